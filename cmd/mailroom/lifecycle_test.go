package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

func TestReadGrantCommands(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := filepath.Join(t.TempDir(), "m.db")
	mustRunCLI(t, env, "identity", "add", "alice", "--db", db)
	mustRunCLI(t, env, "identity", "add", "dana", "--human", "--db", db)
	for _, tc := range []struct {
		args             []string
		wantOut, wantErr string
	}{
		{[]string{"grant", "read-inbox", "human:dana", "@alice"}, "human:dana may now read the inbox of @alice (read-only)", ""},
		{[]string{"grant", "read-inbox", "human:dana", "@alice"}, "may now read", ""},
		{[]string{"grant", "read-inbox", "human:dana", "@nobody"}, "", "owner: unknown identity @nobody"},
		{[]string{"grant", "read-inbox", "@alice", "alice"}, "", "@alice already reads its own inbox"},
		{[]string{"grant", "read-inbox", "role:x", "@alice"}, "", `grantee: "role:x" is not an identity`},
		{[]string{"revoke", "read-inbox", "dana", "alice"}, "dana may no longer read the inbox of alice", ""},
		{[]string{"revoke", "read-inbox", "dana", "alice"}, "dana had no read grant on alice; nothing changed", ""},
	} {
		out, stderr, err := runCLI(t, env, append(tc.args, "--db", db)...)
		if tc.wantErr == "" && err != nil {
			t.Errorf("%v: %v\n%s", tc.args, err, stderr)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(stderr, tc.wantErr)) {
			t.Errorf("%v: err %v, stderr %q; want %q", tc.args, err, stderr, tc.wantErr)
		}
		if !strings.Contains(out, tc.wantOut) {
			t.Errorf("%v: stdout %q lacks %q", tc.args, out, tc.wantOut)
		}
	}
}

func TestPurgeCommand(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := filepath.Join(t.TempDir(), "m.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	var ids []string
	for i := range 3 {
		d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: "old", Body: "b"}.Draft(0)
		d.OriginSessionID = "SESSION:t"
		r, err := s.Send(mailroom.WithCaller(ctx, alice), d)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			ids = append(ids, r.MessageID)
		}
	}
	s.MarkRead(mailroom.WithCaller(ctx, bob), ids)
	s.Close()

	for _, tc := range []struct {
		args             []string
		wantOut, wantErr string
	}{
		{[]string{"purge"}, "", "purge needs --older-than AGE"},
		{[]string{"purge", "--older-than", "soon"}, "", `--older-than must be a positive age such as 90d, 2w or 12h (got "soon")`},
		{[]string{"purge", "--older-than", "90d"}, "removed 0 messages sent before", ""},
		{[]string{"purge", "--older-than", "1ms", "--dry-run"}, "would remove 2 messages", ""},
		{[]string{"purge", "--older-than", "1ms"}, "removed 2 messages", ""},
		{[]string{"purge", "--older-than", "1ms"}, "kept 1 old messages that are still unread", ""},
		{[]string{"purge", "--older-than", "1ms", "--include-unread"}, "removed 1 messages", ""},
	} {
		out, stderr, err := runCLI(t, env, append(tc.args, "--db", db)...)
		if tc.wantErr == "" && err != nil {
			t.Errorf("%v: %v\n%s", tc.args, err, stderr)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(stderr, tc.wantErr)) {
			t.Errorf("%v: err %v, stderr %q; want %q", tc.args, err, stderr, tc.wantErr)
		}
		if !strings.Contains(out, tc.wantOut) {
			t.Errorf("%v: stdout %q lacks %q", tc.args, out, tc.wantOut)
		}
	}
}
