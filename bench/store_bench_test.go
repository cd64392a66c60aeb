package bench_test

import (
	"context"
	"os"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/bench"
	"github.com/mailroom/mailroom/sqlite"
)

// BenchmarkSeededInbox lists agent-0's inbox in a store made by `mailroom
// bench seed` (MAILROOM_BENCH_DB names the file; skipped without it), in
// process: the first page, unread only, a selective and a worst-case
// full-text query, a cursor page deep in the inbox, and mailbox_status.
func BenchmarkSeededInbox(b *testing.B) {
	path := os.Getenv("MAILROOM_BENCH_DB")
	if path == "" {
		b.Skip("MAILROOM_BENCH_DB names a store made by mailroom bench seed")
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	me, err := s.EnsureAgent(ctx, "agent-0")
	if err != nil {
		b.Fatal(err)
	}
	c := mailroom.WithCaller(ctx, me)
	list := func(in mailroom.ListInput) mailroom.Page {
		f, err := in.Filter()
		if err != nil {
			b.Fatal(err)
		}
		p, err := s.List(c, f)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	first := list(mailroom.ListInput{})
	b.Logf("agent-0's inbox: %d messages", first.TotalCount)
	// The cursor 90% of the way down the inbox.
	depth := first.TotalCount * 9 / 10
	deep := list(mailroom.ListInput{Offset: &depth, Limit: ptr(1)}).NextCursor
	for _, tc := range []struct {
		name string
		in   mailroom.ListInput
	}{
		{"first-page", mailroom.ListInput{}},
		{"unread", mailroom.ListInput{UnreadOnly: true}},
		{"query-rare", mailroom.ListInput{Query: bench.Rare}},
		{"query-every-message", mailroom.ListInput{Query: bench.Common}},
		{"cursor-at-90pct", mailroom.ListInput{Cursor: deep}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				list(tc.in)
			}
		})
	}
	// agent-0 holds role:reviewer, whose queue is a tenth of the store:
	// mailbox_status counts it.
	b.Run("status", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Status(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }
