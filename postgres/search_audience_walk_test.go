package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
)

// A reader whose share of the store crosses half between the pages of one
// cursor walk (mail arrives, or is deleted) pages with the tokens on one
// page and without them on the next: the walk still returns each of the
// listing's rows exactly once, in order, whichever way it crosses and
// whichever route brought the row (direct, broadcast, role, own sends).
func TestSearchCursorWalkAcrossTheNarrowingThreshold(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.URL(t), postgres.Options{})
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	carol, _ := s.EnsureAgent(ctx, "carol")
	if err := s.GrantRole(ctx, "bob", "ops"); err != nil {
		t.Fatal(err)
	}
	send := func(from mailroom.Identity, to []string, n int) {
		t.Helper()
		d, err := mailroom.SendInput{To: to, Subject: "note", Body: "the kestrel"}.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:pg"
		if err := s.SendMany(mailroom.WithCaller(ctx, from), d, n); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		send(alice, []string{"@carol"}, 4)
		send(alice, []string{"@bob"}, 1)
		send(carol, []string{"role:ops"}, 1)
		send(alice, []string{"@carol"}, 3)
		send(carol, []string{"*"}, 1)
		send(bob, []string{"@carol"}, 1)
		send(carol, []string{"@bob", "role:ops"}, 1)
	}
	list := func(in mailroom.ListInput, scan int) mailroom.Page {
		t.Helper()
		f, err := in.Filter()
		if err != nil {
			t.Fatal(err)
		}
		f.SearchBounds = mailroom.SearchBounds{Scan: scan, Count: 3}
		p, err := s.List(mailroom.WithCaller(ctx, bob), f)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	lim := 100
	for _, box := range []string{"inbox", "all", "outbox"} {
		want := func() (ids []string) {
			for _, m := range list(mailroom.ListInput{Box: box, Limit: &lim}, 0).Messages {
				ids = append(ids, m.MessageID)
			}
			return ids
		}()
		for _, start := range []bool{true, false} {
			narrow := start
			var got []string
			in := mailroom.ListInput{Box: box, Query: "kestrel", Limit: &lim}
			for pages := 0; ; pages++ {
				if narrow {
					postgres.NarrowAllSearches(s)
				} else {
					postgres.NarrowNoSearches(s)
				}
				narrow = !narrow
				p := list(in, 4)
				for _, m := range p.Messages {
					got = append(got, m.MessageID)
				}
				if p.NextCursor == nil {
					break
				}
				if pages > 100 {
					t.Fatalf("%s: no end to the walk", box)
				}
				in.Cursor = p.NextCursor
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, narrowed first %v: the walk returns %v, the listing %v", box, start, got, want)
			}
		}
	}
}

// The tokens narrow a search by a reader sent less than half of the store
// (docs/contract.md, and SQLite's searchNarrows): at exactly half they do
// not, and one message more to someone else makes them.
func TestSearchNarrowsBelowHalfOnly(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.URL(t), postgres.Options{})
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	_, _ = s.EnsureAgent(ctx, "carol")
	_, _ = s.EnsureAgent(ctx, "erin")
	send := func(to string, n int) {
		t.Helper()
		d := draft(t, to)
		d.Body = "the harbor"
		if err := s.SendMany(mailroom.WithCaller(ctx, alice), d, n); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() int {
		t.Helper()
		f, err := mailroom.ListInput{Query: "harbor"}.Filter()
		if err != nil {
			t.Fatal(err)
		}
		f.SearchBounds = mailroom.SearchBounds{Scan: 5, Count: 20}
		p, err := s.List(mailroom.WithCaller(ctx, bob), f)
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Messages)
	}
	send("@bob", 5)
	send("@carol", 5)
	// bob is sent 5 of 10: his scan of 5 examines carol's newer 5.
	if n := rows(); n != 0 {
		t.Fatalf("bob, sent exactly half: %d rows, want none (a scan of carol's 5)", n)
	}
	send("@erin", 1)
	// 5 of 11: narrowed, his scan examines his own 5.
	if n := rows(); n != 5 {
		t.Fatalf("bob, sent 5 of 11: %d rows, want his 5", n)
	}
}
