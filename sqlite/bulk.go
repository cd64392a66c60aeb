package sqlite

import (
	"context"

	"github.com/mailroom/mailroom"
)

// SendMany stores n copies of d from the caller in one transaction, through
// the same send path as Send. It exists to seed large mailboxes for
// benchmarks and load tests; servers never call it.
func (s *Store) SendMany(ctx context.Context, d mailroom.Draft, n int) error {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return err
	}
	return s.write(ctx, func(tx *ptx) error {
		for range n {
			if _, err := send(ctx, tx, me, d); err != nil {
				return err
			}
		}
		return nil
	})
}
