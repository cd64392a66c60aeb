package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// BenchmarkRoleQueue lists and counts the inbox of dave, who holds
// role:reviewer with a queue of n role messages (10k, 100k; 1M with
// MAILROOM_BENCH_1M=1), beside n/10 personal ones, and some of each kind
// of role mail that is not shown through the queue: his own sends to the
// role, role mail he also got personally, mail to two of his roles, and
// role mail he deleted. Each listing's totalCount and status count the
// queue; the figure to watch is CPU per call as n grows.
func BenchmarkRoleQueue(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "r.db"), sqlite.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			alice, dave := agent(b, s, "alice"), agent(b, s, "dave")
			for _, r := range []string{"reviewer", "oncall"} {
				if err := s.GrantRole(ctx, "dave", r); err != nil {
					b.Fatal(err)
				}
			}
			for _, m := range []struct {
				from context.Context
				to   []string
				n    int
			}{
				{alice, []string{"role:reviewer"}, n},
				{alice, []string{"@dave"}, n / 10},
				{dave, []string{"role:reviewer"}, 100},
				{alice, []string{"role:reviewer", "@dave"}, 100},
				{alice, []string{"role:oncall", "role:reviewer"}, 100},
			} {
				if err := s.SendMany(m.from, draftTo(b, m.to...), m.n); err != nil {
					b.Fatal(err)
				}
			}
			for range 50 {
				r, err := s.Send(alice, draftTo(b, "role:reviewer"))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Delete(dave, r.MessageID); err != nil {
					b.Fatal(err)
				}
			}
			want := n + n/10 + 100 + 100 // queue, personal, personal+role, two-role
			for _, tc := range []struct {
				name string
				in   mailroom.ListInput
				want int
			}{
				{"page", mailroom.ListInput{}, want},
				{"unread", mailroom.ListInput{UnreadOnly: true}, want},
				{"role-high", mailroom.ListInput{Via: mailroom.ViaRole, Priority: "high"}, 0},
				{"status", mailroom.ListInput{}, want},
				{"inbox-state", mailroom.ListInput{}, want},
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
						got := 0
						if tc.name == "inbox-state" {
							st, err := s.InboxState(dave)
							if err != nil {
								b.Fatal(err)
							}
							got = st.UnreadCount
						} else if tc.name == "status" {
							st, err := s.Status(dave)
							if err != nil {
								b.Fatal(err)
							}
							got = st.Unread.Total
						} else {
							p, err := s.List(dave, f)
							if err != nil {
								b.Fatal(err)
							}
							got = p.TotalCount
						}
						if got != tc.want {
							b.Fatalf("count %d, want %d", got, tc.want)
						}
						lat = append(lat, time.Since(start))
					}
					c.pause()
					c.report(b)
					reportLatency(b, lat)
				})
			}
			// A drain without roles counts the role mail it leaves:
			// through a listing's watermark, as a client drains what it
			// saw, and with none. Last: the first drain reads the
			// personal mail.
			f, _ := mailroom.ListInput{}.Filter()
			p, err := s.List(dave, f)
			if err != nil || p.Watermark == nil {
				b.Fatalf("%v %v", err, p.Watermark)
			}
			for _, through := range []string{*p.Watermark, ""} {
				name := "drain-withheld-through"
				if through == "" {
					name = "drain-withheld"
				}
				b.Run(name, func(b *testing.B) {
					c := startCPU()
					for b.Loop() {
						rc, err := s.MarkAllRead(dave, through, false)
						if err != nil || rc.WithheldRoleCount != n+100 {
							b.Fatalf("%v %+v, want %d withheld", err, rc, n+100)
						}
					}
					c.pause()
					c.report(b)
				})
			}
		})
	}
}
