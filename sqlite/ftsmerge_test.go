package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
)

// ftsStore opens a copy of a migrated empty store with hooks h, and the
// agents a0..a3.
func ftsStore(t *testing.T, h *sqlite.Hooks) (*sqlite.Store, []mailroom.Identity) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.db")
	benchstore.Empty(t, path)
	s := open(t, path, sqlite.Options{NoSync: true, Hooks: h})
	var ids []mailroom.Identity
	for i := range 4 {
		id, err := s.EnsureAgent(context.Background(), fmt.Sprintf("a%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return s, ids
}

// sendSingles sends n messages one by one (each writes a segment of the
// full-text index), from and to the agents in turn.
func sendSingles(t *testing.T, s *sqlite.Store, ids []mailroom.Identity, from, n int) {
	t.Helper()
	words := []string{"zeppelin", "harbor", "lantern", "quartz"}
	for i := from; i < from+n; i++ {
		to := "@" + ids[(i+1)%len(ids)].Name
		if i%5 == 0 {
			to = "*"
		}
		d, err := mailroom.SendInput{To: []string{to}, Subject: fmt.Sprintf("note %d", i), Body: words[i%len(words)] + " status " + words[(i/4)%len(words)]}.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:t"
		if _, err := s.Send(mailroom.WithCaller(context.Background(), ids[i%len(ids)]), d); err != nil {
			t.Fatal(err)
		}
	}
}

func segments(t *testing.T, s *sqlite.Store) []int {
	t.Helper()
	segs, err := sqlite.FTSSegments(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

func total(levels []int) int {
	n := 0
	for _, k := range levels {
		n += k
	}
	return n
}

// searches is what each agent's searches find: the pages' ids and totals.
func searches(t *testing.T, s *sqlite.Store, ids []mailroom.Identity) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		for _, q := range []string{"zeppelin", "status", "harbor lantern", "quartz"} {
			f, err := mailroom.ListInput{Query: q, Limit: ptr(5)}.Filter()
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.List(mailroom.WithCaller(context.Background(), id), f)
			if err != nil {
				t.Fatal(err)
			}
			line := fmt.Sprintf("%s %q total %d:", id.Name, q, p.TotalCount)
			for _, m := range p.Messages {
				line += " " + m.MessageID
			}
			out = append(out, line)
		}
	}
	return out
}

// The merger merges the one-page segments single sends leave (FTS5's own
// automerge would leave up to 15 of them in level 0 until 64 pages have
// been written), and searches find what they found before.
func TestFTSMergerMergesSendsSegments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, ids := ftsStore(t, &sqlite.Hooks{HoldMerge: true})
	sqlite.SetFTSMerge(s, 64, 1<<30) // no rebuild
	sendSingles(t, s, ids, 0, 12)
	before := segments(t, s)
	if total(before) < 8 {
		t.Fatalf("12 single sends left %v segments, want at least 8 for the test to mean anything", before)
	}
	want := searches(t, s, ids)
	steps := 0
	for ; steps < 100; steps++ {
		merged, err := sqlite.FTSMergeStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if !merged {
			break
		}
	}
	after := segments(t, s)
	if steps == 0 || total(after) >= total(before) {
		t.Fatalf("%d merge steps took the segments from %v to %v", steps, before, after)
	}
	for l, k := range after {
		if k >= 4 {
			t.Errorf("level %d holds %d segments after the merger finished: %v", l, k, after)
		}
	}
	if got := searches(t, s, ids); !slices.Equal(got, want) {
		t.Errorf("searches after the merge:\n%v\nbefore:\n%v", got, want)
	}
	if merged, err := sqlite.FTSMergeStep(ctx, s); err != nil || merged {
		t.Errorf("a step with nothing due merged (%v, %v)", merged, err)
	}
}

// Once the segments other than the largest hold an eighth of its pages,
// the merger merges the whole index into one segment.
func TestFTSMergerRebuildsTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, ids := ftsStore(t, &sqlite.Hooks{HoldMerge: true})
	sqlite.SetFTSMerge(s, 2, 1) // two pages a step: the rebuild takes several
	sendSingles(t, s, ids, 0, 40)
	if err := s.SendMany(mailroom.WithCaller(ctx, ids[1]), bulkDraft(t, "@a0", "harbor zeppelin bulk"), 300); err != nil {
		t.Fatal(err)
	}
	sendSingles(t, s, ids, 40, 6)
	before := segments(t, s)
	want := searches(t, s, ids)
	steps := 0
	for ; steps < 1000; steps++ {
		merged, err := sqlite.FTSMergeStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if !merged {
			break
		}
	}
	if after := segments(t, s); total(after) != 1 {
		t.Fatalf("after %d steps the index has segments %v (was %v), want one", steps, after, before)
	}
	if got := searches(t, s, ids); !slices.Equal(got, want) {
		t.Errorf("searches after the rebuild:\n%v\nbefore:\n%v", got, want)
	}
}

func bulkDraft(t *testing.T, to, body string) mailroom.Draft {
	t.Helper()
	d, err := mailroom.SendInput{To: []string{to}, Subject: "bulk", Body: body}.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	d.OriginSessionID = "SESSION:t"
	return d
}

// Sends wake the store's merger: with its poll an hour away, the segments
// of single sends are merged all the same.
func TestFTSMergerRunsAfterSends(t *testing.T) {
	t.Parallel()
	stepped := make(chan bool, 1000)
	s, ids := ftsStore(t, &sqlite.Hooks{FoldPoll: time.Hour, MergeStepped: func(merged bool) {
		select {
		case stepped <- merged:
		default: // never block the merger (Close waits for it)
		}
	}})
	sendSingles(t, s, ids, 0, 12)
	timeout := time.After(time.Minute)
	for merged := 0; ; {
		select {
		case m := <-stepped:
			if m {
				merged++
			}
		case <-timeout:
			t.Fatalf("no merge a minute after 12 sends (%d steps merged)", merged)
		}
		if merged > 0 && len(stepped) == 0 && segments(t, s)[0] < 4 {
			break
		}
	}
	if sqlite.FTSMerges(s) == 0 {
		t.Fatal("the merger never merged")
	}
}
