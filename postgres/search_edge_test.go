package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

// bucketEdge is a store whose newest messages straddle the first bucket
// boundary of the full-text index (seq 16,384, migration 0011): filler up
// to seq 16,376, then one message per seq of every kind a search must
// keep apart (role mail, broadcasts, a read grant, deleted, archived,
// read, retracted and purged mail, priorities, a thread, concepts).
type bucketEdge struct {
	t     *testing.T
	ctx   context.Context
	url   string
	s     *postgres.Store
	ids   map[string]mailroom.Identity
	seq   map[int64]mailroom.SendReceipt // the boundary messages by seq
	clock *storetest.Clock
}

func newBucketEdge(t *testing.T) *bucketEdge {
	e := &bucketEdge{t: t, ctx: context.Background(), url: pgtest.URL(t), ids: map[string]mailroom.Identity{},
		seq: map[int64]mailroom.SendReceipt{}, clock: storetest.NewClock()}
	e.s = open(t, e.url, postgres.Options{Now: e.clock.Now})
	for _, n := range []string{"alice", "bob", "carol", "erin"} {
		id, err := e.s.EnsureAgent(e.ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		e.ids[n] = id
	}
	dana, err := e.s.AddIdentity(e.ctx, "dana", mailroom.KindHuman)
	if err != nil {
		t.Fatal(err)
	}
	e.ids["dana"] = dana
	for _, g := range [][2]string{{"bob", "triage"}, {"carol", "triage"}, {"erin", "oncall"}} {
		if err := e.s.GrantRole(e.ctx, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.s.GrantReadInbox(e.ctx, "human:dana", "@bob"); err != nil {
		t.Fatal(err)
	}
	// Filler up to seq 16,376 to bob, carol and their role, the words in
	// some of its last 1,400.
	for b := 0; ; b++ {
		n := e.newest()
		if n >= 16_376 {
			if n != 16_376 {
				t.Fatalf("filler ends at seq %d", n)
			}
			break
		}
		d := draft(t, []string{"@bob", "@carol", "role:triage"}[b%3])
		d.Body = "filler"
		if n >= 15_000 { // the words near the boundary only: searches stay cheap
			d.Body = []string{"kestrel heron filler", "filler kestrel", "filler"}[b%4%3]
		}
		if err := e.s.SendMany(e.as("alice"), d, int(min(97+900*int64(max(0, 15_000-n)/15_000), 16_376-n))); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Hour)
	for i, m := range []struct {
		from, body, priority string
		to                   []string
		concepts             []string
		reply                int64 // the seq of the message it answers
	}{
		{from: "alice", to: []string{"@bob"}, body: "kestrel heron", priority: "high"},                                              // 16377
		{from: "dana", to: []string{"@bob"}, body: "kestrel", priority: "low"},                                                      // 16378
		{from: "bob", to: []string{"role:triage"}, body: "kestrel heron"},                                                           // 16379
		{from: "alice", to: []string{"*"}, body: "kestrel", concepts: []string{"harbor"}},                                           // 16380
		{from: "carol", to: []string{"@bob", "@carol"}, body: "kestrel heron"},                                                      // 16381: bob archives
		{from: "alice", to: []string{"role:triage"}, body: "kestrel"},                                                               // 16382: bob reads
		{from: "alice", to: []string{"@bob", "@carol"}, body: "kestrel heron", priority: "high"},                                    // 16383: bob archives
		{from: "carol", to: []string{"@bob", "@erin"}, body: "kestrel", reply: 16383},                                               // 16384: bob deletes
		{from: "bob", to: []string{"human:dana", "role:triage"}, body: "kestrel heron", reply: 16383, concepts: []string{"harbor"}}, // 16385
		{from: "alice", to: []string{"@bob"}, body: "kestrel heron"},                                                                // 16386: retracted
		{from: "bob", to: []string{"@carol"}, body: "kestrel", reply: 16383},                                                        // 16387
		{from: "alice", to: []string{"@bob"}, body: "heron"},                                                                        // 16388
		{from: "alice", to: []string{"@bob", "@erin"}, body: "kestrel heron"},                                                       // 16389: read by both, purged
		{from: "carol", to: []string{"role:oncall"}, body: "kestrel", priority: "high"},                                             // 16390
		{from: "alice", to: []string{"@bob"}, body: "kestrel heron", priority: "low"},                                               // 16391
		{from: "carol", to: []string{"@bob", "*"}, body: "kestrel"},                                                                 // 16392
	} {
		in := mailroom.SendInput{To: m.to, Subject: "edge", Body: m.body, Priority: m.priority, TaggedConcepts: m.concepts}
		if m.reply > 0 {
			in.InReplyTo = e.seq[m.reply].MessageID
		}
		d, err := in.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:pg"
		rc, err := e.s.Send(e.as(m.from), d)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		e.seq[16_377+int64(i)] = rc
	}
	if n := e.newest(); n != 16_392 {
		t.Fatalf("the boundary messages end at seq %d", n)
	}
	for _, seq := range []int64{16381, 16383} {
		if _, err := e.s.Archive(e.as("bob"), e.seq[seq].MessageID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.s.Delete(e.as("bob"), e.seq[16384].MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Retract(e.as("alice"), e.seq[16386].MessageID); err != nil {
		t.Fatal(err)
	}
	for who, seqs := range map[string][]int64{"bob": {16382, 16389}, "erin": {16389}} {
		for _, seq := range seqs {
			if r := e.s.MarkRead(e.as(who), []string{e.seq[seq].MessageID}); r[0].Err != nil {
				t.Fatal(r[0].Err)
			}
		}
	}
	rep, err := e.s.Purge(e.ctx, mailroom.PurgeRequest{Before: e.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Messages != 2 { // 16,382 (its role's shared read state) and 16,389
		t.Fatalf("purge %+v, want two messages", rep)
	}
	if err := e.s.Analyze(e.ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *bucketEdge) as(name string) context.Context {
	return mailroom.WithCaller(e.ctx, e.ids[name])
}

func (e *bucketEdge) newest() int64 {
	var n int64
	if err := e.s.Pool().QueryRow(e.ctx, `SELECT coalesce(max(seq), 0) FROM message`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// page lists one page for who and says what a user sees of it.
func (e *bucketEdge) page(s *postgres.Store, who string, in mailroom.ListInput, b mailroom.SearchBounds) (string, *string) {
	e.t.Helper()
	f, err := in.Filter()
	if err != nil {
		e.t.Fatal(err)
	}
	f.SearchBounds = b
	p, err := s.List(mailroom.WithCaller(e.ctx, e.ids[who]), f)
	if err != nil {
		return "error: " + err.Error(), nil
	}
	out := fmt.Sprintf("total %d exact %v:", p.TotalCount, p.TotalCountExact)
	for _, m := range p.Messages {
		out += " " + m.MessageID
	}
	if p.NextCursor != nil {
		pos, _ := mailroom.ParseCursor(*p.NextCursor)
		out += fmt.Sprintf(" next %d", pos)
	}
	return out, p.NextCursor
}

// pages lists up to two pages from in, following nextCursor.
func (e *bucketEdge) pages(s *postgres.Store, who string, in mailroom.ListInput, b mailroom.SearchBounds) []string {
	var out []string
	for range 2 {
		p, next := e.page(s, who, in, b)
		out = append(out, p)
		if next == nil {
			break
		}
		in.Cursor, in.Offset = next, nil
	}
	return out
}

// The shapes a search is listed in, for who.
func (e *bucketEdge) inputs(who string) []mailroom.ListInput {
	ins := []mailroom.ListInput{{}, {Box: "all"}, {Box: "outbox"}, {IncludeArchived: true}, {ArchivedOnly: true},
		{UnreadOnly: true}, {Via: mailroom.ViaRole}, {Via: "broadcast"}, {Priority: "high"}, {From: "@alice"}, {From: "human:*"},
		{ThreadID: e.seq[16383].ThreadID, Box: "all"}, {TaggedConcepts: []string{"harbor"}}, {RelatedTo: e.seq[16380].MessageID},
		{Offset: ptr(2)}}
	if who == "dana" {
		ins = append(ins, mailroom.ListInput{Of: "@bob"}, mailroom.ListInput{Of: "@bob", IncludeArchived: true})
	}
	return ins
}

// A search whose stages (a walk, ranges of the index's buckets, the whole
// index) start, end or meet at the first bucket boundary gives what the
// whole index gives, for every reader and listing shape, from cursors on
// both sides of it and at the first seq, with scan bounds that stop inside
// it.
func TestSearchStagesAtABucketBoundaryKeepTheResults(t *testing.T) {
	e := newBucketEdge(t)
	index := openWide(t, e.url)
	postgres.RangeSearches(index, 1, 0) // no range: the whole index
	stores := map[string]*postgres.Store{}
	for name, force := range map[string]func(*postgres.Store){
		"walk-3":            func(s *postgres.Store) { postgres.WalkSearches(s, 3) },
		"range-1-x12":       func(s *postgres.Store) { postgres.RangeSearches(s, 1, 12) },
		"range-16384-twice": func(s *postgres.Store) { postgres.RangeSearches(s, 16_384, 2) },
	} {
		s := openWide(t, e.url)
		force(s)
		stores[name] = s
	}
	small := mailroom.SearchBounds{Scan: 4, Count: 3}
	compared := 0
	for _, who := range []string{"bob", "dana", "erin"} {
		for _, in := range e.inputs(who) {
			for _, q := range []string{"kestrel heron", "heron*"} {
				for _, before := range []int64{0, 16_385, 16_384, 16_383, 1} {
					for _, b := range []mailroom.SearchBounds{small} {
						if q == "heron*" && before > 0 {
							continue
						}
						in := in
						in.Query, in.Limit = q, ptr(2)
						if before > 0 {
							if in.Offset != nil || in.RelatedTo != "" {
								continue
							}
							c := mailroom.Cursor(before)
							in.Cursor = &c
						}
						want := e.pages(index, who, in, b)
						for name, s := range stores {
							if got := e.pages(s, who, in, b); !slices.Equal(got, want) {
								t.Errorf("%s: %s %+v below %d, bounds %+v:\n got %q\nwant %q", name, who, in, before, b, got, want)
							}
						}
						compared++
					}
				}
			}
		}
	}
	t.Logf("%d searches compared", compared)
}

// Mail that arrives while a reader pages moves the top of the listing (the
// total counts from it) but not the pages below the cursor: a search
// through ranges of buckets sees what the whole index sees at each step.
func TestSearchStagesKeepPagesWhileMailArrives(t *testing.T) {
	e := newBucketEdge(t)
	index := openWide(t, e.url)
	postgres.RangeSearches(index, 1, 0)
	ranges := openWide(t, e.url)
	postgres.RangeSearches(ranges, 3, 4)
	walks := openWide(t, e.url)
	postgres.WalkSearches(walks, 5)
	in := mailroom.ListInput{Query: "kestrel", Limit: ptr(2)}
	b := mailroom.SearchBounds{Scan: 4, Count: 3}
	var cursors [3]*string
	for step := range 8 {
		var got [3]string
		for i, s := range []*postgres.Store{index, ranges, walks} {
			in := in
			in.Cursor = cursors[i]
			got[i], cursors[i] = e.page(s, "bob", in, b)
		}
		if got[1] != got[0] || got[2] != got[0] {
			t.Fatalf("step %d: ranges %q, walk %q, index %q", step, got[1], got[2], got[0])
		}
		if step == 0 && !strings.Contains(got[0], "next") {
			t.Fatalf("first page %q has no next page", got[0])
		}
		d := draft(t, "@bob")
		d.Body = "kestrel arriving"
		if _, err := e.s.Send(e.as("alice"), d); err != nil {
			t.Fatal(err)
		}
	}
}

// A store with mail from before migration 0011 (the full-text index over
// fts alone) searches the same after it, sends made while it runs
// included: the migration rebuilds the index from the rows it holds.
func TestSearchBucketsMigrationKeepsTheResults(t *testing.T) {
	e := newBucketEdge(t)
	// Back to schema 10 (and without 0014's audience, which rebuilds the
	// index again after 0011).
	for _, q := range []string{
		`ALTER TABLE message DROP COLUMN audience`, // and its index
		`CREATE INDEX message_fts ON message USING gin (fts)`,
		`DELETE FROM schema_migration WHERE version IN (11, 14)`,
	} {
		if _, err := e.s.Pool().Exec(e.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	old := openWide(t, e.url)
	postgres.RangeSearches(old, 1, 0)
	type shape struct {
		who string
		in  mailroom.ListInput
	}
	var shapes []shape
	for _, who := range []string{"alice", "bob", "carol", "dana", "erin"} {
		for _, in := range e.inputs(who) {
			for _, q := range []string{"kestrel heron", "heron*"} {
				in.Query, in.Limit = q, ptr(2)
				shapes = append(shapes, shape{who, in})
			}
		}
	}
	small := mailroom.SearchBounds{Scan: 4, Count: 3}
	before := map[int]string{}
	for i, sh := range shapes {
		before[i] = strings.Join(e.pages(old, sh.who, sh.in, small), " | ")
	}
	// Sends while the migration runs.
	var wg sync.WaitGroup
	wg.Add(1)
	errs := make(chan error, 1)
	go func() {
		defer wg.Done()
		for range 20 {
			d := draft(t, "@carol")
			d.Body = "during" // matches none of the searches compared
			if _, err := old.Send(e.as("alice"), d); err != nil {
				errs <- err
				return
			}
		}
	}()
	migrated := openWide(t, e.url)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	var def string
	if err := e.s.Pool().QueryRow(e.ctx, `SELECT pg_get_indexdef('message_fts'::regclass)`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "seq >> 14") {
		t.Fatalf("after migration: %s", def)
	}
	postgres.RangeSearches(migrated, 2, 1<<20)
	for i, sh := range shapes {
		if got := strings.Join(e.pages(migrated, sh.who, sh.in, small), " | "); got != before[i] {
			t.Errorf("%s %+v: after the migration %q, before %q", sh.who, sh.in, got, before[i])
		}
	}
	var during int
	if err := e.s.Pool().QueryRow(e.ctx, `SELECT count(*) FROM message WHERE fts @@ plainto_tsquery('mailroom', 'during') AND ARRAY[seq >> 14] && '{1}'::bigint[]`).Scan(&during); err != nil {
		t.Fatal(err)
	}
	if during != 20 {
		t.Fatalf("%d of the 20 sends during the migration in bucket 1 of the index", during)
	}
}

// openWide opens a store whose searches never narrow to the caller's
// audience (migration 0014): these tests compare the stages over every
// match, and a narrowed search by a sparse reader through forced ranges of
// a few seqs would walk the whole store for every page's total.
func openWide(t *testing.T, url string) *postgres.Store {
	s := open(t, url, postgres.Options{})
	postgres.NarrowNoSearches(s)
	return s
}
