package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/mailroom/mailroom"
)

// FTS5 keeps the full-text index as segments, in levels; every send
// writes a segment of its own. A search sets up each of its terms in
// every segment and steps each segment's doclists apart (measured at
// 1,000,000 messages, agent-5's `zeppelin` walk: the seeded index's 11
// segments 14.6M instructions, the same index in one segment 11.4M; a
// one-page segment ~65k). FTS5's automerge merges a level once it holds
// four segments, in budgeted steps inside whichever send writes the 64th
// leaf page since the last, so sends pay for it (a bulk-loaded store's
// unfinished merges cost the first ~5,000 sends ~1.5 ms of CPU each) and
// a level of one-page segments holds up to 16 meanwhile; and it keeps up
// to three large segments in the top levels.
//
// The store's merger runs FTS5's own incremental merge ('merge') off the
// request path, in background write transactions a step at a time: a
// level's segments as soon as it holds four (what automerge would do
// later, in some send), and all the segments into one once those beside
// the largest hold an eighth of its pages (rebuildDue).

// ftsMergePages is one merge step's budget in leaf pages written (FTS5's
// 'merge' command): a step over level 0 writes a page or two, a step of a
// large level's merge this many (~10-60 ms of CPU at 1,000,000 messages)
// and, since a step ends only between terms, once per merge the whole
// doclist of a word in every message (~750 pages, 0.2 s), so a waiting
// send waits for a step, not for the merge.
const ftsMergePages = 64

// ftsMergePace is how many times a merge step's time the merger waits
// before its next step.
const ftsMergePace = 3

// ftsUsermerge is FTS5's default usermerge (and automerge): the number of
// segments in a level that makes it worth merging.
const ftsUsermerge = 4

// ftsStructure is the segment count of each level of the full-text
// index, and of each level the number of its segments an unfinished
// merge is reading, from FTS5's structure record (fts5_index.c: a 4-byte
// cookie, optionally the v2 marker, varints nLevel, nSegment,
// nWriteCounter, then per level nMerge and nSeg and per segment its id,
// first and last page, and in v2 four more varints).
type ftsStructure struct {
	segs, merging []int
	pages         [][]int // each level's segments' sizes in leaf pages
}

// segments is the index's number of segments.
func (st ftsStructure) segments() int {
	n := 0
	for _, k := range st.segs {
		n += k
	}
	return n
}

// rebuildDue says whether the index is due a merge of all its segments
// into one: no merge is unfinished, and its segments other than the
// largest hold at least 1/ftsRebuildRatio of the largest's pages, and at
// least floor pages (a small index is cheap to search in any layout).
// FTS5's own merges keep up to three segments per level, the large ones
// too, and at 1,000,000 messages each large one costs a search ~0.3M
// instructions of its walk; merging them all once the rest has grown by
// an eighth of the largest rewrites the index once per that much new
// text (at 1,000,000 messages, ~28,000 pages every ~3,500 pages of new
// text, ~120,000 sends: ~0.25 pages, ~0.04 ms of CPU, per send).
func (st ftsStructure) rebuildDue(floor int) bool {
	largest, rest := 0, 0
	for l, ps := range st.pages {
		if st.merging[l] > 0 {
			return false
		}
		for _, p := range ps {
			rest += p
			largest = max(largest, p)
		}
	}
	rest -= largest
	return rest >= floor && rest*ftsRebuildRatio >= largest
}

// ftsRebuildRatio and ftsRebuildFloor are rebuildDue's bounds.
const (
	ftsRebuildRatio = 8
	ftsRebuildFloor = 256
)

// mergeDue says whether FTS5's 'merge' with usermerge min has work: an
// unfinished merge, or a level of at least min segments.
func (st ftsStructure) mergeDue(min int) bool {
	// As fts5IndexMerge chooses: the level with the most segments, up
	// to the first with a merge unfinished, which it takes only if it
	// reads more segments than any level before it holds.
	best := 0
	for i, k := range st.segs {
		if st.merging[i] > 0 {
			return st.merging[i] > best || best >= min
		}
		best = max(best, k)
	}
	return best >= min
}

var errFTSStructure = errors.New("full-text index structure record: unexpected format")

func decodeFTSStructure(b []byte) (ftsStructure, error) {
	var st ftsStructure
	if len(b) < 4 {
		return st, errFTSStructure
	}
	p := 4
	v2 := len(b) >= 8 && b[4] == 0xff && b[5] == 0 && b[6] == 0 && b[7] == 1
	if v2 {
		p = 8
	}
	bad := false
	next := func() uint64 {
		v, k := sqliteVarint(b[p:])
		if k == 0 {
			bad = true
			return 0
		}
		p += k
		return v
	}
	nLevel := next()
	next() // nSegment
	next() // nWriteCounter
	if bad || nLevel > 64 {
		return st, errFTSStructure
	}
	st.segs, st.merging, st.pages = make([]int, nLevel), make([]int, nLevel), make([][]int, nLevel)
	for l := range st.segs {
		st.merging[l] = int(next())
		st.segs[l] = int(next())
		if bad || st.segs[l] > 1<<16 {
			return st, errFTSStructure
		}
		for range st.segs[l] {
			next() // segment id
			first, last := next(), next()
			st.pages[l] = append(st.pages[l], int(last-first+1))
			if v2 {
				next()
				next()
				next()
				next()
				next()
			}
		}
	}
	if bad {
		return st, errFTSStructure
	}
	return st, nil
}

// sqliteVarint decodes SQLite's big-endian varint (up to 9 bytes, the
// last one whole); 0 bytes read for a truncated one.
func sqliteVarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 8; i++ {
		if i >= len(b) {
			return 0, 0
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	if len(b) < 9 {
		return 0, 0
	}
	return v<<8 | uint64(b[8]), 9
}

// ftsStructureOf reads the full-text index's structure; an index with no
// structure record yet (nothing indexed) has no levels.
func ftsStructureOf(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (ftsStructure, error) {
	st, _, err := ftsStructureRecord(ctx, q)
	return st, err
}

// ftsStructureRecord is ftsStructureOf with the record's bytes.
func ftsStructureRecord(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (ftsStructure, []byte, error) {
	var b []byte
	err := q.QueryRowContext(ctx, `SELECT block FROM message_fts_data WHERE id = 10`).Scan(&b)
	if isNoRows(err) {
		return ftsStructure{}, nil, nil
	} else if err != nil {
		return ftsStructure{}, nil, err
	}
	st, err := decodeFTSStructure(b)
	return st, b, err
}

// ftsMergeStep runs one budgeted step of FTS5's incremental merge in a
// background write transaction, if the index has one due, and reports
// whether it did any work (FTS5 changes two or more rows for a step that
// merged).
func (s *Store) ftsMergeStep(ctx context.Context) (more bool, err error) {
	// Asked first outside a write: a merger with nothing to do writes
	// nothing.
	st, record, err := ftsStructureRecord(ctx, s.db)
	unknown := errors.Is(err, errFTSStructure) // then FTS5's merge decides alone
	if err != nil && !unknown {
		return false, err
	}
	// A step that merged nothing is not tried again on the same index
	// (the record changes with every write to it): every step commits,
	// waking every other process's watcher, so an idle merger must not
	// repeat one, whether mergeDue misjudged FTS5's choice or the
	// record's format is unknown.
	if idle, _ := s.ftsIdle.Load().(string); idle != "" && idle == string(record) {
		return false, nil
	}
	pages := s.ftsMergePages
	switch {
	case unknown:
	case st.rebuildDue(s.ftsRebuildMin):
		// A negative budget makes all the segments one merge's inputs;
		// the steps after it go on with that merge.
		pages = -pages
	case !st.mergeDue(s.ftsMergeMin):
		return false, nil
	}
	start := time.Now()
	err = s.writeBackground(ctx, func(tx *ptx) error {
		var before, after int64
		if err := tx.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&before); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO message_fts (message_fts, rank) VALUES ('merge', ?)`, pages); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&after); err != nil {
			return err
		}
		more = after-before >= 2
		return nil
	})
	if more {
		s.ftsMerges.Add(1)
	} else if err == nil && record != nil {
		s.ftsIdle.Store(string(record))
	}
	if s.hooks.MergeStepped != nil && err == nil {
		s.hooks.MergeStepped(more)
	}
	if more && s.ftsMergePace > 0 {
		// A step cannot end inside a term's doclist (a word in every
		// message has ~750 pages of it at 1,000,000 messages), so one may
		// hold the write lock for 0.1-0.3 s: the next waits ftsMergePace
		// times as long, so that sends get the lock most of the time.
		select {
		case <-ctx.Done():
		case <-time.After(time.Since(start) * time.Duration(s.ftsMergePace)):
		}
	}
	return more, err
}

// wakeMerger tells the merger that a write may have left a segment.
func (s *Store) wakeMerger() {
	select {
	case s.mergeWake <- struct{}{}:
	default:
	}
}

// merge is the store's merger of the full-text index: woken by this
// process's sends, and every foldPoll for other processes' writes, it
// runs merge steps while one is due, until stopped (Close).
func (s *Store) merge(ctx context.Context) {
	defer close(s.mergeDone)
	// The index's own usermerge, if set (message_fts_config), is what
	// its 'merge' command asks of a level.
	var min int
	if err := s.db.QueryRowContext(ctx, `SELECT v FROM message_fts_config WHERE k = 'usermerge'`).Scan(&min); err == nil && min >= 2 {
		s.ftsMergeMin = min
	}
	every := foldPoll
	if s.hooks.FoldPoll > 0 {
		every = s.hooks.FoldPoll
	}
	mailroom.RunFolder(ctx, s.mergeWake, every, time.Second, s.ftsMergeStep, func(err error) {
		s.log.Warn("full-text index merge; retrying", "err", err)
	})
}
