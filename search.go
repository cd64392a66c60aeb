package mailroom

// A full-text listing examines the store's messages that contain the
// query's words, newest first, and keeps those the caller may see and the
// other filters pass. Counting every match exactly costs time in proportion
// to the matches (~3 µs each in SQLite: 4 s for a word in a million
// messages), so a search is bounded as search engines bound it: it examines
// at most SearchScan matches and counts at most SearchCount rows, and says
// when its totalCount is a lower bound (Page.TotalCountExact false).
const (
	SearchScan  = 10_000 // word matches one search examines, newest first
	SearchCount = 500    // rows a search counts before it stops
)

// SearchBounds are the bounds of one search; a zero field means its
// default.
type SearchBounds struct {
	Scan, Count int
}

func (b SearchBounds) withDefaults() SearchBounds {
	if b.Scan <= 0 {
		b.Scan = SearchScan
	}
	if b.Count <= 0 {
		b.Count = SearchCount
	}
	return b
}

// SearchPage is what a bounded search decides about one page.
type SearchPage struct {
	Total      int
	Exact      bool    // Total is exact, not a lower bound
	Seqs       []int64 // the page's rows, plus one more when a next page exists
	NextCursor *string // where to go on when the page is short because the scan stopped
}

// Search runs the bounded search f asks for. find is the store's walk: the
// caller's rows among the first scan matches below before (0: from the
// newest), newest first, at most need of them, and the scan-th match's seq
// when more matches follow it (else 0; a store that found need rows may
// skip asking). The total counts from the top of the listing, as every
// listing's does; the page starts at the cursor.
func Search(f ListFilter, find func(before int64, scan, need int) ([]int64, int64, error)) (SearchPage, error) {
	b := f.SearchBounds.withDefaults()
	// Enough rows for the page and for the count, and one more, which says
	// that rows follow.
	need := max(b.Count, f.Offset+f.Limit) + 1
	seqs, more, err := find(0, b.Scan, need)
	if err != nil {
		return SearchPage{}, err
	}
	// An offset past the rows a stopped scan found names no row it knows:
	// the rows at that position lie below the scan, where only a cursor walk
	// goes on (an empty page there would pass over them unsaid).
	if f.Offset > len(seqs) && len(seqs) < need && more > 0 {
		return SearchPage{}, Errorf(EINVALID, "offset %d is past the %d rows this search found: it examines only the %d newest matches of query; give an offset of at most %d and follow nextCursor",
			f.Offset, len(seqs), b.Scan, len(seqs))
	}
	var p SearchPage
	if len(seqs) == need {
		p.Total, p.Exact = need-1, false // at least that many
	} else {
		p.Total, p.Exact = len(seqs), more == 0
	}
	if f.Before > 0 { // a cursor page: the same walk from the cursor
		need = max(b.Count, f.Limit) + 1
		if seqs, more, err = find(f.Before, b.Scan, need); err != nil {
			return SearchPage{}, err
		}
	}
	if f.Offset < len(seqs) {
		p.Seqs = seqs[f.Offset:min(len(seqs), f.Offset+f.Limit+1)]
	}
	// A page that is short because the scan stopped goes on below it.
	if len(p.Seqs) <= f.Limit && len(seqs) < need && more > 0 {
		c := Cursor(more)
		p.NextCursor = &c
	}
	return p, nil
}
