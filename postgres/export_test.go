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
		recount AS (SELECT recipient, archived_at IS NOT NULL AS archived, read_at IS NULL AS unread, via, priority, human, count(*) AS n, sum(message_seq)::bigint AS seqs
			FROM delivery GROUP BY 1, 2, 3, 4, 5, 6)
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
