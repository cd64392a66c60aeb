package postgres

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// A bounded search (mailroom.Search) examines the newest matches of its
// words. PostgreSQL finds them in one of two ways, and the cheaper one
// depends on the words:
//
//   - the GIN index: it decodes the whole posting list of every word, so
//     an AND of words that are each in a large share of the messages costs
//     in proportion to the store (five words in 45% of 1M messages each:
//     ~100 ms in the Bitmap Index Scan alone, to find 16,815 matches), however
//     few of its matches the page needs;
//   - a walk down the message key, newest first, testing each message: it
//     stops when the page and the count have their rows, so it costs in
//     proportion to how rare the match is, never to the store's size, but
//     a rare word makes it walk far (a 1% word: 70,000 rows where the index
//     reads 10,000 entries).
//
// The planner cannot choose: the walk's length depends on how many of the
// matches the caller may see, which the statement does not know, and it
// prices the per-row test far too cheaply. So the store chooses, from the
// column statistics ANALYZE keeps (the share of messages holding each
// word), the number of messages, and the caller's share of them (their
// counters): it walks when the expected walk is well under what the index
// would decode. Either way the statement examines exactly the newest
// matches, in order, so the choice changes the cost, never the result; a
// walk that runs out of its range goes on below it through the index.

// The index's cost in walked messages (measured at 1M messages: a walk
// tests a message in ~1 µs): it decodes searchWalkPerEntry posting entries
// in that time (~45 ns each), and reads and sorts searchWalkPerMatch
// matches (the bitmap heap scan and the sort of every match).
const (
	searchWalkPerEntry = 20
	searchWalkPerMatch = 2
)

// searchPlan is what a search needs to choose between the walk and the
// index; the zero value never walks.
type searchPlan struct {
	freqs  []float64 // the share of messages holding each word (0: unknown or rare)
	newest int64     // the newest message's seq
	inbox  float64   // the caller's deliveries, all their mailboxes
	force  int64     // tests: walk this many seqs whatever the estimate
}

// wordFreqSQL reads the share of messages holding each of the words $1
// (stemmed as a query stems them; 0 for a word ANALYZE found too rare to
// keep, or before it has run) from the column statistics.
const wordFreqSQL = `SELECT coalesce(array_agg(coalesce(f.freq, 0)::float8), '{}') FROM unnest(tsvector_to_array(to_tsvector('mailroom', $1))) l(lexeme)
	LEFT JOIN (SELECT u.e, u.freq FROM pg_stats s, unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) u(e, freq)
		WHERE s.schemaname = current_schema() AND s.tablename = 'message' AND s.attname = 'fts') f ON f.e = l.lexeme`

// searchSizeSQL reads the newest seq and the caller's deliveries ($1 the
// caller, $2 their role mailboxes) from the counters.
const searchSizeSQL = `SELECT (SELECT coalesce(max(seq), 0) FROM message),
	(SELECT coalesce(sum(n), 0)::float8 FROM mailbox_count WHERE recipient = $1 OR recipient = ANY($2))`

// wordStats keeps what wordFreqSQL said of recent queries for a while:
// the statistics change only when ANALYZE runs, and reading pg_stats costs
// 2-4 ms of server CPU (mostly planning the view), as much as a selective
// search itself.
type wordStats struct {
	mu    sync.Mutex
	since time.Time
	freqs map[string][]float64
}

const (
	wordStatsFor = time.Minute
	wordStatsMax = 1024 // queries kept; all are dropped when it fills
)

func (w *wordStats) get(key string, now time.Time) ([]float64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.since) > wordStatsFor || now.Before(w.since) {
		w.freqs, w.since = nil, now
	}
	f, ok := w.freqs[key]
	return f, ok
}

func (w *wordStats) put(key string, f []float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.freqs == nil || len(w.freqs) >= wordStatsMax {
		w.freqs = map[string][]float64{}
	}
	w.freqs[key] = f
}

// walkable reports whether a search by f may walk: plain words only (a
// prefix matches lexemes the statistics do not add up), and no filter
// that leaves the caller far fewer rows than their mailboxes hold, which
// the estimate would not see.
func walkable(f mailroom.ListFilter) bool {
	for _, t := range f.Search {
		if t.Prefix {
			return false
		}
	}
	return f.Box != mailroom.BoxOutbox && !f.UnreadOnly && f.ThreadID == "" && !f.FromMe && f.FromName == "" && f.To == "" &&
		len(f.Concepts) == 0 && !f.ArchivedOnly && f.Via == "" && f.Priority == "" && !f.FromHuman
}

// readSearchPlan reads the plan of a search by f, or the zero plan (the
// index) when f may not walk.
func (s *Store) readSearchPlan(ctx context.Context, tx pgx.Tx, me mailroom.Identity, roles roleSet, f mailroom.ListFilter) (searchPlan, error) {
	p := searchPlan{force: s.walkSpan}
	if !walkable(f) && p.force == 0 {
		return p, nil
	}
	words := make([]string, len(f.Search))
	for i, t := range f.Search {
		words[i] = t.Word
	}
	key := strings.Join(words, " ")
	freqs, ok := s.words.get(key, s.clock())
	if !ok {
		if err := tx.QueryRow(ctx, wordFreqSQL, key).Scan(&freqs); err != nil {
			return p, err
		}
		s.words.put(key, freqs)
	}
	p.freqs = freqs
	if p.force == 0 && (len(freqs) == 0 || slices.Contains(freqs, 0)) {
		return p, nil // no walk: a rare or unknown word has a short posting list
	}
	err := tx.QueryRow(ctx, searchSizeSQL, me.ID, roles.ids).Scan(&p.newest, &p.inbox)
	return p, err
}

// walk returns how many seqs below before (0: from the newest) a walk for
// need of the caller's rows among scan matches should cover, or 0 when the
// index is cheaper. The walk is expected to read need rows' worth of the
// caller's matches, or scan matches, whichever comes first; it covers what
// the index would cost (so a walk that fails costs at most as much again),
// and is taken only when it is expected to need half of that.
func (p searchPlan) walk(before int64, scan, need int) int64 {
	top := p.newest + 1
	if before > 0 {
		top = before
	}
	if p.force > 0 {
		return min(p.force, top)
	}
	n := float64(p.newest)
	if len(p.freqs) == 0 || n <= 0 || p.inbox <= 0 {
		return 0
	}
	match, entries := 1.0, 0.0
	for _, f := range p.freqs {
		match *= f // as the planner estimates an AND: as if independent
		entries += f * n
	}
	if match <= 0 {
		return 0 // a rare word: its posting list is short
	}
	share := min(1, p.inbox/n)
	expect := min(float64(need)/(match*share), float64(scan)/match)
	cover := entries/searchWalkPerEntry + match*n/searchWalkPerMatch
	if 2*expect > cover {
		return 0
	}
	return min(int64(cover)+1, top)
}

// searchFinder returns the bounded search's find (mailroom.Search) for
// the tsquery SQL search, whose words are in args, keeping the matches
// that pass the EXISTS conditions mine (on w.seq).
//
// Each statement keeps the caller's rows among the newest matches in one
// pass and, when it found fewer than it needs, says in the same pass how
// many matches it examined and whether another follows the last one it
// may examine (the matches are taken one past the scan bound): asking that
// in a statement of its own repeated the search (a second decode of the
// posting lists for an AND of common words).
//
// The matches are a MATERIALIZED CTE, planned for all of them: planned
// under the outer LIMIT, a word in 1% of the messages walked the message
// key backwards through 90,000 rows (the planner prices @@ per row far
// too cheaply; 53 ms at 1M) where the GIN index and a sort of its 10,700
// matches take 6 ms. It is read only as far as the outer query asks, so a
// walk stops at the page. The outer query has no ORDER BY (one over a CTE
// is a sort of every row that passes, 20 ms for a word in every message):
// a CTE's rows come in the order it made them, and should that ever not
// hold, the search runs again sorted.
func searchFinder(ctx context.Context, tx pgx.Tx, args []any, search string, mine []string, plan searchPlan) func(before int64, scan, need int) ([]int64, int64, error) {
	// stage keeps the caller's rows (at most need) among the first k of
	// the matches (an ordered SELECT of seq); n is how many it examined
	// when it found fewer (k+1 when more than k), last the k-th's seq.
	var stage func(matches string, k, need int, sorted bool) ([]int64, int, int64, error)
	stage = func(matches string, k, need int, sorted bool) (seqs []int64, n int, last int64, err error) {
		ks := strconv.Itoa(k)
		kept := `SELECT seq FROM (SELECT seq, row_number() OVER () AS rn FROM w) w WHERE rn <= ` + ks + ` AND (` + strings.Join(mine, " OR ") + `)`
		if sorted {
			kept = `SELECT seq FROM (SELECT seq, row_number() OVER (ORDER BY seq DESC) AS rn FROM w) w WHERE rn <= ` + ks + ` AND (` +
				strings.Join(mine, " OR ") + `) ORDER BY seq DESC`
		}
		q := callerArgs + `, w AS MATERIALIZED (` + matches + ` LIMIT ` + strconv.Itoa(k+1) + `)
			SELECT * FROM ((SELECT false, seq, 0::bigint FROM (` + kept + ` LIMIT ` + strconv.Itoa(need) + `) c)
				UNION ALL (SELECT true, count(*), coalesce((SELECT min(seq) FROM (SELECT seq FROM w ORDER BY seq DESC LIMIT ` + ks + `) e), 0) FROM w)) u
			LIMIT ` + strconv.Itoa(need)
		rows, err := tx.Query(ctx, q, exec(args)...)
		if err != nil {
			return nil, 0, 0, err
		}
		var done bool
		var a, b int64
		_, err = pgx.ForEachRow(rows, []any{&done, &a, &b}, func() error {
			if done {
				n, last = int(a), b
			} else {
				seqs = append(seqs, a)
			}
			return nil
		})
		if err == nil && !sorted && !descending(seqs) {
			return stage(matches, k, need, true)
		}
		return seqs, n, last, err
	}
	return func(before int64, scan, need int) ([]int64, int64, error) {
		var seqs []int64
		var last int64 // the last match examined so far
		below := before
		if span := plan.walk(before, scan, need); span > 0 {
			top := plan.newest + 1
			if before > 0 {
				top = before
			}
			lo := top - span
			// The function, not the operator: the GIN index cannot answer
			// it, so the plan is the key walk.
			got, n, l, err := stage(`SELECT seq FROM message WHERE seq < `+strconv.FormatInt(top, 10)+` AND seq >= `+strconv.FormatInt(lo, 10)+
				` AND ts_match_vq(fts, `+search+`) ORDER BY seq DESC`, scan, need, false)
			if err != nil || len(got) == need {
				return got, 0, err
			}
			if n > scan {
				return got, l, nil
			}
			if lo <= 1 { // the walk reached the first message
				return got, 0, nil
			}
			seqs, scan, need, below = got, scan-n, need-len(got), lo
			if n > 0 {
				last = l
			}
		}
		matches := `SELECT seq FROM message WHERE fts @@ ` + search
		if below > 0 {
			matches += ` AND seq < ` + strconv.FormatInt(below, 10)
		}
		got, n, l, err := stage(matches+` ORDER BY seq DESC`, scan, need, false)
		seqs = append(seqs, got...)
		switch {
		case err != nil || len(got) == need:
			return seqs, 0, err
		case n > scan && scan == 0: // the walk examined the last match it may
			return seqs, last, nil
		case n > scan:
			return seqs, l, nil
		}
		return seqs, 0, nil
	}
}
