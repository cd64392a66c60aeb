package sqlite_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

func longBody(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s%d ", prefix, i)
	}
	return b.String()
}

// stalledRebuild leaves the store at path with a rebuild of the index
// unfinished at a level above level 0, and two new segments in level 0:
// FTS5's 'merge' picks the level with the most segments before the first
// level with a merge unfinished, so with 2 in level 0 and the rebuild's 2
// inputs above, a positive 'merge' (usermerge 4) does nothing.
func stalledRebuild(t *testing.T) (*sqlite.Store, []mailroom.Identity) {
	t.Helper()
	ctx := context.Background()
	s, ids := ftsStore(t, &sqlite.Hooks{HoldMerge: true})
	sqlite.SetFTSMerge(s, 2, 1<<30) // no rebuild yet
	for range 4 {
		if err := s.SendMany(mailroom.WithCaller(ctx, ids[1]), bulkDraft(t, "@a0", longBody("w", 200)), 75); err != nil {
			t.Fatal(err)
		}
	}
	for {
		m, err := sqlite.FTSMergeStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if !m {
			break
		}
	}
	if err := s.SendMany(mailroom.WithCaller(ctx, ids[1]), bulkDraft(t, "@a0", longBody("w", 200)), 60); err != nil {
		t.Fatal(err)
	}
	sqlite.SetFTSMerge(s, 2, 1)
	if m, err := sqlite.FTSMergeStep(ctx, s); err != nil || !m {
		t.Fatalf("the rebuild's first step: merged %v, %v", m, err)
	}
	sendSingles(t, s, ids, 0, 2)
	segs, merging, _, err := sqlite.FTSStructure(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 2 || segs[0] != 2 || merging[0] != 0 || total(merging) == 0 {
		t.Fatalf("not the stalled state the test needs: segments %v, merging %v", segs, merging)
	}
	return s, ids
}

// A merge step that merges nothing writes nothing: each such step is a
// write transaction (the file's write lock, a change-log row, an fsync,
// a data_version bump that wakes every other process's watcher), and the
// merger runs one on every poll (foldPoll, 2 s) while the structure says
// a merge is unfinished. Found: with a rebuild unfinished above level 0
// and 2 segments in level 0, FTS5's 'merge' picks neither, so an idle
// store writes a change-log row every 2 s, in every process, until
// enough sends arrive for level 0 to reach 4 segments.
func TestFTSMergerStepThatMergesNothingWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := stalledRebuild(t)
	before, err := sqlite.ChangeLogRows(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m, err := sqlite.FTSMergeStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if m { // stalledRebuild checked the state in which FTS5 merges nothing
			t.Fatalf("step %d merged: FTS5 continued the stalled rebuild", i)
		}
	}
	after, err := sqlite.ChangeLogRows(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	segs, merging, _, _ := sqlite.FTSStructure(ctx, s)
	if after != before {
		t.Errorf("3 merge steps that merged nothing (segments %v, merging %v) committed %d write transactions (change-log rows %d -> %d)", segs, merging, after-before, before, after)
	}
}

// The merger does not repeat a step that merged nothing on the same
// index, even where it misjudges FTS5's choice (here: told a level of 1
// segment is worth merging, which FTS5's usermerge of 4 is not): one write,
// then none until the index changes.
func TestFTSMergerDoesNotRepeatAStepThatMergedNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, ids := stalledRebuild(t)
	sqlite.SetFTSMergeMin(s, 1)
	before, err := sqlite.ChangeLogRows(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if m, err := sqlite.FTSMergeStep(ctx, s); err != nil || m {
			t.Fatalf("step %d: merged %v, %v", i, m, err)
		}
	}
	after, err := sqlite.ChangeLogRows(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 1 {
		t.Errorf("3 steps that merged nothing committed %d writes, want 1 (the first)", after-before)
	}
	// A send changes the index: the merger looks again.
	sendSingles(t, s, ids, 0, 1)
	before = after
	if _, err := sqlite.FTSMergeStep(ctx, s); err != nil {
		t.Fatal(err)
	}
	if after, err = sqlite.ChangeLogRows(ctx, s); err != nil || after-before < 2 {
		t.Errorf("after a send: %d change-log rows (the send's and a step's), %v", after-before, err)
	}
}
