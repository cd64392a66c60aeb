package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailroom/mailroom"
)

// Pool exposes the store's pool to the package's external tests.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// ExactUnread counts the caller's unread, unarchived inbox and sums its
// seqs the slow way, from the inbox branches themselves: what InboxState
// answers from counts.
func ExactUnread(ctx context.Context, s *Store) (n int, sum int64, err error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return 0, 0, err
	}
	err = s.read(ctx, func(tx pgx.Tx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		b := inboxBranches(unreadCond, "")
		return tx.QueryRow(ctx, callerArgs+`SELECT count(*), coalesce(sum(seq), 0)::bigint FROM (`+b[0]+` UNION ALL `+b[1]+`) u`,
			exec([]any{me.ID, roles.ids, roles.own})...).Scan(&n, &sum)
	})
	return n, sum, err
}

// CountMismatches lists the mailbox_count rows (count and seq sum) that
// differ from a recount of delivery, either way.
func CountMismatches(ctx context.Context, s *Store) ([]string, error) {
	rows, err := s.pool.Query(ctx, `WITH kept AS (SELECT recipient, archived, unread, via, priority, human, n, seqs FROM mailbox_count WHERE n <> 0 OR seqs <> 0),
		recount AS (SELECT d.recipient, d.archived_at IS NOT NULL AS archived, d.read_at IS NULL AND d.message_seq > coalesce(k.through_seq, 0) AS unread,
				d.via, d.priority, d.human, count(*) AS n, sum(d.message_seq)::bigint AS seqs
			FROM delivery d LEFT JOIN read_mark k ON k.recipient = d.recipient GROUP BY 1, 2, 3, 4, 5, 6)
		SELECT 'kept ' || k::text FROM (SELECT * FROM kept EXCEPT SELECT * FROM recount) k
		UNION ALL SELECT 'recount ' || r::text FROM (SELECT * FROM recount EXCEPT SELECT * FROM kept) r`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// WalkSearches makes every search of s walk span seqs of the message key
// first (then the index below them), whatever the statistics say: the
// results must not change.
func WalkSearches(s *Store, span int64) { s.force = searchForce{walk: span} }

// RangeSearches makes every search ask the index for ranges of span seqs
// (the buckets that hold them), stages of them, then the whole index
// below them: the results must not change.
func RangeSearches(s *Store, span int64, stages int) {
	s.force = searchForce{span: span, stages: stages}
}

// NarrowAllSearches makes every search of s ask for the caller's
// audience tokens, as a search by a reader sent little of the store does.
func NarrowAllSearches(s *Store) { s.narrow = 1 }

// NarrowNoSearches makes no search of s ask for audience tokens: every
// search examines every match, as before migration 0014.
func NarrowNoSearches(s *Store) { s.narrow = -1 }

// Audiences lists every message's audience tokens, sorted, as "seq: tokens".
func Audiences(ctx context.Context, s *Store) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq || ': ' || array_to_string(ARRAY(SELECT unnest(audience) ORDER BY 1), ' ') FROM message ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// FoldStep folds one chunk of some read mark, as the store's folder does
// (a test opens the store with Hooks.HoldFold and steps it), and reports
// whether any mark is left.
func FoldStep(ctx context.Context, s *Store) (bool, error) { return s.foldStep(ctx) }

// SetFoldChunk sets how many deliveries one fold step covers.
func SetFoldChunk(s *Store, n int) { s.foldChunk = n }

// MarkDrains is how many drains of s were by a read mark.
func MarkDrains(s *Store) int { return int(s.markDrains.Load()) }

// ReadMarks lists the read marks as "recipient through folded".
func ReadMarks(ctx context.Context, s *Store) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT recipient || ' ' || through_seq || ' ' || folded FROM read_mark ORDER BY recipient`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// PurgeWaited reports whether some transaction waits for the store's
// mark lock (which a purge holds) in this store's schema.
func PurgeWaited(ctx context.Context, s *Store) (bool, error) {
	var waiting bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
		AND ((classid::bigint << 32) | objid::bigint) = `+storeLockKey+`)`).Scan(&waiting)
	return waiting, err
}

// QueueMarkDrains is how many role queues' marks drains of s wrote.
func QueueMarkDrains(s *Store) int { return int(s.queueMarkDrains.Load()) }
