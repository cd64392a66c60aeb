package storetest

import (
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// RunDrainAfterTheClockSteppedBack runs the cases of a drain after the
// store's clock stepped back (wall clocks do: an NTP step, a VM restored
// from a snapshot), each on its own store and clock (Run calls it). Mail
// sent before the step carries times "later" than the clock now reads; a
// drain must still read every unread message it finds, whichever way the
// store marks it (rows, a read-through mark, through a watermark, with
// role queues), with a receipt that counts what it read, and single-id
// mark_read and mark_unread keep their rules.
func RunDrainAfterTheClockSteppedBack(t *testing.T, openAt Open) {
	for _, tc := range []struct {
		name string
		run  func(e *env, back func())
	}{
		{"ByRows", clockBackByRows},
		{"ByAMark", clockBackByAMark},
		{"ThroughAWatermarkWithMoreNewerMail", clockBackThroughAWatermarkWithMoreNewerMail},
		{"ThroughAWatermarkWithLessNewerMail", clockBackThroughAWatermarkWithLessNewerMail},
		{"WithRoles", clockBackWithRoles},
		{"WithRolesByRows", clockBackWithRolesByRows},
		{"WithoutRolesHeldByRows", clockBackWithoutRolesHeldByRows},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := NewClock()
			e := newEnv(t, openAt(t, c.Now))
			// Mail and a drain at T first, and one message of it made
			// unread and read again by id (which also leaves no
			// read-through mark of the drain for the cases to meet, or
			// not, by the folder's luck): the clock then steps back an
			// hour, behind every time stored so far.
			first := e.sends(2)
			e.drainAll("bob", "", len(first))
			if _, err := e.s.MarkUnread(e.as("bob"), first[0]); err != nil {
				t.Fatal(err)
			}
			if r := e.s.MarkRead(e.as("bob"), first[:1]); r[0].Err != nil {
				t.Fatal(r[0].Err)
			}
			tc.run(e, func() { c.Advance(-time.Hour) })
		})
	}
}

// steppedDrain checks a drain after the step: every id read at the
// receipt's snapshotAt (the contract's readAt), as who sees it.
func (e *env) steppedDrain(what, who string, rc mailroom.DrainReceipt, read ...string) {
	e.t.Helper()
	e.sameReadAt(what, who, rc.SnapshotAt, read...)
}

// singleIDsAfterTheStep checks mark_read and mark_unread of id (read by
// who's last drain) after the step: mark_unread makes it unread again,
// mark_read reads it at the clock's time and a second mark_read keeps
// that readAt, and mark_unread makes it unread once more. with and
// without are who's unread mail (newest first) with id unread and
// without it.
func (e *env) singleIDsAfterTheStep(who, id string, with, without []string) {
	e.t.Helper()
	if _, err := e.s.MarkUnread(e.as(who), id); err != nil {
		e.t.Fatal(err)
	}
	e.unreadFor("mark_unread after the step", who, with...)
	first := e.s.MarkRead(e.as(who), []string{id})[0]
	if first.Err != nil || first.Status != "read" || first.ReadAt == nil {
		e.t.Fatalf("mark_read after the step: %+v", first)
	}
	again := e.s.MarkRead(e.as(who), []string{id})[0]
	if again.Err != nil || again.ReadAt == nil || !again.ReadAt.Equal(*first.ReadAt) {
		e.t.Fatalf("mark_read again after the step: %+v, want the first readAt %v", again, first.ReadAt)
	}
	e.sameReadAt("mark_read after the step", who, *first.ReadAt, id)
	e.unreadFor("mark_read after the step", who, without...)
	if _, err := e.s.MarkUnread(e.as(who), id); err != nil {
		e.t.Fatal(err)
	}
	e.unreadFor("mark_unread again", who, with...)
}

// ByRows: archived unread mail at or below the drain's end makes a store
// mark rows (a mark would read the archived mail too); one message read
// one by one at T keeps its readAt.
func clockBackByRows(e *env, back func()) {
	pre := e.sends(4)
	if _, err := e.s.Archive(e.as("bob"), pre[0]); err != nil {
		e.t.Fatal(err)
	}
	early := e.s.MarkRead(e.as("bob"), []string{pre[1]})[0].ReadAt
	back()
	post := e.sends(2)
	rc := e.drainAll("bob", "", 4)
	e.steppedDrain("a drain by rows after the step", "bob", rc, pre[2], pre[3], post[0], post[1])
	e.sameReadAt("read one by one before the step", "bob", *early, pre[1])
	if r := e.readAt("bob", pre[0]); r != nil {
		e.t.Fatalf("archived unread mail was drained: readAt %v", r)
	}
	e.unreadFor("after the drain", "bob")
	e.singleIDsAfterTheStep("bob", pre[2], []string{pre[2]}, nil)
	e.steppedDrain("the message made unread, drained", "bob", e.drainAll("bob", "", 1), pre[2])
	e.drainAll("bob", "", 0)
	e.unreadFor("after the last drain", "bob")
}

// ByAMark: the whole inbox with nothing archived (a store may write a
// read-through mark), mail from before and after the step.
func clockBackByAMark(e *env, back func()) {
	pre := e.sends(3)
	back()
	post := e.sends(2)
	rc := e.drainAll("bob", "", 5)
	e.steppedDrain("a drain of the whole inbox after the step", "bob", rc, append(pre, post...)...)
	e.unreadFor("after the drain", "bob")
	e.singleIDsAfterTheStep("bob", pre[0], []string{pre[0]}, nil)
	e.steppedDrain("the message made unread, drained", "bob", e.drainAll("bob", "", 1), pre[0])
	e.unreadFor("after the last drain", "bob")
}

// ThroughAWatermarkWithMoreNewerMail: the drain reads less than the newer
// mail it leaves (a store marks rows); the watermark's mail is from before
// the step, the newer mail from after it.
func clockBackThroughAWatermarkWithMoreNewerMail(e *env, back func()) {
	pre := e.sends(1)
	wm := *e.list("bob", mailroom.ListInput{}).Watermark
	back()
	post := e.sends(3)
	rc := e.drainAll("bob", wm, 1)
	e.steppedDrain("a drain through the watermark after the step", "bob", rc, pre...)
	e.unreadFor("after the drain through the watermark", "bob", newest(post...)...)
	e.singleIDsAfterTheStep("bob", pre[0], append(newest(post...), pre[0]), newest(post...))
	rc = e.drainAll("bob", "", 4)
	e.steppedDrain("the rest", "bob", rc, append(pre, post...)...)
	e.unreadFor("after the last drain", "bob")
}

// ThroughAWatermarkWithLessNewerMail: the drain reads more than the newer
// mail it leaves (a store may write a mark), from both sides of the step;
// the newer mail is from after a second step.
func clockBackThroughAWatermarkWithLessNewerMail(e *env, back func()) {
	pre := e.sends(3)
	back()
	mid := e.sends(1)
	wm := *e.list("bob", mailroom.ListInput{}).Watermark
	// The newer mail: after a second step back.
	back()
	later := e.sends(1)
	rc := e.drainAll("bob", wm, 4)
	e.steppedDrain("a drain through the watermark after the step", "bob", rc, append(pre, mid...)...)
	e.unreadFor("after the drain through the watermark", "bob", later...)
	e.singleIDsAfterTheStep("bob", pre[1], []string{later[0], pre[1]}, later)
	rc = e.drainAll("bob", "", 2)
	e.steppedDrain("the rest", "bob", rc, pre[1], later[0])
	e.unreadFor("after the last drain", "bob")
}

// WithRoles: includeRoles over a role queue another agent holds too, with
// personal and role mail from both sides of the step.
func clockBackWithRoles(e *env, back func()) {
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	q := []string{e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID}
	own := e.sends(1)
	back()
	q = append(q, e.send("alice", "role:ops").MessageID)
	own = append(own, e.sends(1)...)
	rc := e.drainRoles("bob", "", 5)
	e.steppedDrain("a drain with roles after the step", "bob", rc, own...)
	e.readBy("a drain with roles after the step", "bob", "@bob", rc.SnapshotAt, q...)
	e.readBy("a drain with roles after the step, carol's view", "carol", "@bob", rc.SnapshotAt, q...)
	e.unreadFor("after the drain", "bob")
	e.unreadFor("after bob's drain", "carol")
	e.singleIDsAfterTheStep("bob", q[0], []string{q[0]}, nil)
	e.unreadFor("the role message bob made unread", "carol", q[0])
	rc = e.drainRoles("carol", "", 1)
	e.readBy("carol's drain", "bob", "@carol", rc.SnapshotAt, q[0])
	e.unreadFor("after carol's drain", "bob")
}

// WithRolesByRows: archived unread mail in the role queue and in the
// personal inbox makes a store mark both by rows.
func clockBackWithRolesByRows(e *env, back func()) {
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	q := []string{e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID}
	own := e.sends(2)
	for _, id := range []string{q[0], own[0]} {
		if _, err := e.s.Archive(e.as("bob"), id); err != nil {
			e.t.Fatal(err)
		}
	}
	back()
	q = append(q, e.send("alice", "role:ops").MessageID)
	own = append(own, e.sends(1)...)
	rc := e.drainRoles("bob", "", 5)
	e.steppedDrain("a drain with roles by rows after the step", "bob", rc, own[1:]...)
	e.readBy("a drain with roles by rows after the step", "carol", "@bob", rc.SnapshotAt, q[1:]...)
	for _, id := range []string{q[0], own[0]} {
		if r := e.readAt("bob", id); r != nil {
			e.t.Fatalf("archived unread mail %s was drained: readAt %v", id, r)
		}
	}
	e.unreadFor("after the drain", "bob")
	e.unreadFor("after bob's drain", "carol")
	e.singleIDsAfterTheStep("bob", q[1], []string{q[1]}, nil)
	e.drainRoles("bob", "", 1)
	e.unreadFor("after the last drain", "bob")
}

// WithoutRolesHeldByRows: a drain without includeRoles by a holder of a
// role, by rows (archived unread personal mail), reads the personal mail
// of both sides of the step and counts the role mail it leaves.
func clockBackWithoutRolesHeldByRows(e *env, back func()) {
	e.grant("bob", "ops")
	q := []string{e.send("alice", "role:ops").MessageID}
	pre := e.sends(3)
	if _, err := e.s.Archive(e.as("bob"), pre[0]); err != nil {
		e.t.Fatal(err)
	}
	back()
	q = append(q, e.send("alice", "role:ops").MessageID)
	post := e.sends(1)
	rc := e.drainAll("bob", "", 3)
	if rc.WithheldRoleCount != 2 {
		e.t.Fatalf("withheldRoleCount %d, want the 2 role messages", rc.WithheldRoleCount)
	}
	e.steppedDrain("a drain without roles after the step", "bob", rc, pre[1], pre[2], post[0])
	e.unreadFor("after the drain", "bob", newest(q...)...)
	e.singleIDsAfterTheStep("bob", pre[1], []string{q[1], pre[1], q[0]}, newest(q...))
	e.drainAll("bob", "", 1)
	e.unreadFor("after the last drain", "bob", newest(q...)...)
}
