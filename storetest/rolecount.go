package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// testRoleCountEdges walks the role-mail cases a store that counts role
// queues (instead of counting the role branch) could get wrong, checking
// every count against a cursor walk after each: handoffs to one's own next
// session beside other held roles, implicit roles granted explicitly too,
// another agent holding one's successor role, a human holding a role and
// sending to it, role mail that is also broadcast, read grants onto a role
// holder, and drains with and without a watermark.
func testRoleCountEdges(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.agent("erin")
	people := []string{"alice", "bob", "carol", "erin", "dana"}
	check := func(when string) {
		t.Helper()
		for _, p := range people {
			e.checkCounts(t, p, when)
		}
		for _, in := range []mailroom.ListInput{{Of: "@bob", Via: mailroom.ViaRole, IncludeArchived: true}, {Of: "@bob", UnreadOnly: true},
			{Of: "@bob", ArchivedOnly: true}, {Of: "@bob", UnreadOnly: true, From: mailroom.AnyHuman}} {
			e.walked(t, "dana", in)
		}
	}
	for _, g := range [][2]string{{"bob", "triage"}, {"carol", "triage"}, {"carol", "oncall"}, {"dana", "triage"}} {
		if err := s.GrantRole(e.ctx, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.GrantReadInbox(e.ctx, "human:dana", "@bob"); err != nil {
		t.Fatal(err)
	}

	// A handoff to one's own next session, addressed after another role
	// the sender holds: it still reaches the sender's next session, once.
	handoff := e.send("bob", "role:triage", "role:next-session-of-bob")
	if _, ok := e.row("bob", handoff.MessageID, mailroom.ListInput{}); !ok {
		t.Error("bob's handoff to his next session, sent to role:triage too, is not in his inbox")
	}
	all := e.list("bob", mailroom.ListInput{Box: "all", Limit: ptr(200)})
	if n := slices.Index(ids(all), handoff.MessageID); n < 0 {
		t.Error("bob's handoff is in none of his boxes")
	}
	check("handoff after another held role")

	// Implicit roles granted explicitly as well: still one row a message.
	for _, r := range []string{"next-session", "next-session-of-bob"} {
		if err := s.GrantRole(e.ctx, "bob", r); err != nil {
			t.Fatal(err)
		}
	}
	next := e.send("alice", "role:next-session")
	own := e.send("alice", "role:next-session-of-bob", "role:next-session")
	got := ids(e.list("bob", mailroom.ListInput{UnreadOnly: true, Limit: ptr(200)}))
	for _, id := range []string{next.MessageID, own.MessageID} {
		if n := count(got, id); n != 1 {
			t.Errorf("bob, holding next-session by grant too, lists %s %d times", id, n)
		}
	}
	st, err := s.Status(e.as("bob"))
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, r := range st.Roles {
		held = append(held, r.Role)
	}
	if len(unique(slices.Clone(held))) != len(held) {
		t.Errorf("bob's status lists a role twice: %v", held)
	}
	check("implicit roles granted explicitly")

	// Another agent holds bob's successor role.
	if err := s.GrantRole(e.ctx, "carol", "next-session-of-bob"); err != nil {
		t.Fatal(err)
	}
	e.send("bob", "role:next-session-of-bob")
	e.send("bob", "role:next-session-of-bob", "role:oncall", "@carol")
	e.send("carol", "role:next-session-of-bob", "role:triage")
	check("another holder of bob's successor role")

	// A human holding a role sends to it, and to it and everyone.
	e.send("dana", "role:triage")
	e.send("dana", "role:triage", "*")
	e.send("alice", "role:triage", "*")
	e.send("alice", "role:triage", "role:oncall", "*")
	e.send("carol", "role:oncall", "role:triage", "*", "@me")
	check("role mail that is also broadcast")

	// State changes of role mail through each holder.
	for _, m := range e.list("carol", mailroom.ListInput{Via: mailroom.ViaRole, Limit: ptr(200)}).Messages[:4] {
		if res := s.MarkRead(e.as("carol"), []string{m.MessageID}); res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		if _, err := s.MarkUnread(e.as("bob"), m.MessageID); err != nil && mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
			t.Fatal(err)
		}
		if _, err := s.Archive(e.as("carol"), m.MessageID); err != nil {
			t.Fatal(err)
		}
	}
	check("role mail marked, unmarked and archived")
	for _, m := range e.list("carol", mailroom.ListInput{Via: mailroom.ViaRole, ArchivedOnly: true, Limit: ptr(200)}).Messages[:2] {
		if _, err := s.Unarchive(e.as("bob"), m.MessageID); err != nil && mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
			t.Fatal(err)
		}
		if _, err := s.Delete(e.as("carol"), m.MessageID); err != nil {
			t.Fatal(err)
		}
	}
	check("role mail unarchived and deleted")

	// Drains: the withheld role count is the unread role mail at or before
	// the watermark that a walk lists.
	var sent []string
	for i := range 12 {
		to := []string{"role:triage"}
		if i%3 == 0 {
			to = append(to, "@carol")
		}
		if i%4 == 0 {
			to = append(to, "role:oncall")
		}
		sent = append(sent, e.send([]string{"alice", "erin", "carol"}[i%3], to...).MessageID)
	}
	for _, who := range []string{"carol", "bob"} {
		for _, through := range []string{sent[7], sent[3], ""} {
			want := e.unreadRoleThrough(t, who, through, sent)
			rc, err := s.MarkAllRead(e.as(who), through, false)
			if err != nil {
				t.Fatal(err)
			}
			if rc.WithheldRoleCount != want {
				t.Errorf("%s: drain through %q: withheldRoleCount %d, a walk lists %d unread role messages up to it", who, through, rc.WithheldRoleCount, want)
			}
			check("drain of " + who + " through " + through)
		}
	}
	rc, err := s.MarkAllRead(e.as("carol"), sent[5], true)
	if err != nil || rc.WithheldRoleCount != 0 {
		t.Fatalf("drain with roles: %+v %v", rc, err)
	}
	check("drain with roles through a watermark")
	if _, err := s.MarkAllRead(e.as("bob"), "", true); err != nil {
		t.Fatal(err)
	}
	check("drain with roles")
	if err := s.RevokeRole(e.ctx, "carol", "triage"); err != nil {
		t.Fatal(err)
	}
	check("revoke")
}

// unreadRoleThrough is the number of unread, unarchived role messages a
// walk of who's inbox lists at or before through (all when ""), with sent
// in send order.
func (e *env) unreadRoleThrough(t *testing.T, who, through string, sent []string) int {
	t.Helper()
	in := mailroom.ListInput{UnreadOnly: true, Via: mailroom.ViaRole, Limit: ptr(40)}
	n := 0
	for {
		p := e.list(who, in)
		for _, r := range p.Messages {
			if through == "" || !slices.Contains(sent, r.MessageID) || slices.Index(sent, r.MessageID) <= slices.Index(sent, through) {
				n++
			}
		}
		if p.NextCursor == nil {
			return n
		}
		in.Cursor = p.NextCursor
	}
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// checkOldest compares who's oldestUnreadAt with the oldest row a cursor
// walk of the unread listing returns.
func (e *env) checkOldest(t *testing.T, who string, st mailroom.Status, when string) {
	t.Helper()
	in := mailroom.ListInput{UnreadOnly: true, Limit: ptr(40)}
	var oldest *time.Time
	for {
		p := e.list(who, in)
		if n := len(p.Messages); n > 0 {
			oldest = &p.Messages[n-1].SentAt
		}
		if p.NextCursor == nil {
			break
		}
		in.Cursor = p.NextCursor
	}
	if (oldest == nil) != (st.OldestUnreadAt == nil) || (oldest != nil && !oldest.Equal(*st.OldestUnreadAt)) {
		t.Errorf("%s: %s: oldestUnreadAt %v, the oldest row of a walk of its unread mail was sent at %v", when, who, st.OldestUnreadAt, oldest)
	}
}
