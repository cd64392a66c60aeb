package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
)

// benchSizes are the store sizes BenchmarkScale runs at: 1M only with
// MAILROOM_BENCH_1M=1 (building it takes a minute or more; it is cached in
// benchstore.Dir() for later runs).
func benchSizes() []int {
	sizes := []int{10_000, 100_000}
	if os.Getenv("MAILROOM_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	return sizes
}

func sizeName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// BenchmarkScale runs the hot operations on stores of 10k, 100k (and 1M)
// messages built through the bulk path: listings, full-text queries, one
// add_message, and a drain of bob's whole inbox. bob's inbox holds every
// message; carol sent 9% of them.
func BenchmarkScale(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			st := benchstore.Open(b, n)
			for _, tc := range []struct {
				name  string
				in    mailroom.ListInput
				total int
			}{
				{"list-all", mailroom.ListInput{}, n},
				{"list-unread", mailroom.ListInput{UnreadOnly: true}, n},
				{"list-thread", mailroom.ListInput{ThreadID: st.Thread}, min(n/100, 100)},
				{"list-from-carol", mailroom.ListInput{From: "@carol"}, 9 * n / 100},
				{"query-1pct", mailroom.ListInput{Query: st.Rare}, n / 100},
				{"query-every-message", mailroom.ListInput{Query: st.Common}, n},
				// carol's inbox is empty: a search for a word in every
				// message examines its most matches and finds none.
				{"query-none-mine", mailroom.ListInput{Query: st.Common}, 0},
				{"deep-offset", mailroom.ListInput{Offset: ptr(9 * n / 10)}, n},
				// bob's inbox is every message, seq 1..n: the page below
				// position n/10 is 90% of the way down.
				{"deep-cursor", mailroom.ListInput{Cursor: ptr(mailroom.Cursor(int64(n / 10)))}, n},
			} {
				f, err := tc.in.Filter()
				if err != nil {
					b.Fatal(err)
				}
				b.Run(tc.name, func(b *testing.B) {
					var lat []time.Duration
					c := startCPU()
					for b.Loop() {
						start := time.Now()
						who := st.Bob
						if tc.name == "query-none-mine" {
							who = st.Carol
						}
						p, err := st.List(who, f)
						if err != nil || p.TotalCount != wantTotal(tc.in, tc.total) || len(p.Messages) != min(50, tc.total) {
							b.Fatalf("%v: total %d, want %d (%d rows)", err, p.TotalCount, wantTotal(tc.in, tc.total), len(p.Messages))
						}
						lat = append(lat, time.Since(start))
					}
					c.pause()
					c.report(b)
					reportLatency(b, lat)
				})
			}
			b.Run("send", func(b *testing.B) {
				d := benchstore.Draft()
				c := startCPU()
				for b.Loop() {
					if _, err := st.Send(st.Alice, d); err != nil {
						b.Fatal(err)
					}
				}
				c.pause()
				c.report(b)
			})
			b.Run("drain", func(b *testing.B) {
				var c cpuMeter
				for b.Loop() {
					b.StopTimer()
					fresh := benchstore.Open(b, n)
					b.StartTimer()
					c.resume()
					rc, err := fresh.MarkAllRead(fresh.Bob, "", false)
					c.pause()
					if err != nil || rc.DurableCount != n {
						b.Fatalf("%+v %v", rc, err)
					}
				}
				c.report(b)
			})
		})
	}
}

// BenchmarkSendGrowth sends alternately into a 1k and a 100k store (and a
// 1M one with MAILROOM_BENCH_1M=1), so machine load hits both alike, and
// reports each store's median send and their ratio: the send path is flat
// in the store's size when x-100k/1k is near 1 (target <= 1.2).
func BenchmarkSendGrowth(b *testing.B) {
	sizes := []int{1_000, 100_000}
	if os.Getenv("MAILROOM_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	stores := make([]*benchstore.Store, len(sizes))
	for i, n := range sizes {
		stores[i] = benchstore.Open(b, n)
	}
	d := benchstore.Draft()
	lat := make([][]time.Duration, len(sizes))
	cpu := make([]time.Duration, len(sizes))
	for b.Loop() {
		for i, st := range stores {
			start, c := time.Now(), cpuTime()
			if _, err := st.Send(st.Alice, d); err != nil {
				b.Fatal(err)
			}
			lat[i] = append(lat[i], time.Since(start))
			cpu[i] += cpuTime() - c
		}
	}
	med := make([]float64, len(sizes))
	for i, l := range lat {
		slices.Sort(l)
		med[i] = float64(l[len(l)/2].Microseconds()) / 1000
		b.ReportMetric(med[i], "ms/send-"+sizeName(sizes[i]))
		b.ReportMetric(float64(cpu[i].Microseconds())/1000/float64(len(l)), "cpu-ms/send-"+sizeName(sizes[i]))
	}
	b.ReportMetric(med[1]/med[0], "x-100k/1k")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-x-100k/1k")
	if len(med) > 2 {
		b.ReportMetric(med[2]/med[0], "x-1M/1k")
		b.ReportMetric(float64(cpu[2])/float64(cpu[0]), "cpu-x-1M/1k")
	}
}

// reportLatency reports the median and 95th percentile of per-call wall
// times (p95 is the slowest call when there are fewer than 20).
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*95/100)]), "p95-ms")
}

// cpuMeter adds up this process's CPU time (user and system, every
// goroutine's) over the measured parts of a benchmark: on a shared machine
// it moves less with other processes' load than wall time does.
type cpuMeter struct {
	total, since time.Duration
}

func startCPU() *cpuMeter {
	c := &cpuMeter{}
	c.resume()
	return c
}

func (c *cpuMeter) resume() { c.since = cpuTime() }
func (c *cpuMeter) pause()  { c.total += cpuTime() - c.since }

// report reports the CPU milliseconds per operation measured so far.
func (c *cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(c.total.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkBulk builds a store of 100k messages (and 1M with
// MAILROOM_BENCH_1M=1) through SendMany, as benchstore does, and reports
// messages per second of wall time and CPU microseconds per message.
func BenchmarkBulk(b *testing.B) {
	sizes := []int{100_000}
	if os.Getenv("MAILROOM_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(sizeName(n), func(b *testing.B) {
			var c cpuMeter
			var wall time.Duration
			for b.Loop() {
				b.StopTimer()
				s := open(b, filepath.Join(b.TempDir(), "bulk.db"), sqlite.Options{})
				alice, _ := s.EnsureAgent(context.Background(), "alice")
				carol, _ := s.EnsureAgent(context.Background(), "carol")
				if _, err := s.EnsureAgent(context.Background(), "bob"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				c.resume()
				if _, err := benchstore.Seed(mailroom.WithCaller(context.Background(), alice), mailroom.WithCaller(context.Background(), carol), s, n); err != nil {
					b.Fatal(err)
				}
				c.pause()
				wall += time.Since(start)
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/wall.Seconds(), "msgs/s")
			b.ReportMetric(float64(c.total.Microseconds())/float64(n*b.N), "cpu-us/msg")
		})
	}
}
