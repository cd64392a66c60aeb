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
	// Every inbox row reached its reader by one route: the listings by
	// route (a store may read only the mailboxes that can hold a route)
	// split the inbox between them, rows and counts.
	for _, who := range []string{"bob", "carol"} {
		all := e.list(who, mailroom.ListInput{IncludeArchived: true, Limit: n(100)})
		by, total := map[string]string{}, 0
		routes := []string{mailroom.ViaDirect, mailroom.ViaBroadcast, mailroom.ViaRole}
		if who == "carol" { // another order: a store may keep one statement for two routes
			slices.Reverse(routes)
		}
		for _, via := range routes {
			p := e.list(who, mailroom.ListInput{Via: via, IncludeArchived: true, Limit: n(100)})
			total += p.TotalCount
			for _, r := range p.Messages {
				if other, ok := by[r.MessageID]; ok {
					t.Errorf("%s: %q listed via %s and via %s", who, r.Subject, other, via)
				}
				by[r.MessageID] = via
			}
		}
		for _, r := range all.Messages {
			if _, ok := by[r.MessageID]; !ok {
				t.Errorf("%s: %q is in the inbox but in no listing by route", who, r.Subject)
			}
		}
		if len(by) != len(all.Messages) || total != all.TotalCount || len(all.Messages) < 5 {
			t.Errorf("%s: listings by route hold %d rows, %d counted; the inbox %d rows, %d counted", who, len(by), total, len(all.Messages), all.TotalCount)
		}
	}
	// A listing by the reader's own address (to: @me, or the address
	// itself) holds the rows of the same listing whose recipients name the
	// reader, rows and count: a store may answer its inbox side from the
	// reader's direct mail (ListFilter.OwnersDirectMail). A message to everyone and
	// to bob reaches bob directly and carol as a broadcast; bob deleted a
	// message to him and to his role, which carol still sees by the role.
	e.send("alice", "*", "@bob")
	gone := e.send("alice", "@bob", "role:reviewer")
	if _, err := s.Delete(e.as("bob"), gone.MessageID); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"bob", "carol", "dana"} {
		self := "@" + who
		if who == "dana" {
			self = "human:dana"
		}
		for _, in := range []mailroom.ListInput{{}, {Box: "all"}, {Box: "outbox"}, {UnreadOnly: true}, {IncludeArchived: true},
			{ArchivedOnly: true}, {Via: mailroom.ViaDirect}, {Via: mailroom.ViaBroadcast}, {Via: mailroom.ViaRole, IncludeArchived: true},
			{Box: "all", IncludeArchived: true}, {Query: "subject"}} {
			in.Limit = n(100)
			want := []string{}
			for _, r := range e.list(who, in).Messages {
				if slices.Contains(r.To, self) {
					want = append(want, r.MessageID)
				}
			}
			if who == "bob" && in.Box == "" && in.Via == "" && len(want) == 0 {
				t.Fatalf("bob %+v: no row to him; the comparison checks nothing", in)
			}
			for _, to := range []string{"@me", self} {
				in.To = to
				p := e.list(who, in)
				if got := ids(p); !slices.Equal(got, want) || p.TotalCount != len(want) {
					t.Errorf("%s %+v: rows %v, totalCount %d; the rows to %s of the same listing are %v", who, in, got, p.TotalCount, self, want)
				}
				if in.Query == "" { // pages by cursor hold the same rows
					if n := e.walked(t, who, in); n != len(want) {
						t.Errorf("%s %+v: a walk by cursor returns %d rows, want %d", who, in, n, len(want))
					}
				}
			}
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

// testRoleCountsOfReadersWithoutCandidates: counts of role mail for
// readers with nothing of their own in their queues (no copies, sends or
// deletions, no mail to two of their roles: the counts' cheapest path),
// each then given one of those, which must count as the listing shows.
func testRoleCountsOfReadersWithoutCandidates(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.agent("erin")
	for _, g := range [][2]string{{"bob", "r1"}, {"bob", "r2"}, {"carol", "d1"}, {"erin", "h1"}} {
		if err := s.GrantRole(e.ctx, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	want := func(who string, total int, want ...string) {
		t.Helper()
		for _, in := range []mailroom.ListInput{{}, {UnreadOnly: true}, {Via: "role"}} {
			p := e.list(who, in)
			wantIDs(t, fmt.Sprintf("%s's listing %+v", who, in), ids(p), want...)
			if p.TotalCount != total {
				t.Fatalf("%s's listing %+v: totalCount %d, want %d", who, in, p.TotalCount, total)
			}
		}
	}
	// Mail to two roles bob holds shows and counts once.
	both := e.send("alice", "role:r1", "role:r2")
	want("bob", 1, both.MessageID)
	// Role mail carol deleted counts no more.
	d := e.send("alice", "role:d1")
	want("carol", 1, d.MessageID)
	if _, err := s.Delete(e.as("carol"), d.MessageID); err != nil {
		t.Fatal(err)
	}
	want("carol", 0)
	// erin's own role mail is not in her inbox, nor in its count.
	e.send("erin", "role:h1")
	want("erin", 0)
	h := e.send("alice", "role:h1")
	want("erin", 1, h.MessageID)
}
