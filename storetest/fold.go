package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// HeldFold is a store with read-through marks whose folder is held, and
// what the fold tests step it with (RunFold).
type HeldFold struct {
	Store mailroom.Store
	// Step folds one chunk of a mark; more says whether any is left.
	Step func(context.Context) (more bool, err error)
	// SetChunk sets how many deliveries a step writes.
	SetChunk func(n int)
	// Marks lists the marks left.
	Marks func(context.Context) ([]string, error)
	// MarkDrains counts the drains written as a mark; MarkDrainsOverNewer,
	// if set, those through a watermark with newer mail.
	MarkDrains, MarkDrainsOverNewer func() int
	// RoleMarkDrains counts the role queues' marks drains wrote.
	RoleMarkDrains func() int
	// Check asserts the store's own invariants (its counts against a
	// recount of its rows).
	Check func(t *testing.T, when string)
	// Reopen, which RunMarkDiff needs, closes the store and opens it
	// again on its database, the folder held, and returns the new one.
	Reopen func(t *testing.T) HeldFold
}

// RunFold runs the cases of a fold stepped by the test: a fold changes
// nothing anyone sees, whatever runs between its chunks.
func RunFold(t *testing.T, open func(t *testing.T) HeldFold) {
	t.Run("FoldInterleavedWithEveryOperation", func(t *testing.T) { testFoldInterleaved(t, open(t)) })
	t.Run("DrainThroughAWatermarkIsAPartialMark", func(t *testing.T) { testDrainThroughAWatermarkIsAPartialMark(t, open(t)) })
	t.Run("RoleFoldInterleavedWithEveryOperation", func(t *testing.T) { testRoleFoldInterleaved(t, open(t)) })
	t.Run("SecondRoleDrainLeavesTheFoldToTheFolder", func(t *testing.T) { testSecondRoleDrain(t, open(t)) })
	t.Run("DrainsOverAnUnfinishedMark", func(t *testing.T) { testDrainsOverAnUnfinishedMark(t, open(t)) })
	t.Run("WatermarksOverAnUnfinishedMark", func(t *testing.T) { testWatermarksOverAnUnfinishedMark(t, open(t)) })
	t.Run("WritesAroundAnUnfinishedMark", func(t *testing.T) { testWritesAroundAnUnfinishedMark(t, open(t)) })
	t.Run("DrainsWithTheFolderRunning", func(t *testing.T) { testDrainsWithTheFolderRunning(t, open(t)) })
	t.Run("RoleDrainsOverUnfinishedRoleMarks", func(t *testing.T) { testRoleDrainsOverUnfinishedRoleMarks(t, open(t)) })
}

// A role drain (a role mark, where the store has them), one fold step,
// then another holder's drain of the queue's one new message: that drain
// reads the new one by rows and leaves the first drain's mark as it was,
// for the folder; every message keeps the reader and readAt of the drain
// that read it, through the fold.
func testSecondRoleDrain(t *testing.T, h HeldFold) {
	e := newEnv(t, h.Store)
	h.SetChunk(3)
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	var first []string
	for range 10 {
		first = append(first, e.send("alice", "role:ops").MessageID)
	}
	rc := e.drainRoles("bob", "", 10)
	if _, err := h.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := h.marks(t)
	late := e.send("alice", "role:ops").MessageID
	rc2 := e.drainRoles("carol", "", 1)
	if now := h.marks(t); fmt.Sprint(now) != fmt.Sprint(before) {
		t.Fatalf("marks %v after the second drain, want %v", now, before)
	}
	h.Check(t, "after the second drain")
	at, at2 := rc.SnapshotAt, rc2.SnapshotAt // each drain's one readAt
	check := func(when string) {
		t.Helper()
		for _, who := range []string{"bob", "carol"} {
			e.readBy(when, who, "@bob", at, first...)
			e.readBy(when, who, "@carol", at2, late)
			e.unreadFor(when, who)
		}
	}
	bob := e.as("bob")
	check("under the mark")
	h.stepAll(t, bob, func(int) {})
	check("after the fold")
}

func (h HeldFold) marks(t *testing.T) []string {
	t.Helper()
	m, err := h.Marks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// View is everything who can see of read state: each message's readAt and
// archivedAt in a full listing (and get_message's readAt, which must
// agree), the counts, the inbox state and the unread listing.
func View(t *testing.T, s mailroom.Store, who context.Context) string {
	t.Helper()
	f, err := mailroom.ListInput{IncludeArchived: true, Limit: ptr(200)}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.List(who, f)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range p.Messages {
		m, err := s.Get(who, r.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(m.ReadAt) != fmt.Sprint(r.ReadAt) {
			t.Fatalf("%s: get says readAt %v, the listing %v", r.MessageID, m.ReadAt, r.ReadAt)
		}
		by, got := "-", "-"
		if r.ReadBy != nil {
			by = *r.ReadBy
		}
		if m.ReadBy != nil {
			got = *m.ReadBy
		}
		if got != by {
			t.Fatalf("%s: get says readBy %s, the listing %s", r.MessageID, got, by)
		}
		fmt.Fprintf(&b, "%s read %v by %s archived %v\n", r.MessageID, r.ReadAt, by, r.ArchivedAt)
	}
	st, err := s.Status(who)
	if err != nil {
		t.Fatal(err)
	}
	is, err := s.InboxState(who)
	if err != nil {
		t.Fatal(err)
	}
	uf, _ := mailroom.ListInput{UnreadOnly: true, IncludeArchived: true, Limit: ptr(200)}.Filter()
	u, err := s.List(who, uf)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "unread %+v archived %d oldest %v state %d %s listed %d %v", st.Unread, st.Archived, st.OldestUnreadAt, is.UnreadCount, is.Fingerprint, u.TotalCount, len(u.Messages))
	return b.String()
}

// stepAll folds h's marks step by step, checking that no step changes
// what bob sees, and returns the number of steps. before runs ahead of
// step i (an operation between chunks).
func (h HeldFold) stepAll(t *testing.T, bob context.Context, before func(i int)) int {
	t.Helper()
	return h.stepAllFor(t, []context.Context{bob}, before)
}

// stepAllFor is stepAll for what each of who sees.
func (h HeldFold) stepAllFor(t *testing.T, who []context.Context, before func(i int)) int {
	t.Helper()
	steps := 0
	view := func() string {
		var b strings.Builder
		for _, c := range who {
			b.WriteString(View(t, h.Store, c) + "\n")
		}
		return b.String()
	}
	for i := 0; ; i++ {
		before(i)
		was := view()
		more, err := h.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		steps++
		if now := view(); now != was {
			t.Fatalf("fold step %d changed what the readers see:\nbefore\n%s\nafter\n%s", steps, was, now)
		}
		h.Check(t, fmt.Sprintf("after fold step %d", steps))
		if !more {
			return steps
		}
	}
}

// A fold changes nothing anyone sees: every operation runs between the
// fold's chunks (4 deliveries each), and after each step what bob sees is
// what it was before the step, and counts match a recount.
func testFoldInterleaved(t *testing.T, h HeldFold) {
	ctx, s, e := context.Background(), h.Store, newEnv(t, h.Store)
	h.SetChunk(4)
	alice, bob := e.as("alice"), e.as("bob")
	var ids []string
	send := func() string {
		id := e.send("alice", "@bob").MessageID
		ids = append(ids, id)
		return id
	}
	for range 30 {
		send()
	}
	early := ids[3]
	if res := s.MarkRead(bob, []string{early}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	drain := func(want int) {
		t.Helper()
		rc, err := s.MarkAllRead(bob, "", false)
		if err != nil || rc.ReadCount != want || rc.DurableCount != want {
			t.Fatalf("drain: %+v %v, want %d", rc, err, want)
		}
	}
	drain(29)
	if m := h.marks(t); len(m) != 1 {
		t.Fatalf("marks %v, want bob's", m)
	}
	ops := []struct {
		name string
		do   func() error
	}{
		{"archive a covered message", func() error { _, err := s.Archive(bob, ids[10]); return err }},
		{"send", func() error { send(); return nil }},
		{"mark_read a covered message", func() error { return s.MarkRead(bob, []string{ids[20]})[0].Err }},
		{"unarchive", func() error { _, err := s.Unarchive(bob, ids[10]); return err }},
		{"delete a covered message", func() error { _, err := s.Delete(bob, ids[25]); return err }},
		{"retract", func() error { _, err := s.Retract(alice, ids[26]); return err }},
		{"archive an unfolded one", func() error { _, err := s.Archive(bob, ids[28]); return err }},
		{"mark_read the new one", func() error { return s.MarkRead(bob, []string{ids[30]})[0].Err }},
	}
	steps := h.stepAll(t, bob, func(i int) {
		if i < len(ops) {
			if err := ops[i].do(); err != nil {
				t.Fatalf("%s: %v", ops[i].name, err)
			}
		}
	})
	if steps < 8 {
		t.Fatalf("the fold took %d steps of 4 deliveries, want about 8", steps)
	}
	if m := h.marks(t); len(m) != 0 {
		t.Fatalf("marks left after the fold: %v", m)
	}
	// A drain and a partial fold, then operations that must fold first,
	// and a second drain, which must not.
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"mark_unread of a covered message", func() error { _, err := s.MarkUnread(bob, ids[5]); return err }},
		{"mark_unread of one read before the drain", func() error { _, err := s.MarkUnread(bob, early); return err }},
		{"a second drain", func() error { send(); drain(1); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send()
			st, err := s.Status(bob)
			if err != nil {
				t.Fatal(err)
			}
			drained := h.MarkDrains()
			drain(st.Unread.Total)
			if h.MarkDrains() == drained {
				t.Fatal("the drain was not a mark")
			}
			if _, err := h.Step(ctx); err != nil {
				t.Fatal(err)
			}
			before := h.marks(t)
			if len(before) != 1 {
				t.Fatalf("marks %v, want bob's, partly folded", before)
			}
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			h.Check(t, "after "+tc.name)
			now := h.marks(t)
			if tc.name == "a second drain" {
				// It reads its own new mail by rows and leaves the rest of
				// the first drain's mark to the folder, unfolded: a drain
				// pays for what it reads, not for an earlier drain's fold.
				if fmt.Sprint(now) != fmt.Sprint(before) {
					t.Fatalf("marks %v after a second drain, want the first one as it was: %v", now, before)
				}
				h.stepAll(t, bob, func(int) {})
				if m := h.marks(t); len(m) != 0 {
					t.Fatalf("marks left after the fold: %v", m)
				}
				return
			}
			if len(now) > 0 && fmt.Sprint(now) == fmt.Sprint(before) {
				t.Fatalf("the mark %v is left after a write that must fold it", now)
			}
			// Only a second drain leaves a mark: its own.
			if tc.name != "a second drain" && len(now) != 0 {
				t.Fatalf("a mark is left after a write that must fold it: %v", now)
			}
		})
	}
	// Purge everything under a partly folded mark: new mail (on SQLite,
	// reusing a purged seq) must arrive unread.
	send()
	drain(1)
	if _, err := h.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(ctx, mailroom.PurgeRequest{Before: time.Now().Add(24 * time.Hour), IncludeUnread: true}); err != nil {
		t.Fatal(err)
	}
	fresh := send()
	if m, err := s.Get(bob, fresh); err != nil || m.ReadAt != nil {
		t.Fatalf("mail after a purge under a mark: readAt %v %v", m.ReadAt, err)
	}
	if st, _ := s.Status(bob); st.Unread.Total != 1 {
		t.Fatalf("unread after purge %+v", st.Unread)
	}
	h.Check(t, "after the purge")
}

// A drain through a watermark with newer mail is a mark through the
// watermark: the newer mail, archived or not, stays unread and counted so
// while the fold writes the mark into the rows below it, chunk by chunk
// (3 deliveries each), and after it.
func testDrainThroughAWatermarkIsAPartialMark(t *testing.T, h HeldFold) {
	s, e := h.Store, newEnv(t, h.Store)
	h.SetChunk(3)
	bob := e.as("bob")
	e.sends(12)
	f, _ := mailroom.ListInput{Limit: ptr(5)}.Filter()
	p, err := s.List(bob, f)
	if err != nil {
		t.Fatal(err)
	}
	newer := e.sends(4)
	if _, err := s.Archive(bob, newer[1]); err != nil {
		t.Fatal(err)
	}
	rc, err := s.MarkAllRead(bob, *p.Watermark, false)
	if err != nil || rc.ReadCount != 12 || rc.DurableCount != 12 || h.MarkDrains() != 1 {
		t.Fatalf("drain through the watermark: %+v %v (by a mark: %d)", rc, err, h.MarkDrains())
	}
	if h.MarkDrainsOverNewer != nil && h.MarkDrainsOverNewer() != 1 {
		t.Fatalf("drains by a mark over newer mail: %d, want 1", h.MarkDrainsOverNewer())
	}
	unread := func(when string) {
		t.Helper()
		uf, _ := mailroom.ListInput{UnreadOnly: true, IncludeArchived: true}.Filter()
		u, err := s.List(bob, uf)
		if err != nil || u.TotalCount != 4 || len(u.Messages) != 4 {
			t.Fatalf("%s: unread %d %v", when, u.TotalCount, err)
		}
		for i, r := range u.Messages {
			if r.MessageID != newer[3-i] || r.ReadAt != nil {
				t.Fatalf("%s: unread row %d: %s read %v, want %s unread", when, i, r.MessageID, r.ReadAt, newer[3-i])
			}
		}
	}
	unread("under the mark")
	if steps := h.stepAll(t, bob, func(int) {}); steps != 5 { // 4 chunks, then a step that finds no mark
		t.Fatalf("the fold of 12 took %d steps of 3, want 5", steps)
	}
	if m := h.marks(t); len(m) != 0 {
		t.Fatalf("marks left after the fold: %v", m)
	}
	unread("after the fold")
}

// A role queue's fold changes nothing any holder sees: bob drains a queue
// he and carol hold (a role mark, the role's: his readAt and readBy for
// both), then every write of role read state runs between the fold's
// chunks (4 deliveries each), by either holder, and after each step what
// both see is what it was before the step, and counts match a recount.
// Then a write that must fold a partly folded role mark first: carol's
// mark_unread of a covered message (a second drain leaves it to the
// folder: SecondRoleDrainLeavesTheFoldToTheFolder).
func testRoleFoldInterleaved(t *testing.T, h HeldFold) {
	ctx, s, e := context.Background(), h.Store, newEnv(t, h.Store)
	h.SetChunk(4)
	alice, bob, carol := e.as("alice"), e.as("bob"), e.as("carol")
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	var ids []string
	send := func() string {
		id := e.send("alice", "role:ops").MessageID
		ids = append(ids, id)
		return id
	}
	for range 30 {
		send()
	}
	early := ids[3]
	if res := s.MarkRead(carol, []string{early}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	roleMarks := func() int {
		if h.RoleMarkDrains == nil {
			return 0
		}
		return h.RoleMarkDrains()
	}
	drain := func(who context.Context, want int) {
		t.Helper()
		was := roleMarks()
		rc, err := s.MarkAllRead(who, "", true)
		if err != nil || rc.ReadCount != want || rc.DurableCount != want {
			t.Fatalf("drain: %+v %v, want %d", rc, err, want)
		}
		if h.RoleMarkDrains != nil && roleMarks() == was {
			t.Fatal("the role drain wrote no role mark")
		}
	}
	drain(bob, 29)
	if m := h.marks(t); len(m) != 1 {
		t.Fatalf("marks %v, want the role's", m)
	}
	ops := []struct {
		name string
		do   func() error
	}{
		{"carol archives a covered message", func() error { _, err := s.Archive(carol, ids[10]); return err }},
		{"a send to the role", func() error { send(); return nil }},
		{"carol marks a covered message read", func() error { return s.MarkRead(carol, []string{ids[20]})[0].Err }},
		{"bob unarchives it", func() error { _, err := s.Unarchive(bob, ids[10]); return err }},
		{"carol deletes a covered message", func() error { _, err := s.Delete(carol, ids[25]); return err }},
		{"alice retracts one", func() error { _, err := s.Retract(alice, ids[26]); return err }},
		{"bob archives an unfolded one", func() error { _, err := s.Archive(bob, ids[28]); return err }},
		{"carol marks the new one read", func() error { return s.MarkRead(carol, []string{ids[30]})[0].Err }},
	}
	steps := h.stepAllFor(t, []context.Context{bob, carol}, func(i int) {
		if i < len(ops) {
			if err := ops[i].do(); err != nil {
				t.Fatalf("%s: %v", ops[i].name, err)
			}
		}
	})
	if steps < 8 {
		t.Fatalf("the fold took %d steps of 4 deliveries, want about 8", steps)
	}
	if m := h.marks(t); len(m) != 0 {
		t.Fatalf("marks left after the fold: %v", m)
	}
	for _, id := range ids[:30] {
		if id == ids[25] || id == early || id == ids[30] {
			continue
		}
		m, err := s.Get(bob, id)
		if err != nil || m.ReadAt == nil || m.ReadBy == nil || *m.ReadBy != "@bob" {
			t.Fatalf("%s after the fold: readAt %v readBy %v %v, want read by @bob", id, m.ReadAt, m.ReadBy, err)
		}
	}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"carol's mark_unread of a covered message", func() error { _, err := s.MarkUnread(carol, ids[5]); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send()
			st, err := s.Status(bob)
			if err != nil {
				t.Fatal(err)
			}
			drain(bob, st.Unread.Total)
			if _, err := h.Step(ctx); err != nil {
				t.Fatal(err)
			}
			before := h.marks(t)
			if len(before) != 1 {
				t.Fatalf("marks %v, want the role's, partly folded", before)
			}
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			h.Check(t, "after "+tc.name)
			now := h.marks(t)
			if len(now) > 0 && fmt.Sprint(now) == fmt.Sprint(before) {
				t.Fatalf("the mark %v is left after a write that must fold it", now)
			}
			if st, err := s.Status(carol); err != nil || st.Unread.Total != 1 {
				t.Fatalf("carol's unread after %s: %+v %v", tc.name, st.Unread, err)
			}
		})
	}
	h.Check(t, "at the end")
}
