package bench_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/bench"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/sqlite"
)

// BenchmarkSeededInbox lists agent-0's inbox in a store made by `mailroom
// bench seed` (MAILROOM_BENCH_DB names the file, or a postgres:// URL;
// skipped without it), in process: the first page, unread only, a
// selective and a worst-case full-text query, a cursor page deep in the
// inbox, and mailbox_status. On PostgreSQL, MAILROOM_BENCH_PG_PID (the
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
		{"cursor-at-90pct", mailroom.ListInput{Cursor: deep}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cpu := serverCPU()
			for b.Loop() {
				list(tc.in)
			}
			reportServerCPU(b, cpu)
		})
	}
	// agent-0 holds role:reviewer, whose queue is a tenth of the store:
	// mailbox_status counts it.
	b.Run("status", func(b *testing.B) {
		cpu := serverCPU()
		for b.Loop() {
			if _, err := s.Status(c); err != nil {
				b.Fatal(err)
			}
		}
		reportServerCPU(b, cpu)
	})
}

// serverCPU is the user+system CPU of the PostgreSQL server whose
// postmaster is MAILROOM_BENCH_PG_PID and its children (-1 without it),
// as postgres/bench_test.go measures it.
func serverCPU() time.Duration {
	pid := os.Getenv("MAILROOM_BENCH_PG_PID")
	if pid == "" {
		return -1
	}
	var ticks int64
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if len(f) > 13 && (f[1] == pid || d.Name() == pid) {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + s
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

func reportServerCPU(b *testing.B, start time.Duration) {
	if start < 0 {
		return
	}
	b.ReportMetric(float64((serverCPU()-start).Microseconds())/1000/float64(b.N), "server-cpu-ms/op")
}

func ptr[T any](v T) *T { return &v }
