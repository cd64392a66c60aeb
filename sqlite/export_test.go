package sqlite

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// ExplainQueryPlan returns the plan of query with args on one of the
// store's own connections, one detail line per step.
func ExplainQueryPlan(ctx context.Context, s *Store, query string, args []any) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, err
		}
		plan = append(plan, detail)
	}
	return plan, rows.Err()
}

// Pragma reads a pragma's value on one of the store's own connections.
func Pragma(ctx context.Context, s *Store, name string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v)
	return v, err
}

// VacuumInto writes a copy of the store's database to path.
func VacuumInto(ctx context.Context, s *Store, path string) error {
	_, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, path)
	return err
}

// SetStatsFloor sets the message count from which refreshStats measures.
func SetStatsFloor(s *Store, n int64) { s.statsFloor = n }

// WatchChecks returns how many data_version checks the change watcher made.
func WatchChecks(s *Store) int64 { return s.watchChecks.Load() }

// Watching reports whether the change watcher is watching (holds its
// connection and file watch).
func Watching(s *Store) bool { return s.watching.Load() }

// CountMismatches recounts every recipient's personal deliveries and every
// role's deliveries and returns the mailbox_count and role_count rows that
// differ from the recount.
func CountMismatches(ctx context.Context, s *Store) ([]string, error) {
	return strs(ctx, s, `WITH recount AS (
			SELECT d.recipient_id, d.archived_at IS NOT NULL AS archived, `+unreadD+` AS unread, d.via, m.priority, s.kind = 'human' AS human, count(*) AS n, sum(d.message_seq) AS seqs
			FROM delivery d JOIN message m ON m.seq = d.message_seq JOIN identity s ON s.id = m.sender_id
			WHERE d.recipient_id IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6),
		kept AS (SELECT recipient_id, archived, unread, via, priority, human, n, seqs FROM mailbox_count WHERE n <> 0 OR seqs <> 0),
		rrecount AS (
			SELECT d.role, d.archived_at IS NOT NULL AS archived, `+roleUnreadD+` AS unread, m.priority, s.kind = 'human' AS human, count(*) AS n, sum(d.message_seq) AS seqs
			FROM delivery d JOIN message m ON m.seq = d.message_seq JOIN identity s ON s.id = m.sender_id
			WHERE d.role IS NOT NULL GROUP BY 1, 2, 3, 4, 5),
		rkept AS (SELECT role, archived, unread, priority, human, n, seqs FROM role_count WHERE n <> 0 OR seqs <> 0)
		SELECT 'kept ' || recipient_id || ' ' || archived || unread || ' ' || via || ' ' || priority || ' ' || human || ': ' || n || ' ' || seqs FROM (SELECT * FROM kept EXCEPT SELECT * FROM recount)
		UNION ALL
		SELECT 'recount ' || recipient_id || ' ' || archived || unread || ' ' || via || ' ' || priority || ' ' || human || ': ' || n || ' ' || seqs FROM (SELECT * FROM recount EXCEPT SELECT * FROM kept)
		UNION ALL
		SELECT 'kept role ' || role || ' ' || archived || unread || ' ' || priority || ' ' || human || ': ' || n || ' ' || seqs FROM (SELECT * FROM rkept EXCEPT SELECT * FROM rrecount)
		UNION ALL
		SELECT 'recount role ' || role || ' ' || archived || unread || ' ' || priority || ' ' || human || ': ' || n || ' ' || seqs FROM (SELECT * FROM rrecount EXCEPT SELECT * FROM rkept)`)
}

// RoleCandidates lists the rows of role_hint and role_later.
func RoleCandidates(ctx context.Context, s *Store) ([]string, error) {
	return strs(ctx, s, `SELECT 'hint ' || identity_id || ' ' || message_seq FROM role_hint
		UNION ALL SELECT 'later ' || role || ' ' || message_seq FROM role_later ORDER BY 1`)
}

func strs(ctx context.Context, s *Store, q string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// SetReadyWait sets how long Subscribe waits for the watcher's baseline.
func SetReadyWait(s *Store, d time.Duration) { s.readyWait = d }

// HoldWatchConn takes the change watcher's only connection, so that the
// watcher cannot take its baseline until release is called.
func HoldWatchConn(ctx context.Context, s *Store) (release func(), err error) {
	c, err := s.watchDB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return func() { c.Close() }, nil
}

// FileEvents returns how many file events the change watcher received.
func FileEvents(s *Store) int64 { return s.fileEvents.Load() }

// OnFileEvents reports whether the change watcher waits for file events
// now (rather than polling while the store writes).
func OnFileEvents(s *Store) bool { return s.onEvents.Load() }

// ExactUnread counts the caller's unread, unarchived inbox and sums its
// seqs the slow way, from the inbox branches themselves: what InboxState
// answers from counts.
func ExactUnread(ctx context.Context, s *Store) (n int, sum int64, err error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return 0, 0, err
	}
	err = s.read(ctx, func(tx *ptx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		u := inboxBranches(unreadCond, "")
		return tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(seq), 0) FROM (`+u[0]+` UNION ALL `+u[1]+`)`, me.ID, jsonStrings(roles)).Scan(&n, &sum)
	})
	return n, sum, err
}

// Audiences returns each message's audience tokens (seq: tokens), in seq
// order.
func Audiences(ctx context.Context, s *Store) ([]string, error) {
	return strs(ctx, s, `SELECT message_seq || ': ' || tokens FROM message_audience ORDER BY message_seq`)
}

// FTSIntegrity runs FTS5's integrity check of the full-text index against
// its content (migration 0013's message_text).
func FTSIntegrity(ctx context.Context, s *Store) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO message_fts (message_fts, rank) VALUES ('integrity-check', 1)`)
	return err
}

// NarrowAllSearches makes every search of s ask FTS5 for the caller's
// audience, whatever share of the store the caller is sent.
func NarrowAllSearches(s *Store) { s.narrowAll = true }

// FoldStep folds one chunk of some read mark, as the store's folder does
// (a test opens the store with Hooks.HoldFold and steps it), and reports
// whether a mark is left.
func FoldStep(ctx context.Context, s *Store) (bool, error) { return s.foldStep(ctx) }

// SetFoldChunk sets how many deliveries one fold step covers.
func SetFoldChunk(s *Store, n int) { s.foldChunk = n }

// ReadMarks lists the read marks as "recipient through folded".
func ReadMarks(ctx context.Context, s *Store) ([]string, error) {
	return strs(ctx, s, `SELECT recipient_id || ' ' || through_seq || ' ' || folded FROM read_mark ORDER BY recipient_id`)
}

// MarkDrains counts the drains the store made by a read mark.
func MarkDrains(s *Store) int64 { return s.marks.Load() }

// RoleMarkDrains counts the role marks drains wrote.
func RoleMarkDrains(s *Store) int64 { return s.roleMarks.Load() }

// RoleMarks lists the role marks as "role through folded".
func RoleMarks(ctx context.Context, s *Store) ([]string, error) {
	return strs(ctx, s, `SELECT role || ' ' || through_seq || ' ' || folded FROM role_mark ORDER BY role`)
}

// MarkDrainsOverNewer counts the drains by a read mark that stopped at a
// watermark with unread mail after it.
func MarkDrainsOverNewer(s *Store) int64 { return s.marksOver.Load() }

// CopyFile copies the file from to to (a seeded store, for benchmarks).
func CopyFile(tb testing.TB, from, to string) { copyFile(tb, from, to) }

// PoolStats is the store's reading pool's database/sql statistics.
func PoolStats(s *Store) sql.DBStats { return s.db.Stats() }

// WritersWaiting reports whether a write of this process waits for the
// write lock.
func WritersWaiting(s *Store) bool { return s.fgWaiting.Load() > 0 }

// DeliveryIDs lists every delivery's id, in order.
func DeliveryIDs(ctx context.Context, t testing.TB, s *Store) []string {
	ids, err := strs(ctx, s, `SELECT id FROM delivery ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// FTSMergeStep runs one step of the store's merger of the full-text index
// (a test opens the store with Hooks.HoldMerge and steps it), and reports
// whether it merged.
func FTSMergeStep(ctx context.Context, s *Store) (bool, error) { return s.ftsMergeStep(ctx) }

// FTSSegments is the full-text index's segment count per level.
func FTSSegments(ctx context.Context, s *Store) ([]int, error) {
	st, err := ftsStructureOf(ctx, s.db)
	return st.segs, err
}

// SetFTSMerge sets one merge step's budget in pages and the floor of
// pages outside the largest segment below which no rebuild is due, and
// steps no longer wait between them.
func SetFTSMerge(s *Store, pages, rebuildFloor int) {
	s.ftsMergePages, s.ftsRebuildMin, s.ftsMergePace = pages, rebuildFloor, 0
}

// FTSMerges counts the merger's steps that merged.
func FTSMerges(s *Store) int64 { return s.ftsMerges.Load() }
