package sqlite_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/storetest"
)

// A search narrows its candidates to the caller's mail: matches only
// others were sent do not use up its scan bound, so a reader who sees a
// few of a common word's matches gets them all on the first page, with an
// exact total. (Before migration 0013 the 60 matches of carol's below
// stopped bob's search empty-handed, with a cursor to go on.)
func TestSearchSkipsOthersMail(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{NoSync: true})
	sqlite.NarrowAllSearches(s) // bob is sent fewer than half of the messages anyway
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	agent(t, s, "carol")
	d := draftTo(t, "@bob")
	d.Body = "the harbor at dawn"
	if err := s.SendMany(alice, d, 5); err != nil {
		t.Fatal(err)
	}
	d = draftTo(t, "@carol")
	d.Body = "the harbor at noon"
	if err := s.SendMany(alice, d, 60); err != nil {
		t.Fatal(err)
	}
	f, err := mailroom.ListInput{Query: "harbor"}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	f.SearchBounds = mailroom.SearchBounds{Scan: 60, Count: 20}
	p, err := s.List(bob, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != 5 || p.TotalCount != 5 || !p.TotalCountExact || p.NextCursor != nil {
		t.Fatalf("bob's search: %d rows, total %d exact %v, nextCursor %v; want his 5, exact, no cursor",
			len(p.Messages), p.TotalCount, p.TotalCountExact, p.NextCursor)
	}
	// Nor does anyone find a message by its audience's tokens.
	for _, q := range []string{"r1", "s1", "b", "q", "harbor r2"} {
		f, err := mailroom.ListInput{Query: q, Box: "all"}.Filter()
		if err != nil {
			t.Fatal(err)
		}
		if p, err := s.List(alice, f); err != nil || p.TotalCount != 0 {
			t.Errorf("search %q finds %d messages by their audience %v", q, p.TotalCount, err)
		}
	}
}

// The store suite's search completeness check, with every search asking
// for the caller's audience tokens (in its small store most readers are
// sent so much of the mail that searches would not).
func TestSearchFindsWhatListingsShowNarrowed(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{NoSync: true})
	sqlite.NarrowAllSearches(s)
	storetest.SearchFindsWhatListingsShow(t, s)
}

// A database from before migration 0013 gets every message's audience
// from the migration's backfill, the same tokens the send path writes, and
// an index that passes FTS5's integrity check and finds what it found.
func TestSearchAudienceMigrationBackfillsExistingMail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{})
	alice, bob, carol := agent(t, s, "alice"), agent(t, s, "bob"), agent(t, s, "carol")
	if err := s.GrantRole(ctx, "bob", "ops"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		from context.Context
		to   []string
	}{
		{alice, []string{"@bob"}}, {alice, []string{"*"}}, {alice, []string{"role:ops", "@carol"}},
		{bob, []string{"@me", "role:next-session-of-bob"}}, {carol, []string{"@bob", "*", "role:ops", "role:triage"}},
	} {
		d := draftTo(t, m.to...)
		d.Body = "a kestrel over the harbor"
		if _, err := s.Send(m.from, d); err != nil {
			t.Fatal(err)
		}
	}
	d := draftTo(t, "@bob", "role:ops")
	d.Body = "a kestrel over the harbor"
	if err := s.SendMany(carol, d, 3); err != nil {
		t.Fatal(err)
	}
	want, err := sqlite.Audiences(ctx, s)
	if err != nil || len(want) != 8 {
		t.Fatalf("audiences before: %v %v", want, err)
	}
	search := func(who context.Context) []string {
		t.Helper()
		f, err := mailroom.ListInput{Query: "kestrel", Box: "all"}.Filter()
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.List(who, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range p.Messages {
			ids = append(ids, r.MessageID)
		}
		return ids
	}
	found := [][]string{search(alice), search(bob), search(carol)}
	s.Close()
	execRaw(t, path,
		`DROP TABLE message_fts`, `DROP VIEW message_text`, `DROP TABLE message_audience`,
		`CREATE VIRTUAL TABLE message_fts USING fts5 (subject, body, content = 'message', content_rowid = 'seq', tokenize = 'porter unicode61 remove_diacritics 2')`,
		`INSERT INTO message_fts (message_fts) VALUES ('rebuild')`,
		`DELETE FROM schema_migration WHERE version IN (13, 15)`, // 0015 rebuilds 0013's index
	)
	s = open(t, path, sqlite.Options{})
	got, err := sqlite.Audiences(ctx, s)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("audiences after the backfill:\n%s\nwant (written by the sends):\n%s\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"), err)
	}
	if err := sqlite.FTSIntegrity(ctx, s); err != nil {
		t.Fatalf("the rebuilt index: %v", err)
	}
	for i, who := range []context.Context{alice, bob, carol} {
		if got := search(who); !slices.Equal(got, found[i]) {
			t.Errorf("search %d after the migration: %v, before %v", i, got, found[i])
		}
	}
}
