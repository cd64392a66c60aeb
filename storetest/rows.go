package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// ListingRowsAreTheMessages (part of Run) checks every column of listed rows against
// get_message's view of the same message, over listings that read their
// rows in different ways (first pages, offsets, cursors, searches, the
// outbox, role queues): senders of either kind, several recipients in
// their order, read state from single marks, drains and another role
// holder, archives and retractions.
func ListingRowsAreTheMessages(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	for _, who := range []string{"bob", "carol"} {
		if err := s.GrantRole(e.ctx, who, "reviewer"); err != nil {
			t.Fatal(err)
		}
	}
	mark := func(who string, id string) {
		t.Helper()
		if res := s.MarkRead(e.as(who), []string{id}); res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
	}
	three := e.send("alice", "@bob", "human:dana", "@carol")
	human := e.send("dana", "@bob")
	drained := e.send("carol", "@bob", "role:reviewer")
	if _, err := s.MarkAllRead(e.as("bob"), "", false); err != nil { // a read-through mark where the store has one
		t.Fatal(err)
	}
	byCarol := e.send("alice", "role:reviewer")
	mark("carol", byCarol.MessageID) // read by carol for bob too
	e.send("alice", "*")
	archived := e.send("alice", "@bob")
	if _, err := s.Archive(e.as("bob"), archived.MessageID); err != nil {
		t.Fatal(err)
	}
	mark("bob", e.send("dana", "@bob", "@alice").MessageID)
	retracted := e.send("alice", "@bob")
	if _, err := s.Retract(e.as("alice"), retracted.MessageID); err != nil {
		t.Fatal(err)
	}
	e.send("bob", "@alice", "human:dana")
	e.send("bob", "role:reviewer")
	e.send("alice", "role:next-session-of-bob")
	e.send("bob", "@bob")
	for i := range 4 {
		e.send([]string{"alice", "dana"}[i%2], "@bob", "role:reviewer")
	}
	unread := e.send("alice", "@bob")

	n := func(i int) *int { return &i }
	rows := map[string]mailroom.Row{}
	for _, r := range e.list("bob", mailroom.ListInput{Box: "all", IncludeArchived: true, Limit: n(100)}).Messages {
		rows[r.MessageID] = r
	}
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"three recipients in order", fmt.Sprint(rows[three.MessageID].To) == "[@bob human:dana @carol]" && rows[three.MessageID].From == "@alice"},
		{"a human sender", rows[human.MessageID].From == "human:dana" && rows[human.MessageID].ReadAt != nil},
		{"drained", rows[drained.MessageID].ReadAt != nil && rows[drained.MessageID].ReadBy == nil},
		{"read by another holder", rows[byCarol.MessageID].ReadAt != nil && rows[byCarol.MessageID].ReadBy != nil && *rows[byCarol.MessageID].ReadBy == "@carol"},
		{"archived", rows[archived.MessageID].ArchivedAt != nil},
		{"retracted", rows[retracted.MessageID].Retracted},
		{"unread", rows[unread.MessageID].ReadAt == nil && rows[unread.MessageID].From == "@alice" && fmt.Sprint(rows[unread.MessageID].To) == "[@bob]"},
	} {
		if !c.ok {
			t.Errorf("bob's listing: %s: wrong row", c.what)
		}
	}
	check := func(who string, in mailroom.ListInput) {
		t.Helper()
		p := e.list(who, in)
		if len(p.Messages) == 0 && who == "bob" {
			t.Fatalf("%s %+v: an empty page checks nothing", who, in)
		}
		for _, r := range p.Messages {
			m, err := s.Get(e.as(who), r.MessageID)
			if err != nil {
				t.Fatalf("%s %+v: get %s: %v", who, in, r.MessageID, err)
			}
			if d := rowDiff(r, m.Row); d != "" {
				t.Errorf("%s %+v: row %s (%s) differs from get_message: %s", who, in, r.MessageID, r.Subject, d)
			}
		}
	}
	for _, in := range []mailroom.ListInput{
		{},
		{UnreadOnly: true},
		{IncludeArchived: true},
		{ArchivedOnly: true},
		{Box: "all", IncludeArchived: true},
		{Box: "outbox"},
		{Limit: n(3), Offset: n(2)},
		{Box: "all", Limit: n(4), Offset: n(5)},
		{From: "human:dana"},
		{Via: "role"},
		{Query: "subject"},
		{Query: "subject", Box: "all", Limit: n(5), Offset: n(1)},
	} {
		for _, who := range []string{"bob", "carol", "dana", "alice"} {
			if who != "bob" && (in.ArchivedOnly || in.Via != "" || in.From != "") {
				continue // only bob has such mail
			}
			check(who, in)
		}
	}
	// Cursor pages of 3 over bob's whole mailbox.
	in := mailroom.ListInput{Box: "all", IncludeArchived: true, Limit: n(3)}
	for range 20 {
		check("bob", in)
		p := e.list("bob", in)
		if p.NextCursor == nil {
			return
		}
		c := string(*p.NextCursor)
		in.Cursor = &c
	}
	t.Fatal("cursor pages did not end")
}

// rowDiff says how two rows differ, or "".
func rowDiff(a, b mailroom.Row) string {
	ts := func(t *time.Time) string {
		if t == nil {
			return "nil"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	str := func(s *string) string {
		if s == nil {
			return "nil"
		}
		return *s
	}
	for _, c := range []struct{ what, x, y string }{
		{"subject", a.Subject, b.Subject},
		{"from", a.From, b.From},
		{"to", fmt.Sprint(a.To), fmt.Sprint(b.To)},
		{"priority", string(a.Priority), string(b.Priority)},
		{"sentAt", ts(&a.SentAt), ts(&b.SentAt)},
		{"readAt", ts(a.ReadAt), ts(b.ReadAt)},
		{"archivedAt", ts(a.ArchivedAt), ts(b.ArchivedAt)},
		{"threadId", a.ThreadID, b.ThreadID},
		{"retracted", fmt.Sprint(a.Retracted), fmt.Sprint(b.Retracted)},
		{"readBy", str(a.ReadBy), str(b.ReadBy)},
	} {
		if c.x != c.y {
			return fmt.Sprintf("%s %q, want %q", c.what, c.x, c.y)
		}
	}
	if a.To == nil || slices.Contains(a.To, "") {
		return fmt.Sprintf("to %q", a.To)
	}
	return ""
}
