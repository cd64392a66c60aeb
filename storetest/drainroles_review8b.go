package storetest

import (
	"testing"

	"github.com/mailroom/mailroom"
)

// A drain with roles through a listing's watermark, with role mail after
// it (some the drainer's own, which its inbox hides), then the drainer's
// role revoked and granted again: the queue's read state is the role's
// throughout, so the other holder sees the drain's messages read by the
// drainer at one readAt, and newer mail unread, whoever holds the role
// meanwhile. (review8b: on SQLite and PostgreSQL a role mark through the
// watermark, folded or not.)
func testRoleDrainThroughWatermarkThenRevoke(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	var q []string
	for range 4 {
		q = append(q, e.send("alice", "role:ops").MessageID)
	}
	wm := e.list("bob", mailroom.ListInput{Limit: ptr(1)}).Watermark
	own := e.send("bob", "role:ops").MessageID // hidden from bob's inbox
	later := e.send("alice", "role:ops").MessageID
	e.drainRoles("bob", *wm, 4)
	at := *e.readAt("carol", q[0])
	e.readBy("through the watermark", "carol", "@bob", at, q...)
	e.readBy("through the watermark", "bob", "@bob", at, q...)
	e.unreadFor("newer than the watermark", "carol", newest(own, later)...)
	e.unreadFor("newer than the watermark", "bob", later)
	if err := s.RevokeRole(e.ctx, "bob", "ops"); err != nil {
		t.Fatal(err)
	}
	e.readBy("bob's role revoked", "carol", "@bob", at, q...)
	e.unreadFor("bob's role revoked", "carol", newest(own, later)...)
	e.unreadFor("without the role", "bob")
	newer := e.send("alice", "role:ops").MessageID
	e.grant("bob", "ops")
	e.readBy("granted again", "bob", "@bob", at, q...)
	e.unreadFor("granted again", "bob", newest(later, newer)...)
	e.drainRoles("bob", "", 2)
	again := *e.readAt("carol", later)
	if !again.After(at) {
		t.Fatalf("the second drain's readAt %v is not after the first's %v", again, at)
	}
	e.readBy("the second drain", "carol", "@bob", again, later, newer)
	e.readBy("the second drain keeps the first's", "carol", "@bob", at, q...)
	e.unreadFor("the second drain", "carol", own)
	e.drainRoles("carol", "", 1)
	e.unreadFor("at the end", "carol")
	e.unreadFor("at the end", "bob")
}

// A drain without roles counts the role mail it leaves alone
// (withheldRoleCount); role mail another holder's drain read, by a role
// mark above the drain's watermark too, is not withheld. (review8b)
func testWithheldRoleCountBesideARoleDrain(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	p1 := e.send("alice", "@bob").MessageID
	e.send("alice", "role:ops")
	wm := e.list("bob", mailroom.ListInput{Limit: ptr(1)}).Watermark
	e.send("alice", "role:ops")
	e.send("alice", "role:ops")
	p2 := e.send("alice", "@bob").MessageID
	e.drainRoles("carol", "", 3)
	drain := func(what, through string, read, withheld int) {
		t.Helper()
		rc, err := s.MarkAllRead(e.as("bob"), through, false)
		if err != nil {
			t.Fatal(err)
		}
		if rc.ReadCount != read || rc.WithheldRoleCount != withheld {
			t.Fatalf("%s: bob's drain without roles: read %d withheld %d, want %d and %d", what, rc.ReadCount, rc.WithheldRoleCount, read, withheld)
		}
	}
	drain("through the watermark", *wm, 1, 0)
	if e.readAt("bob", p1) == nil || e.readAt("bob", p2) != nil {
		t.Fatalf("through the watermark: p1 read %v, p2 read %v", e.readAt("bob", p1), e.readAt("bob", p2))
	}
	q4 := e.send("alice", "role:ops").MessageID
	drain("the rest", "", 1, 1)
	e.unreadFor("at the end", "bob", q4)
}
