package mailroom_test

import (
	"testing"

	"github.com/mailroom/mailroom"
)

// feed runs a walk over n matches, seqs n..1 newest first, where mine says
// which are the caller's; it returns the walk and how many it examined.
func feed(w *mailroom.SearchWalk, n int, mine func(seq int64) bool) (*mailroom.SearchWalk, int) {
	sent := 0
	for seq := int64(n); seq >= 1 && sent < w.Limit(); seq-- {
		sent++
		if !w.Add(seq, mine(seq)) {
			break
		}
	}
	return w, sent
}

func TestSearchWalk(t *testing.T) {
	all := func(int64) bool { return true }
	none := func(int64) bool { return false }
	for _, tc := range []struct {
		name           string
		matches        int
		mine           func(int64) bool
		offset, limit  int
		total          int
		exact          bool
		page           int   // rows on the page, with the one that says more exist
		resume         int64 // 0: none
		examinedAtMost int
	}{
		{name: "few matches, all mine", matches: 30, mine: all, limit: 50, total: 30, exact: true, page: 30},
		{name: "exactly the count bound", matches: mailroom.SearchCount, mine: all, limit: 50, total: mailroom.SearchCount, exact: true, page: 51},
		{name: "one over the count bound", matches: mailroom.SearchCount + 1, mine: all, limit: 50, total: mailroom.SearchCount, exact: false, page: 51,
			examinedAtMost: mailroom.SearchCount + 1},
		{name: "a word in every message", matches: 1_000_000, mine: all, limit: 50, total: mailroom.SearchCount, exact: false, page: 51,
			examinedAtMost: mailroom.SearchCount + 1},
		{name: "a deep offset is still counted to", matches: 1_000_000, mine: all, offset: 1500, limit: 200, total: 1700, exact: false, page: 201},
		{name: "nothing mine within the scan", matches: 50_000, mine: none, limit: 50, total: 0, exact: false, page: 0,
			resume: 50_000 - mailroom.SearchScan + 1, examinedAtMost: mailroom.SearchScan + 1},
		{name: "all examined, none mine", matches: mailroom.SearchScan, mine: none, limit: 50, total: 0, exact: true, page: 0},
		{name: "a few mine among many", matches: 50_000, mine: func(s int64) bool { return s%1000 == 0 }, limit: 50, total: 10, exact: false, page: 10,
			resume: 50_000 - mailroom.SearchScan + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, examined := feed(mailroom.NewSearchWalk(mailroom.SearchBounds{}, tc.offset, tc.limit), tc.matches, tc.mine)
			total, exact := w.Total()
			if total != tc.total || exact != tc.exact {
				t.Errorf("total %d exact %v, want %d %v", total, exact, tc.total, tc.exact)
			}
			if got := len(w.Page(tc.offset, tc.limit)); got != tc.page {
				t.Errorf("page of %d rows, want %d", got, tc.page)
			}
			if tc.page <= tc.limit {
				if got := w.Resume(); got != tc.resume {
					t.Errorf("resume at %d, want %d", got, tc.resume)
				}
			}
			if tc.examinedAtMost > 0 && examined > tc.examinedAtMost {
				t.Errorf("examined %d matches, want at most %d", examined, tc.examinedAtMost)
			}
			if !exact && total > tc.matches {
				t.Errorf("a lower bound %d above the %d matches", total, tc.matches)
			}
		})
	}
}

// Resumed walks together see every match once: the pages a cursor chain
// returns are exactly the caller's matches.
func TestSearchWalkResumesWithoutGaps(t *testing.T) {
	const n = 35_000
	mine := func(s int64) bool { return s%7 == 0 }
	var got []int64
	before := int64(n + 1)
	for range 100 {
		w := mailroom.NewSearchWalk(mailroom.SearchBounds{}, 0, 50)
		for seq := before - 1; seq >= 1; seq-- {
			if !w.Add(seq, mine(seq)) {
				break
			}
		}
		page := w.Page(0, 50)
		if len(page) > 50 {
			got = append(got, page[:50]...)
			before = page[49]
			continue
		}
		got = append(got, page...)
		if before = w.Resume(); before == 0 {
			break
		}
	}
	want := 0
	for s := int64(n); s >= 1; s-- {
		if mine(s) {
			if want >= len(got) || got[want] != s {
				t.Fatalf("row %d: got %v, want seq %d", want, got[min(want, len(got)-1)], s)
			}
			want++
		}
	}
	if want != len(got) {
		t.Fatalf("%d rows, want %d", len(got), want)
	}
}

// Set, given what one statement finds, agrees with a walk through Add.
func TestSearchWalkSet(t *testing.T) {
	b := mailroom.SearchBounds{Scan: 100, Count: 10}
	for _, tc := range []struct {
		name    string
		matches int
		mine    func(int64) bool
	}{
		{"few", 30, func(s int64) bool { return s%3 == 0 }},
		{"count bound", 500, func(int64) bool { return true }},
		{"scan bound", 500, func(s int64) bool { return s%50 == 0 }},
		{"exactly the scan", 100, func(s int64) bool { return s%50 == 0 }},
		{"none", 500, func(int64) bool { return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			add, _ := feed(mailroom.NewSearchWalk(b, 0, 5), tc.matches, tc.mine)
			set := mailroom.NewSearchWalk(b, 0, 5)
			var seqs []int64
			for s := int64(tc.matches); s > int64(tc.matches-set.Scan()) && s >= 1 && len(seqs) < set.Need(); s-- {
				if tc.mine(s) {
					seqs = append(seqs, s)
				}
			}
			var more int64
			if tc.matches > set.Scan() {
				more = int64(tc.matches - set.Scan() + 1)
			}
			set.Set(seqs, more)
			at, ae := add.Total()
			st, se := set.Total()
			if at != st || ae != se || len(add.Page(0, 5)) != len(set.Page(0, 5)) || add.Resume() != set.Resume() {
				t.Fatalf("Add: total %d %v, page %d, resume %d; Set: total %d %v, page %d, resume %d",
					at, ae, len(add.Page(0, 5)), add.Resume(), st, se, len(set.Page(0, 5)), set.Resume())
			}
		})
	}
}

// Search counts from the top and pages from the cursor, and a short page
// of a stopped scan carries on below it.
func TestSearch(t *testing.T) {
	b := mailroom.SearchBounds{Scan: 100, Count: 10}
	const n = 1000
	mine := func(s int64) bool { return s%40 == 0 } // 25 of the caller's rows
	var calls []int64
	find := func(before int64, scan, need int) ([]int64, int64, error) {
		calls = append(calls, before)
		top := int64(n)
		if before > 0 {
			top = before - 1
		}
		var seqs []int64
		s := top
		for ; s > top-int64(scan) && s >= 1 && len(seqs) < need; s-- {
			if mine(s) {
				seqs = append(seqs, s)
			}
		}
		var more int64
		if len(seqs) < need && top-int64(scan) >= 1 {
			more = top - int64(scan) + 1
		}
		return seqs, more, nil
	}
	f := mailroom.ListFilter{Limit: 5, SearchBounds: b}
	p, err := mailroom.Search(f, find)
	if err != nil || p.Total != 3 || p.Exact || len(p.Seqs) != 3 || p.NextCursor == nil || len(calls) != 1 {
		t.Fatalf("first page: %+v %v, %d walks; want 3 rows of a stopped scan, a cursor, one walk", p, err, len(calls))
	}
	f.Before, _ = mailroom.ParseCursor(*p.NextCursor)
	if f.Before != n-100+1 {
		t.Fatalf("cursor at %d, want below the scan at %d", f.Before, n-100+1)
	}
	calls = nil
	p, err = mailroom.Search(f, find)
	if err != nil || p.Total != 3 || len(calls) != 2 || calls[0] != 0 || calls[1] != f.Before || len(p.Seqs) != 2 || p.Seqs[0] != 880 {
		t.Fatalf("cursor page: %+v %v, walks from %v; want the total from the top and the page from the cursor", p, err, calls)
	}
}
