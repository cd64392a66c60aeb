package storetest

import (
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// More role-queue cases of RunDrainEdges (session 7 review): the other
// views of drained role mail, archive and mark_unread of it by another
// holder before a second drain, messages to two roles in either order,
// and a handoff queue holding the drainer's own sends.

// viewedReadBy checks that every row of who's listing in shows readAt at
// and readBy reader for each id, and that each id is listed.
func (e *env) viewedReadBy(what, who, reader string, at time.Time, in mailroom.ListInput, ids ...string) {
	e.t.Helper()
	in.IncludeArchived = true
	in.Limit = ptr(100)
	rows := map[string]mailroom.Row{}
	for _, r := range e.list(who, in).Messages {
		rows[r.MessageID] = r
	}
	for _, id := range ids {
		r, ok := rows[id]
		if !ok {
			e.t.Fatalf("%s: %s's listing %+v lacks %s", what, who, in, id)
		}
		if r.ReadAt == nil || !r.ReadAt.Equal(at) || r.ReadBy == nil || *r.ReadBy != reader {
			e.t.Fatalf("%s: %s's listing %+v shows %s read at %v by %q, want %v by %s", what, who, in, id, r.ReadAt, deref(r.ReadBy), at, reader)
		}
	}
}

// Search, thread, route listings and get_message of drained role mail
// show the drain's readAt and reader to another holder; a retraction
// keeps them.
func testRoleDrainThenViews(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	first, err := e.trySend("alice", mailroom.SendInput{To: []string{"role:ops"}, Subject: "zebra crossing"})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := e.trySend("alice", mailroom.SendInput{To: []string{"role:ops"}, Subject: "zebra again", InReplyTo: first.MessageID})
	if err != nil {
		t.Fatal(err)
	}
	other := e.send("alice", "role:ops").MessageID
	q := []string{first.MessageID, reply.MessageID, other}
	e.drainRoles("bob", "", 3)
	at := *e.readAt("bob", q[0])
	m, err := s.Get(e.as("carol"), q[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []mailroom.ListInput{{}, {Query: "zebra"}, {ThreadID: m.ThreadID}, {Via: "role"}, {From: "@alice"}} {
		want := q
		if in.Query != "" || in.ThreadID != "" {
			want = q[:2]
		}
		e.viewedReadBy("after bob's drain", "carol", "@bob", at, in, want...)
		if in.ThreadID == "" && in.Query == "" {
			// A later page (by offset) reads its rows another way.
			off := in
			off.Offset = ptr(1)
			e.viewedReadBy("after bob's drain, a second page", "carol", "@bob", at, off, q[:2]...)
		}
		e.viewedReadBy("after bob's drain", "bob", "@bob", at, in, want...)
		in.UnreadOnly = true
		if p := e.list("carol", in); len(p.Messages) != 0 || p.TotalCount != 0 {
			t.Fatalf("carol's unread listing %+v after bob's drain: %v (%d)", in, ids(p), p.TotalCount)
		}
	}
	if _, err := s.Retract(e.as("alice"), q[1]); err != nil {
		t.Fatal(err)
	}
	e.readBy("retracted after the drain", "carol", "@bob", at, q...)
	e.unreadFor("retracted after the drain", "carol")
	e.unreadFor("retracted after the drain", "bob")
}

// Drained role mail archived and marked unread by another holder is
// archived unread mail for every holder: a second drain leaves it (and a
// store must not read it by a mark of the queue), and it shows unread
// once unarchived.
func testRoleDrainThenArchivedUnread(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.grant("bob", "ops")
	e.grant("carol", "ops")
	q := []string{e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID}
	e.drainRoles("bob", "", 3)
	at := *e.readAt("bob", q[0])
	if _, err := s.Archive(e.as("carol"), q[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkUnread(e.as("carol"), q[1]); err != nil {
		t.Fatal(err)
	}
	if r := e.readAt("bob", q[1]); r != nil {
		t.Fatalf("archived, then marked unread by carol: bob sees it read at %v", r)
	}
	e.readBy("the rest of bob's drain", "carol", "@bob", at, q[0], q[2])
	late := []string{e.send("alice", "role:ops").MessageID, e.send("alice", "role:ops").MessageID}
	e.unreadFor("archived unread, then new mail", "carol", newest(late...)...)
	e.drainRoles("carol", "", 2)
	second := *e.readAt("bob", late[0])
	e.readBy("carol's drain", "bob", "@carol", second, late...)
	e.readBy("bob's drain kept", "bob", "@bob", at, q[0], q[2])
	if r := e.readAt("carol", q[1]); r != nil {
		t.Fatalf("the second drain read archived unread role mail at %v", r)
	}
	if p := e.list("bob", mailroom.ListInput{ArchivedOnly: true, UnreadOnly: true}); len(p.Messages) != 1 || p.TotalCount != 1 {
		t.Fatalf("bob's archived unread after carol's drain: %v (%d)", ids(p), p.TotalCount)
	}
	if _, err := s.Unarchive(e.as("bob"), q[1]); err != nil {
		t.Fatal(err)
	}
	e.unreadFor("unarchived", "carol", q[1])
	e.unreadFor("unarchived", "bob", q[1])
	e.drainRoles("bob", "", 1)
	e.unreadFor("at the end", "carol")
}

// A message to two roles is shown through one delivery among the
// drainer's roles, in either order of the roles; the other delivery stays
// unread for the holders of that role alone. (Which delivery is the
// store's: SQLite's first in the message's order, PostgreSQL's of the
// role created first; they agree when the two orders do.)
func testRoleDrainTwoRolesEitherOrder(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.agent("erin")
	e.grant("bob", "ops", "dev")
	e.grant("carol", "dev")
	e.grant("erin", "ops")
	opsFirst := e.send("alice", "role:ops", "role:dev").MessageID
	devFirst := e.send("alice", "role:dev", "role:ops").MessageID
	dev := e.send("alice", "role:dev").MessageID
	ops := e.send("alice", "role:ops").MessageID
	tail := e.send("alice", "role:ops").MessageID
	e.drainRoles("bob", "", 5)
	at := *e.readAt("bob", ops)
	e.readBy("bob's drain, through dev", "carol", "@bob", at, dev)
	e.readBy("bob's drain, through ops", "erin", "@bob", at, opsFirst, ops, tail)
	e.unreadFor("after bob's drain", "bob")
	// devFirst: read through one role, unread through the other.
	readVia, unreadVia := "carol", "erin"
	if e.readAt("carol", devFirst) == nil {
		readVia, unreadVia = "erin", "carol"
	}
	e.readBy("bob's drain, the two-role message", readVia, "@bob", at, devFirst)
	if unreadVia == "carol" {
		e.unreadFor("after bob's drain", "carol", devFirst, opsFirst)
		e.unreadFor("after bob's drain", "erin")
	} else {
		e.unreadFor("after bob's drain", "carol", opsFirst)
		e.unreadFor("after bob's drain", "erin", devFirst)
	}
	e.drainRoles("carol", "", len(e.list("carol", mailroom.ListInput{UnreadOnly: true}).Messages))
	e.drainRoles("erin", "", len(e.list("erin", mailroom.ListInput{UnreadOnly: true}).Messages))
	for _, who := range []string{"bob", "carol", "erin"} {
		e.unreadFor("after every drain", who)
	}
	e.readBy("bob's drain kept", "erin", "@bob", at, opsFirst, ops, tail)
	e.readBy("bob's drain kept", "carol", "@bob", at, dev)
}

// A handoff queue (role:next-session-of-<agent>) shows its holder its own
// sends: its drain reads them with the rest, for every holder.
func testRoleDrainOwnHandoffs(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	const queue = "next-session-of-bob"
	e.grant("bob", queue)
	e.grant("carol", queue)
	q := []string{e.send("bob", "role:"+queue).MessageID, e.send("alice", "role:"+queue).MessageID, e.send("bob", "role:"+queue).MessageID}
	e.unreadFor("handoffs", "bob", newest(q...)...)
	e.drainRoles("bob", "", 3)
	at := *e.readAt("bob", q[0])
	e.readBy("bob's drain of his handoffs", "carol", "@bob", at, q...)
	e.unreadFor("after bob's drain", "carol")
	e.unreadFor("after bob's drain", "bob")
}
