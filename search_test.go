package mailroom_test

import (
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
)

// fakeFind is a store's walk over n word matches, seqs n..1 newest first,
// where mine says which are the caller's. It records the most matches one
// walk examined and the cursor of each walk.
type fakeFind struct {
	n        int64
	mine     func(seq int64) bool
	examined int
	befores  []int64
}

func (s *fakeFind) find(before int64, scan, need int) ([]int64, int64, error) {
	s.befores = append(s.befores, before)
	top := s.n
	if before > 0 {
		top = before - 1
	}
	var seqs []int64
	examined := 0
	seq := top
	for ; seq >= 1 && examined < scan && len(seqs) < need; seq-- {
		examined++
		if s.mine(seq) {
			seqs = append(seqs, seq)
		}
	}
	s.examined = max(s.examined, examined)
	var more int64
	if len(seqs) < need && examined == scan && seq >= 1 { // matches go on past the scan
		more = seq + 1
	}
	return seqs, more, nil
}

func TestSearch(t *testing.T) {
	all := func(int64) bool { return true }
	none := func(int64) bool { return false }
	small := mailroom.SearchBounds{Scan: 100, Count: 10}
	for _, tc := range []struct {
		name           string
		bounds         mailroom.SearchBounds
		matches        int64
		mine           func(int64) bool
		offset, limit  int
		total          int
		exact          bool
		page           int   // rows on the page, with the one that says more exist
		resume         int64 // the nextCursor's position; 0: none
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
			resume: 50_000 - mailroom.SearchScan + 1, examinedAtMost: mailroom.SearchScan},
		{name: "all examined, none mine", matches: mailroom.SearchScan, mine: none, limit: 50, total: 0, exact: true, page: 0},
		{name: "a few mine among many", matches: 50_000, mine: func(s int64) bool { return s%1000 == 0 }, limit: 50, total: 10, exact: false, page: 10,
			resume: 50_000 - mailroom.SearchScan + 1},
		// The same rules with small bounds, as the store suite sets them.
		{name: "small: few", bounds: small, matches: 30, mine: func(s int64) bool { return s%3 == 0 }, limit: 5, total: 10, exact: true, page: 6},
		{name: "small: count bound", bounds: small, matches: 500, mine: all, limit: 5, total: 10, exact: false, page: 6, examinedAtMost: 11},
		{name: "small: scan bound", bounds: small, matches: 500, mine: func(s int64) bool { return s%50 == 0 }, limit: 5, total: 2, exact: false, page: 2,
			resume: 401, examinedAtMost: 100},
		{name: "small: exactly the scan", bounds: small, matches: 100, mine: func(s int64) bool { return s%50 == 0 }, limit: 5, total: 2, exact: true, page: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &fakeFind{n: tc.matches, mine: tc.mine}
			p, err := mailroom.Search(mailroom.ListFilter{Offset: tc.offset, Limit: tc.limit, SearchBounds: tc.bounds}, st.find)
			if err != nil {
				t.Fatal(err)
			}
			if p.Total != tc.total || p.Exact != tc.exact {
				t.Errorf("total %d exact %v, want %d %v", p.Total, p.Exact, tc.total, tc.exact)
			}
			if len(p.Seqs) != tc.page {
				t.Errorf("page of %d rows, want %d", len(p.Seqs), tc.page)
			}
			var resume int64
			if p.NextCursor != nil {
				if resume, err = mailroom.ParseCursor(*p.NextCursor); err != nil {
					t.Fatal(err)
				}
			}
			if resume != tc.resume {
				t.Errorf("nextCursor at %d, want %d", resume, tc.resume)
			}
			if tc.examinedAtMost > 0 && st.examined > tc.examinedAtMost {
				t.Errorf("examined %d matches, want at most %d", st.examined, tc.examinedAtMost)
			}
			if !p.Exact && int64(p.Total) > tc.matches {
				t.Errorf("a lower bound %d above the %d matches", p.Total, tc.matches)
			}
		})
	}
}

// Search counts from the top and pages from the cursor, and a short page
// of a stopped scan carries on below it.
func TestSearchCursorPage(t *testing.T) {
	st := &fakeFind{n: 1000, mine: func(s int64) bool { return s%40 == 0 }} // 25 of the caller's rows
	f := mailroom.ListFilter{Limit: 5, SearchBounds: mailroom.SearchBounds{Scan: 100, Count: 10}}
	p, err := mailroom.Search(f, st.find)
	if err != nil || p.Total != 3 || p.Exact || len(p.Seqs) != 3 || p.NextCursor == nil || len(st.befores) != 1 {
		t.Fatalf("first page: %+v %v, %d walks; want 3 rows of a stopped scan, a cursor, one walk", p, err, len(st.befores))
	}
	f.Before, _ = mailroom.ParseCursor(*p.NextCursor)
	if f.Before != 1000-100+1 {
		t.Fatalf("cursor at %d, want below the scan at %d", f.Before, 1000-100+1)
	}
	st.befores = nil
	p, err = mailroom.Search(f, st.find)
	if err != nil || p.Total != 3 || len(st.befores) != 2 || st.befores[0] != 0 || st.befores[1] != f.Before || len(p.Seqs) != 2 || p.Seqs[0] != 880 {
		t.Fatalf("cursor page: %+v %v, walks from %v; want the total from the top and the page from the cursor", p, err, st.befores)
	}
}

// Following nextCursor (from a full page's last row, as the stores do, or
// from where a stopped scan ended) returns exactly the caller's matches.
func TestSearchCursorsReturnEveryRowOnce(t *testing.T) {
	const n = 35_000
	st := &fakeFind{n: n, mine: func(s int64) bool { return s%7 == 0 }}
	f := mailroom.ListFilter{Limit: 50}
	var got []int64
	for range 100 {
		p, err := mailroom.Search(f, st.find)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Seqs) > f.Limit {
			got = append(got, p.Seqs[:f.Limit]...)
			f.Before = p.Seqs[f.Limit-1]
			continue
		}
		got = append(got, p.Seqs...)
		if p.NextCursor == nil {
			break
		}
		f.Before, _ = mailroom.ParseCursor(*p.NextCursor)
	}
	want := 0
	for s := int64(n); s >= 1; s-- {
		if s%7 == 0 {
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

// An offset past the rows a stopped scan found is an error naming the
// offset: the rows at that position lie below the scan, so an empty page
// would pass over them. At exactly the rows found the page is empty and
// its cursor carries on at that position; past the end of a scan that did
// not stop, the page is empty and is the end.
func TestSearchOffsetPastAStoppedScan(t *testing.T) {
	mine := func(s int64) bool { return s%40 == 0 } // 3 in a scan of 100 from the top
	f := mailroom.ListFilter{Limit: 5, SearchBounds: mailroom.SearchBounds{Scan: 100, Count: 10}}
	f.Offset = 4
	_, err := mailroom.Search(f, (&fakeFind{n: 1000, mine: mine}).find)
	if mailroom.ErrorCode(err) != mailroom.EINVALID || !strings.HasPrefix(err.Error(), "offset 4 is past the 3 rows this search found") {
		t.Fatalf("offset 4 past a stopped scan of 3 rows: %v", err)
	}
	f.Offset = 3
	p, err := mailroom.Search(f, (&fakeFind{n: 1000, mine: mine}).find)
	if err != nil || len(p.Seqs) != 0 || p.Exact || p.NextCursor == nil {
		t.Fatalf("offset 3, at the rows found: %+v %v; want an empty page and a cursor", p, err)
	}
	f.Offset = 40
	p, err = mailroom.Search(f, (&fakeFind{n: 100, mine: mine}).find) // every match examined
	if err != nil || len(p.Seqs) != 0 || !p.Exact || p.Total != 2 || p.NextCursor != nil {
		t.Fatalf("offset 40 past a whole search: %+v %v; want an empty last page, exact", p, err)
	}
}
