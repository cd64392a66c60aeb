package sqlite

import (
	"context"
	"database/sql"
	"strings"
)

// Changes of a delivery's read or archived state move it between count
// rows: mailbox_count for personal deliveries (migration 0009), role_count
// for role deliveries (0010). The update paths count them here, around
// their UPDATE: countOut takes the deliveries out under their old state,
// countIn puts them back under their new one. (Inserts and deletes are
// counted by triggers.)

// A counter is one count table: its key columns, the keys of a delivery
// d (of message m from sender s), and which deliveries it counts.
type counter struct {
	table string
	cols  []string
	keys  string
	which string
}

func personalCounter() counter {
	return counter{`mailbox_count`, []string{"recipient_id", "archived", "unread", "via", "priority", "human"},
		`SELECT d.recipient_id, d.archived_at IS NOT NULL, ` + unreadD + `, d.via, m.priority, s.kind = 'human', `, `d.recipient_id IS NOT NULL`}
}

func roleCounter() counter {
	return counter{`role_count`, []string{"role", "archived", "unread", "priority", "human"},
		`SELECT d.role, d.archived_at IS NOT NULL, ` + roleUnreadD + `, m.priority, s.kind = 'human', `, `d.role IS NOT NULL`}
}

// out subtracts the deliveries matching idCond (e.g. "= ?") from their
// counts: an upsert of negative numbers, as in, each key a primary-key
// seek (an UPDATE joined to the keys planned as a scan once analyzed).
func (c counter) out(ctx context.Context, tx *ptx, idCond string, args ...any) error {
	return c.add(ctx, tx, "-", idCond, args...)
}

// in adds the deliveries matching idCond to their counts.
func (c counter) in(ctx context.Context, tx *ptx, idCond string, args ...any) error {
	return c.add(ctx, tx, "", idCond, args...)
}

func (c counter) add(ctx context.Context, tx *ptx, sign, idCond string, args ...any) error {
	g := make([]string, len(c.cols))
	for i := range g {
		g[i] = itoa(i + 1)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO `+c.table+` (`+strings.Join(c.cols, ", ")+`, n, seqs) `+c.keys+sign+`count(*), `+sign+`sum(d.message_seq)
	FROM delivery d JOIN message m ON m.seq = d.message_seq JOIN identity s ON s.id = m.sender_id
	WHERE `+c.which+` AND d.id `+idCond+` GROUP BY `+strings.Join(g, ", ")+` ON CONFLICT DO UPDATE SET n = n + excluded.n, seqs = seqs + excluded.seqs`, args...)
	return err
}

// countOut takes the deliveries matching idCond out of whichever count
// holds them.
func countOut(ctx context.Context, tx *ptx, idCond string, args ...any) error {
	if err := personalCounter().out(ctx, tx, idCond, args...); err != nil {
		return err
	}
	return roleCounter().out(ctx, tx, idCond, args...)
}

// countIn puts the deliveries matching idCond back into their counts.
func countIn(ctx context.Context, tx *ptx, idCond string, args ...any) error {
	if err := personalCounter().in(ctx, tx, idCond, args...); err != nil {
		return err
	}
	return roleCounter().in(ctx, tx, idCond, args...)
}

// countedUpdate runs update on the one delivery did, keeping its count.
func countedUpdate(ctx context.Context, tx *ptx, did int64, update string, args ...any) (sql.Result, error) {
	if err := countOut(ctx, tx, `= ?`, did); err != nil {
		return nil, err
	}
	res, err := tx.ExecContext(ctx, update, args...)
	if err != nil {
		return nil, err
	}
	return res, countIn(ctx, tx, `= ?`, did)
}

// recount counts the recipient's personal deliveries again from scratch:
// the one path that costs a pass over a mailbox, for a drain that raced
// other changes of the same inbox.
func recount(ctx context.Context, tx *ptx, recipient int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM mailbox_count WHERE recipient_id = ?`, recipient); err != nil {
		return err
	}
	return personalCounter().in(ctx, tx, `IN (SELECT id FROM delivery WHERE recipient_id = ?)`, recipient)
}

// The role deliveries that may be hidden from a holder, the candidates
// (migration 0010), selected by id for the caller ?1 holding the roles ?2
// (JSON), in two disjoint sets:
//
//   - roleHinted: deliveries of messages the caller sent, got personally or
//     deleted. Each is hidden from it: a personal copy goes only when the
//     message is deleted, and a deletion is for good. The one exception is
//     a handoff it sent to its own next session (ownSuccessorRole).
//   - roleLater: the other ones that are not their message's first role
//     delivery, shown unless an older one is in another of its roles.
//
// Every other role delivery of its roles is in its inbox, shown through
// itself, so counts of the role branch are role_count's, with the
// candidates' own states taken out and the unsure ones (roleUnsure) put
// back where the branch shows them. The cost grows with the caller's own
// sends, copies and deletions of role mail and its multi-role mail, not
// with its role queues (0.1 s for a queue of 100,000 before).
const (
	roleHintedSeqs = `SELECT message_seq FROM role_hint WHERE identity_id = ?1 UNION ALL SELECT message_seq FROM message_deleted WHERE identity_id = ?1`
	// A hinted delivery is found from the smaller side: each hinted
	// message looked up in the caller's role queues, or each delivery of
	// the queues looked up in the hints. (An agent that sent thousands of
	// messages to roles it does not hold has many hints and empty queues;
	// agent-0 of the seeded store the opposite.) fewHints picks the side:
	// it filters the role list each form loops over, so the other form's
	// list is empty and it reads nothing (as a WHERE term it was tested
	// per row, with the queue walked all the same).
	fewHints = `NOT EXISTS (SELECT 1 FROM role_hint WHERE identity_id = ?1 LIMIT 1 OFFSET
		(SELECT coalesce(sum(n), 0) FROM role_count WHERE role IN (SELECT value FROM json_each(?2))))`
	isHinted = `(EXISTS (SELECT 1 FROM role_hint h WHERE h.identity_id = ?1 AND h.message_seq = c.message_seq)
		OR EXISTS (SELECT 1 FROM message_deleted x WHERE x.identity_id = ?1 AND x.message_seq = c.message_seq))`
	roleHinted = `SELECT c.id FROM delivery c WHERE c.role IN (SELECT value FROM json_each(?2) WHERE ` + fewHints + `) AND c.message_seq IN (` + roleHintedSeqs + `)
		UNION ALL SELECT c.id FROM delivery c WHERE c.role IN (SELECT value FROM json_each(?2) WHERE NOT ` + fewHints + `) AND ` + isHinted
	roleLater = `SELECT c.id FROM role_later l JOIN delivery c ON c.role = l.role AND c.message_seq = l.message_seq
		WHERE l.role IN (SELECT value FROM json_each(?2))
		AND NOT EXISTS (SELECT 1 FROM role_hint h WHERE h.identity_id = ?1 AND h.message_seq = l.message_seq)
		AND NOT EXISTS (SELECT 1 FROM message_deleted x WHERE x.identity_id = ?1 AND x.message_seq = l.message_seq)`
	roleCandidates = roleHinted + ` UNION ALL ` + roleLater
	ownSuccessor   = `('next-session-of-' || (SELECT name FROM identity WHERE id = ?1 AND kind = 'agent'))` // ownSuccessorRole("?1")
	// The caller's own next-session queue is walked: it holds handoffs.
	roleUnsure = roleLater + ` UNION ALL SELECT c.id FROM delivery c WHERE c.role = ` + ownSuccessor + `
		AND c.role IN (SELECT value FROM json_each(?2)) AND ` + isHinted
)

// mayHideRoleMail says whether the caller ?1 holding the roles ?2 has any
// candidates at all: roleHinted needs a hint or a deletion of the
// caller's, roleLater (and so roleUnsure) a later role delivery of its
// roles. Without, both candidate counts are 0, and skipping them (three
// probes) saves most of a role holder's count: their subqueries cost more
// than a page's worth of rows even when they find nothing.
const mayHideRoleMail = `(EXISTS (SELECT 1 FROM role_hint WHERE identity_id = ?1) OR EXISTS (SELECT 1 FROM message_deleted WHERE identity_id = ?1)
	OR EXISTS (SELECT 1 FROM role_later WHERE role IN (SELECT value FROM json_each(?2))))`

// roleTotal is an expression for the number of rows of the caller's role
// branch (inboxBranches) under the conditions dcond and mcond, which keys
// states in role_count's terms.
func roleTotal(keys, dcond, mcond string) string {
	return `((SELECT coalesce(sum(n), 0) FROM role_count WHERE role IN (SELECT value FROM json_each(?2))` + keys + `)
		+ CASE WHEN ` + mayHideRoleMail + ` THEN
		- (SELECT count(*) ` + candidateFrom(roleCandidates) + ` WHERE 1` + roleUnread(dcond) + mcond + `)
		+ (SELECT count(*) FROM (` + fromCandidates(inboxBranches(dcond, mcond)[1], roleUnsure) + `)) ELSE 0 END)`
}

// candidateFrom reads the deliveries d that src selects (by id) and their
// messages m. The CROSS JOIN keeps that order: once a store is analyzed,
// SQLite would rather scan an index of every archived or unread delivery
// and filter it by the list.
func candidateFrom(src string) string {
	return `FROM (` + src + `) cc CROSS JOIN delivery d NOT INDEXED ON d.id = cc.id JOIN message m ON m.seq = d.message_seq`
}

// fromCandidates rewrites a role branch of inboxBranches to read only the
// deliveries that src selects.
func fromCandidates(branch, src string) string {
	const from = `FROM delivery d JOIN message m ON m.seq = d.message_seq`
	if !strings.Contains(branch, from) {
		panic("sqlite: fromCandidates: not a role branch")
	}
	return strings.Replace(branch, from, candidateFrom(src), 1)
}

// roleStatus counts the caller's role branch for mailbox_status: unread
// (unarchived) mail in all, by priority and from humans, and archived mail,
// in one statement.
func roleStatus(ctx context.Context, tx *ptx, me int64, roles []string, n, high, normal, low, human, archived *int) error {
	keys := `d.archived_at IS NOT NULL, ` + roleUnreadD + `, m.priority, s.kind = 'human'`
	const unread = `archived = 0 AND unread = 1`
	return tx.QueryRowContext(ctx, `WITH k (archived, unread, priority, human, n) AS (
			SELECT archived, unread, priority, human, n FROM role_count WHERE role IN (SELECT value FROM json_each(?2))
			UNION ALL SELECT `+keys+`, -1 `+candidateFrom(roleCandidates)+` JOIN identity s ON s.id = m.sender_id
			UNION ALL SELECT `+keys+`, 1 FROM (`+fromCandidates(inboxBranches("", "")[1], roleUnsure)+`) b
				CROSS JOIN delivery d ON d.id = b.did JOIN message m ON m.seq = b.seq JOIN identity s ON s.id = m.sender_id)
		SELECT coalesce(sum(n) FILTER (WHERE `+unread+`), 0),
			coalesce(sum(n) FILTER (WHERE `+unread+` AND priority = 'high'), 0), coalesce(sum(n) FILTER (WHERE `+unread+` AND priority = 'normal'), 0),
			coalesce(sum(n) FILTER (WHERE `+unread+` AND priority = 'low'), 0), coalesce(sum(n) FILTER (WHERE `+unread+` AND human), 0),
			coalesce(sum(n) FILTER (WHERE archived = 1), 0) FROM k`, me, jsonStrings(roles)).Scan(n, high, normal, low, human, archived)
}

// oldestRoleUnread is the seq of the oldest unread, unarchived message of
// the caller's role branch: the first of each role's unread deliveries
// (delivery_role_unread) that the branch shows. Those it does not show are
// candidates, so each walk stops within a few rows.
func oldestRoleUnread(ctx context.Context, tx *ptx, me int64, roles []string) (sql.NullInt64, error) {
	var oldest sql.NullInt64
	rj := jsonStrings(roles)
	for _, b := range perRole(inboxBranches(` AND d.read_at IS NULL AND d.archived_at IS NULL`, "")[1], len(roles)) {
		var seq int64
		err := tx.QueryRowContext(ctx, `SELECT seq FROM (`+b+`) ORDER BY seq LIMIT 1`, me, rj).Scan(&seq)
		if err == sql.ErrNoRows {
			continue
		} else if err != nil {
			return oldest, err
		}
		if !oldest.Valid || seq < oldest.Int64 {
			oldest = sql.NullInt64{Int64: seq, Valid: true}
		}
	}
	return oldest, nil
}

// roleAddressedUnread counts, for each role the caller holds, the unread,
// unarchived mail of its role branch addressed to that role, shown through
// any role it holds: the role's unread count, with its candidates taken
// out and put back for each whose message the branch shows unread. Only a
// message with an unsure delivery can be shown once one of its role
// deliveries is a candidate.
func roleAddressedUnread(ctx context.Context, tx *ptx, me int64, roles []string) (map[string]int, error) {
	const unread = ` AND d.archived_at IS NULL AND d.read_at IS NULL`
	shown := inboxBranches(unread+` AND d.message_seq = r.message_seq`, "")[1]
	rows, err := tx.QueryContext(ctx, `WITH cand (id, later) AS MATERIALIZED (
			SELECT id, 0 FROM (`+roleHinted+`) UNION ALL SELECT id, 1 FROM (`+roleLater+`))
		SELECT role, sum(n) FROM (
			SELECT role, n FROM role_count WHERE role IN (SELECT value FROM json_each(?2)) AND archived = 0 AND unread = 1
			UNION ALL SELECT d.role, -1 FROM cand CROSS JOIN delivery d NOT INDEXED ON d.id = cand.id WHERE 1`+roleUnread(unread)+`
			UNION ALL SELECT r.role, 1 FROM cand CROSS JOIN delivery r NOT INDEXED ON r.id = cand.id
				WHERE (cand.later OR EXISTS (SELECT 1 FROM delivery z WHERE z.role = `+ownSuccessor+` AND z.message_seq = r.message_seq))
				AND EXISTS (`+shown+`))
		GROUP BY role`, me, jsonStrings(roles))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var role string
		var n int
		if err := rows.Scan(&role, &n); err != nil {
			return nil, err
		}
		out[role] = n
	}
	return out, rows.Err()
}
