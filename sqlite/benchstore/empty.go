package benchstore

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mailroom/mailroom/sqlite"
)

// empty is a freshly migrated, empty store's file, made once per process.
var empty struct {
	once sync.Once
	file []byte
	err  error
}

// Empty writes at path a copy of a freshly migrated, empty store, made once
// per process: a test's sqlite.Open of the copy finds every migration
// applied, and skips the ~20 ms of CPU that migrating an empty file costs
// (a test package opens a hundred stores). Tests of migrations themselves
// open a new file instead.
func Empty(tb testing.TB, path string) {
	tb.Helper()
	empty.once.Do(func() {
		dir, err := os.MkdirTemp("", "mailroom-empty-")
		if err != nil {
			empty.err = err
			return
		}
		defer os.RemoveAll(dir)
		p := filepath.Join(dir, "m.db")
		s, err := sqlite.Open(context.Background(), p, sqlite.Options{NoSync: true})
		if err != nil {
			empty.err = err
			return
		}
		// Close checkpoints the write-ahead log into the file and removes it.
		if empty.err = s.Close(); empty.err != nil {
			return
		}
		if _, err := os.Stat(p + "-wal"); err == nil {
			empty.err = os.ErrExist // a log left beside it: the file alone is not the store
			return
		}
		empty.file, empty.err = os.ReadFile(p)
	})
	if empty.err != nil {
		tb.Fatalf("empty store template: %v", empty.err)
	}
	if err := os.WriteFile(path, empty.file, 0o600); err != nil {
		tb.Fatal(err)
	}
}
