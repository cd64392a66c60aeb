package sqlite

import (
	"context"
	"database/sql"
	"strings"
)

// A role mark (migration 0014) is the read-through mark of a role queue:
// the role's deliveries with message_seq <= through_seq whose read_at IS
// NULL are read, at the mark's at, by its read_by. A role delivery's read
// state is shared by the role's holders, so a role mark is the role's, not
// the drainer's: a drain writes one only when it would have marked exactly
// those rows (drainRoleByMark: the drainer's inbox shows every unread,
// unarchived delivery of the role up to the drain's end, and none at or
// below it is archived and unread). Every reader of role read state
// consults it through the expressions below; the folder writes it into the
// rows and deletes it, as for read_mark (mark.go). It covers no delivery
// inserted after it, for the reason read_mark does not; a purge lowers it
// (lowerMarks).

// roleMarkOf is the seq the mark of the role the SQL expression role names
// reads through (0 for none).
func roleMarkOf(role string) string {
	return `coalesce((SELECT rk.through_seq FROM role_mark rk WHERE rk.role = ` + role + `), 0)`
}

// roleMarkedThroughD is roleMarkOf the role of role delivery d.
var roleMarkedThroughD = roleMarkOf(`d.role`)

// roleUnreadD is "role delivery d is unread": not read, and not covered by
// its role's mark.
var roleUnreadD = `(d.read_at IS NULL AND d.message_seq > ` + roleMarkedThroughD + `)`

// roleReadAtD is role delivery d's readAt as shown.
const roleReadAtD = `coalesce(d.read_at, (SELECT rk.at FROM role_mark rk WHERE rk.role = d.role AND d.message_seq <= rk.through_seq))`

// readByD is delivery d's reader as shown (a role delivery's only): its
// own, or its role's mark's when the mark covers it.
const readByD = `CASE WHEN d.role IS NOT NULL THEN coalesce(d.read_by,
	(SELECT rk.read_by FROM role_mark rk WHERE rk.role = d.role AND d.read_at IS NULL AND d.message_seq <= rk.through_seq)) END`

// roleReadAtOf and roleReadByOf are roleReadAtD and readByD for a
// delivery d of the role that the constant expression role names (a branch
// of perRole): the mark is then read once per statement, not once or
// twice per unread row of a page.
func roleReadAtOf(role string) string {
	return `coalesce(d.read_at, CASE WHEN d.message_seq <= ` + roleMarkOf(role) + `
		THEN (SELECT rk.at FROM role_mark rk WHERE rk.role = ` + role + `) END)`
}

func roleReadByOf(role string) string {
	return `coalesce(d.read_by, CASE WHEN d.read_at IS NULL AND d.message_seq <= ` + roleMarkOf(role) + `
		THEN (SELECT rk.read_by FROM role_mark rk WHERE rk.role = ` + role + `) END)`
}

// roleUnread rewrites a condition on a role delivery d: "d.read_at IS
// NULL" (always one term of an AND chain) also leaves out what its role's
// mark covers.
func roleUnread(dcond string) string {
	return strings.ReplaceAll(dcond, `d.read_at IS NULL`, `d.read_at IS NULL AND d.message_seq > `+roleMarkedThroughD)
}

// roleMark is a role's mark.
type roleMark struct {
	role                string
	through, folded, by int64
	at                  string
}

func roleMarkFor(ctx context.Context, tx *ptx, role string) (roleMark, bool, error) {
	k := roleMark{role: role}
	err := tx.QueryRowContext(ctx, `SELECT through_seq, at, read_by, folded FROM role_mark WHERE role = ?`, role).Scan(&k.through, &k.at, &k.by, &k.folded)
	if isNoRows(err) {
		return k, false, nil
	}
	return k, err == nil, err
}

// roleMarkLeft is markLeft for role's mark.
func roleMarkLeft(ctx context.Context, tx *ptx, role string, chunk int) (bool, error) {
	k, ok, err := roleMarkFor(ctx, tx, role)
	if err != nil || !ok {
		return false, err
	}
	var n int
	err = tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM delivery WHERE role = ?1 AND message_seq > ?2 AND message_seq <= ?3 LIMIT ?4)`,
		role, k.folded, k.through, chunk+1).Scan(&n)
	return n > chunk, err
}

// foldRoleNow folds role's mark, if any, inside tx.
func foldRoleNow(ctx context.Context, tx *ptx, role string) error {
	k, ok, err := roleMarkFor(ctx, tx, role)
	if err != nil || !ok {
		return err
	}
	return k.foldRange(ctx, tx, k.through)
}

// foldRange writes the mark into the rows it covers above folded and up
// to hi, and deletes it at its end (as readMark.foldRange).
func (k roleMark) foldRange(ctx context.Context, tx *ptx, hi int64) error {
	if _, err := tx.ExecContext(ctx, `UPDATE delivery SET read_at = ?1, read_by = ?2 WHERE role = ?3 AND message_seq > ?4 AND message_seq <= ?5 AND read_at IS NULL`,
		k.at, k.by, k.role, k.folded, hi); err != nil {
		return err
	}
	if hi >= k.through {
		_, err := tx.ExecContext(ctx, `DELETE FROM role_mark WHERE role = ?`, k.role)
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE role_mark SET folded = ? WHERE role = ?`, hi, k.role)
	return err
}

// foldRoleStep folds one chunk of some role mark inside tx and reports
// whether there was one.
func (s *Store) foldRoleStep(ctx context.Context, tx *ptx) (bool, error) {
	var k roleMark
	err := tx.QueryRowContext(ctx, `SELECT role, through_seq, at, read_by, folded FROM role_mark ORDER BY role LIMIT 1`).
		Scan(&k.role, &k.through, &k.at, &k.by, &k.folded)
	if isNoRows(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	var hi sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT max(message_seq) FROM (SELECT message_seq FROM delivery
		WHERE role = ?1 AND message_seq > ?2 AND message_seq <= ?3 ORDER BY message_seq LIMIT ?4)`,
		k.role, k.folded, k.through, s.foldChunk).Scan(&hi); err != nil {
		return false, err
	}
	end := k.through
	if hi.Valid && hi.Int64 < end {
		end = hi.Int64
	}
	return true, k.foldRange(ctx, tx, end)
}

// foldAllRoles folds every role mark inside tx (before a migration).
func foldAllRoles(ctx context.Context, tx *ptx) error {
	var exists int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'role_mark'`).Scan(&exists); err != nil || exists == 0 {
		return err
	}
	roles, err := strings1(ctx, tx, `SELECT role FROM role_mark`)
	if err != nil {
		return err
	}
	for _, r := range roles {
		if err := foldRoleNow(ctx, tx, r); err != nil {
			return err
		}
	}
	return nil
}

// drainRoleByMark is the share of role in a drain by me (holding the
// roles rj, JSON) through the watermark limit (-1 for none), inside the
// drain's write transaction, by a mark where a mark reads exactly the rows
// row marking would; it reports false, having changed nothing, when it
// writes none. Those rows are the role's unread, unarchived deliveries at
// or below the limit that me's inbox shows (inboxBranches: the role branch
// shows one delivery per message). A mark through seq reads every unread
// delivery of the role at or below seq, so it ends below the first one
// row marking would leave:
//   - an archived unread one (a drain reads unarchived mail only);
//   - one hidden from me: the role's candidates (counts.go: role mail me
//     sent, also got personally or deleted, and later deliveries of a
//     message to two of its roles) unread there, less those the branch
//     shows;
//
// and at the newest unread, unarchived delivery below it. All from counts
// and index ranges, without walking the queue (the first archived unread
// one is looked for only when the counts say there is one, the hidden ones
// among the candidates only). The unread mail above the mark (newer mail,
// and what follows a delivery the mark stopped at) stays unread, its
// counts moved back as writeMark does; partial says the rows above the
// mark up to the limit may hold some for row marking. A mark that would
// leave more unread above it than it reads is not written (the counts'
// move back would cost more than the mark saves). The caller folded the
// role's mark first.
func drainRoleByMark(ctx context.Context, tx *ptx, me int64, rj, role string, limit int64, at string) (k roleMark, n int, partial, ok bool, err error) {
	k = roleMark{role: role, by: me, at: at}
	var unread, archived, archivedAbove int
	if err := tx.QueryRowContext(ctx, `SELECT
			(SELECT coalesce(sum(n), 0) FROM role_count WHERE role = ?1 AND archived = 0 AND unread = 1),
			(SELECT coalesce(sum(n), 0) FROM role_count WHERE role = ?1 AND archived = 1 AND unread = 1),
			(SELECT count(*) FROM delivery d WHERE d.role = ?1 AND d.archived_at IS NOT NULL AND d.read_at IS NULL AND d.message_seq > ?2)`,
		role, upTo(limit)).Scan(&unread, &archived, &archivedAbove); err != nil || unread == 0 {
		return k, 0, false, false, err
	}
	end := upTo(limit)
	if archived != archivedAbove {
		// The role's deliveries from the oldest: the walk stops at the
		// first archived unread one.
		var first int64
		if err := tx.QueryRowContext(ctx, `SELECT min(d.message_seq) FROM delivery d WHERE d.role = ?1 AND d.message_seq <= ?2 AND d.archived_at IS NOT NULL AND d.read_at IS NULL`,
			role, end).Scan(&first); err != nil {
			return k, 0, false, false, err
		}
		end, partial = first-1, true
	}
	const cond = ` AND d.role = ?3 AND d.read_at IS NULL AND d.archived_at IS NULL AND d.message_seq <= ?4`
	var hidden sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT CASE WHEN `+mayHideRoleMail+` THEN (SELECT min(seq) FROM (
			SELECT d.message_seq AS seq, d.id AS did `+candidateFrom(roleCandidates)+` WHERE 1`+cond+`
			EXCEPT SELECT seq, did FROM (`+fromCandidates(inboxBranches(cond, "")[1], roleUnsure)+`))) END`,
		me, rj, role, end).Scan(&hidden); err != nil {
		return k, 0, false, false, err
	}
	if hidden.Valid {
		end, partial = hidden.Int64-1, true
	}
	var through sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT max(d.message_seq) FROM delivery d WHERE d.role = ?1 AND d.read_at IS NULL AND d.archived_at IS NULL AND d.message_seq <= ?2`,
		role, end).Scan(&through); err != nil || !through.Valid {
		return k, 0, false, false, err
	}
	var newer int // unread, unarchived above the mark
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM delivery d WHERE d.role = ?1 AND d.read_at IS NULL AND d.archived_at IS NULL AND d.message_seq > ?2`,
		role, through.Int64).Scan(&newer); err != nil {
		return k, 0, false, false, err
	}
	n = unread - newer
	if n <= 0 || newer > n {
		return k, 0, false, false, nil
	}
	k.through = through.Int64
	// The newer unread deliveries: above the mark, so unread before and
	// after it; their counts go out before the move and back after.
	const newerIDs = `IN (SELECT id FROM delivery WHERE role = ? AND message_seq > ? AND read_at IS NULL AND archived_at IS NULL)`
	if newer > 0 {
		if err := roleCounter().out(ctx, tx, newerIDs, role, k.through); err != nil {
			return k, 0, false, false, err
		}
	}
	for _, q := range []string{
		`INSERT INTO role_count (role, archived, unread, priority, human, n, seqs)
			SELECT role, 0, 0, priority, human, n, seqs FROM role_count WHERE role = ?1 AND archived = 0 AND unread = 1 AND n > 0
			ON CONFLICT DO UPDATE SET n = n + excluded.n, seqs = seqs + excluded.seqs`,
		`UPDATE role_count SET n = 0, seqs = 0 WHERE role = ?1 AND archived = 0 AND unread = 1`,
	} {
		if _, err := tx.ExecContext(ctx, q, role); err != nil {
			return k, 0, false, false, err
		}
	}
	if newer > 0 {
		if err := roleCounter().in(ctx, tx, newerIDs, role, k.through); err != nil {
			return k, 0, false, false, err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO role_mark (role, through_seq, at, read_by) VALUES (?, ?, ?, ?)`, role, k.through, k.at, me); err != nil {
		return k, 0, false, false, err
	}
	return k, n, partial, true, nil
}

// roleMarkedCount is a drain's durable count by the role mark k, read
// back after commit, as markedCount is for a personal mark.
func (s *Store) roleMarkedCount(ctx context.Context, k roleMark) (int, error) {
	var covered, folded int
	err := s.read(ctx, func(tx *ptx) error {
		now, ok, err := roleMarkFor(ctx, tx, k.role)
		if err != nil {
			return err
		}
		foldedTo := k.through
		if ok && now.at == k.at && now.by == k.by {
			foldedTo = now.folded
			// Unarchived covered rows are a range of delivery_role_unread;
			// archived ones (archived since the drain) a range of
			// delivery_archived, whose role rows have no recipient.
			if err := tx.QueryRowContext(ctx, `SELECT
					(SELECT count(*) FROM delivery WHERE role = ?1 AND message_seq > ?2 AND message_seq <= ?3 AND read_at IS NULL AND archived_at IS NULL)
					+ (SELECT count(*) FROM delivery WHERE recipient_id IS NULL AND message_seq > ?2 AND message_seq <= ?3 AND archived_at IS NOT NULL AND role = ?1 AND read_at IS NULL)`,
				k.role, now.folded, now.through).Scan(&covered); err != nil {
				return err
			}
		}
		if foldedTo > 0 {
			return tx.QueryRowContext(ctx, `SELECT count(*) FROM delivery WHERE role = ?1 AND message_seq <= ?2 AND read_at = ?3 AND read_by = ?4`,
				k.role, foldedTo, k.at, k.by).Scan(&folded)
		}
		return nil
	})
	return covered + folded, err
}
