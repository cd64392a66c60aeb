package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// BenchmarkHotPath is the two calls `mailroom bench` repeats most, in
// process, on a copy of a store made by `mailroom bench seed`
// (MAILROOM_BENCH_DB; skipped without it): agent-0's first page of 50,
// its unread page, and a send of 100 bytes to itself (as the bench's send
// phase), each with its CPU per call (getrusage: the machine is shared).
func BenchmarkHotPath(b *testing.B) {
	src := os.Getenv("MAILROOM_BENCH_DB")
	if src == "" {
		b.Skip("MAILROOM_BENCH_DB names a store made by mailroom bench seed")
	}
	path := filepath.Join(b.TempDir(), "hot.db")
	sqlite.CopyFile(b, src, path)
	s := open(b, path, sqlite.Options{})
	ctx := context.Background()
	me, err := s.EnsureAgent(ctx, "agent-0")
	if err != nil {
		b.Fatal(err)
	}
	c := mailroom.WithCaller(ctx, me)
	for _, tc := range []struct {
		name string
		in   mailroom.ListInput
	}{
		{"page", mailroom.ListInput{}},
		{"unread", mailroom.ListInput{UnreadOnly: true}},
	} {
		f, err := tc.in.Filter()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				if p, err := s.List(c, f); err != nil || len(p.Messages) != 50 {
					b.Fatalf("%v %d", err, len(p.Messages))
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
	body := strings.Repeat("x", 93) + " status"
	i := 0
	send := func(b *testing.B) {
		i++
		d, err := mailroom.SendInput{To: []string{"@me"}, Subject: "bench " + strconv.Itoa(i), Body: body}.Draft(0)
		if err != nil {
			b.Fatal(err)
		}
		d.OriginSessionID = "SESSION:bench"
		if _, err := s.Send(c, d); err != nil {
			b.Fatal(err)
		}
	}
	// The first few hundred sends to a seeded store merge the full-text
	// segments the seed wrote (FTS5's crisis merge): a one-off cost, not
	// a send's.
	warm := false
	b.Run("send", func(b *testing.B) {
		if !warm {
			for range 600 {
				send(b)
			}
			warm = true
		}
		cpu := cpuTime()
		for b.Loop() {
			send(b)
		}
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	})
}
