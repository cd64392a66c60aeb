package postgres

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// A bounded search (mailroom.Search) examines the newest matches of its
// words. PostgreSQL finds them in one of three ways, and the cheapest one
// depends on the words:
//
//   - the GIN index over the whole store: it decodes the whole posting list
//     of every word, so an AND of words that are each in a large share of
//     the messages costs in proportion to the store (five words in 45% of
//     1M messages each: ~100 ms in the Bitmap Index Scan alone, to find
//     16,815 matches), however few of its matches the page needs;
//   - the index over a range of the newest seqs: the index also holds each
//     message's bucket of 16,384 seqs (migration 0011), and a search that
//     asks for the words AND a range's buckets decodes the words' lists
//     only within those buckets (GIN skips the rest of them), so it costs
//     in proportion to the range, not the store;
//   - a walk down the message key, newest first, testing each message: it
//     stops when the page and the count have their rows, so it costs in
//     proportion to how rare the match is, but each message it tests is a
//     heap tuple read (~0.5-1 µs; more when its page is not in shared
//     buffers): a word in every message finds its page in 700 messages.
//
// The planner cannot choose: the walk's length depends on how many of the
// matches the caller may see, which the statement does not know, and it
// prices the per-row test far too cheaply. So the store chooses, from the
// column statistics ANALYZE keeps (the share of messages holding each
// word), the number of messages, and the caller's share of them (their
// counters): the expected walk, the range twice as deep, or the whole
// index, whichever is expected to cost least. Either way the statement
// examines exactly the newest matches, in order, so the choice changes the
// cost, never the result; a walk or a range that runs out goes on below
// it, by the same choice.

// The index's cost in walked messages (measured at 1M messages: a walk
// tests a message in ~1 µs): it decodes searchWalkPerEntry posting entries
// in that time (~45 ns each), and reads and sorts searchWalkPerMatch
// matches (the bitmap heap scan and the sort of every match).
const (
	searchWalkPerEntry = 20
	searchWalkPerMatch = 2
)

// The buckets of the index (migration 0011): its second column is
// ARRAY[seq >> searchBucketBits]. A range stage asks for at most
// searchRangeBuckets of them: GIN finds each candidate as the least of
// the buckets' next entries, so fewer, larger buckets cost less per seq (a
// range of 82k seqs at 1M: 36-42 ms of server CPU in buckets of 4,096,
// 24-32 ms in buckets of 16,384, 22-28 ms in buckets of 65,536, under load
// 8; a walk of it 50-54 ms), and smaller ones cover less beyond the need.
const (
	searchBucket       = `ARRAY[seq >> 14]`
	searchBucketBits   = 14
	searchRangeBuckets = 8
)

// A range's cost per seq in walked messages (measured over 49k seqs at 1M:
// every seq of its buckets is a candidate the words are looked up for,
// each match is read from the heap and sorted), and the most a
// range may cost per seq to be taken over a walk: the walk stops when it
// has its rows and a range does not, but the walk's length rests on the
// statistics' estimate of the match, which the range's twice-as-deep span
// allows for.
const (
	searchRangePerSeq   = 1.0 / 14
	searchRangeSeqsAt   = 0.45 // the rarest word's share searchRangePerSeq was measured at
	searchRangePerEntry = 1.0 / 5.5
	searchRangePerMatch = 1.5
	searchRangeVsWalk   = 0.7
)

// bucketQuery is the condition (SQL) for the messages in the buckets that
// hold the seqs from lo up to top (excluded).
func bucketQuery(lo, top int64) string {
	var b strings.Builder
	for k := (top - 1) >> searchBucketBits; k >= lo>>searchBucketBits; k-- {
		if b.Len() > 0 {
			b.WriteString(`,`)
		}
		b.WriteString(strconv.FormatInt(k, 10))
	}
	return searchBucket + ` && '{` + b.String() + `}'::bigint[]`
}

// How a stage of a search finds its matches.
type stageKind int

const (
	indexStage stageKind = iota // the whole index, below the stages before it
	walkStage                   // the message key from top down to lo
	rangeStage                  // the index, within the buckets of lo..top
)

// searchForce, set by tests, makes every search take these stages
// whatever the statistics say: a walk of walk seqs, then stages ranges of
// span seqs, then the index.
type searchForce struct {
	walk   int64
	span   int64
	stages int
}

// searchPlan is what a search needs to choose between the walk, ranges
// and the index; the zero value takes the index.
type searchPlan struct {
	freqs    []float64 // the share of messages holding each word (0: unknown or rare)
	newest   int64     // the newest message's seq
	inbox    float64   // the caller's deliveries, all their mailboxes
	audience []int64   // the caller's audience tokens when the search narrows to them (audienceTokens)
	tokens   float64   // the share of messages holding those tokens, from the statistics (0: unknown)
	force    searchForce
}

// A search by a reader sent less than half of the store (and every outbox
// search) examines only the matches whose audience (migration 0014) holds
// one of the caller's tokens, as SQLite's does: others' mail does not use
// up its scan bound, and GIN steps through the caller's short token lists
// instead of every match of the words. The listing's own rule still
// decides what shows. A reader sent most of the store skips the tokens:
// merging their long lists costs more than the tests they save.

// audienceTokens are the tokens a listing of box for me (holding the role
// mailboxes roles) may show: the inbox's personal branch shows mail to me
// directly or by broadcast (0), its role branches the queues' mailboxes,
// the outbox what me sent (-me). 0 is in every set: it also marks a row
// written without its audience, which every search must examine.
func audienceTokens(me int64, roles []int64, box mailroom.Box) []int64 {
	t := []int64{0}
	if box != mailroom.BoxOutbox {
		t = append(t, me)
		t = append(t, roles...)
	}
	if box != mailroom.BoxInbox {
		t = append(t, -me)
	}
	return t
}

// audienceCond is the condition for a message whose audience holds one of
// tokens; with walk, as the function, which the GIN index cannot answer
// (a walk's plan is the key walk).
func audienceCond(tokens []int64, walk bool) string {
	var b strings.Builder
	for i, t := range tokens {
		if i > 0 {
			b.WriteString(`,`)
		}
		b.WriteString(strconv.FormatInt(t, 10))
	}
	if walk {
		return `arrayoverlap(audience, '{` + b.String() + `}'::bigint[])`
	}
	return `audience && '{` + b.String() + `}'::bigint[]`
}

// The narrowed index's cost per posting entry of the words, in walked
// messages: GIN decodes the words' lists but tests only the caller's
// candidates (agent-3's five-word AND at 1M: 2.25M entries, ~7 ms). Each
// of the caller's matches is then a heap page of its own (they are
// scattered), so a range of the newest buckets still pays where the
// caller's matches are dense: agent-3's word in every message at 1M
// reads ~500 matches' pages in a range against 10,500 in the index.
const (
	searchNarrowPerEntry = 300
	searchNarrowPerMatch = 3
)

// wordFreqSQL reads the share of messages holding each of the words $1
// (stemmed as a query stems them; 0 for a word ANALYZE found too rare to
// keep, or before it has run) from the column statistics.
const wordFreqSQL = `SELECT coalesce(array_agg(coalesce(f.freq, 0)::float8), '{}') FROM unnest(tsvector_to_array(to_tsvector('mailroom', $1))) l(lexeme)
	LEFT JOIN (SELECT u.e, u.freq FROM pg_stats s, unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) u(e, freq)
		WHERE s.schemaname = current_schema() AND s.tablename = 'message' AND s.attname = 'fts') f ON f.e = l.lexeme`

// tokenFreqSQL reads the share of messages whose audience holds one of
// the tokens $1 (the sum of their shares: an upper bound) from the column
// statistics; tokens ANALYZE found too rare to keep count 0.
const tokenFreqSQL = `SELECT coalesce(sum(u.freq), 0)::float8 FROM pg_stats s, unnest(s.most_common_elems::text::bigint[], s.most_common_elem_freqs) u(e, freq)
	WHERE s.schemaname = current_schema() AND s.tablename = 'message' AND s.attname = 'audience' AND u.e = ANY($1)`

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
	p := searchPlan{force: s.force}
	if err := tx.QueryRow(ctx, searchSizeSQL, me.ID, roles.ids).Scan(&p.newest, &p.inbox); err != nil {
		return p, err
	}
	if s.narrow >= 0 && (f.Box == mailroom.BoxOutbox || s.narrow > 0 || 2*p.inbox < float64(p.newest)) {
		p.audience = audienceTokens(me.ID, roles.ids, f.Box)
	}
	forced := p.force != searchForce{}
	if !walkable(f) && !forced {
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
	if p.audience != nil && !forced {
		// The caller's counts miss mail their tokens reach that no
		// delivery shows (a broadcast before they existed, their own
		// sends in an outbox search): the statistics say how much.
		key := "\x00" + audienceCond(p.audience, false)
		t, ok := s.words.get(key, s.clock())
		if !ok {
			t = []float64{0}
			if err := tx.QueryRow(ctx, tokenFreqSQL, p.audience).Scan(&t[0]); err != nil {
				return p, err
			}
			s.words.put(key, t)
		}
		p.tokens = t[0]
	}
	return p, nil
}

// next says how the i-th stage of a search for need of the caller's rows
// among scan matches below top finds its matches, down to which seq (a
// walk or a range covers lo up to top), and what it may cost in walked
// messages, when the stages before it may have cost spent. A walk is
// expected to read need rows' worth of the caller's matches, or scan
// matches, whichever comes first, and covers what the index would cost (so
// a walk that runs out costs at most as much again, and is followed by the
// index); it may be taken when expected to need half of that. A range
// covers twice the expected walk (down to a bucket's start, at most
// searchRangeBuckets buckets), and may be taken when twice that would
// still cost under half the index and, with the stages before it, under
// the index: a density the statistics overrate by half still ends in
// ranges, and a search never pays for more than twice the index. A range
// is taken over a walk when cheap per seq (searchRangeVsWalk).
func (p searchPlan) next(i int, top int64, scan, need int, spent float64) (stageKind, int64, float64) {
	if f := p.force; f != (searchForce{}) {
		switch {
		case i == 0 && f.walk > 0:
			return walkStage, max(0, top-f.walk), 0
		case f.span > 0 && i < f.stages+min(1, int(f.walk)):
			return rangeStage, max(0, top-f.span), 0
		}
		return indexStage, 0, 0
	}
	n := float64(p.newest)
	if len(p.freqs) == 0 || n <= 0 || p.inbox <= 0 {
		return indexStage, 0, 0
	}
	match, sum, rarest := 1.0, 0.0, 1.0
	for _, f := range p.freqs {
		match *= f // as the planner estimates an AND: as if independent
		sum += f
		rarest = min(rarest, f)
	}
	if match <= 0 {
		return indexStage, 0, 0 // a rare word: its posting list is short
	}
	share := min(1, p.inbox/n)
	expect := min(float64(need)/(match*share), float64(scan)/match)
	index := sum*n/searchWalkPerEntry + match*n/searchWalkPerMatch
	// GIN steps through the rarest word's entries and advances the
	// buckets' lists to them, so a range's cost per seq beyond its matches
	// is in proportion to that word's share: a word in 1% of 1M messages
	// costs ~1.5 µs a match in a range of 8 buckets (1,201 matches: 1.6-2.6
	// ms of server CPU) where the index reads and sorts all 10,701 (6-7 ms).
	perSeq := searchRangePerSeq*min(1, rarest/searchRangeSeqsAt) + sum*searchRangePerEntry + match*searchRangePerMatch
	if p.audience != nil {
		// Narrowed, the matches are those the caller's tokens reach (cand
		// of the store; the caller sees share of it), and the index or a
		// range reads and sorts only those, a heap page each (they are
		// scattered), decoding the words' lists as it goes.
		cand := max(share, min(1, p.tokens))
		expect = min(float64(need)/(match*share), float64(scan)/(match*cand))
		index = sum*n/searchNarrowPerEntry + match*cand*n*searchNarrowPerMatch
		perSeq = sum/searchNarrowPerEntry + cand*(searchRangePerSeq+match*searchNarrowPerMatch)
	}
	walk := spent == 0 && 2*expect <= index
	if 4*expect*perSeq <= index && (perSeq < searchRangeVsWalk || !walk) {
		lo := max(0, (top-int64(2*expect)-1)>>searchBucketBits, (top-1)>>searchBucketBits-searchRangeBuckets+1) << searchBucketBits
		if c := float64(top-lo) * perSeq; spent+c <= index {
			return rangeStage, lo, c
		}
	}
	if walk {
		return walkStage, max(0, top-int64(index)-1), index
	}
	return indexStage, 0, 0
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
	var narrowed string // the index's condition on the audience, if any
	if plan.audience != nil {
		narrowed = ` AND ` + audienceCond(plan.audience, false)
	}
	return func(before int64, scan, need int) ([]int64, int64, error) {
		var seqs []int64
		var last int64                          // the last match examined so far
		top, below := plan.newest+1, before > 0 // below: only matches under top
		if below {
			top = before
		}
		var spent float64 // the stages' cost so far, in walked messages
		for i := 0; ; i++ {
			kind, lo, cost := plan.next(i, top, scan, need, spent)
			spent += cost
			var matches string
			bounds := ` AND seq < ` + strconv.FormatInt(top, 10) + ` AND seq >= ` + strconv.FormatInt(lo, 10)
			switch kind {
			case walkStage:
				// The function, not the operator: the GIN index cannot answer
				// it, so the plan is the key walk.
				matches = `SELECT seq FROM message WHERE ts_match_vq(fts, ` + search + `)` + bounds
				if plan.audience != nil {
					matches += ` AND ` + audienceCond(plan.audience, true)
				}
			case rangeStage:
				// One scan of the index for both conditions; the bounds are a
				// filter (seq + 0), or the planner ANDs the index's few
				// matches with a bitmap of the key's whole range (at 1M, 2-4
				// ms of a 10-12 ms range).
				matches = `SELECT seq FROM message WHERE fts @@ ` + search + narrowed + ` AND ` + bucketQuery(lo, top) +
					` AND seq + 0 < ` + strconv.FormatInt(top, 10) + ` AND seq + 0 >= ` + strconv.FormatInt(lo, 10)
			}
			if kind == indexStage {
				break
			}
			got, n, l, err := stage(matches+` ORDER BY seq DESC`, scan, need, false)
			seqs = append(seqs, got...)
			switch {
			case err != nil || len(got) == need:
				return seqs, 0, err
			case n > scan && scan == 0: // a stage before examined the last match it may
				return seqs, last, nil
			case n > scan:
				return seqs, l, nil
			case lo <= 1: // the stage reached the first message
				return seqs, 0, nil
			}
			scan, need, top, below = scan-n, need-len(got), lo, true
			if n > 0 {
				last = l
			}
		}
		matches := `SELECT seq FROM message WHERE fts @@ ` + search + narrowed
		if below {
			matches += ` AND seq < ` + strconv.FormatInt(top, 10)
		}
		order := ` ORDER BY seq DESC`
		if narrowed != "" {
			// Not the key walk: the planner prices the walk's filter per row
			// far too cheaply, and a narrowed search reaches the index only
			// when the caller's matches are sparse (a 45% word for agent-3
			// at 1M: 1.9 s down message_pkey, against a bitmap and a sort).
			order = ` ORDER BY seq + 0 DESC`
		}
		got, n, l, err := stage(matches+order, scan, need, false)
		seqs = append(seqs, got...)
		switch {
		case err != nil || len(got) == need:
			return seqs, 0, err
		case n > scan && scan == 0:
			return seqs, last, nil
		case n > scan:
			return seqs, l, nil
		}
		return seqs, 0, nil
	}
}
