package postgres_test

import (
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
		h := foldHooks(s)
		h.Reopen = func(t *testing.T) storetest.HeldFold {
			s.Close()
			return held(t, url, open(t, url, postgres.Options{Now: storetest.NewClock().Now, Hooks: &postgres.Hooks{HoldFold: true}}))
		}
		return h
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
