package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/mailroom/mailroom"
)

// A read-through mark (migration 0012) says that a recipient's personal
// deliveries with message_seq <= through_seq whose read_at IS NULL are
// read, at the mark's at: a drain of the caller's whole unread, unarchived
// personal set, or of all of it up to a watermark with no archived unread
// mail there (markWhole), writes it instead of rewriting every row (at
// least 0.23 s of CPU for 100,000 rows here). Unread mail above a mark is
// not covered by it, so a mark need not be the newest delivery's. Every reader of personal read state consults
// it through the expressions below; the store's folder then writes the
// mark's at into the rows it covers, in chunks off the request path, and
// deletes it.
//
// A mark covers no delivery inserted after it: a delivery is inserted only
// with its message, whose seq is the table's largest rowid plus one (one
// writer at a time, so seqs grow with commit order), and the drain's
// through_seq is a seq of a message that exists. Only a purge removes
// messages, and it lowers a mark to the newest message left (lowerMarks),
// so a reused seq is never at or below a mark.

// markedThroughD is the seq the mark of delivery d's recipient reads
// through (0 for none, and for a role delivery, whose recipient_id is NULL).
const markedThroughD = `coalesce((SELECT k.through_seq FROM read_mark k WHERE k.recipient_id = d.recipient_id), 0)`

// markedThroughOwner is markedThroughD for the mailbox owner ?1 of
// inboxBranches: a constant for the statement, so SQLite evaluates it
// once and can bound an index range on (recipient_id, message_seq) by it.
const markedThroughOwner = `(SELECT coalesce(max(k.through_seq), 0) FROM read_mark k WHERE k.recipient_id = ?1)`

// unreadD is "delivery d is unread": not read, and not covered by its
// recipient's mark.
const unreadD = `(d.read_at IS NULL AND d.message_seq > ` + markedThroughD + `)`

// readAtD is delivery d's readAt as shown: its own, or its recipient's
// mark's (its role's, for a role delivery: rolemark.go) when the mark
// covers it.
const readAtD = `coalesce(d.read_at, CASE WHEN d.role IS NULL
	THEN (SELECT k.at FROM read_mark k WHERE k.recipient_id = d.recipient_id AND d.message_seq <= k.through_seq)
	ELSE (SELECT rk.at FROM role_mark rk WHERE rk.role = d.role AND d.message_seq <= rk.through_seq) END)`

// unreadAnyD is "delivery d is unread" for a delivery of either kind.
var unreadAnyD = `(d.read_at IS NULL AND d.message_seq > CASE WHEN d.role IS NULL THEN ` + markedThroughD + ` ELSE ` + roleMarkedThroughD + ` END)`

// readAtOwnerD is readAtD for a delivery d of the mailbox owner ?1 (the
// personal branch of inboxBranches): the owner's mark is a constant of the
// statement, read once instead of once per unread row.
const readAtOwnerD = `coalesce(d.read_at, CASE WHEN d.message_seq <= ` + markedThroughOwner + `
	THEN (SELECT k.at FROM read_mark k WHERE k.recipient_id = ?1) END)`

// personalUnread rewrites a condition on the inbox's delivery d for the
// personal branch: "d.read_at IS NULL" (always one term of an AND chain)
// also leaves out what the owner's mark covers.
func personalUnread(dcond string) string {
	return strings.ReplaceAll(dcond, `d.read_at IS NULL`, `d.read_at IS NULL AND d.message_seq > `+markedThroughOwner)
}

// readMark is a recipient's mark.
type readMark struct {
	recipient, through, folded int64
	at                         string
}

func markOf(ctx context.Context, tx *ptx, recipient int64) (readMark, bool, error) {
	k := readMark{recipient: recipient}
	err := tx.QueryRowContext(ctx, `SELECT through_seq, at, folded FROM read_mark WHERE recipient_id = ?`, recipient).Scan(&k.through, &k.at, &k.folded)
	if isNoRows(err) {
		return k, false, nil
	}
	return k, err == nil, err
}

// foldNow folds recipient's mark, if any, inside tx: for a write the mark
// would make wrong (a mark_unread at or below it, a second drain).
func foldNow(ctx context.Context, tx *ptx, recipient int64) error {
	k, ok, err := markOf(ctx, tx, recipient)
	if err != nil || !ok {
		return err
	}
	return k.foldRange(ctx, tx, k.through)
}

// markLeft reports whether recipient has a mark with more than chunk
// deliveries left to fold (a bounded count).
func markLeft(ctx context.Context, tx *ptx, recipient int64, chunk int) (bool, error) {
	k, ok, err := markOf(ctx, tx, recipient)
	if err != nil || !ok {
		return false, err
	}
	var n int
	err = tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM delivery WHERE recipient_id = ?1 AND message_seq > ?2 AND message_seq <= ?3 LIMIT ?4)`,
		recipient, k.folded, k.through, chunk+1).Scan(&n)
	return n > chunk, err
}

// foldAll folds every mark inside tx (before a migration).
func foldAll(ctx context.Context, tx *ptx) error {
	var exists int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'read_mark'`).Scan(&exists); err != nil || exists == 0 {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT recipient_id FROM read_mark`)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if err := foldNow(ctx, tx, id); err != nil {
			return err
		}
	}
	return foldAllRoles(ctx, tx)
}

// foldRange writes the mark's at into the rows it covers above folded and
// up to hi; at the mark's end it deletes the mark, in the same
// transaction, so no covered row is ever left without it. Counts do not
// move: a covered row is counted read already.
func (k readMark) foldRange(ctx context.Context, tx *ptx, hi int64) error {
	if _, err := tx.ExecContext(ctx, `UPDATE delivery SET read_at = ?1 WHERE recipient_id = ?2 AND message_seq > ?3 AND message_seq <= ?4 AND read_at IS NULL`,
		k.at, k.recipient, k.folded, hi); err != nil {
		return err
	}
	if hi >= k.through {
		_, err := tx.ExecContext(ctx, `DELETE FROM read_mark WHERE recipient_id = ?`, k.recipient)
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE read_mark SET folded = ? WHERE recipient_id = ?`, hi, k.recipient)
	return err
}

// defaultFoldChunk is how many of a mark's deliveries one fold transaction
// covers: about 5 ms of writer time, so concurrent sends wait for a chunk,
// not for the fold.
const defaultFoldChunk = 2000

// foldStep folds one chunk of some mark in its own background write
// transaction and reports whether any mark is left.
func (s *Store) foldStep(ctx context.Context) (more bool, err error) {
	// Asked first outside a write: a folder with nothing to do writes
	// nothing (a write transaction keeps a change-log row and a sync).
	var any bool
	if err := s.db.QueryRowContext(ctx, anyMarks).Scan(&any); err != nil || !any {
		return false, err
	}
	err = s.writeBackground(ctx, func(tx *ptx) error {
		var k readMark
		err := tx.QueryRowContext(ctx, `SELECT recipient_id, through_seq, at, folded FROM read_mark ORDER BY recipient_id LIMIT 1`).
			Scan(&k.recipient, &k.through, &k.at, &k.folded)
		if isNoRows(err) {
			// Personal marks first, then role marks (rolemark.go).
			more, err = s.foldRoleStep(ctx, tx)
			return err
		} else if err != nil {
			return err
		}
		// The chunk's end: the chunk-th delivery of the recipient after
		// folded, whatever its state (bounded work per chunk).
		var hi sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT max(message_seq) FROM (SELECT message_seq FROM delivery
			WHERE recipient_id = ?1 AND message_seq > ?2 AND message_seq <= ?3 ORDER BY message_seq LIMIT ?4)`,
			k.recipient, k.folded, k.through, s.foldChunk).Scan(&hi); err != nil {
			return err
		}
		end := k.through
		if hi.Valid && hi.Int64 < end {
			end = hi.Int64
		}
		more = true
		return k.foldRange(ctx, tx, end)
	})
	return more, err
}

// anyMarks asks whether any mark, personal or a role's, is left.
const anyMarks = `SELECT EXISTS (SELECT 1 FROM read_mark) OR EXISTS (SELECT 1 FROM role_mark)`

// wakeFolder tells the folder that a mark may be waiting.
func (s *Store) wakeFolder() {
	select {
	case s.foldWake <- struct{}{}:
	default:
	}
}

// foldPoll is how often the folder looks for marks no drain of this
// process woke it for: another process's, left when it closed mid-fold
// (a CLI drain, an ended stdio session). Looking is one read of an
// empty table; a mark left unfolded would make its recipient's next
// mark_unread under it fold all of it in the request (a drain folds at
// most a chunk of it: MarkAllRead).
const foldPoll = 2 * time.Second

// fold is the store's folder: woken (by a drain that wrote a mark, at
// open for marks a process left behind, and every foldPoll for marks
// other processes left), it folds every mark chunk by chunk, then waits
// again, until stopped (Close).
func (s *Store) fold(ctx context.Context) {
	defer close(s.foldDone)
	every := foldPoll
	if s.hooks.FoldPoll > 0 {
		every = s.hooks.FoldPoll
	}
	mailroom.RunFolder(ctx, s.foldWake, every, time.Second, s.foldStep, func(err error) {
		s.log.Warn("read mark fold; retrying", "err", err)
	})
}

// lowerMarks keeps marks below every seq a new message can get after a
// purge removed the newest messages (a rowid is the largest plus one): a
// mark through a purged seq reads through the newest message left, which
// covers the same rows, since none is left above it.
func lowerMarks(ctx context.Context, tx *ptx) error {
	_, err := tx.ExecContext(ctx, `UPDATE read_mark SET through_seq = (SELECT coalesce(max(seq), 0) FROM message)
		WHERE through_seq > (SELECT coalesce(max(seq), 0) FROM message)`)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE role_mark SET through_seq = (SELECT coalesce(max(seq), 0) FROM message)
		WHERE through_seq > (SELECT coalesce(max(seq), 0) FROM message)`)
	return err
}
