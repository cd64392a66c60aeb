package storetest

import (
	"context"
	"testing"

	"github.com/mailroom/mailroom"
)

// bulkSender is a store that can seed many messages at once (both stores'
// SendMany); the bounded-search test needs more than SearchScan.
type bulkSender interface {
	SendMany(ctx context.Context, d mailroom.Draft, n int) error
}

// testSearchIsBounded: a search examines at most SearchScan word matches
// and counts at most SearchCount rows, says when its total is a lower
// bound, and its cursor carries on where it stopped, so a cursor walk still
// returns every match once.
func testSearchIsBounded(t *testing.T, s mailroom.Store) {
	bulk, ok := s.(bulkSender)
	if !ok {
		t.Skip("the store has no SendMany to seed with")
	}
	e := newEnv(t, s)
	seed := func(from, to, body string, n int) {
		t.Helper()
		d, err := mailroom.SendInput{To: []string{to}, Subject: "seeded", Body: body}.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:test"
		if err := bulk.SendMany(e.as(from), d, n); err != nil {
			t.Fatal(err)
		}
	}
	// Oldest first: bob's harbor mail, then more harbor mail than one
	// search examines, all to carol; then lanterns past the count bound.
	seed("alice", "@bob", "the harbor at dawn", 5)
	seed("alice", "@carol", "the harbor at noon", mailroom.SearchScan)
	seed("alice", "@bob", "a lantern in the window", mailroom.SearchCount+5)
	seed("alice", "@bob", "a rare comet", 3)

	p := e.list("bob", mailroom.ListInput{Query: "comet"})
	if p.TotalCount != 3 || !p.TotalCountExact || len(p.Messages) != 3 || p.NextCursor != nil {
		t.Fatalf("a search with few matches: total %d exact %v, %d rows, nextCursor %v; want 3, exact, 3 rows, none",
			p.TotalCount, p.TotalCountExact, len(p.Messages), p.NextCursor)
	}
	if p := e.list("bob", mailroom.ListInput{}); !p.TotalCountExact || p.TotalCount != 5+mailroom.SearchCount+5+3 {
		t.Fatalf("an unfiltered listing counts exactly: %d exact %v", p.TotalCount, p.TotalCountExact)
	}

	p = e.list("bob", mailroom.ListInput{Query: "lantern"})
	if p.TotalCount != mailroom.SearchCount || p.TotalCountExact || len(p.Messages) != 50 ||
		p.NextOffset == nil || *p.NextOffset != 50 || p.NextCursor == nil {
		t.Fatalf("past the count bound: total %d exact %v, %d rows, nextOffset %v; want %d as a lower bound, 50 rows, nextOffset 50 and a cursor",
			p.TotalCount, p.TotalCountExact, len(p.Messages), p.NextOffset, mailroom.SearchCount)
	}
	lim := 200
	if got := len(e.searchWalk("bob", mailroom.ListInput{Query: "lantern", Limit: &lim})); got != mailroom.SearchCount+5 {
		t.Fatalf("a cursor walk of the lantern search returned %d rows, want all %d", got, mailroom.SearchCount+5)
	}

	// Every harbor match within one search's scan is carol's: bob's first
	// page is empty, says its total is only a lower bound, and its cursor
	// leads on to his five.
	p = e.list("bob", mailroom.ListInput{Query: "harbor"})
	if len(p.Messages) != 0 || p.TotalCount != 0 || p.TotalCountExact || p.NextCursor == nil || p.NextOffset != nil {
		t.Fatalf("a scan that stopped short: %d rows, total %d exact %v, nextCursor %v, nextOffset %v; want none, 0 as a lower bound, a cursor, no offset",
			len(p.Messages), p.TotalCount, p.TotalCountExact, p.NextCursor, p.NextOffset)
	}
	next := e.list("bob", mailroom.ListInput{Query: "harbor", Cursor: p.NextCursor})
	if len(next.Messages) != 5 || next.NextCursor != nil {
		t.Fatalf("the page after the scan: %d rows, nextCursor %v; want bob's 5 and the end", len(next.Messages), next.NextCursor)
	}
	for _, r := range next.Messages {
		if r.Subject != "seeded" || r.From != "@alice" {
			t.Fatalf("row %+v is not bob's harbor mail", r)
		}
	}
	if got := len(e.searchWalk("carol", mailroom.ListInput{Query: "harbor", Limit: &lim})); got != mailroom.SearchScan {
		t.Fatalf("carol's harbor walk returned %d rows, want %d", got, mailroom.SearchScan)
	}
}

// searchWalk pages a search by cursor until nextCursor is null and returns
// the row ids, failing on a repeat. Unlike walk it allows a page with
// fewer rows than the limit, even none, before the end.
func (e *env) searchWalk(who string, in mailroom.ListInput) []string {
	e.t.Helper()
	var got []string
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page > 1000 {
			e.t.Fatal("cursor paging does not end")
		}
		p := e.list(who, in)
		for _, r := range p.Messages {
			if seen[r.MessageID] {
				e.t.Fatalf("page %d repeats %s", page, r.MessageID)
			}
			seen[r.MessageID] = true
			got = append(got, r.MessageID)
		}
		if p.NextCursor == nil {
			return got
		}
		in.Offset, in.Cursor = nil, p.NextCursor
	}
}
