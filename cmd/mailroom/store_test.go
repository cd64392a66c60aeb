package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailroom/mailroom/postgres/pgtest"
)

// testDB is a fresh database for one test: a SQLite file, or with
// MAILROOM_TEST_STORE=postgres a new schema on MAILROOM_TEST_POSTGRES.
func testDB(t *testing.T) string {
	t.Helper()
	if pgtest.UsePostgres() {
		return pgtest.URL(t)
	}
	return filepath.Join(t.TempDir(), "m.db")
}

func TestUnsupportedDatabaseURLIsAnErrorNotAPath(t *testing.T) {
	t.Parallel()
	env := environ(t)
	dir := t.TempDir()
	for _, db := range []string{"mysql://u:secret@db.example/mail", "sqlite://x.db", "file://x.db"} {
		_, stderr, err := runCLIIn(t, dir, env, "identity", "add", "bob", "--db", db)
		if err == nil || !strings.Contains(stderr, "unsupported URL scheme") {
			t.Fatalf("--db %s: err %v, stderr %q", db, err, stderr)
		}
		if strings.Contains(stderr, "secret") {
			t.Fatalf("the password reached stderr: %q", stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a URL was taken for a path: %v", entries)
	}
}

// runCLIIn is runCLI in the working directory dir.
func runCLIIn(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}
