package bench_test

import (
	"context"
	"os"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/bench"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/sqlite"
)

// BenchmarkSeededInbox lists agent-0's inbox in a store made by `mailroom
// bench seed` (MAILROOM_BENCH_DB names the file, or a postgres:// URL;
// skipped without it), in process: the first page, unread only, a
// selective and a worst-case full-text query, a cursor page deep in the
// inbox, listings by route, thread and sender, and mailbox_status. On PostgreSQL, MAILROOM_BENCH_PG_PID (the
// postmaster's pid) adds the server's CPU per call.
func BenchmarkSeededInbox(b *testing.B) {
	path := os.Getenv("MAILROOM_BENCH_DB")
	if path == "" {
		b.Skip("MAILROOM_BENCH_DB names a store made by mailroom bench seed")
	}
	ctx := context.Background()
	var s mailroom.Store
	var err error
	if postgres.IsURL(path) {
		s, err = postgres.Open(ctx, path, postgres.Options{})
	} else {
		s, err = sqlite.Open(ctx, path, sqlite.Options{})
	}
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	agent := "agent-0"
	if a := os.Getenv("MAILROOM_BENCH_AGENT"); a != "" { // another reader of the seeded store
		agent = a
	}
	me, err := s.EnsureAgent(ctx, agent)
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
	b.Logf("%s's inbox: %d messages", agent, first.TotalCount)
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
		{"query-third", mailroom.ListInput{Query: "replica"}}, // one of the seed's 55 words: in about a third of the bodies
		// Five of them, ANDed (each in ~45% of the messages, 1.7% hold all
		// five): an intersection of large posting lists on PostgreSQL.
		{"query-five-common", mailroom.ListInput{Query: "replica failover shard backfill alert"}},
		{"cursor-at-90pct", mailroom.ListInput{Cursor: deep}},
		// By route: agent-0's role mail is a queue of ~100k beside ~670k
		// personal deliveries, none of them via a role.
		{"via-role", mailroom.ListInput{Via: mailroom.ViaRole}},
		{"via-direct", mailroom.ListInput{Via: mailroom.ViaDirect}},
		// Filtered by the message: a thread (the newest message's), a
		// sender (agent-1 sends ~5% of agent-0's mail), and the caller's
		// own mail in box all (agent-0 sends none).
		{"thread", mailroom.ListInput{ThreadID: first.Messages[0].ThreadID}},
		{"from-agent-1", mailroom.ListInput{From: "@agent-1"}},
		{"from-me-all", mailroom.ListInput{Box: "all", From: "@me"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cpu, own := pgtest.ServerCPU(), cpuTime()
			for b.Loop() {
				list(tc.in)
			}
			pgtest.ReportServerCPU(b, cpu, b.N)
			// In process, a SQLite store's work is this process's CPU.
			b.ReportMetric(float64((cpuTime()-own).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
	// agent-0 holds role:reviewer, whose queue is a tenth of the store:
	// mailbox_status counts it.
	b.Run("status", func(b *testing.B) {
		cpu, own := pgtest.ServerCPU(), cpuTime()
		for b.Loop() {
			if _, err := s.Status(c); err != nil {
				b.Fatal(err)
			}
		}
		pgtest.ReportServerCPU(b, cpu, b.N)
		b.ReportMetric(float64((cpuTime()-own).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	})
	// InboxState: every wake round's and wait_for_mail's check.
	b.Run("inbox-state", func(b *testing.B) {
		cpu, own := pgtest.ServerCPU(), cpuTime()
		for b.Loop() {
			if _, err := s.InboxState(c); err != nil {
				b.Fatal(err)
			}
		}
		pgtest.ReportServerCPU(b, cpu, b.N)
		b.ReportMetric(float64((cpuTime()-own).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	})
}

func ptr[T any](v T) *T { return &v }
