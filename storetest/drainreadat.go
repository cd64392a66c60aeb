package storetest

import (
	"testing"

	"github.com/mailroom/mailroom"
)

// A drain's readAt is its receipt's snapshotAt, whichever way the store
// marks: the whole inbox (SQLite and PostgreSQL: a mark), through a
// watermark with more newer mail than it reads, and with archived unread
// mail at or below its end (both by rows), and with role mail.
func testDrainReadAtIsItsSnapshotAt(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	check := func(what string, rc mailroom.DrainReceipt, ids ...string) {
		t.Helper()
		e.sameReadAt(what, "bob", rc.SnapshotAt, ids...)
	}
	m := e.sends(3)
	check("the whole inbox", e.drainAll("bob", "", 3), m...)

	one := e.sends(1)
	p := e.list("bob", mailroom.ListInput{Limit: ptr(1)})
	newer := e.sends(3)
	check("through a watermark with more newer mail", e.drainAll("bob", *p.Watermark, 1), one...)
	check("the newer mail after it", e.drainAll("bob", "", 3), newer...)

	m = e.sends(3)
	if _, err := s.Archive(e.as("bob"), m[0]); err != nil {
		t.Fatal(err)
	}
	check("with archived unread mail", e.drainAll("bob", "", 2), m[1:]...)

	e.grant("bob", "ops")
	r := []string{e.send("alice", "role:ops").MessageID, e.send("alice", "@bob").MessageID, e.send("alice", "role:ops").MessageID}
	check("with roles", e.drainRoles("bob", "", 3), r...)
}
