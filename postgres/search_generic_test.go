package postgres_test

import (
	"context"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

// A search's page query is a prepared statement, and after five runs on a
// connection the server plans it once for any values: the store suite's
// search cases with every statement planned so (plan_cache_mode), whole
// store and narrowed, find the same rows.
func TestSearchesUnderGenericPlansKeepTheResults(t *testing.T) {
	for _, narrow := range []bool{false, true} {
		name := "whole store"
		if narrow {
			name = "narrowed"
		}
		t.Run(name, func(t *testing.T) {
			storetest.RunSearch(t, func(t *testing.T) mailroom.Store {
				t.Parallel()
				s := open(t, pgtest.URL(t)+"&plan_cache_mode=force_generic_plan", postgres.Options{Now: storetest.NewClock().Now})
				if narrow {
					postgres.NarrowAllSearches(s)
				}
				return s
			})
		})
	}
}

// The same search, run more often than the server keeps custom plans for
// on one connection, shows each run's state: a row archived between runs
// leaves the page, a new one joins it, a read one shows read.
func TestRepeatedSearchPagesShowTheCurrentState(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.URL(t), postgres.Options{MaxConns: 1, Now: storetest.NewClock().Now})
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	send := func(body string) string {
		t.Helper()
		d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: "note", Body: body}.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:pg"
		r, err := s.Send(mailroom.WithCaller(ctx, alice), d)
		if err != nil {
			t.Fatal(err)
		}
		return r.MessageID
	}
	for range 3 {
		send("the kestrel flies")
	}
	in := mailroom.ListInput{Query: "kestrel"}
	f, err := in.Filter()
	if err != nil {
		t.Fatal(err)
	}
	bc := mailroom.WithCaller(ctx, bob)
	want := 3
	for i := range 12 {
		p, err := s.List(bc, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Messages) != want || p.TotalCount != want || !p.TotalCountExact {
			t.Fatalf("run %d: %d rows, total %d (exact %v), want %d", i, len(p.Messages), p.TotalCount, p.TotalCountExact, want)
		}
		switch i % 3 {
		case 0: // a new match
			send("another kestrel")
			want++
		case 1: // the newest archived
			if _, err := s.Archive(bc, p.Messages[0].MessageID); err != nil {
				t.Fatal(err)
			}
			want--
		case 2: // the newest read, which a search shows read
			if r := s.MarkRead(bc, []string{p.Messages[0].MessageID}); len(r) != 1 || r[0].Err != nil {
				t.Fatalf("mark read: %+v", r)
			}
			q, err := s.List(bc, f)
			if err != nil {
				t.Fatal(err)
			}
			if q.Messages[0].MessageID != p.Messages[0].MessageID || q.Messages[0].ReadAt == nil {
				t.Fatalf("run %d: the newest read is shown unread: %+v", i, q.Messages[0])
			}
		}
	}
}
