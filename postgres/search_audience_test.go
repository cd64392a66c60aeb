package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

// A search by a reader sent less than half of the store narrows its
// candidates to the caller's mail (migration 0014), as SQLite's does:
// matches only others were sent do not use up its scan bound. A reader
// sent more than half examines every match, as before.
func TestSearchSkipsOthersMail(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.URL(t), postgres.Options{})
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	carol, _ := s.EnsureAgent(ctx, "carol")
	send := func(to, body string, n int) {
		t.Helper()
		d := draft(t, to)
		d.Body = body
		if err := s.SendMany(mailroom.WithCaller(ctx, alice), d, n); err != nil {
			t.Fatal(err)
		}
	}
	send("@bob", "the harbor at dawn", 5)
	send("@carol", "the harbor at noon", 60)
	send("@bob", "the harbor at dusk", 5)
	list := func(who mailroom.Identity, scan int) mailroom.Page {
		t.Helper()
		f, err := mailroom.ListInput{Query: "harbor"}.Filter()
		if err != nil {
			t.Fatal(err)
		}
		f.SearchBounds = mailroom.SearchBounds{Scan: scan, Count: 20}
		p, err := s.List(mailroom.WithCaller(ctx, who), f)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// bob is sent 10 of 70: his 10, exact, though 60 of carol's lie between.
	if p := list(bob, 60); len(p.Messages) != 10 || p.TotalCount != 10 || !p.TotalCountExact || p.NextCursor != nil {
		t.Fatalf("bob's search: %d rows, total %d exact %v, nextCursor %v; want his 10, exact, no cursor",
			len(p.Messages), p.TotalCount, p.TotalCountExact, p.NextCursor)
	}
	// carol is sent 60 of 70: her scan of 5 examines bob's newest 5 and stops.
	if p := list(carol, 5); len(p.Messages) != 0 || p.TotalCountExact || p.NextCursor == nil {
		t.Fatalf("carol's search: %d rows, total %d exact %v, nextCursor %v; want none, a lower bound and a cursor",
			len(p.Messages), p.TotalCount, p.TotalCountExact, p.NextCursor)
	}
	// Nor does anyone find a message by its audience's tokens.
	for _, q := range []string{"0", "1", "-1", "2"} {
		f, err := mailroom.ListInput{Query: q, Box: "all"}.Filter()
		if err != nil {
			t.Fatal(err)
		}
		if p, err := s.List(mailroom.WithCaller(ctx, alice), f); err != nil || p.TotalCount != 0 {
			t.Errorf("search %q finds %d messages by their audience %v", q, p.TotalCount, err)
		}
	}
}

// The store suite's search cases with every search narrowed (in their
// small stores most readers are sent too much of the mail to narrow), and
// with a walk or ranges first: a route whose token is missing shows in the
// listing and not in the search.
func TestSearchesNarrowedKeepTheResults(t *testing.T) {
	for _, c := range []struct {
		name  string
		force func(*postgres.Store)
	}{
		{"index", func(*postgres.Store) {}},
		{"walk-7", func(s *postgres.Store) { postgres.WalkSearches(s, 7) }},
		{"range-7-down", func(s *postgres.Store) { postgres.RangeSearches(s, 7, 1<<30) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			storetest.RunSearch(t, func(t *testing.T) mailroom.Store {
				t.Parallel()
				s := open(t, pgtest.URL(t), postgres.Options{Now: storetest.NewClock().Now})
				postgres.NarrowAllSearches(s)
				c.force(s)
				return s
			})
		})
	}
}

// A database from before migration 0014 gets every message's audience
// from the migration's backfill, the same tokens Send and SendMany write,
// and searches the same after it.
func TestSearchAudienceMigrationBackfillsExistingMail(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url, postgres.Options{})
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	carol, _ := s.EnsureAgent(ctx, "carol")
	dana, err := s.AddIdentity(ctx, "dana", mailroom.KindHuman)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.GrantRole(ctx, "bob", "ops"); err != nil {
		t.Fatal(err)
	}
	routes := []struct {
		from mailroom.Identity
		to   []string
	}{
		{alice, []string{"@bob"}}, {alice, []string{"*"}}, {alice, []string{"role:ops", "@carol"}},
		{bob, []string{"@me", "role:next-session-of-bob"}}, {carol, []string{"@bob", "*", "role:ops", "role:triage"}},
		{dana, []string{"human:dana", "@alice"}}, {alice, []string{"human:dana", "*"}},
	}
	for _, r := range routes {
		d, err := mailroom.SendInput{To: r.to, Subject: "note", Body: "a kestrel over the harbor"}.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:t"
		if _, err := s.Send(mailroom.WithCaller(ctx, r.from), d); err != nil {
			t.Fatal(err)
		}
		if err := s.SendMany(mailroom.WithCaller(ctx, r.from), d, 2); err != nil {
			t.Fatal(err)
		}
	}
	// bob deletes one: the backfill reads the addresses, not deliveries.
	if _, err := s.Delete(mailroom.WithCaller(ctx, bob), firstID(t, s, bob)); err != nil {
		t.Fatal(err)
	}
	want, err := postgres.Audiences(ctx, s)
	if err != nil || len(want) != 3*len(routes) {
		t.Fatalf("audiences before: %v %v", want, err)
	}
	// Send and SendMany write the same tokens.
	for i := 0; i < len(want); i += 3 {
		a, b, c := after(want[i]), after(want[i+1]), after(want[i+2])
		if a != b || a != c {
			t.Errorf("route %v: Send wrote %q, SendMany %q and %q", routes[i/3].to, a, b, c)
		}
	}
	search := func(s *postgres.Store, who mailroom.Identity, box string) []string {
		t.Helper()
		f, err := mailroom.ListInput{Query: "kestrel", Box: box}.Filter()
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.List(mailroom.WithCaller(ctx, who), f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range p.Messages {
			ids = append(ids, r.MessageID)
		}
		return ids
	}
	readers := []mailroom.Identity{alice, bob, carol, dana}
	var found [][]string
	for _, who := range readers {
		for _, box := range []string{"inbox", "outbox", "all"} {
			found = append(found, search(s, who, box))
		}
	}
	// Back to schema 13.
	for _, q := range []string{
		`DROP INDEX message_fts`,
		`ALTER TABLE message DROP COLUMN audience`,
		`CREATE INDEX message_fts ON message USING gin (fts, (ARRAY[seq >> 14]))`,
		`DELETE FROM schema_migration WHERE version = 14`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = open(t, url, postgres.Options{})
	postgres.NarrowAllSearches(s)
	got, err := postgres.Audiences(ctx, s)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("audiences after the backfill:\n%s\nwant (written by the sends):\n%s\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"), err)
	}
	i := 0
	for _, who := range readers {
		for _, box := range []string{"inbox", "outbox", "all"} {
			if got := search(s, who, box); !slices.Equal(got, found[i]) {
				t.Errorf("%s's %s search after the migration: %v, before %v", who.Name, box, got, found[i])
			}
			i++
		}
	}
}

// after is a line of Audiences without its seq.
func after(line string) string { _, a, _ := strings.Cut(line, ": "); return a }

// firstID is the id of the oldest message in who's inbox.
func firstID(t *testing.T, s *postgres.Store, who mailroom.Identity) string {
	t.Helper()
	f, _ := mailroom.ListInput{}.Filter()
	p, err := s.List(mailroom.WithCaller(context.Background(), who), f)
	if err != nil || len(p.Messages) == 0 {
		t.Fatalf("%s's inbox: %v", who.Name, err)
	}
	return p.Messages[len(p.Messages)-1].MessageID
}
