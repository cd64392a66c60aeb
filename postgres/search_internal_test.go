package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom/postgres/pgtest"
)

// The walk-range-or-index choice on the shapes measured at 1M messages
// (the seed's word shares from pg_stats; agent-0 sees ~75% of the store,
// agent-3 1.3%), for the first page of a default search (need 501 of the
// caller's rows among 10,000 matches).
func TestSearchPlanChoosesTheCheaperWay(t *testing.T) {
	five := []float64{0.441, 0.453, 0.446, 0.452, 0.450}
	for _, c := range []struct {
		name  string
		freqs []float64
		n     int64
		inbox float64
		want  stageKind
	}{
		{"a word in every message", []float64{1}, 1_000_000, 750_000, walkStage},
		{"a word in 45%", []float64{0.441}, 1_000_000, 750_000, walkStage},
		// The newest buckets hold the page's matches: the index would read
		// and sort all 10,000 (a range's cost per seq beyond its matches
		// is the rarest word's share).
		{"a word in 1%", []float64{0.0094}, 1_000_000, 750_000, rangeStage},
		{"a word in 1%, 40% of the store mine", []float64{0.0094}, 1_000_000, 400_000, indexStage},
		{"five words in 45% each, most of the store mine", five, 1_000_000, 750_000, rangeStage},
		{"the same at 100k: the index", five, 100_000, 75_000, indexStage},
		{"five words in 45% each, 1.3% of the store mine", five, 1_000_000, 13_000, indexStage},
		{"a word in every message, 1.3% mine: the scan bound ends the walk", []float64{1}, 1_000_000, 13_000, walkStage},
		{"a word ANALYZE did not keep", []float64{0.45, 0}, 1_000_000, 750_000, indexStage},
		{"no statistics", nil, 1_000_000, 750_000, indexStage},
	} {
		p := searchPlan{freqs: c.freqs, newest: c.n, inbox: c.inbox}
		for _, top := range []int64{c.n + 1, c.n / 2, 5_000, 2} { // the newest, then below cursors
			kind, lo, _ := p.next(0, top, 10_000, 501, 0)
			if top == c.n+1 && kind != c.want {
				t.Errorf("%s: stage %d, want %d", c.name, kind, c.want)
			}
			if kind != indexStage && (lo < 0 || lo >= top) {
				t.Errorf("%s, below %d: stage %d covers %d up to %d", c.name, top, kind, lo, top)
			}
			if kind == rangeStage && (lo%(1<<searchBucketBits) != 0 || (top-1)>>searchBucketBits-lo>>searchBucketBits >= searchRangeBuckets) {
				t.Errorf("%s, below %d: range from %d is not whole buckets, at most %d", c.name, top, lo, searchRangeBuckets)
			}
		}
	}
	// After stages that cost what the index would, only the index: a
	// walk that ran out covered that much, and ranges stop at it.
	p := searchPlan{freqs: five, newest: 1_000_000, inbox: 750_000}
	kind, _, cost := p.next(0, 1_000_001, 10_000, 501, 0)
	if kind != rangeStage || cost <= 0 {
		t.Fatalf("five words: stage %d costing %g, want a range", kind, cost)
	}
	if k, _, _ := p.next(1, 900_000, 10_000, 300, cost); k != rangeStage {
		t.Errorf("five words after a range that ran out: stage %d, want another range", k)
	}
	if k, _, _ := p.next(1, 900_000, 10_000, 300, 100_000); k != indexStage {
		t.Errorf("five words after stages that cost nearly the index: stage %d, want the index", k)
	}
	every := searchPlan{freqs: []float64{1}, newest: 1_000_000, inbox: 13_000}
	kind, _, cost = every.next(0, 1_000_001, 10_000, 501, 0)
	if k, _, _ := every.next(1, 900_000, 5_000, 300, cost); kind != walkStage || k != indexStage {
		t.Errorf("a word in every message: stage %d, then %d after it ran out; want a walk, then the index", kind, k)
	}
	// Narrowed to the caller's tokens (a reader sent little of the store):
	// the index when the caller's matches are rare in the store (its cost
	// is theirs), a range where they are dense enough near the top, a walk
	// where the caller is sent nearly half of it.
	aud := []int64{0, 4}
	for _, c := range []struct {
		name  string
		freqs []float64
		inbox float64
		want  stageKind
	}{
		{"narrowed, five words in 45% each, 1% mine", five, 10_500, indexStage},
		{"narrowed, a word in every message, 1% mine", []float64{1}, 10_500, rangeStage},
		{"narrowed, a word in 45%, 1% mine", []float64{0.441}, 10_500, rangeStage},
		{"narrowed, a word in every message, 45% mine", []float64{1}, 450_000, walkStage},
		{"narrowed, a word ANALYZE did not keep", []float64{0.45, 0}, 10_500, indexStage},
	} {
		p := searchPlan{freqs: c.freqs, newest: 1_000_000, inbox: c.inbox, audience: aud}
		if kind, _, _ := p.next(0, 1_000_001, 10_000, 501, 0); kind != c.want {
			t.Errorf("%s: stage %d, want %d", c.name, kind, c.want)
		}
		if kind, _, _ := p.next(1, 900_000, 10_000, 300, 1e9); kind != indexStage {
			t.Errorf("%s, after stages that cost the index: %d, want the index", c.name, kind)
		}
	}
	walk := searchPlan{force: searchForce{walk: 7}, newest: 100}
	if k, lo, _ := walk.next(0, 3, 10, 5, 0); k != walkStage || lo != 0 {
		t.Errorf("a forced walk below seq 3: stage %d from %d, want a walk from 0", k, lo)
	}
	if k, _, _ := walk.next(1, 3, 10, 5, 0); k != indexStage {
		t.Errorf("after a forced walk: stage %d, want the index", k)
	}
	ranges := searchPlan{force: searchForce{span: 5, stages: 2}, newest: 100}
	for i, want := range []stageKind{rangeStage, rangeStage, indexStage} {
		if k, lo, _ := ranges.next(i, 50, 10, 5, 0); k != want || (k == rangeStage && lo != 45) {
			t.Errorf("forced ranges, stage %d: %d from %d, want %d", i, k, lo, want)
		}
	}
}

// The buckets of a range: each one that holds a seq of it, newest first.
func TestBucketQueryNamesTheRangesBuckets(t *testing.T) {
	for _, c := range []struct {
		lo, top int64
		want    string
	}{
		{0, 1, `{0}`},
		{0, 16384, `{0}`},
		{16383, 16385, `{1,0}`},
		{32768, 49153, `{3,2}`},
	} {
		if got, want := bucketQuery(c.lo, c.top), searchBucket+` && '`+c.want+`'::bigint[]`; got != want {
			t.Errorf("bucketQuery(%d, %d) = %s, want %s", c.lo, c.top, got, want)
		}
	}
}

// Word statistics are kept for wordStatsFor, and dropped when they fill.
func TestWordStatsAreKeptForAWhile(t *testing.T) {
	var w wordStats
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	if _, ok := w.get("status", now); ok {
		t.Fatal("an empty cache has an entry")
	}
	w.put("status", []float64{1})
	if f, ok := w.get("status", now.Add(wordStatsFor/2)); !ok || len(f) != 1 {
		t.Fatalf("kept %v %v", f, ok)
	}
	if _, ok := w.get("status", now.Add(wordStatsFor+time.Second)); ok {
		t.Fatal("kept past wordStatsFor")
	}
	for i := range wordStatsMax + 1 {
		w.put(time.Duration(i).String(), nil)
	}
	if len(w.freqs) > wordStatsMax {
		t.Fatalf("%d entries kept, at most %d", len(w.freqs), wordStatsMax)
	}
}

// The index's columns (migrations 0011, 0014) are the expressions a
// search builds: one that differed would leave the buckets or the audience
// to a filter over every match of the words, with the same results.
func TestSearchesUseTheBucketIndex(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	search := `fts @@ plainto_tsquery('mailroom', 'harbor lantern')`
	for _, q := range []string{
		`SELECT seq FROM message WHERE ` + search,
		`SELECT seq FROM message WHERE ` + search + ` AND ` + bucketQuery(1, 40_000),
		`SELECT seq FROM message WHERE ` + search + ` AND ` + audienceCond([]int64{0, 3, -3}, false),
		`SELECT seq FROM message WHERE ` + search + ` AND ` + audienceCond([]int64{0, 3}, false) + ` AND ` + bucketQuery(1, 40_000),
	} {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Only the GIN index can answer it without a scan.
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, `EXPLAIN `+q)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		tx.Rollback(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if plan := strings.Join(lines, "\n"); !strings.Contains(plan, "Bitmap Index Scan on message_fts") || strings.Contains(plan, "Filter:") {
			t.Errorf("%s\nplans\n%s", q, plan)
		}
	}
}
