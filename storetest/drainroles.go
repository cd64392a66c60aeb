package storetest

import (
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// The role-queue cases of RunDrainEdges: a drain with includeRoles reads
// role mail for every holder of the role (a role delivery's read state is
// shared), so a store that drains a role queue by a read-through mark of
// the role (SQLite does) must show exactly what row marking would to every
// holder, present or granted later, and leave alone the role mail the
// drainer's own inbox hides.

// drainRoles drains who's inbox with its roles and checks the receipt.
func (e *env) drainRoles(who, through string, want int) mailroom.DrainReceipt {
	e.t.Helper()
	rc, err := e.s.MarkAllRead(e.as(who), through, true)
	if err != nil {
		e.t.Fatal(err)
	}
	status := "read"
	if want == 0 {
		status = "noop"
	}
	if rc.Status != status || rc.MatchedCount != want || rc.ReadCount != want || rc.FailureCount != 0 || rc.WithheldRoleCount != 0 {
		e.t.Fatalf("drain of %s with roles: receipt %+v, want %d read", who, rc, want)
	}
	if e.s.Durable() && rc.DurableCount != want {
		e.t.Fatalf("drain of %s with roles: durableCount %d, want %d", who, rc.DurableCount, want)
	}
	return rc
}

// grant grants each role to who.
func (e *env) grant(who string, roles ...string) {
	e.t.Helper()
	for _, r := range roles {
		if err := e.s.GrantRole(e.ctx, who, r); err != nil {
			e.t.Fatal(err)
		}
	}
}

// readBy checks who's view of each id: read at at by reader, in
// get_message and in a listing row.
func (e *env) readBy(what, who, reader string, at time.Time, ids ...string) {
	e.t.Helper()
	e.sameReadAt(what, who, at, ids...)
	for _, id := range ids {
		r, _ := e.row(who, id, mailroom.ListInput{IncludeArchived: true})
		m, err := e.s.Get(e.as(who), id)
		if err != nil {
			e.t.Fatal(err)
		}
		if r.ReadBy == nil || *r.ReadBy != reader || m.ReadBy == nil || *m.ReadBy != reader {
			e.t.Fatalf("%s: %s's view of %s: readBy listed %v, got %v, want %s", what, who, id, r.ReadBy, m.ReadBy, reader)
		}
	}
}

// unreadFor checks who's unread mail, everywhere it is counted or listed:
// the unread listing (rows and totalCount), status, the wake state and new
// mail with roles.
func (e *env) unreadFor(what, who string, want ...string) {
	e.t.Helper()
	p := e.list(who, mailroom.ListInput{UnreadOnly: true, Limit: ptr(100)})
	wantIDs(e.t, what+": "+who+"'s unread", ids(p), want...)
	if p.TotalCount != len(want) {
		e.t.Fatalf("%s: %s's unread totalCount %d, want %d", what, who, p.TotalCount, len(want))
	}
	if n := e.unread(who); n != len(want) {
		e.t.Fatalf("%s: %s's status unread %d, want %d", what, who, n, len(want))
	}
	if n := e.state(who).UnreadCount; n != len(want) {
		e.t.Fatalf("%s: %s's inbox state unread %d, want %d", what, who, n, len(want))
	}
	nm, err := e.s.NewMail(e.as(who), "", true, 100)
	if err != nil || len(nm.Messages) != len(want) {
		e.t.Fatalf("%s: %s's new mail %d %v, want %d", what, who, len(nm.Messages), err, len(want))
	}
	e.checkCounts(e.t, who, what)
}

// newest returns want in newest-first order (listings' order) from
// oldest-first ids.
func newest(list ...string) []string {
	out := make([]string, len(list))
	for i, id := range list {
		out[len(list)-1-i] = id
	}
	return out
}

func testRoleDrainIsSharedByHolders(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	var q []string
	for range 4 {
		q = append(q, e.send("alice", "role:ops").MessageID)
	}
	own := e.send("alice", "@bob").MessageID
	rc := e.drainRoles("bob", "", 5)
	at := *e.readAt("bob", q[0])
	if at.Before(rc.SnapshotAt) {
		t.Fatalf("readAt %v before the snapshot %v", at, rc.SnapshotAt)
	}
	e.sameReadAt("bob's drain", "bob", at, own)
	e.readBy("bob's drain", "bob", "@bob", at, q...)
	e.readBy("bob's drain, carol's view", "carol", "@bob", at, q...)
	e.unreadFor("after bob's drain", "carol")
	e.unreadFor("after bob's drain", "bob")
	// A role message after the drain is unread for both; carol's drain
	// reads it alone and keeps bob's.
	late := e.send("alice", "role:ops").MessageID
	e.unreadFor("after a new role message", "carol", late)
	e.unreadFor("after a new role message", "bob", late)
	if r := e.readAt("bob", late); r != nil {
		t.Fatalf("a role message after the drain shows read at %v", r)
	}
	e.drainRoles("carol", "", 1)
	second := *e.readAt("bob", late)
	if !second.After(at) {
		t.Fatalf("carol's drain's readAt %v not after bob's %v", second, at)
	}
	e.readBy("carol's drain", "bob", "@carol", second, late)
	e.readBy("bob's drain kept", "carol", "@bob", at, q...)
	e.drainRoles("bob", "", 0)
	e.unreadFor("after both drains", "bob")
	e.unreadFor("after both drains", "carol")
}

func testRoleDrainThenGrant(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.grant("bob", "ops")
	q := []string{e.send("alice", "role:ops").MessageID, e.send("carol", "role:ops").MessageID, e.send("alice", "role:ops").MessageID}
	e.drainRoles("bob", "", 3)
	at := *e.readAt("bob", q[0])
	// A holder granted the role after the drain finds its queue read.
	e.agent("erin")
	e.grant("erin", "ops")
	e.readBy("granted after the drain", "erin", "@bob", at, q...)
	e.unreadFor("granted after the drain", "erin")
	fresh := e.send("alice", "role:ops").MessageID
	e.unreadFor("granted after the drain, then a new message", "erin", fresh)
	e.unreadFor("bob, then a new message", "bob", fresh)
	// A revoked holder no longer sees the role; granted again, the same.
	if err := s.RevokeRole(e.ctx, "erin", "ops"); err != nil {
		t.Fatal(err)
	}
	e.unreadFor("revoked", "erin")
	e.grant("erin", "ops")
	e.readBy("granted again", "erin", "@bob", at, q...)
	e.unreadFor("granted again", "erin", fresh)
}

// Role mail the drainer's inbox hides (its own sends to the role, copies
// it also got personally, messages it deleted, a second role's delivery of
// a message it sees through another role) stays unread for the holders who
// see it.
func testRoleDrainLeavesHiddenRoleMail(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.agent("erin")
	e.grant("bob", "ops")
	e.grant("carol", "ops", "dev")
	e.grant("erin", "dev")
	plain := e.send("alice", "role:ops").MessageID
	sentByBob := e.send("bob", "role:ops").MessageID
	copied := e.send("alice", "@bob", "role:ops").MessageID
	deleted := e.send("alice", "role:ops").MessageID
	if _, err := s.Delete(e.as("bob"), deleted); err != nil {
		t.Fatal(err)
	}
	both := e.send("alice", "role:ops", "role:dev").MessageID
	plain2 := e.send("alice", "role:ops").MessageID
	// bob's inbox: plain, copied (personally), both (through ops), plain2.
	e.drainRoles("bob", "", 4)
	at := *e.readAt("bob", plain)
	e.readBy("bob's drain", "carol", "@bob", at, plain, both, plain2)
	e.sameReadAt("bob's personal copy", "bob", at, copied)
	e.unreadFor("after bob's drain", "bob")
	// carol sees the ops deliveries bob's inbox hid, unread.
	e.unreadFor("after bob's drain", "carol", newest(sentByBob, copied, deleted)...)
	// erin sees both through dev, whose delivery bob's drain did not read.
	e.unreadFor("after bob's drain", "erin", both)
	// carol's drain: ops (through which she sees both) and dev, whose
	// delivery of both her inbox hides behind the ops one.
	e.drainRoles("carol", "", 3)
	e.unreadFor("after carol's drain", "erin", both)
	e.unreadFor("after carol's drain", "carol")
	e.unreadFor("after carol's drain", "bob")
	e.drainRoles("erin", "", 1)
	e.unreadFor("after erin's drain", "erin")
	e.unreadFor("after erin's drain", "carol")
	// Hidden mail amid a queue bob sees: his own send between others'.
	// (A store may read what precedes it by a mark, the rest row by row.)
	var seen []string
	for range 3 {
		seen = append(seen, e.send("alice", "role:ops").MessageID)
	}
	own := e.send("bob", "role:ops").MessageID
	seen = append(seen, e.send("alice", "role:ops").MessageID)
	e.drainRoles("bob", "", 4)
	again := *e.readAt("bob", seen[0])
	e.readBy("bob's drain around his own send", "carol", "@bob", again, seen...)
	e.unreadFor("bob's drain around his own send", "carol", own)
	e.unreadFor("bob's drain around his own send", "bob")
}

func testRoleDrainThenMarkUnread(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	q := []string{e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID}
	e.drainRoles("bob", "", 3)
	at := *e.readAt("bob", q[0])
	// A single-id mark of a drained role message keeps its readAt and
	// reader.
	res := s.MarkRead(e.as("carol"), []string{q[0]})
	if res[0].ReadAt == nil || !res[0].ReadAt.Equal(at) {
		t.Fatalf("carol's mark_read of drained role mail: %+v, want readAt %v", res[0], at)
	}
	e.readBy("marked again by carol", "bob", "@bob", at, q[0])
	// carol's mark_unread is every holder's.
	if _, err := s.MarkUnread(e.as("carol"), q[1]); err != nil {
		t.Fatal(err)
	}
	e.unreadFor("after carol's mark_unread", "bob", q[1])
	e.unreadFor("after carol's mark_unread", "carol", q[1])
	if r := e.readAt("bob", q[1]); r != nil {
		t.Fatalf("mark_unread left readAt %v", r)
	}
	e.readBy("the others keep the drain", "carol", "@bob", at, q[0], q[2])
	// An archive of drained role mail, by the other holder.
	if _, err := s.Archive(e.as("carol"), q[2]); err != nil {
		t.Fatal(err)
	}
	e.readBy("archived after the drain", "bob", "@bob", at, q[2])
	e.unreadFor("after the archive", "bob", q[1])
	if _, err := s.Unarchive(e.as("bob"), q[2]); err != nil {
		t.Fatal(err)
	}
	e.readBy("unarchived", "carol", "@bob", at, q[2])
	res = s.MarkRead(e.as("bob"), []string{q[1]})
	if res[0].ReadAt == nil || !res[0].ReadAt.After(at) {
		t.Fatalf("mark_read after mark_unread: %+v", res[0])
	}
	e.readBy("read again", "carol", "@bob", *res[0].ReadAt, q[1])
	e.drainRoles("carol", "", 0)
	e.unreadFor("at the end", "carol")
}

func testRoleDrainThenPurge(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	for range 3 {
		e.send("alice", "role:ops")
	}
	e.drainRoles("bob", "", 3)
	fresh := e.send("alice", "role:ops")
	cut := fresh.SentAt.Add(time.Microsecond)
	dry, err := s.Purge(e.ctx, mailroom.PurgeRequest{Before: cut, DryRun: true})
	if err != nil || dry.Messages != 3 || dry.Kept != 1 {
		t.Fatalf("dry run: drained role mail is read, the fresh one unread: %+v %v", dry, err)
	}
	rep, err := s.Purge(e.ctx, mailroom.PurgeRequest{Before: cut})
	if err != nil || rep.Messages != 3 || rep.Kept != 1 {
		t.Fatalf("purge of read role mail: %+v %v", rep, err)
	}
	e.unreadFor("after purging drained role mail", "carol", fresh.MessageID)
	// Drain again, purge everything: role mail after it is unread
	// whatever it is numbered.
	e.drainRoles("carol", "", 1)
	rep, err = s.Purge(e.ctx, mailroom.PurgeRequest{Before: cut, IncludeUnread: true})
	if err != nil || rep.Messages != 1 {
		t.Fatalf("purge of everything: %+v %v", rep, err)
	}
	after := []string{e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID}
	e.unreadFor("role mail after the purge", "bob", newest(after...)...)
	e.unreadFor("role mail after the purge", "carol", newest(after...)...)
	e.drainRoles("bob", "", 2)
	e.unreadFor("drained after the purge", "carol")
}

// An archived unread role message is not drained (the single-id rule:
// a drain reads unarchived mail), nor is role mail after the watermark.
func testRoleDrainLeavesArchivedAndNewer(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	q := []string{e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID}
	if _, err := s.Archive(e.as("carol"), q[1]); err != nil {
		t.Fatal(err)
	}
	e.drainRoles("bob", "", 2)
	if r := e.readAt("carol", q[1]); r != nil {
		t.Fatalf("the drain read archived role mail at %v", r)
	}
	if p := e.list("carol", mailroom.ListInput{ArchivedOnly: true, UnreadOnly: true}); len(p.Messages) != 1 || p.TotalCount != 1 {
		t.Fatalf("carol's archived unread: %v (%d)", ids(p), p.TotalCount)
	}
	e.unreadFor("archived unread left", "carol")
	if _, err := s.Unarchive(e.as("carol"), q[1]); err != nil {
		t.Fatal(err)
	}
	e.unreadFor("unarchived", "bob", q[1])
	// Through a watermark, with role mail after it, archived at times.
	wm := e.list("bob", mailroom.ListInput{Limit: ptr(1)}).Watermark
	newer := []string{e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID}
	if _, err := s.Archive(e.as("bob"), newer[0]); err != nil {
		t.Fatal(err)
	}
	e.drainRoles("bob", *wm, 1)
	e.unreadFor("through the watermark", "carol", newer[1])
	if r := e.readAt("carol", newer[0]); r != nil {
		t.Fatalf("archived newer role mail read at %v", r)
	}
	e.readBy("through the watermark", "carol", "@bob", *e.readAt("bob", q[1]), q[1])
	if _, err := s.Unarchive(e.as("bob"), newer[0]); err != nil {
		t.Fatal(err)
	}
	e.unreadFor("at the end", "carol", newest(newer...)...)
	e.drainRoles("carol", "", 2)
	e.unreadFor("at the end", "bob")
}
