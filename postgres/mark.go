package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mailroom/mailroom"
)

// A read-through mark (migration 0012, the design of sqlite/mark.go) says
// that a recipient's deliveries with message_seq <= through_seq whose
// read_at IS NULL are read, at the mark's at. A drain of the caller's whole
// unread, unarchived personal set, or of all of it up to a watermark with
// no archived unread mail there (drainByMarkSQL), writes it and moves a few count
// rows instead of rewriting every delivery (0.2 s of server CPU for the
// UPDATE of 100,000 rows alone). Every reader of personal read state
// consults it through the expressions below; the store's folder then
// writes the mark's at into the rows it covers, in chunks off the request
// path, and deletes it.
//
// A role queue has marks too (migration 0013; SQLite's 0014): read_mark
// keyed by the queue's mailbox id, read by read_by, the drainer (NULL for
// a personal mark). A role delivery's read state is its holders' shared
// state, so a drain with includeRoles writes one (roleDrainByMarkSQL) only
// where it reads exactly the rows row marking would, and every reader of
// role read state consults it: the role branch's unread filter (a constant
// per queue once split, roleBranchOf), readAt and readBy of role rows,
// roleHidden's read state (the counts' and wake state's candidates), the
// count functions and purge (by recipient, as for personal marks),
// mailbox_status's oldest unread (role_unread keeps the rows' own state,
// bounded by the mark), and a single-id mark_read (a covered row keeps the
// mark's readAt and reader). mark_unread of a covered row, and a drain of
// the queue, fold it first.
//
// A mark covers no delivery inserted after it: a delivery is inserted only
// with its message, under the send lock, so an uncommitted send's seq is
// above every committed one, and a mark reads through a committed seq.
// Seqs come from an identity column and are never reused, so a purge of
// the newest messages leaves a mark covering nothing new (SQLite lowers its
// marks there instead, since a rowid is reused).
//
// Locks. A drain by mark decides from one statement's snapshot and moves
// counts by what that snapshot held, so no write to the same personal
// deliveries may be in flight beside it: every writer of a caller's
// personal read or archive state takes the recipient's mark lock shared
// (lockMailbox; lockMailboxes also takes the caller's role queues'), a
// drain takes it exclusive (with includeRoles, its queues' too), and a
// purge (which deletes any recipient's rows) takes the store-wide mark
// lock exclusive where a drain takes it shared. The folder and foldNow lock
// the mark row itself (FOR UPDATE), so one fold runs at a time per mark and
// none works from a mark that was replaced.

// markOf is the seq the mark of the mailbox the SQL expression rcpt names
// reads through (0 for none). For a constant rcpt (a parameter, a role
// branch's queue) it is a constant of the statement (an InitPlan), so it
// bounds the mailbox's index range on (recipient, message_seq).
func markOf(rcpt string) string {
	return `(SELECT coalesce(max(k.through_seq), 0) FROM read_mark k WHERE k.recipient = ` + rcpt + `)`
}

// markedThroughOwner is markOf the mailbox owner $1.
var markedThroughOwner = markOf("$1")

// readAtOf is delivery d's readAt as shown, in a query whose personal
// deliveries are those of the mailbox owner named by the parameter owner:
// its own, or its mailbox's mark's when the mark covers it (NULL when d
// is). The owner's mark is a constant of the statement (two InitPlans, run
// once), not a probe or a join per row; a role delivery's (role marks,
// migration 0013) is a probe of its queue's mark, for unread role rows only.
func readAtOf(owner string) string {
	return `coalesce(d.read_at, CASE WHEN d.recipient = ` + owner + ` AND d.message_seq <= (SELECT k.through_seq FROM read_mark k WHERE k.recipient = ` + owner + `)
		THEN (SELECT k.at FROM read_mark k WHERE k.recipient = ` + owner + `)
		WHEN d.via = 'role' THEN (SELECT k.at FROM read_mark k WHERE k.recipient = d.recipient AND d.message_seq <= k.through_seq) END)`
}

// readByD is role delivery d's reader as shown: its own, or its queue's
// mark's when the mark covers it.
const readByD = `coalesce(d.read_by, CASE WHEN d.read_at IS NULL THEN
	(SELECT k.read_by FROM read_mark k WHERE k.recipient = d.recipient AND d.message_seq <= k.through_seq) END)`

// coveredD is "delivery d is read by its recipient's mark".
var coveredD = `(d.read_at IS NULL AND d.message_seq <= ` + markOf("d.recipient") + `)`

// unreadD is "delivery d is unread": not read, and not covered by its
// mailbox's mark (a probe per row: for few rows).
var unreadD = `(d.read_at IS NULL AND d.message_seq > ` + markOf("d.recipient") + `)`

// personalUnread rewrites a condition on the personal branch's delivery d:
// "d.read_at IS NULL" (always one term of an AND chain) also leaves out
// what the owner's mark covers.
func personalUnread(dcond string) string {
	return strings.ReplaceAll(dcond, `d.read_at IS NULL`, `d.read_at IS NULL AND d.message_seq > `+markedThroughOwner)
}

// roleUnread is personalUnread for the role branch: d's queue's mark
// (markOf d.recipient; a constant once a branch is split per queue,
// roleBranchOf).
func roleUnread(dcond string) string {
	return strings.ReplaceAll(dcond, `d.read_at IS NULL`, `d.read_at IS NULL AND d.message_seq > `+markOf("d.recipient"))
}

// Mark lock keys: one per recipient, and one for the store, both within
// the schema so that mailrooms sharing a database do not wait for each
// other.
const (
	mailboxLockKey = `hashtextextended('mailroom.mark.' || current_schema(), $1::bigint)`
	storeLockKey   = `hashtextextended('mailroom.marks.' || current_schema(), 0)`
)

// lockMailbox takes recipient's mark lock shared for the rest of the
// transaction: before a write to its personal read or archive state.
func lockMailbox(ctx context.Context, tx pgx.Tx, recipient int64) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+mailboxLockKey+`)`, recipient)
	return err
}

// lockMailboxes takes the mark locks of me's mailbox and of the role
// queues queues shared for the rest of the transaction: before a single-id
// write to read or archive state (a role delivery's is the role's, which
// another holder's drain may be deciding a mark from). Always the personal
// lock first, then the queues in mailbox order, as a drain takes them
// exclusive, so the two never wait for each other in a cycle.
func lockMailboxes(ctx context.Context, tx pgx.Tx, me int64, queues []int64) error {
	return lockMarks(ctx, tx, append([]int64{me}, slices.Sorted(slices.Values(queues))...), false)
}

// lockMarks takes the mark locks of the mailboxes ids, in that order,
// exclusive or shared.
func lockMarks(ctx context.Context, tx pgx.Tx, ids []int64, exclusive bool) error {
	fn := "pg_advisory_xact_lock_shared"
	if exclusive {
		fn = "pg_advisory_xact_lock"
	}
	_, err := tx.Exec(ctx, `SELECT count(`+fn+`(hashtextextended('mailroom.mark.' || current_schema(), r))) FROM unnest($1::bigint[]) AS r`, ids)
	return err
}

// readMark is a mailbox's mark: a recipient's own (by nil), or a role
// queue's, read by the drainer by.
type readMark struct {
	recipient, through, folded int64
	at                         time.Time
	by                         *int64
}

// foldNow folds recipient's mark, if any, inside tx: for a write the mark
// would make wrong (a drain; a mark_unread of a delivery at or below it,
// seq below, else 0).
func foldNow(ctx context.Context, tx pgx.Tx, recipient int64, below int64) error {
	k := readMark{recipient: recipient}
	err := tx.QueryRow(ctx, `SELECT through_seq, at, folded, read_by FROM read_mark WHERE recipient = $1 FOR UPDATE`, recipient).Scan(&k.through, &k.at, &k.folded, &k.by)
	if isNoRows(err) || (err == nil && below > k.through) {
		return nil
	} else if err != nil {
		return err
	}
	return k.foldRange(ctx, tx, k.through)
}

// foldAll folds every mark inside tx (before a later migration; read_by
// is read so that it works before 0013 too).
func foldAll(ctx context.Context, tx pgx.Tx) error {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('read_mark') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT recipient, through_seq, at, folded, (to_jsonb(k) ->> 'read_by')::bigint FROM read_mark k ORDER BY recipient FOR UPDATE`)
	if err != nil {
		return err
	}
	ks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (readMark, error) {
		var k readMark
		err := r.Scan(&k.recipient, &k.through, &k.at, &k.folded, &k.by)
		return k, err
	})
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := k.foldRange(ctx, tx, k.through); err != nil {
			return err
		}
	}
	return nil
}

// foldRange writes the mark's at (and reader) into the rows it covers above
// folded and up to hi; at the mark's end it deletes the mark, in the same
// transaction, so no covered row is ever left without it. Counts do not
// move (a covered row is counted read already), so the update trigger
// stands aside; a role queue's rows leave role_unread here instead.
func (k readMark) foldRange(ctx context.Context, tx pgx.Tx, hi int64) error {
	if _, err := tx.Exec(ctx, `SELECT set_config('mailroom.writer_counts', 'on', true)`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE delivery SET read_at = $1, read_by = coalesce($5::bigint, $2) WHERE recipient = $2 AND message_seq > $3 AND message_seq <= $4 AND read_at IS NULL`,
		k.at, k.recipient, k.folded, hi, k.by); err != nil {
		return err
	}
	if k.by != nil {
		if _, err := tx.Exec(ctx, `DELETE FROM role_unread WHERE recipient = $1 AND message_seq > $2 AND message_seq <= $3`, k.recipient, k.folded, hi); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('mailroom.writer_counts', 'off', true)`); err != nil {
		return err
	}
	if hi >= k.through {
		_, err := tx.Exec(ctx, `DELETE FROM read_mark WHERE recipient = $1`, k.recipient)
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE read_mark SET folded = $2 WHERE recipient = $1`, k.recipient, hi)
	return err
}

// defaultFoldChunk is how many of a mark's deliveries one fold transaction
// covers: a few ms of server time each.
const defaultFoldChunk = 5000

// foldStep folds one chunk of some mark in its own write transaction and
// reports whether any mark is left to fold.
func (s *Store) foldStep(ctx context.Context) (more bool, err error) {
	// Asked first outside a write: a folder with nothing to do writes nothing.
	var any bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM read_mark)`).Scan(&any); err != nil || !any {
		return false, err
	}
	err = s.write(ctx, func(tx pgx.Tx) error {
		more = false
		var k readMark
		// A mark a drain or a mark_unread is folding itself is theirs.
		err := tx.QueryRow(ctx, `SELECT recipient, through_seq, at, folded, read_by FROM read_mark ORDER BY recipient LIMIT 1 FOR UPDATE SKIP LOCKED`).
			Scan(&k.recipient, &k.through, &k.at, &k.folded, &k.by)
		if isNoRows(err) {
			return nil
		} else if err != nil {
			return err
		}
		// The chunk's end: the chunk-th delivery of the recipient after
		// folded, whatever its state (bounded work per chunk).
		var hi *int64
		if err := tx.QueryRow(ctx, `SELECT max(message_seq) FROM (SELECT message_seq FROM delivery
			WHERE recipient = $1 AND message_seq > $2 AND message_seq <= $3 ORDER BY message_seq LIMIT $4) c`,
			k.recipient, k.folded, k.through, s.foldChunk).Scan(&hi); err != nil {
			return err
		}
		end := k.through
		if hi != nil && *hi < end {
			end = *hi
		}
		more = true
		return k.foldRange(ctx, tx, end)
	})
	return more, err
}

// wakeFolder tells the folder that a mark may be waiting.
func (s *Store) wakeFolder() {
	select {
	case s.foldWake <- struct{}{}:
	default:
	}
}

// foldPoll is how often the folder looks for marks no drain of this
// instance woke it for: another instance's, or one left when a process
// stopped mid-fold. Looking is one read of an empty table.
const foldPoll = 2 * time.Second

// fold is the store's folder: woken (by a drain that wrote a mark, at open,
// and every foldPoll), it folds every mark chunk by chunk, then waits
// again, until stopped (Close).
func (s *Store) fold(ctx context.Context) {
	defer close(s.foldDone)
	mailroom.RunFolder(ctx, s.foldWake, foldPoll, time.Second, s.foldStep, func(err error) {
		s.log.Warn("read mark fold; retrying", "err", err)
	})
}

// startFolder runs the folder for the store's lifetime, unless a test holds it.
func (s *Store) startFolder() {
	if s.hooks.HoldFold {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopFold, s.foldDone = cancel, make(chan struct{})
	go s.fold(ctx)
	s.wakeFolder() // marks left behind are folded from the start
}

// drainByMarkSQL is the drain by a mark, in one statement (one snapshot),
// after the drain took the caller's mark lock exclusive and folded any
// earlier mark ($1-$3 the caller's, $4 the watermark's seq or -1, $5 the
// drain's readAt, $6 the watermark's seq or the largest bigint). When the
// caller's unread, unarchived personal deliveries at or below $6 are every
// unread personal delivery there (none is archived: the archived unread
// count less those above $6 is 0), and no fewer than the unread ones above
// $6, it writes a mark through the newest of them read at $5 and moves the
// caller's unread, unarchived counts to read, less those above $6 (by key,
// from one pass over them). Its row is the count it read, the mark's
// through_seq and the role deliveries it left alone; no row when the drain
// must mark rows instead. Counts move by deltas on the latest counter
// rows, so a send committed meanwhile stays counted unread, as it stays
// unread (its seq is above the mark).
var drainByMarkSQL = callerArgs + `,
	c AS (SELECT coalesce(sum(n) FILTER (WHERE NOT archived), 0)::bigint AS unread, coalesce(sum(n) FILTER (WHERE archived), 0)::bigint AS archived
		FROM mailbox_count WHERE recipient = $1 AND unread),
	t AS (SELECT max(d.message_seq) AS through FROM delivery d
		WHERE d.recipient = $1 AND d.read_at IS NULL AND d.archived_at IS NULL AND d.message_seq <= $6),
	w AS (SELECT d.via, d.priority, d.human, count(*) AS n, sum(d.message_seq)::bigint AS seqs FROM delivery d
		WHERE d.recipient = $1 AND d.read_at IS NULL AND d.archived_at IS NULL AND d.message_seq > $6 GROUP BY 1, 2, 3),
	a AS (SELECT count(*) AS n FROM delivery d
		WHERE d.recipient = $1 AND d.archived_at IS NOT NULL AND d.read_at IS NULL AND d.message_seq > $6),
	ok AS (SELECT c.unread - w.n AS n, t.through FROM c, t, a, (SELECT coalesce(sum(n), 0)::bigint AS n FROM w) w
		WHERE t.through IS NOT NULL AND c.archived = a.n AND c.unread - w.n >= w.n),
	k AS (SELECT x.via, x.priority, x.human, x.n - coalesce(w.n, 0) AS n, x.seqs - coalesce(w.seqs, 0) AS seqs
		FROM mailbox_count x LEFT JOIN w ON (w.via, w.priority, w.human) = (x.via, x.priority, x.human)
		WHERE x.recipient = $1 AND x.unread AND NOT x.archived AND EXISTS (SELECT 1 FROM ok)),
	mv AS (INSERT INTO mailbox_count AS x (recipient, archived, unread, via, priority, human, n, seqs)
		SELECT $1, false, s.unread, k.via, k.priority, k.human, CASE WHEN s.unread THEN -k.n ELSE k.n END, CASE WHEN s.unread THEN -k.seqs ELSE k.seqs END
		FROM k CROSS JOIN (VALUES (true), (false)) AS s (unread) WHERE k.n <> 0 OR k.seqs <> 0 ORDER BY 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = x.n + excluded.n, seqs = x.seqs + excluded.seqs),
	mk AS (INSERT INTO read_mark (recipient, through_seq, at) SELECT $1, ok.through, $5::timestamptz FROM ok)
	SELECT ok.n, ok.through, ` + withheldRoles + ` FROM ok`

// markedCount is a drain's durable count by mark k, read back after
// commit (evidence, not intent): the deliveries at or below the mark that
// carry its at, and those the mark still covers, at most n.
func (s *Store) markedCount(ctx context.Context, k readMark, n int) (int, error) {
	var got int
	err := s.pool.QueryRow(ctx, `SELECT least($4::bigint, count(*)) FROM delivery d
		WHERE d.recipient = $1 AND d.message_seq <= $2 AND (d.read_at = $3
			OR (d.read_at IS NULL AND d.message_seq <= (SELECT k.through_seq FROM read_mark k WHERE k.recipient = $1 AND k.at = $3)))`,
		pgx.QueryExecModeExec, k.recipient, k.through, k.at, n).Scan(&got)
	return got, err
}

// roleDrainByMarkSQL is a drain's share of one role queue by a mark, in one
// statement (one snapshot), after the drain took the queue's mark lock
// exclusive and folded its earlier mark ($1-$3 the caller's, $4 the queue's
// mailbox, $5 the drain's readAt, $6 the drain's end: its watermark's seq
// or the newest message's). A role delivery's read state is its holders'
// shared one, so the mark must read exactly the rows row marking would:
// the queue's unread, unarchived deliveries at or below $6 that the
// caller's role branch shows. A mark through seq reads every unread
// delivery of the queue at or below seq, so it ends below the first one row
// marking would leave:
//   - an archived unread one (a drain reads unarchived mail only), looked
//     for only when the queue's archived unread count is not all above $6;
//   - one the caller's branch hides (roleHidden: the caller's candidates,
//     few, on this queue: their own sends, mail they also got personally
//     or deleted, later deliveries of a message to two of their roles);
//
// and at the newest unread, unarchived delivery below it (not looked for
// in a queue with nothing unread: the walk would pass every read row).
// Then, as
// drainByMarkSQL does, it moves the queue's unread, unarchived counts to
// read less those above the mark (by key, one grouped pass over them) and
// writes the mark read by $1. Its row is the count it read and the mark's
// through_seq; no row when the mark would read nothing, or leave more
// unread above it than it reads (the counts' move back would cost more
// than the mark saves). The queue's rows above the mark up to $6 are left
// to the drain's row statement, whose branch starts above the mark.
var roleDrainByMarkSQL = callerArgs + `,
	c AS (SELECT coalesce(sum(n) FILTER (WHERE NOT archived), 0)::bigint AS unread, coalesce(sum(n) FILTER (WHERE archived), 0)::bigint AS archived
		FROM mailbox_count WHERE recipient = $4 AND unread),
	a AS (SELECT count(*) AS n FROM delivery d
		WHERE d.recipient = $4 AND d.archived_at IS NOT NULL AND d.read_at IS NULL AND d.message_seq > $6),
	e1 AS (SELECT CASE WHEN c.archived = a.n THEN $6::bigint ELSE (SELECT min(d.message_seq) - 1 FROM delivery d
			WHERE d.recipient = $4 AND d.message_seq <= $6 AND d.archived_at IS NOT NULL AND d.read_at IS NULL) END AS e FROM c, a),
	e AS (SELECT coalesce((SELECT min(h.message_seq) - 1 FROM (` + roleHidden + ` AND d.recipient = $4 AND d.read_at IS NULL AND d.archived_at IS NULL) h
			WHERE h.message_seq <= e1.e), e1.e) AS e FROM e1),
	t AS (SELECT CASE WHEN c.unread > 0 THEN (SELECT max(d.message_seq) FROM delivery d
			WHERE d.recipient = $4 AND d.read_at IS NULL AND d.archived_at IS NULL AND d.message_seq <= e.e) END AS through FROM e, c),
	w AS (SELECT d.via, d.priority, d.human, count(*) AS n, sum(d.message_seq)::bigint AS seqs FROM delivery d, t
		WHERE d.recipient = $4 AND d.read_at IS NULL AND d.archived_at IS NULL AND d.message_seq > t.through GROUP BY 1, 2, 3),
	ok AS (SELECT c.unread - w.n AS n, t.through FROM c, t, (SELECT coalesce(sum(n), 0)::bigint AS n FROM w) w
		WHERE t.through IS NOT NULL AND c.unread - w.n > 0 AND c.unread - w.n >= w.n),
	k AS (SELECT x.via, x.priority, x.human, x.n - coalesce(w.n, 0) AS n, x.seqs - coalesce(w.seqs, 0) AS seqs
		FROM mailbox_count x LEFT JOIN w ON (w.via, w.priority, w.human) = (x.via, x.priority, x.human)
		WHERE x.recipient = $4 AND x.unread AND NOT x.archived AND EXISTS (SELECT 1 FROM ok)),
	mv AS (INSERT INTO mailbox_count AS x (recipient, archived, unread, via, priority, human, n, seqs)
		SELECT $4, false, s.unread, k.via, k.priority, k.human, CASE WHEN s.unread THEN -k.n ELSE k.n END, CASE WHEN s.unread THEN -k.seqs ELSE k.seqs END
		FROM k CROSS JOIN (VALUES (true), (false)) AS s (unread) WHERE k.n <> 0 OR k.seqs <> 0 ORDER BY 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = x.n + excluded.n, seqs = x.seqs + excluded.seqs),
	mk AS (INSERT INTO read_mark (recipient, through_seq, at, read_by) SELECT $4, ok.through, $5::timestamptz, $1 FROM ok)
	SELECT ok.n, ok.through FROM ok`
