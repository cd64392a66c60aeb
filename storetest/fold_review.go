package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// Review cases of RunFold (review8a): drains after a drain by a mark whose
// fold is unfinished, with more or less than a chunk left.

// drainsRead checks the readAt of each drain's messages: drains[i] read
// batches[i], each message at one instant of that drain (not before its
// snapshotAt, before the next drain's).
func (e *env) drainsRead(what string, drains []mailroom.DrainReceipt, batches [][]string) {
	e.t.Helper()
	for i, b := range batches {
		at := e.readAt("bob", b[0])
		if at == nil || at.Before(drains[i].SnapshotAt) || (i+1 < len(drains) && !at.Before(drains[i+1].SnapshotAt)) {
			e.t.Fatalf("%s: drain %d's %s read at %v, drains at %v", what, i, b[0], at, snapshots(drains))
		}
		e.sameReadAt(what, "bob", *at, b...)
	}
}

func snapshots(rcs []mailroom.DrainReceipt) []time.Time {
	out := make([]time.Time, len(rcs))
	for i, rc := range rcs {
		out[i] = rc.SnapshotAt
	}
	return out
}

// A drain by a mark (9 deliveries), then drains while its fold is
// unfinished, with chunks of 3: with 6 left, two drains each read their
// own new mail by rows and leave the mark as it was; with exactly a chunk
// (3) left, the next drain folds the rest and is a mark itself. Each
// message keeps the readAt of the drain that read it, through every fold
// step, and counts match a recount throughout.
func testDrainsOverAnUnfinishedMark(t *testing.T, h HeldFold) {
	e := newEnv(t, h.Store)
	h.SetChunk(3)
	bob := e.as("bob")
	var batches [][]string
	var drains []mailroom.DrainReceipt
	drain := func(n int) {
		t.Helper()
		batches = append(batches, e.sends(n))
		drains = append(drains, e.drainAll("bob", "", n))
		h.Check(t, fmt.Sprintf("after drain %d", len(drains)))
		e.unreadFor(fmt.Sprintf("after drain %d", len(drains)), "bob")
	}
	drain(9)
	if h.MarkDrains() != 1 {
		t.Fatalf("the first drain was not a mark (%d)", h.MarkDrains())
	}
	if _, err := h.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := h.marks(t)
	for range 2 {
		drain(2)
		if now := h.marks(t); fmt.Sprint(now) != fmt.Sprint(first) {
			t.Fatalf("marks %v after drain %d, want the first one as it was: %v", now, len(drains), first)
		}
		e.drainsRead(fmt.Sprintf("after drain %d", len(drains)), drains, batches)
	}
	if h.MarkDrains() != 1 {
		t.Fatalf("drains by a mark %d, want only the first", h.MarkDrains())
	}
	// 3 left of the first mark: at most a chunk, so the next drain folds it
	// and writes its own mark.
	if _, err := h.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	drain(1)
	if now := h.marks(t); len(now) != 1 || fmt.Sprint(now) == fmt.Sprint(first) {
		t.Fatalf("marks %v after a drain with a chunk of the first mark left, want a new one (was %v)", now, first)
	}
	if h.MarkDrains() != 2 {
		t.Fatalf("drains by a mark %d, want the first and the last", h.MarkDrains())
	}
	e.drainsRead("after the last drain", drains, batches)
	h.stepAll(t, bob, func(int) {})
	if m := h.marks(t); len(m) != 0 {
		t.Fatalf("marks left after the fold: %v", m)
	}
	e.drainsRead("after the fold", drains, batches)
	e.checkCounts(t, "bob", "after the fold")
}

// Drains through watermarks over an unfinished mark (chunks of 3, 6 of
// its 9 left): through a watermark the mark covers, nothing to read (a
// noop, the new mail stays unread); through one between the new mail, the
// new mail up to it and no more, archived unread mail after it left alone;
// then a whole drain, which cannot be a mark (archived unread mail in its
// range), reads the rest by rows and leaves the mark to the folder too.
func testWatermarksOverAnUnfinishedMark(t *testing.T, h HeldFold) {
	e := newEnv(t, h.Store)
	h.SetChunk(3)
	bob := e.as("bob")
	old := e.sends(9)
	w0 := e.list("bob", mailroom.ListInput{}).Watermark
	rc1 := e.drainAll("bob", "", 9)
	if _, err := h.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := h.marks(t)
	same := func(what string) {
		t.Helper()
		if now := h.marks(t); fmt.Sprint(now) != fmt.Sprint(first) {
			t.Fatalf("%s: marks %v, want the first one as it was: %v", what, now, first)
		}
		h.Check(t, what)
	}
	a := e.sends(2)
	w1 := e.list("bob", mailroom.ListInput{}).Watermark
	b := e.sends(3)
	if _, err := e.s.Archive(bob, b[0]); err != nil {
		t.Fatal(err)
	}
	e.drainAll("bob", *w0, 0)
	same("after a drain through a covered watermark")
	e.unreadFor("after a drain through a covered watermark", "bob", newest(append(append([]string{}, a...), b[1:]...)...)...)
	rc2 := e.drainAll("bob", *w1, 2)
	same("after a drain through the new mail")
	e.unreadFor("after a drain through the new mail", "bob", newest(b[1:]...)...)
	drains := []mailroom.DrainReceipt{rc1, rc2}
	e.drainsRead("after a drain through the new mail", drains, [][]string{old, a})
	if m, err := e.s.Get(bob, b[0]); err != nil || m.ReadAt != nil || m.ArchivedAt == nil {
		t.Fatalf("the archived unread one after the watermark: %+v %v", m.Row, err)
	}
	rc3 := e.drainAll("bob", "", 2)
	same("after a whole drain")
	e.unreadFor("after a whole drain", "bob")
	drains = append(drains, rc3)
	e.drainsRead("after a whole drain", drains, [][]string{old, a, b[1:]})
	h.stepAll(t, bob, func(int) {})
	e.drainsRead("after the fold", drains, [][]string{old, a, b[1:]})
	if m, err := e.s.Get(bob, b[0]); err != nil || m.ReadAt != nil || m.ArchivedAt == nil {
		t.Fatalf("the archived unread one after the fold: %+v %v", m.Row, err)
	}
	e.checkCounts(t, "bob", "after the fold")
}

// Writes under and above an unfinished mark (chunks of 3, 6 of its 9
// left) while later drains' rows sit above it: a mark_unread of a row a
// second drain read (above the mark) leaves the mark; a third drain reads
// that row again, by rows; archiving and unarchiving a covered row leaves
// it read at the first drain's instant; a mark_unread of a covered row
// folds the mark, and a last drain reads just that row. Every other row
// keeps its drain's readAt.
func testWritesAroundAnUnfinishedMark(t *testing.T, h HeldFold) {
	e := newEnv(t, h.Store)
	h.SetChunk(3)
	bob := e.as("bob")
	old := e.sends(9)
	rc1 := e.drainAll("bob", "", 9)
	if _, err := h.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := h.marks(t)
	same := func(what string) {
		t.Helper()
		if now := h.marks(t); fmt.Sprint(now) != fmt.Sprint(first) {
			t.Fatalf("%s: marks %v, want the first one as it was: %v", what, now, first)
		}
		h.Check(t, what)
	}
	a := e.sends(2)
	rc2 := e.drainAll("bob", "", 2)
	if _, err := e.s.MarkUnread(bob, a[0]); err != nil {
		t.Fatal(err)
	}
	same("after a mark_unread above the mark")
	e.unreadFor("after a mark_unread above the mark", "bob", a[0])
	rc3 := e.drainAll("bob", "", 1)
	same("after a third drain")
	e.drainsRead("after a third drain", []mailroom.DrainReceipt{rc1, rc2, rc3}, [][]string{old, a[1:], a[:1]})
	if _, err := e.s.Archive(bob, old[7]); err != nil {
		t.Fatal(err)
	}
	same("after archiving a covered row")
	if _, err := e.s.Unarchive(bob, old[7]); err != nil {
		t.Fatal(err)
	}
	same("after unarchiving it")
	e.unreadFor("after unarchiving a covered row", "bob")
	e.drainsRead("after unarchiving a covered row", []mailroom.DrainReceipt{rc1, rc2, rc3}, [][]string{old, a[1:], a[:1]})
	if _, err := e.s.MarkUnread(bob, old[8]); err != nil {
		t.Fatal(err)
	}
	if m := h.marks(t); len(m) != 0 {
		t.Fatalf("marks %v after a mark_unread of a covered row, want it folded", m)
	}
	h.Check(t, "after a mark_unread of a covered row")
	e.unreadFor("after a mark_unread of a covered row", "bob", old[8])
	rc4 := e.drainAll("bob", "", 1)
	drains := []mailroom.DrainReceipt{rc1, rc2, rc3, rc4}
	batches := [][]string{old[:8], a[1:], a[:1], old[8:]}
	e.drainsRead("after the last drain", drains, batches)
	h.stepAll(t, bob, func(int) {})
	e.drainsRead("after the fold", drains, batches)
	e.unreadFor("after the fold", "bob")
}

// Drains one after another while a folder steps the marks in its own
// goroutine (as the store's folder would, woken after each drain), with
// chunks of 2: so some drains meet a mark with more than a chunk left,
// some one with less, some none, and the fold may run between a drain's
// read and its write. Each drain reads exactly the mail sent since the
// last one (its receipt says so, counts from storage), each message is
// read at its drain's one instant, and counts match a recount.
func testDrainsWithTheFolderRunning(t *testing.T, h HeldFold) {
	e := newEnv(t, h.Store)
	h.SetChunk(2)
	bob := e.as("bob")
	kick, done := make(chan struct{}, 1), make(chan error, 1)
	go func() {
		for range kick {
			for {
				more, err := h.Step(context.Background())
				if err != nil {
					done <- err
					return
				}
				if !more {
					break
				}
			}
		}
		done <- nil
	}()
	var batches [][]string
	var drains []mailroom.DrainReceipt
	for i, n := range []int{20, 1, 3, 12, 2, 1, 9, 4, 1, 15, 2, 1} {
		batches = append(batches, e.sends(n))
		drains = append(drains, e.drainAll("bob", "", n))
		select {
		case kick <- struct{}{}:
		default:
		}
		if i%4 == 3 {
			e.drainsRead(fmt.Sprintf("after drain %d", i+1), drains, batches)
		}
	}
	close(kick)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.stepAll(t, bob, func(int) {})
	e.drainsRead("after the fold", drains, batches)
	e.unreadFor("after the fold", "bob")
	h.Check(t, "after the fold")
}

// kept lists the marks of before still in after.
func kept(before, after []string) []string {
	var out []string
	for _, m := range before {
		if slices.Contains(after, m) {
			out = append(out, m)
		}
	}
	return out
}

// Role drains over role marks (where the store has them), chunks of 3:
// bob drains ops (9) and dev (3); carol, holding both, drains one new
// message of each. ops's mark has more than a chunk left and stays for
// the folder (the new ops message is read by rows); dev's has exactly a
// chunk left, which carol's drain folds, writing its own. Every message
// keeps its drain's reader and readAt, through the fold.
func testRoleDrainsOverUnfinishedRoleMarks(t *testing.T, h HeldFold) {
	e := newEnv(t, h.Store)
	h.SetChunk(3)
	e.grant("bob", "ops", "dev")
	e.grant("carol", "ops", "dev")
	var ops, dev []string
	for range 9 {
		ops = append(ops, e.send("alice", "role:ops").MessageID)
	}
	for range 3 {
		dev = append(dev, e.send("alice", "role:dev").MessageID)
	}
	rc := e.drainRoles("bob", "", 12)
	before := h.marks(t)
	lateOps := e.send("alice", "role:ops").MessageID
	lateDev := e.send("alice", "role:dev").MessageID
	rc2 := e.drainRoles("carol", "", 2)
	after := h.marks(t)
	h.Check(t, "after the second drain")
	// Where role queues have marks: ops's stays as it was, dev's is
	// replaced by carol's.
	if len(before) > 0 && (len(before) != 2 || len(after) != 2 || len(kept(before, after)) != 1) {
		t.Fatalf("role marks %v after the second drain, want one of %v as it was and the other replaced", after, before)
	}
	at, at2 := *e.readAt("bob", ops[0]), *e.readAt("bob", lateOps)
	if at.Before(rc.SnapshotAt) || at2.Before(rc2.SnapshotAt) || !at.Before(rc2.SnapshotAt) {
		t.Fatalf("readAts %v and %v, drains at %v and %v", at, at2, rc.SnapshotAt, rc2.SnapshotAt)
	}
	check := func(when string) {
		t.Helper()
		for _, who := range []string{"bob", "carol"} {
			e.readBy(when, who, "@bob", at, append(append([]string{}, ops...), dev...)...)
			e.readBy(when, who, "@carol", at2, lateOps, lateDev)
			e.unreadFor(when, who)
		}
	}
	check("under the marks")
	h.stepAll(t, e.as("bob"), func(int) {})
	if m := h.marks(t); len(m) != 0 {
		t.Fatalf("marks left after the fold: %v", m)
	}
	check("after the fold")
}
