package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
	"github.com/mailroom/mailroom/storetest"
)

// TestMarkDrainsAsRowsDo is the differential test of read marks
// (storetest.RunMarkDiff): a store draining by marks against one whose
// FailMark hook, failing nothing, makes every drain mark rows. In
// parallel with the package's other tests: serially, its seeds held back
// every parallel test for seconds, one core idle for part of it.
func TestMarkDrainsAsRowsDo(t *testing.T) {
	t.Parallel()
	fresh := func(t *testing.T, hooks *sqlite.Hooks) (string, *sqlite.Store) {
		path := filepath.Join(t.TempDir(), "m.db")
		benchstore.Empty(t, path)
		return path, open(t, path, sqlite.Options{NoSync: true, Now: storetest.NewClock().Now, Hooks: hooks})
	}
	var held func(t *testing.T, path string, s *sqlite.Store) storetest.HeldFold
	held = func(t *testing.T, path string, s *sqlite.Store) storetest.HeldFold {
		h := foldHooks(s)
		h.Reopen = func(t *testing.T) storetest.HeldFold {
			s.Close()
			return held(t, path, open(t, path, sqlite.Options{NoSync: true, Now: storetest.NewClock().Now, Hooks: &sqlite.Hooks{HoldFold: true}}))
		}
		return h
	}
	storetest.RunMarkDiff(t, storetest.MarkDiff{
		Marked: func(t *testing.T) storetest.HeldFold {
			path, s := fresh(t, &sqlite.Hooks{HoldFold: true})
			return held(t, path, s)
		},
		Rows: func(t *testing.T) mailroom.Store {
			_, s := fresh(t, &sqlite.Hooks{HoldFold: true, FailMark: func(string) error { return nil }})
			return s
		},
	})
}
