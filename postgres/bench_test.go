package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
)

// The same benchmarks as sqlite/bench_test.go, on the server named by
// MAILROOM_TEST_POSTGRES (use a cluster with fsync on for figures).

type benchEnv struct {
	s          *postgres.Store
	alice, bob context.Context
}

func newBenchEnv(b *testing.B) benchEnv { return newBenchEnvWith(b, postgres.Options{}) }

func newBenchEnvWith(b *testing.B, opts postgres.Options) benchEnv {
	s := open(b, pgtest.URL(b), opts)
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

func benchDraft(b *testing.B, to string) mailroom.Draft {
	d, err := mailroom.SendInput{To: []string{to}, Subject: "Handoff: WAL checkpoint tuning",
		Body: "Picked up where the last session stopped. The checkpoint starves readers under load; see POL-358. Next: measure with 8 writers."}.Draft(0)
	if err != nil {
		b.Fatal(err)
	}
	d.OriginSessionID = "SESSION:bench"
	return d
}

// seed stores n messages from alice to bob; one in a hundred mentions a
// zeppelin, for a selective full-text query.
func (e benchEnv) seed(b *testing.B, n int) {
	start := time.Now()
	d := benchDraft(b, "@bob")
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
	if err := e.s.Analyze(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded in %v", time.Since(start))
}

// BenchmarkSend is one add_message: a committed transaction with the
// message, its edges, its delivery and its concept job.
func BenchmarkSend(b *testing.B) {
	var rt roundTrips
	e := newBenchEnvWith(b, postgres.Options{Tracer: &rt})
	d := benchDraft(b, "@bob")
	if _, err := e.s.Send(e.alice, d); err != nil { // prepares the statements
		b.Fatal(err)
	}
	rt.n.Store(0)
	cpu := pgtest.ServerCPU()
	for b.Loop() {
		if _, err := e.s.Send(e.alice, d); err != nil {
			b.Fatal(err)
		}
	}
	pgtest.ReportServerCPU(b, cpu, b.N)
	b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
}

// BenchmarkListInbox is one page (50 rows), totalCount and watermark of an
// inbox holding 100,000 messages.
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
		{"deep-cursor", mailroom.ListInput{Cursor: ptr("")}, 100_000},
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
			cpu := pgtest.ServerCPU()
			for b.Loop() {
				p, err := e.s.List(e.bob, f)
				if err != nil || p.TotalCount != wantTotal(tc.in, tc.total) {
					b.Fatalf("%v %d", err, p.TotalCount)
				}
			}
			pgtest.ReportServerCPU(b, cpu, b.N)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkDrain is mark_read({all: true}) over 100,000 unread messages:
// snapshot, one set-based mark, commit, read back. roles is the same over
// a role queue of 100,000 that bob holds (includeRoles); through the same
// as the first through a listing's watermark with one message after it.
func BenchmarkDrain(b *testing.B) {
	const n = 100_000
	for _, c := range []struct{ roles, through bool }{{false, false}, {true, false}, {false, true}} {
		roles := c.roles
		name := fmt.Sprint(n)
		if roles {
			name = "roles-" + name
		}
		if c.through {
			name = "through-" + name
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				e := newBenchEnv(b)
				if roles {
					if err := e.s.GrantRole(context.Background(), "bob", "ops"); err != nil {
						b.Fatal(err)
					}
					for range n / 10_000 {
						if err := e.s.SendMany(e.alice, benchDraft(b, "role:ops"), 10_000); err != nil {
							b.Fatal(err)
						}
					}
					if err := e.s.Analyze(context.Background()); err != nil {
						b.Fatal(err)
					}
				} else {
					e.seed(b, n)
				}
				through := ""
				if c.through {
					f, _ := mailroom.ListInput{}.Filter()
					p, err := e.s.List(e.bob, f)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := e.s.Send(e.alice, benchDraft(b, "@bob")); err != nil {
						b.Fatal(err)
					}
					through = *p.Watermark
				}
				cpu := pgtest.ServerCPU()
				b.StartTimer()
				rc, err := e.s.MarkAllRead(e.bob, through, roles)
				if err != nil || rc.DurableCount != n || rc.Status != "read" {
					b.Fatalf("%+v %v", rc, err)
				}
				b.StopTimer()
				pgtest.ReportServerCPU(b, cpu, 1)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkDrainFold is the deferred half of a drain by a mark: the fold
// of a 100,000-delivery mark into the rows, stepped to the end as the
// store's folder does (chunks of defaultFoldChunk deliveries, each its own
// transaction).
func BenchmarkDrainFold(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		b.StopTimer()
		e := newBenchEnvWith(b, postgres.Options{Hooks: &postgres.Hooks{HoldFold: true}})
		e.seed(b, n)
		if rc, err := e.s.MarkAllRead(e.bob, "", false); err != nil || rc.DurableCount != n || postgres.MarkDrains(e.s) != 1 {
			b.Fatalf("%+v %v", rc, err)
		}
		ctx := context.Background()
		cpu := pgtest.ServerCPU()
		steps := 0
		b.StartTimer()
		for more := true; more; steps++ {
			var err error
			if more, err = postgres.FoldStep(ctx, e.s); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		pgtest.ReportServerCPU(b, cpu, 1)
		b.ReportMetric(float64(steps), "steps/op")
		b.StartTimer()
	}
}

// BenchmarkSecondDrain is a small drain right after a drain by a mark:
// 100,000 unread for bob, a drain by a mark (the folder held, so none of
// it is folded), one new message, and a second drain, whose server CPU it
// reports: it used to fold the first mark's 100,000 rows in its request.
func BenchmarkSecondDrain(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		b.StopTimer()
		e := newBenchEnvWith(b, postgres.Options{Hooks: &postgres.Hooks{HoldFold: true}})
		e.seed(b, n)
		if rc, err := e.s.MarkAllRead(e.bob, "", false); err != nil || rc.DurableCount != n || postgres.MarkDrains(e.s) != 1 {
			b.Fatalf("%+v %v", rc, err)
		}
		if _, err := e.s.Send(e.alice, benchDraft(b, "@bob")); err != nil {
			b.Fatal(err)
		}
		cpu := pgtest.ServerCPU()
		b.StartTimer()
		rc, err := e.s.MarkAllRead(e.bob, "", false)
		b.StopTimer()
		if err != nil || rc.ReadCount != 1 || rc.DurableCount != 1 {
			b.Fatalf("%+v %v", rc, err)
		}
		pgtest.ReportServerCPU(b, cpu, 1)
		b.StartTimer()
	}
}

// roundTrips counts what a pool's connections send to the server: each
// query outside a batch (BEGIN and COMMIT included) and each batch is one
// round trip; a query inside a batch is not. Statement preparation on a
// connection's first use of a query is not counted (it happens once per
// connection).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// BenchmarkCommitFloor is the floor under one send: a one-row insert
// committed on its own (one round trip and one WAL flush).
func BenchmarkCommitFloor(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	pool := e.s.Pool()
	if _, err := pool.Exec(ctx, `CREATE TABLE floor (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := pool.Exec(ctx, `INSERT INTO floor (at) VALUES (now())`); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPurge removes 100,000 read messages (with their deliveries,
// recipients and concept jobs) in batches, as `mailroom purge` does.
func BenchmarkPurge(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		b.StopTimer()
		e := newBenchEnv(b)
		e.seed(b, n)
		if _, err := e.s.MarkAllRead(e.bob, "", false); err != nil {
			b.Fatal(err)
		}
		cpu := pgtest.ServerCPU()
		b.StartTimer()
		rep, err := e.s.Purge(context.Background(), mailroom.PurgeRequest{Before: time.Now().Add(time.Hour)})
		if err != nil || rep.Messages != n || rep.Deliveries != n {
			b.Fatalf("%+v %v", rep, err)
		}
		b.StopTimer()
		pgtest.ReportServerCPU(b, cpu, 1)
		b.StartTimer()
	}
}

// wantTotal is the totalCount a listing of total rows reports: a search
// counts to mailroom.SearchCount (then says it is a lower bound).
func wantTotal(in mailroom.ListInput, total int) int {
	if in.Query != "" {
		return min(total, mailroom.SearchCount)
	}
	return total
}

// BenchmarkRoleQueue is a role holder's list_messages (a page of 50, its
// totalCount and watermark) and mailbox_status when the holder's role
// queue holds 100,000 messages beside 1,000 personal ones, with some of
// the holder's own activity in the queue: 20 messages they sent to the
// role, 20 they also got personally, 20 they deleted.
func BenchmarkRoleQueue(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	carol, err := e.s.EnsureAgent(ctx, "carol")
	if err != nil {
		b.Fatal(err)
	}
	if err := e.s.GrantRole(ctx, "bob", "reviewer"); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for range 10 {
		if err := e.s.SendMany(e.alice, benchDraft(b, "role:reviewer"), 10_000); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.s.SendMany(e.alice, benchDraft(b, "@bob"), 1_000); err != nil {
		b.Fatal(err)
	}
	if err := e.s.SendMany(e.bob, benchDraft(b, "role:reviewer"), 20); err != nil {
		b.Fatal(err)
	}
	both := benchDraft(b, "role:reviewer")
	both.To = append(both.To, mailroom.Address{Kind: mailroom.AddrAgent, Name: "bob"})
	if err := e.s.SendMany(mailroom.WithCaller(ctx, carol), both, 20); err != nil {
		b.Fatal(err)
	}
	f, _ := mailroom.ListInput{Via: "role", Limit: ptr(20)}.Filter()
	p, err := e.s.List(e.bob, f)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range p.Messages {
		if _, err := e.s.Delete(e.bob, m.MessageID); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.s.Analyze(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded in %v", time.Since(start))
	const role, total = 100_000 - 20, 100_000 - 20 + 1_000 + 20
	for _, tc := range []struct {
		name string
		in   mailroom.ListInput
		want int
	}{
		{"list", mailroom.ListInput{}, total},
		{"list-unread", mailroom.ListInput{UnreadOnly: true}, total},
		{"list-role", mailroom.ListInput{Via: "role", UnreadOnly: true}, role},
	} {
		f, err := tc.in.Filter()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			cpu := pgtest.ServerCPU()
			for b.Loop() {
				p, err := e.s.List(e.bob, f)
				if err != nil || p.TotalCount != tc.want || len(p.Messages) != 50 {
					b.Fatalf("%v total %d, %d rows", err, p.TotalCount, len(p.Messages))
				}
			}
			pgtest.ReportServerCPU(b, cpu, b.N)
		})
	}
	b.Run("status", func(b *testing.B) {
		cpu := pgtest.ServerCPU()
		for b.Loop() {
			st, err := e.s.Status(e.bob)
			if err != nil || st.Unread.Role != role || st.Unread.Total != total || !slices.Contains(st.Roles, mailroom.RoleCount{Role: "role:reviewer", Unread: role}) {
				b.Fatalf("%v %+v %+v", err, st.Unread, st.Roles)
			}
		}
		pgtest.ReportServerCPU(b, cpu, b.N)
	})
	// The wake path's fingerprint of the unread set (wait_for_mail, the
	// inbox resource), asked for every touched inbox on each commit.
	b.Run("inbox-state", func(b *testing.B) {
		cpu := pgtest.ServerCPU()
		for b.Loop() {
			st, err := e.s.InboxState(e.bob)
			if err != nil || st.UnreadCount != total {
				b.Fatalf("%v %+v", err, st)
			}
		}
		pgtest.ReportServerCPU(b, cpu, b.N)
	})
	// A drain without roles counts the role mail it leaves (withheld):
	// through the watermark of a listing, as a client drains what it saw,
	// and with no watermark. Last: the first drain reads the personal mail.
	wf, _ := mailroom.ListInput{}.Filter()
	wp, err := e.s.List(e.bob, wf)
	if err != nil || wp.Watermark == nil {
		b.Fatalf("%v %+v", err, wp.Watermark)
	}
	wm := wp.Watermark
	for _, through := range []string{*wm, ""} {
		name := "drain-withheld-through"
		if through == "" {
			name = "drain-withheld"
		}
		b.Run(name, func(b *testing.B) {
			cpu := pgtest.ServerCPU()
			for b.Loop() {
				rc, err := e.s.MarkAllRead(e.bob, through, false)
				if err != nil || rc.WithheldRoleCount != role {
					b.Fatalf("%v %+v", err, rc)
				}
			}
			pgtest.ReportServerCPU(b, cpu, b.N)
		})
	}
}
