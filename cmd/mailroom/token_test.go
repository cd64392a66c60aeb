package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var tokenRowRE = regexp.MustCompile(`(?m)^([0-9a-f]{12})\s+(\S+)\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s+(never|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$`)

// TestTokenListAndRevoke: token list shows id, identity, created and last
// use and never a secret; revoke by identity or by id works at once on an
// open HTTP session served by another process.
func TestTokenListAndRevoke(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := filepath.Join(t.TempDir(), "m.db")
	alice := lastLine(mustRunCLI(t, env, "token", "create", "--agent", "alice", "--db", db))
	bob := lastLine(mustRunCLI(t, env, "token", "create", "--agent", "bob", "--db", db))
	dana := lastLine(mustRunCLI(t, env, "token", "create", "--human", "dana", "--db", db))
	endpoint := serveHTTP(t, env, "--http", "127.0.0.1:0", "--db", db)

	aliceSession, err := httpSession(t, endpoint, alice, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var p page
	aliceSession.ok("list_messages", map[string]any{}, &p)

	out := mustRunCLI(t, env, "token", "list", "--db", db)
	for _, secret := range []string{alice, bob, dana, alice[3:15]} {
		if strings.Contains(out, secret) {
			t.Fatalf("token list shows a secret:\n%s", out)
		}
	}
	rows := tokenRowRE.FindAllStringSubmatch(out, -1)
	if len(rows) != 3 || !strings.HasPrefix(out, "ID") {
		t.Fatalf("token list:\n%s", out)
	}
	byWho := map[string][]string{}
	for _, r := range rows {
		byWho[r[2]] = r
	}
	if byWho["@alice"] == nil || byWho["@alice"][4] == "never" || byWho["@bob"][4] != "never" || byWho["human:dana"] == nil {
		t.Errorf("token list (alice used over HTTP, bob not):\n%s", out)
	}

	t.Run("revoke by identity ends an open session at once", func(t *testing.T) {
		got := mustRunCLI(t, env, "token", "revoke", "--agent", "alice", "--db", db)
		if !strings.Contains(got, "revoked token "+byWho["@alice"][1]+" of @alice") {
			t.Errorf("revoke printed %q", got)
		}
		if _, err := aliceSession.call("list_messages", map[string]any{}); err == nil {
			t.Errorf("the open session still works after its token was revoked")
		}
		if s := statusOf(t, endpoint, "Bearer "+alice); s != http.StatusUnauthorized {
			t.Errorf("a revoked token: %d", s)
		}
		if s := statusOf(t, endpoint, "Bearer "+bob); s != http.StatusOK {
			t.Errorf("bob's token: %d", s)
		}
	})
	t.Run("revoke by id prefix", func(t *testing.T) {
		got := mustRunCLI(t, env, "token", "revoke", byWho["human:dana"][1][:6], "--db", db)
		if !strings.Contains(got, "of human:dana") {
			t.Errorf("revoke printed %q", got)
		}
		if s := statusOf(t, endpoint, "Bearer "+dana); s != http.StatusUnauthorized {
			t.Errorf("dana's revoked token: %d", s)
		}
	})
	t.Run("revoke by the whole token", func(t *testing.T) {
		mustRunCLI(t, env, "token", "revoke", bob, "--db", db)
		if s := statusOf(t, endpoint, "Bearer "+bob); s != http.StatusUnauthorized {
			t.Errorf("bob's revoked token: %d", s)
		}
	})
	t.Run("bad revokes are one-line errors that change nothing", func(t *testing.T) {
		carol := lastLine(mustRunCLI(t, env, "token", "create", "--agent", "carol", "--db", db))
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"token", "revoke"}, "token revoke needs exactly one of --agent NAME, --human LOGIN or an ID-PREFIX"},
			{[]string{"token", "revoke", "--agent", "carol", "abcd"}, "token revoke needs exactly one of"},
			{[]string{"token", "revoke", "ab"}, `token id prefix "ab": give 4 to 64 hex digits`},
			{[]string{"token", "revoke", "zzzz"}, `token id prefix "zzzz" is not hexadecimal`},
			{[]string{"token", "revoke", "--agent", "nobody"}, "unknown identity @nobody"},
			{[]string{"token", "revoke", "--agent", "alice"}, "@alice has no tokens"},
		} {
			_, stderr, err := runCLI(t, env, append(tc.args, "--db", db)...)
			if err == nil || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("%v: err %v, stderr %q, want %q", tc.args, err, stderr, tc.want)
			}
		}
		if s := statusOf(t, endpoint, "Bearer "+carol); s != http.StatusOK {
			t.Errorf("carol's token after failed revokes: %d", s)
		}
	})
}

// TestLooseDatabaseFilesAreTightened: an existing database (and its -wal
// and -shm) readable by others is made owner-only at open, with a log line.
func TestLooseDatabaseFilesAreTightened(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := filepath.Join(t.TempDir(), "m.db")
	mustRunCLI(t, env, "identity", "add", "bob", "--db", db)
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	// A leftover write-ahead log, world-writable (SQLite removes it at
	// close, so only the log line can show it was tightened).
	if err := os.WriteFile(db+"-wal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(db+"-wal", 0o666)
	_, stderr, err := runCLI(t, env, "identity", "list", "--db", db)
	if err != nil {
		t.Fatalf("identity list: %v %s", err, stderr)
	}
	if fi, err := os.Stat(db); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s after open: %v %v, want 0600", db, fi.Mode().Perm(), err)
	}
	for _, want := range []string{"file=" + db + " was=0644 now=0600", "file=" + db + "-wal was=0666 now=0600"} {
		if !strings.Contains(stderr, "tightened database file permissions") || !strings.Contains(stderr, want) {
			t.Errorf("no log line with %q: %s", want, stderr)
		}
	}
	_, stderr, _ = runCLI(t, env, "identity", "list", "--db", db)
	if strings.Contains(stderr, "tightened") {
		t.Errorf("tightened again: %s", stderr)
	}
}
