package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/storetest"
)

func open(t testing.TB, path string, opts sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, now func() time.Time) mailroom.Store {
		// Unsynced: the suite asserts what stores do, not what the disk
		// keeps through a power cut; TestCommitsAreSynced checks the default.
		return open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{Now: now, NoSync: true})
	})
}

// TestCommitsAreSynced: a store syncs every commit (synchronous=FULL,
// which lets receipts say durable) unless opened with NoSync.
func TestCommitsAreSynced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opts sqlite.Options
		want string
	}{{sqlite.Options{}, "2"}, {sqlite.Options{NoSync: true}, "0"}} {
		s := open(t, filepath.Join(t.TempDir(), "m.db"), tc.opts)
		if got, err := sqlite.Pragma(context.Background(), s, "synchronous"); err != nil || got != tc.want {
			t.Errorf("NoSync %v: synchronous = %q %v, want %s", tc.opts.NoSync, got, err, tc.want)
		}
	}
}

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, now func() time.Time) mailroom.Store {
		return open(t, sqlite.Memory, sqlite.Options{Now: now})
	})
}
