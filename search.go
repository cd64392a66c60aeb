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

// SearchWalk collects one pass of a search over the word matches, newest
// first: the store feeds it each match in turn with whether the row is the
// caller's (under every other filter) until Add says stop.
type SearchWalk struct {
	scan     int     // matches to examine at most
	need     int     // rows to collect before stopping
	Seqs     []int64 // the caller's rows, newest first
	examined int
	last     int64 // the last match examined
	Cut      bool  // stopped before the matches ran out
}

// NewSearchWalk starts a walk within b that needs the rows of a page at
// offset and limit, and at least b.Count of them for the total.
func NewSearchWalk(b SearchBounds, offset, limit int) *SearchWalk {
	b = b.withDefaults()
	return &SearchWalk{scan: b.Scan, need: max(b.Count, offset+limit) + 1}
}

// Limit is how many matches a store need send at most: one more than the
// scan bound says whether the scan stopped short.
func (w *SearchWalk) Limit() int { return w.scan + 1 }

// Scan is how many matches the walk examines at most.
func (w *SearchWalk) Scan() int { return w.scan }

// Need is how many of the caller's rows the walk stops at.
func (w *SearchWalk) Need() int { return w.need }

// Set records a walk the store ran in one statement instead of through
// Add: seqs are the caller's rows among the first Scan matches, newest
// first, at most Need of them; more is the Scan-th match's seq when
// further matches follow it, 0 when the matches end within the scan.
func (w *SearchWalk) Set(seqs []int64, more int64) {
	w.Seqs, w.examined = seqs, 0
	switch {
	case len(seqs) == w.need:
		w.Cut = true
	case more > 0:
		w.Cut, w.last = true, more
	}
}

// Add records the next match at seq, and reports whether the walk wants
// another.
func (w *SearchWalk) Add(seq int64, mine bool) bool {
	if w.examined == w.scan {
		w.Cut = true
		return false
	}
	w.examined++
	w.last = seq
	if mine {
		w.Seqs = append(w.Seqs, seq)
		if len(w.Seqs) == w.need {
			w.Cut = true
			return false
		}
	}
	return true
}

// Total returns the listing's totalCount and whether it is exact. A cut
// walk's total is a lower bound: at least that many rows match.
func (w *SearchWalk) Total() (int, bool) {
	if len(w.Seqs) == w.need {
		return w.need - 1, false
	}
	return len(w.Seqs), !w.Cut
}

// Page returns the seqs of the rows at offset and limit, plus one more
// when there is one, which says that a next page exists.
func (w *SearchWalk) Page(offset, limit int) []int64 {
	if offset >= len(w.Seqs) {
		return nil
	}
	return w.Seqs[offset:min(len(w.Seqs), offset+limit+1)]
}

// Resume returns where the next page should continue when this page is
// not full because the walk stopped short: below the last match examined.
// It returns 0 when the matches ran out.
func (w *SearchWalk) Resume() int64 {
	if !w.Cut || len(w.Seqs) == w.need { // a walk stopped by the count fills its page
		return 0
	}
	return w.last
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
// when more matches follow it (else 0). The total counts from the top of
// the listing, as every listing's does; the page starts at the cursor.
func Search(f ListFilter, find func(before int64, scan, need int) ([]int64, int64, error)) (SearchPage, error) {
	walk := func(before int64, offset int) (*SearchWalk, error) {
		w := NewSearchWalk(f.SearchBounds, offset, f.Limit)
		seqs, more, err := find(before, w.Scan(), w.Need())
		if err != nil {
			return nil, err
		}
		w.Set(seqs, more)
		return w, nil
	}
	w, err := walk(0, f.Offset)
	if err != nil {
		return SearchPage{}, err
	}
	var p SearchPage
	p.Total, p.Exact = w.Total()
	if f.Before > 0 {
		if w, err = walk(f.Before, 0); err != nil {
			return SearchPage{}, err
		}
	}
	p.Seqs = w.Page(f.Offset, f.Limit)
	if len(p.Seqs) <= f.Limit && w.Resume() > 0 {
		c := Cursor(w.Resume())
		p.NextCursor = &c
	}
	return p, nil
}
