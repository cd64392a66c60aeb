package postgres_test

import (
	"context"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

// TestMarkDrainsAsRowsDo is the differential test of read marks
// (storetest.RunMarkDiff): a store draining by marks, personal and role
// queues', against one whose AfterSnapshot hook, doing nothing, makes
// every drain mark rows. (FailMark, which SQLite's row store uses, only
// fails MarkRead's ids here: a drain has no per-id writes.) The store
// does not count its drains by a mark over newer mail: the run sees them
// in the model.
func TestMarkDrainsAsRowsDo(t *testing.T) {
	t.Parallel()
	var held func(t *testing.T, url string, s *postgres.Store) storetest.HeldFold
	held = func(t *testing.T, url string, s *postgres.Store) storetest.HeldFold {
		return storetest.HeldFold{
			Store:          s,
			Step:           func(ctx context.Context) (bool, error) { return postgres.FoldStep(ctx, s) },
			SetChunk:       func(n int) { postgres.SetFoldChunk(s, n) },
			Marks:          func(ctx context.Context) ([]string, error) { return postgres.ReadMarks(ctx, s) },
			MarkDrains:     func() int { return postgres.MarkDrains(s) },
			RoleMarkDrains: func() int { return postgres.QueueMarkDrains(s) },
			Check:          func(t *testing.T, when string) { checkNoMismatch(t, s, when) },
			Reopen: func(t *testing.T) storetest.HeldFold {
				s.Close()
				return held(t, url, open(t, url, postgres.Options{Now: storetest.NewClock().Now, Hooks: &postgres.Hooks{HoldFold: true}}))
			},
		}
	}
	storetest.RunMarkDiff(t, storetest.MarkDiff{
		Marked: func(t *testing.T) storetest.HeldFold {
			url := pgtest.URL(t)
			return held(t, url, open(t, url, postgres.Options{Now: storetest.NewClock().Now, Hooks: &postgres.Hooks{HoldFold: true}}))
		},
		Rows: func(t *testing.T) mailroom.Store {
			return open(t, pgtest.URL(t), postgres.Options{Now: storetest.NewClock().Now, Hooks: &postgres.Hooks{HoldFold: true, AfterSnapshot: func() {}}})
		},
	})
}
