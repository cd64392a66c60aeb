package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// schema13RoleTriggers are migration 0011's role count triggers, which a
// store at schema 13 has (0014 replaces them with ones that consult
// role_mark).
var schema13RoleTriggers = []string{
	`DROP TRIGGER delivery_role_count_insert`,
	`DROP TRIGGER delivery_role_count_delete`,
	`CREATE TRIGGER delivery_role_count_insert AFTER INSERT ON delivery WHEN NEW.role IS NOT NULL
BEGIN
	INSERT INTO role_count (role, archived, unread, priority, human, n, seqs)
		SELECT NEW.role, NEW.archived_at IS NOT NULL, NEW.read_at IS NULL, m.priority, s.kind = 'human', 1, NEW.message_seq
		FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = NEW.message_seq
		ON CONFLICT DO UPDATE SET n = n + 1, seqs = seqs + excluded.seqs;
	INSERT OR IGNORE INTO role_hint (identity_id, message_seq)
		SELECT sender_id, seq FROM message WHERE seq = NEW.message_seq
		UNION ALL
		SELECT recipient_id, message_seq FROM delivery WHERE message_seq = NEW.message_seq AND recipient_id IS NOT NULL;
	INSERT OR IGNORE INTO role_later (role, message_seq)
		SELECT NEW.role, NEW.message_seq WHERE EXISTS
			(SELECT 1 FROM delivery o WHERE o.message_seq = NEW.message_seq AND o.role IS NOT NULL AND o.id < NEW.id);
END`,
	`CREATE TRIGGER delivery_role_count_delete AFTER DELETE ON delivery WHEN OLD.role IS NOT NULL
BEGIN
	UPDATE role_count SET n = n - 1, seqs = seqs - OLD.message_seq
		WHERE role = OLD.role AND archived = (OLD.archived_at IS NOT NULL) AND unread = (OLD.read_at IS NULL)
		AND (priority, human) = (SELECT m.priority, s.kind = 'human' FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = OLD.message_seq);
	DELETE FROM role_hint WHERE message_seq = OLD.message_seq;
	DELETE FROM role_later WHERE role = OLD.role AND message_seq = OLD.message_seq;
END`,
	`DROP TABLE role_mark`,
	`DELETE FROM schema_migration WHERE version = 14`,
}

// Migration 0014 on a store at schema 13 with role mail in every state:
// the role counts stay right, a drain with roles is then a role mark that
// reads exactly what rows would, for every holder, and its fold writes
// the same.
func TestRoleMarkMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{NoSync: true})
	alice, bob, carol := agent(t, s, "alice"), agent(t, s, "bob"), agent(t, s, "carol")
	for _, who := range []string{"bob", "carol"} {
		if err := s.GrantRole(ctx, who, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	send := func(from context.Context, to ...string) string {
		t.Helper()
		d, err := mailroom.SendInput{To: to, Subject: "s", Body: "b", OriginSessionID: "SESSION:t"}.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Send(from, d)
		if err != nil {
			t.Fatal(err)
		}
		return r.MessageID
	}
	var q []string
	for range 6 {
		q = append(q, send(alice, "role:ops"))
	}
	own := send(bob, "role:ops")
	if res := s.MarkRead(carol, []string{q[1], q[2]}); res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("carol's mark_read: %+v", res)
	}
	if _, err := s.Archive(carol, q[2]); err != nil {
		t.Fatal(err)
	}
	s.Close()
	execRaw(t, path, schema13RoleTriggers...)

	s = open(t, path, sqlite.Options{NoSync: true, Hooks: &sqlite.Hooks{HoldFold: true}})
	checkNoMismatch(t, s, "after migration 0014")
	rc, err := s.MarkAllRead(bob, "", true)
	if err != nil || rc.ReadCount != 4 || rc.DurableCount != 4 || sqlite.RoleMarkDrains(s) != 1 {
		t.Fatalf("bob's drain with roles after the migration: %+v %v (role marks %d)", rc, err, sqlite.RoleMarkDrains(s))
	}
	checkNoMismatch(t, s, "after a drain by a role mark")
	purged := false
	view := func(when string) {
		t.Helper()
		want := map[string]string{q[1]: "@carol", q[2]: "@carol", q[3]: "@bob", q[4]: "@bob", q[5]: "@bob", own: ""}
		if !purged {
			want[q[0]] = "@bob"
		}
		for id, reader := range want {
			m, err := s.Get(carol, id)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if m.ReadBy != nil {
				got = *m.ReadBy
			}
			if got != reader || (reader == "") != (m.ReadAt == nil) {
				t.Fatalf("%s: carol's view of %s: readAt %v readBy %q, want %q", when, id, m.ReadAt, got, reader)
			}
		}
		st, err := s.Status(carol)
		if err != nil || st.Unread.Total != 1 || st.Archived != 1 {
			t.Fatalf("%s: carol's status %+v archived %d %v", when, st.Unread, st.Archived, err)
		}
		checkNoMismatch(t, s, when)
	}
	view("with the role mark")
	// A purge deletes covered deliveries: the delete trigger 0014 made
	// counts them as read.
	m1, err := s.Get(carol, q[1])
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Purge(ctx, mailroom.PurgeRequest{Before: m1.SentAt}); err != nil || rep.Messages != 1 {
		t.Fatalf("purge of the first drained message: %+v %v", rep, err)
	}
	checkNoMismatch(t, s, "after a purge of covered role mail")
	purged = true
	for {
		more, err := sqlite.FoldStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
	if marks, err := sqlite.RoleMarks(ctx, s); err != nil || len(marks) != 0 {
		t.Fatalf("role marks left after folding: %v %v", marks, err)
	}
	view("folded")
}

// Two holders draining a role queue at once, with sends to it, another
// holder's mark_unread and archive, and the folder running: every count
// stays right, each read role message shows a drainer's read, and a last
// drain reads exactly what status called unread.
func TestRoleMarkConcurrentDrains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "c.db"), sqlite.Options{NoSync: true})
	alice, bob, carol, dana := agent(t, s, "alice"), agent(t, s, "bob"), agent(t, s, "carol"), agent(t, s, "dana")
	for _, who := range []string{"bob", "carol", "dana"} {
		if err := s.GrantRole(ctx, who, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	sqlite.SetFoldChunk(s, 2)
	var sent []string
	send := func(from context.Context) string {
		d, err := mailroom.SendInput{To: []string{"role:ops"}, Subject: "s", Body: "b", OriginSessionID: "SESSION:t"}.Draft(0)
		if err != nil {
			t.Error(err)
			return ""
		}
		r, err := s.Send(from, d)
		if err != nil {
			t.Error(err)
		}
		return r.MessageID
	}
	for range 10 {
		sent = append(sent, send(alice))
	}
	// A first drain of the whole queue, alone: a role mark.
	if rc, err := s.MarkAllRead(carol, "", true); err != nil || rc.ReadCount != 10 || sqlite.RoleMarkDrains(s) != 1 {
		t.Fatalf("carol's first drain: %+v %v (role marks %d)", rc, err, sqlite.RoleMarkDrains(s))
	}
	for round := range 8 {
		var wg sync.WaitGroup
		for _, who := range []context.Context{bob, carol} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.MarkAllRead(who, "", true); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Add(1)
		var more []string
		go func() {
			defer wg.Done()
			for range 3 {
				more = append(more, send(alice))
			}
			if _, err := s.MarkUnread(dana, sent[round]); err != nil {
				t.Error(err)
			}
			// An archive and unarchive racing the drains: archived
			// unread mail stops a role mark, archived read mail does not.
			if _, err := s.Archive(dana, sent[round+1]); err != nil {
				t.Error(err)
			}
			if _, err := s.Unarchive(dana, sent[round+1]); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		sent = append(sent, more...)
		checkNoMismatch(t, s, "after concurrent drains")
	}
	for _, id := range sent {
		m, err := s.Get(dana, id)
		if err != nil {
			t.Fatal(err)
		}
		if (m.ReadAt == nil) != (m.ReadBy == nil) || (m.ReadBy != nil && *m.ReadBy != "@bob" && *m.ReadBy != "@carol") {
			t.Fatalf("%s: readAt %v readBy %v", id, m.ReadAt, m.ReadBy)
		}
	}
	st, err := s.Status(bob)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := s.MarkAllRead(bob, "", true)
	if err != nil || rc.ReadCount != st.Unread.Total {
		t.Fatalf("last drain %+v %v, status said %d unread", rc, err, st.Unread.Total)
	}
	if st, err := s.Status(carol); err != nil || st.Unread.Total != 0 {
		t.Fatalf("carol after the last drain: %+v %v", st.Unread, err)
	}
	checkNoMismatch(t, s, "at the end")
	t.Logf("%d drains by a role mark", sqlite.RoleMarkDrains(s))
}
