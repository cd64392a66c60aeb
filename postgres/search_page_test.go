package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
)

// A search's page query reads each of its messages once and the caller's
// delivery of each twice (the branch that found it, then the row), however
// many others a message was delivered to: a broadcast to 30 mailboxes
// costs it what a direct message does. Planned on delivery_message alone
// (message_seq, before migration 0015), the branch's message_seq = ANY(...)
// read every delivery of each message and dropped the others' on the heap
// (953 rows for a page of 51 at 1M); and a page that tested the words again
// joined each personal row's message a second time. The results are the
// same either way: this is what notices the cost.
func TestSearchPageReadsOnlyTheCallersDeliveries(t *testing.T) {
	for _, to := range []string{"@bob", "*"} {
		t.Run(to, func(t *testing.T) {
			ctx := context.Background()
			rec := &recorder{}
			s := open(t, pgtest.URL(t), postgres.Options{Tracer: rec})
			ids := map[string]mailroom.Identity{}
			for i := range 30 {
				name := fmt.Sprintf("agent-%d", i)
				if i == 0 {
					name = "bob"
				}
				id, err := s.EnsureAgent(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				ids[name] = id
			}
			alice := ids["agent-1"]
			// Enough other mail that the page is planned as in a large
			// store: probes by key, not hashes of whole tables.
			for _, m := range []struct {
				to, body string
				n        int
			}{{"@agent-2", "the harbor at noon", 10_000}, {to, "the kestrel at dawn", 60}, {to, "the harbor at noon", 60}, {to, "a kestrel at dusk", 60}} {
				d := draft(t, m.to)
				d.Body = m.body
				if err := s.SendMany(mailroom.WithCaller(ctx, alice), d, m.n); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Analyze(ctx); err != nil {
				t.Fatal(err)
			}
			f, err := mailroom.ListInput{Query: "kestrel", Limit: ptr(50)}.Filter()
			if err != nil {
				t.Fatal(err)
			}
			rec.start()
			p, err := s.List(mailroom.WithCaller(ctx, ids["bob"]), f)
			queries := rec.stop()
			if err != nil || len(p.Messages) != 50 || p.TotalCount != 120 {
				t.Fatalf("%v: %d rows, total %d; want 50 of 120", err, len(p.Messages), p.TotalCount)
			}
			var page *pgx.TraceQueryStartData
			for i, q := range queries {
				if strings.Contains(q.SQL, "message_to t") { // the row columns
					page = &queries[i]
				}
			}
			if page == nil {
				t.Fatal("no page query among the search's statements")
			}
			read := relationRows(t, s, *page)
			n := len(p.Messages) + 1 // the page asks for one row more
			if read["message"] < len(p.Messages) || read["delivery"] < len(p.Messages) {
				t.Fatalf("the page of %d rows read %v: fewer rows than it shows, so the plan's counts were not read", len(p.Messages), read)
			}
			if read["message"] > n || read["delivery"] > 2*n {
				t.Errorf("the page of %d rows read %d message rows (want at most %d) and %d delivery rows (want at most %d)",
					n, read["message"], n, read["delivery"], 2*n)
			}
			t.Logf("rows read by relation: %v", read)
		})
	}
}

// Migration 0015 rekeys delivery_message by (message_seq, recipient) in a
// store made before it; the same searches find the same mail after it.
func TestDeliveryMessageMigrationKeysByRecipient(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url, postgres.Options{})
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	s.EnsureAgent(ctx, "carol")
	for _, to := range []string{"*", "@bob", "@carol", "*"} {
		d := draft(t, to)
		d.Body = "the kestrel " + to
		if err := s.SendMany(mailroom.WithCaller(ctx, alice), d, 7); err != nil {
			t.Fatal(err)
		}
	}
	search := func(s *postgres.Store) []string {
		t.Helper()
		in := mailroom.ListInput{Query: "kestrel", Limit: ptr(10)}
		var ids []string
		for {
			f, err := in.Filter()
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.List(mailroom.WithCaller(ctx, bob), f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Messages {
				ids = append(ids, r.MessageID)
			}
			if p.NextCursor == nil {
				return ids
			}
			in.Cursor = p.NextCursor
		}
	}
	before := search(s)
	if len(before) != 21 {
		t.Fatalf("bob finds %d messages, want 21", len(before))
	}
	indexdef := func(s *postgres.Store) string {
		t.Helper()
		var def string
		if err := s.Pool().QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'delivery_message'`).Scan(&def); err != nil {
			t.Fatal(err)
		}
		return def
	}
	// Back to schema 14.
	for _, q := range []string{
		`DROP INDEX delivery_message`,
		`CREATE INDEX delivery_message ON delivery (message_seq)`,
		`DELETE FROM schema_migration WHERE version = 15`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if def := indexdef(s); !strings.HasSuffix(def, "(message_seq)") {
		t.Fatalf("schema 14's index: %s", def)
	}
	s.Close()
	s = open(t, url, postgres.Options{})
	if def := indexdef(s); !strings.HasSuffix(def, "(message_seq, recipient)") {
		t.Errorf("after migration 0015: %s", def)
	}
	if after := search(s); !slices.Equal(after, before) {
		t.Errorf("bob's search after the migration: %v, before %v", after, before)
	}
}

// relationRows runs q under EXPLAIN ANALYZE in a read-only transaction and
// returns the rows each relation's scans produced or dropped, times their
// loops, planned with sequential scans off.
func relationRows(t *testing.T, s *postgres.Store, q pgx.TraceQueryStartData) map[string]int {
	t.Helper()
	// Planned as at scale: a small table is otherwise scanned whole
	// (message_to per row in a store of 180 messages).
	out := map[string]int{}
	explainAnalyze(t, s, q, `enable_seqscan = off`).byRelation(out)
	return out
}
