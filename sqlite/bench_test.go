package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

type benchEnv struct {
	s          *sqlite.Store
	alice, bob context.Context
}

func newBenchEnv(b *testing.B) benchEnv {
	s := open(b, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	ctx := context.Background()
	alice, err := s.EnsureAgent(ctx, "alice")
	if err != nil {
		b.Fatal(err)
	}
	bob, err := s.EnsureAgent(ctx, "bob")
	if err != nil {
		b.Fatal(err)
	}
	return benchEnv{s: s, alice: mailroom.WithCaller(ctx, alice), bob: mailroom.WithCaller(ctx, bob)}
}

func draft(b *testing.B, to string) mailroom.Draft {
	d, err := mailroom.SendInput{To: []string{to}, Subject: "Handoff: WAL checkpoint tuning",
		Body: "Picked up where the last session stopped. The checkpoint starves readers under load; see POL-358. Next: measure with 8 writers."}.Draft(0)
	if err != nil {
		b.Fatal(err)
	}
	d.OriginSessionID = "SESSION:bench"
	return d
}

// seed stores n messages from alice to bob in batches; one in a hundred
// mentions a zeppelin, for a selective full-text query.
func (e benchEnv) seed(b *testing.B, n int) {
	start := time.Now()
	d := draft(b, "@bob")
	rare := d
	rare.Body += " The zeppelin hangar lease renews in March."
	for n > 0 {
		k := min(n, 10000)
		if err := e.s.SendMany(e.alice, d, k-k/100); err != nil {
			b.Fatal(err)
		}
		if err := e.s.SendMany(e.alice, rare, k/100); err != nil {
			b.Fatal(err)
		}
		n -= k
	}
	b.Logf("seeded in %v", time.Since(start))
}

// BenchmarkSend is one add_message: a committed transaction with the message,
// its edges, its delivery and its concept job.
func BenchmarkSend(b *testing.B) {
	e := newBenchEnv(b)
	d := draft(b, "@bob")
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := e.s.Send(e.alice, d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkListInbox is the first page (50 rows), totalCount and watermark
// of an inbox holding 100,000 messages.
func BenchmarkListInbox(b *testing.B) {
	e := newBenchEnv(b)
	e.seed(b, 100_000)
	for _, tc := range []struct {
		name  string
		in    mailroom.ListInput
		total int
	}{
		{"all", mailroom.ListInput{}, 100_000},
		{"unread", mailroom.ListInput{UnreadOnly: true}, 100_000},
		{"query-1pct", mailroom.ListInput{Query: "zeppelin"}, 1_000},
		{"query-every-message", mailroom.ListInput{Query: "checkpoint"}, 100_000},
		{"deep-offset", mailroom.ListInput{Offset: ptr(90_000)}, 100_000},
		{"deep-cursor", mailroom.ListInput{Cursor: ptr("at 90000")}, 100_000},
	} {
		if tc.in.Cursor != nil {
			// The cursor after the 90,000th row: the same page as offset 90000.
			f, _ := mailroom.ListInput{Offset: ptr(89_999), Limit: ptr(1)}.Filter()
			p, err := e.s.List(e.bob, f)
			if err != nil || p.NextCursor == nil {
				b.Fatalf("%v %v", err, p.NextCursor)
			}
			tc.in.Cursor = p.NextCursor
		}
		f, err := tc.in.Filter()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				p, err := e.s.List(e.bob, f)
				if err != nil || p.TotalCount != wantTotal(tc.in, tc.total) {
					b.Fatalf("%v %d", err, p.TotalCount)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkDrain is mark_read({all: true}) over 100,000 unread messages:
// snapshot, mark each through the single-id write path, commit, read back.
func BenchmarkDrain(b *testing.B) {
	for _, n := range []int{100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var c cpuMeter
			for b.Loop() {
				b.StopTimer()
				e := newBenchEnv(b)
				e.seed(b, n)
				b.StartTimer()
				c.resume()
				rc, err := e.s.MarkAllRead(e.bob, "", false)
				c.pause()
				if err != nil || rc.DurableCount != n || rc.Status != "read" {
					b.Fatalf("%+v %v", rc, err)
				}
			}
			c.report(b)
		})
	}
}

// BenchmarkDrainByRows is a drain that marks rows (no read-through mark:
// one archived unread message keeps it off the mark; no roles) of 10
// unread messages sent before each drain (untimed), on one store: the
// path of a drain after the clock stepped back, and of most small drains
// around archived mail. Run it with -benchtime 300x; 1x is one drain.
func BenchmarkDrainByRows(b *testing.B) {
	e := newBenchEnv(b)
	d := draft(b, "@bob")
	r, err := e.s.Send(e.alice, d)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.s.Archive(e.bob, r.MessageID); err != nil {
		b.Fatal(err)
	}
	var c cpuMeter
	for b.Loop() {
		b.StopTimer()
		if err := e.s.SendMany(e.alice, d, 10); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c.resume()
		rc, err := e.s.MarkAllRead(e.bob, "", false)
		c.pause()
		if err != nil || rc.ReadCount != 10 || rc.DurableCount != 10 {
			b.Fatalf("%+v %v", rc, err)
		}
	}
	c.report(b)
}

// wantTotal is the totalCount a listing of total rows reports: a search
// counts to mailroom.SearchCount (then says it is a lower bound).
func wantTotal(in mailroom.ListInput, total int) int {
	if in.Query != "" {
		return min(total, mailroom.SearchCount)
	}
	return total
}

// BenchmarkInboxState is the inbox check a wake round makes for each
// watched identity a commit touches (bob's inbox holds 1,000 messages, a
// tenth unread).
func BenchmarkInboxState(b *testing.B) {
	e := newBenchEnv(b)
	if err := e.s.SendMany(e.alice, draft(b, "@bob"), 1000); err != nil {
		b.Fatal(err)
	}
	if _, err := e.s.MarkAllRead(e.bob, "", true); err != nil {
		b.Fatal(err)
	}
	if err := e.s.SendMany(e.alice, draft(b, "@bob"), 100); err != nil {
		b.Fatal(err)
	}
	cpu := cpuTime()
	for b.Loop() {
		if _, err := e.s.InboxState(e.bob); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
}
