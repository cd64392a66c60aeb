package sqlite_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// TestSearchNewestFirstMigrationRekeysEveryMessage: a store at schema 14
// (its full-text index keyed by seq) holding direct, broadcast and role
// mail, a retracted message, a deleted and an archived one, and mail sent
// after a purge in the purged mail's place, is migrated to 0015 (keys
// -seq): the index matches its content row for row, every search returns
// and counts what it did, and a retraction and a purge after the
// migration forget their words.
func TestSearchNewestFirstMigrationRekeysEveryMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{NoSync: true})
	alice, bob, carol := agent(t, s, "alice"), agent(t, s, "bob"), agent(t, s, "carol")
	if err := s.GrantRole(ctx, "bob", "triage"); err != nil {
		t.Fatal(err)
	}
	send := func(from context.Context, body string, to ...string) string {
		t.Helper()
		d := draftTo(t, to...)
		d.Body = body
		r, err := s.Send(from, d)
		if err != nil {
			t.Fatal(err)
		}
		return r.MessageID
	}
	send(alice, "a zebra long gone", "@bob")
	send(carol, "a zebra long gone", "@bob", "*")
	if _, err := s.Purge(ctx, mailroom.PurgeRequest{Before: time.Now().Add(time.Hour), IncludeUnread: true}); err != nil {
		t.Fatal(err)
	}
	send(alice, "the kestrel one", "@bob")
	send(carol, "the kestrel two", "*")
	send(alice, "the kestrel three", "role:triage")
	retracted := send(alice, "the kestrel four and a gate", "@bob", "role:triage")
	deleted := send(carol, "the kestrel five", "@bob")
	archived := send(alice, "the kestrel six", "@bob", "@carol")
	send(bob, "the kestrel seven", "@carol", "role:triage")
	later := send(carol, "the kestrel eight", "@bob")
	if _, err := s.Retract(alice, retracted); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(bob, deleted); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Archive(bob, archived); err != nil {
		t.Fatal(err)
	}
	type found struct {
		ids   []string
		total int
	}
	search := func(who context.Context, in mailroom.ListInput) found {
		t.Helper()
		f, err := in.Filter()
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.List(who, f)
		if err != nil || !p.TotalCountExact {
			t.Fatalf("search %+v: exact %v, %v", in, p.TotalCountExact, err)
		}
		var out found
		for _, r := range p.Messages {
			out.ids = append(out.ids, r.MessageID)
		}
		out.total = p.TotalCount
		return out
	}
	var ins []mailroom.ListInput
	for _, q := range []string{"kestrel", "zebra", "gate", "eight"} {
		for _, box := range []string{"", "all", "outbox"} {
			ins = append(ins, mailroom.ListInput{Query: q, Box: box}, mailroom.ListInput{Query: q, Box: box, IncludeArchived: true})
		}
	}
	who := []context.Context{alice, bob, carol}
	var before []found
	for _, w := range who {
		for _, in := range ins {
			before = append(before, search(w, in))
		}
	}
	if f := search(bob, mailroom.ListInput{Query: "kestrel"}); f.total != 4 {
		t.Fatalf("bob's search before: %+v, want 4 rows", f)
	}
	s.Close()
	execRaw(t, path, // schema 14's index: 0013's, keyed by seq
		`DROP TABLE message_fts`, `DROP VIEW message_text`,
		`CREATE VIEW message_text AS SELECT m.seq AS seq, m.subject AS subject, m.body AS body, coalesce(a.tokens, '') AS audience
			FROM message m LEFT JOIN message_audience a ON a.message_seq = m.seq`,
		`CREATE VIRTUAL TABLE message_fts USING fts5 (subject, body, audience, content = 'message_text', content_rowid = 'seq', tokenize = 'porter unicode61 remove_diacritics 2')`,
		`INSERT INTO message_fts (message_fts) VALUES ('rebuild')`,
		`INSERT INTO message_fts (message_fts, rank) VALUES ('secure-delete', 1)`,
		`DELETE FROM schema_migration WHERE version = 15`,
	)
	s = open(t, path, sqlite.Options{NoSync: true})
	if err := sqlite.FTSIntegrity(ctx, s); err != nil {
		t.Fatalf("the migrated index: %v", err)
	}
	i := 0
	for _, w := range who {
		for _, in := range ins {
			if got := search(w, in); !slices.Equal(got.ids, before[i].ids) || got.total != before[i].total {
				t.Errorf("search %d (%+v) after the migration: %+v, before %+v", i, in, got, before[i])
			}
			i++
		}
	}
	// Writes after the migration use its keys.
	if _, err := s.Retract(carol, later); err != nil {
		t.Fatal(err)
	}
	if f := search(bob, mailroom.ListInput{Query: "eight", Box: "all"}); f.total != 0 {
		t.Fatalf("a message retracted after the migration is found: %+v", f)
	}
	if _, err := s.Purge(ctx, mailroom.PurgeRequest{Before: time.Now().Add(time.Hour), IncludeUnread: true}); err != nil {
		t.Fatal(err)
	}
	fresh := send(alice, "an osprey", "@bob")
	for _, w := range who {
		if f := search(w, mailroom.ListInput{Query: "kestrel", Box: "all", IncludeArchived: true}); f.total != 0 {
			t.Fatalf("purged mail is found after the migration: %+v", f)
		}
	}
	if f := search(bob, mailroom.ListInput{Query: "osprey"}); f.total != 1 || f.ids[0] != fresh {
		t.Fatalf("bob's osprey: %+v", f)
	}
	if err := sqlite.FTSIntegrity(ctx, s); err != nil {
		t.Fatalf("the index after a retraction and a purge: %v", err)
	}
}
