package postgres

import (
	"testing"
	"time"
)

// The walk-or-index choice on the shapes measured at 1M messages (the
// seed's word shares from pg_stats; agent-0 sees ~75% of the store,
// agent-3 1.3%), for the first page of a default search (need 501 of the
// caller's rows among 10,000 matches).
func TestSearchPlanChoosesTheCheaperWay(t *testing.T) {
	five := []float64{0.441, 0.453, 0.446, 0.452, 0.450}
	for _, c := range []struct {
		name  string
		freqs []float64
		n     int64
		inbox float64
		walk  bool
	}{
		{"a word in every message", []float64{1}, 1_000_000, 750_000, true},
		{"a word in 45%", []float64{0.441}, 1_000_000, 750_000, true},
		{"a word in 1%", []float64{0.0094}, 1_000_000, 750_000, false},
		{"five words in 45% each, most of the store mine", five, 1_000_000, 750_000, true},
		{"the same at 100k: the index", five, 100_000, 75_000, false},
		{"five words in 45% each, 1.3% of the store mine", five, 1_000_000, 13_000, false},
		{"a word in every message, 1.3% mine: the scan bound ends the walk", []float64{1}, 1_000_000, 13_000, true},
		{"a word ANALYZE did not keep", []float64{0.45, 0}, 1_000_000, 750_000, false},
		{"no statistics", nil, 1_000_000, 750_000, false},
	} {
		p := searchPlan{freqs: c.freqs, newest: c.n, inbox: c.inbox}
		span := p.walk(0, 10_000, 501)
		if (span > 0) != c.walk || span > c.n+1 {
			t.Errorf("%s: walk span %d, want a walk: %v", c.name, span, c.walk)
		}
		if span > 0 && p.walk(span/2, 10_000, 501) > span/2 {
			t.Errorf("%s: a walk below a cursor covers more than the seqs below it", c.name)
		}
	}
	if (searchPlan{force: 7, newest: 100}).walk(3, 10, 5) != 3 {
		t.Error("a forced walk below seq 3 covers more than seqs 1 and 2")
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
