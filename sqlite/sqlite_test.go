package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
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

// execRaw runs statements on the file at path outside any Store, as an
// older version or a damaged file would have left it.
func execRaw(t testing.TB, path string, qs ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, now func() time.Time) mailroom.Store {
		// Unsynced: the suite asserts what stores do, not what the disk
		// keeps through a power cut; TestCommitsAreSynced checks the default.
		// A copy of a migrated empty store (the migrations have tests of
		// their own; TestMemoryStore's stores migrate).
		path := filepath.Join(t.TempDir(), "m.db")
		benchstore.Empty(t, path)
		return open(t, path, sqlite.Options{Now: now, NoSync: true})
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

// A store upgraded by a newer mailroom is refused, not misread: its
// migrations may change what rows mean (0012's read-through mark made
// drained mail look unread to a binary without it).
func TestOpenRefusesANewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{NoSync: true})
	if _, err := s.EnsureAgent(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	execRaw(t, path, `INSERT INTO schema_migration (version, applied_at) VALUES (9999, '2027-01-01T00:00:00Z')`)
	_, err := sqlite.Open(context.Background(), path, sqlite.Options{NoSync: true})
	if mailroom.ErrorCode(err) != mailroom.ECONFLICT || !strings.Contains(err.Error(), "schema version 9999 is newer than this mailroom knows") {
		t.Fatalf("open of a newer store: %v, want a conflict naming its version", err)
	}
	execRaw(t, path, `DELETE FROM schema_migration WHERE version = 9999`)
	s = open(t, path, sqlite.Options{NoSync: true})
	ids, err := s.Identities(context.Background())
	if err != nil || len(ids) != 1 || ids[0].Name != "alice" {
		t.Fatalf("after the refused open: identities %+v, %v; want alice alone", ids, err)
	}
}
