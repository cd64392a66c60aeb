package storetest

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// testSearchIsBounded: a search examines at most its scan bound of word
// matches and counts at most its count bound of rows, says when its total
// is a lower bound, and its cursor carries on where it stopped, so a cursor
// walk still returns every match once. It runs with small bounds (the
// filter carries them) so that a few hundred sends cross them.
func testSearchIsBounded(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	b := mailroom.SearchBounds{Scan: 60, Count: 20}
	list := func(who string, in mailroom.ListInput) mailroom.Page {
		t.Helper()
		f, err := in.Filter()
		if err != nil {
			t.Fatal(err)
		}
		f.SearchBounds = b
		p, err := s.List(e.as(who), f)
		if err != nil {
			t.Fatalf("list for %s: %v", who, err)
		}
		return p
	}
	seed := func(to, body string, n int) []string {
		t.Helper()
		var ids []string
		for range n {
			r, err := e.trySend("alice", mailroom.SendInput{To: strings.Split(to, ","), Body: body})
			if err != nil {
				t.Fatal(err)
			}
			ids = append([]string{r.MessageID}, ids...) // newest first
		}
		return ids
	}
	// Oldest first: bob's harbor mail, then more harbor mail than one
	// search examines, to carol and to bob, who archives his copies (so
	// his searches examine them and show none); then lanterns past the
	// count bound.
	harbor := seed("@bob", "the harbor at dawn", 5)
	for _, id := range seed("@carol,@bob", "the harbor at noon", b.Scan) {
		if _, err := s.Archive(e.as("bob"), id); err != nil {
			t.Fatal(err)
		}
	}
	lanterns := seed("@bob", "a lantern in the window", b.Count+5)
	seed("@bob", "a rare comet", 3)

	p := list("bob", mailroom.ListInput{Query: "comet"})
	if p.TotalCount != 3 || !p.TotalCountExact || len(p.Messages) != 3 || p.NextCursor != nil {
		t.Fatalf("a search with few matches: total %d exact %v, %d rows, nextCursor %v; want 3, exact, 3 rows, none",
			p.TotalCount, p.TotalCountExact, len(p.Messages), p.NextCursor)
	}
	if p := list("bob", mailroom.ListInput{}); !p.TotalCountExact || p.TotalCount != 5+b.Count+5+3 {
		t.Fatalf("a listing without query counts exactly: %d exact %v", p.TotalCount, p.TotalCountExact)
	}

	lim := 10
	p = list("bob", mailroom.ListInput{Query: "lantern", Limit: &lim})
	if p.TotalCount != b.Count || p.TotalCountExact || len(p.Messages) != 10 ||
		p.NextOffset == nil || *p.NextOffset != 10 || p.NextCursor == nil {
		t.Fatalf("past the count bound: total %d exact %v, %d rows, nextOffset %v; want %d as a lower bound, 10 rows, nextOffset 10 and a cursor",
			p.TotalCount, p.TotalCountExact, len(p.Messages), p.NextOffset, b.Count)
	}
	wantIDs(t, "the lantern search by offset", ids(p), lanterns[:10]...)
	if p := list("bob", mailroom.ListInput{Query: "lantern", Limit: &lim, Offset: ptr(20)}); len(p.Messages) != 5 || p.TotalCount != 25 || !p.TotalCountExact {
		// A page past the count bound is served: the walk counts as deep
		// as the page (20 + 10 rows), which here is past the last match.
		t.Fatalf("offset 20: %d rows, total %d exact %v; want 5, 25, exact", len(p.Messages), p.TotalCount, p.TotalCountExact)
	}
	// Paging by nextOffset goes past the count bound too: a lower-bound
	// total never ends the pages while rows follow.
	var byOffset []string
	for off := 0; ; {
		p := list("bob", mailroom.ListInput{Query: "lantern", Limit: &lim, Offset: ptr(off)})
		byOffset = append(byOffset, ids(p)...)
		if p.NextOffset == nil {
			break
		}
		if *p.NextOffset != off+len(p.Messages) || len(byOffset) > len(lanterns) {
			t.Fatalf("nextOffset %d after a page of %d at %d", *p.NextOffset, len(p.Messages), off)
		}
		off = *p.NextOffset
	}
	wantIDs(t, "the lantern search by nextOffset", byOffset, lanterns...)
	wantIDs(t, "the lantern search by cursor", walkSearch(t, list, "bob", mailroom.ListInput{Query: "lantern", Limit: &lim}), lanterns...)

	// Every harbor match within one search's scan is archived for bob: his
	// first page is empty, says its total is only a lower bound, and its
	// cursor leads on to his five.
	p = list("bob", mailroom.ListInput{Query: "harbor"})
	if len(p.Messages) != 0 || p.TotalCount != 0 || p.TotalCountExact || p.NextCursor == nil || p.NextOffset != nil {
		t.Fatalf("a scan that stopped short: %d rows, total %d exact %v, nextCursor %v, nextOffset %v; want none, 0 as a lower bound, a cursor, no offset",
			len(p.Messages), p.TotalCount, p.TotalCountExact, p.NextCursor, p.NextOffset)
	}
	next := list("bob", mailroom.ListInput{Query: "harbor", Cursor: p.NextCursor})
	wantIDs(t, "the page after the scan", ids(next), harbor...)
	if next.NextCursor != nil {
		t.Fatalf("the last page has a nextCursor")
	}
	if got := walkSearch(t, list, "carol", mailroom.ListInput{Query: "harbor", Limit: &lim}); len(got) != b.Scan {
		t.Fatalf("carol's harbor walk returned %d rows, want %d", len(got), b.Scan)
	}
	// Other filters apply within the walk: a tag nobody has, a thread.
	if p := list("bob", mailroom.ListInput{Query: "comet", TaggedConcepts: []string{"topic a", "topic b"}}); p.TotalCount != 0 || !p.TotalCountExact {
		t.Fatalf("a search with tags no message has: %d exact %v, want 0, exact", p.TotalCount, p.TotalCountExact)
	}
	if p := list("bob", mailroom.ListInput{Query: "comet", Priority: "high"}); p.TotalCount != 0 || !p.TotalCountExact {
		t.Fatalf("a search for high-priority comets: %d exact %v, want 0, exact", p.TotalCount, p.TotalCountExact)
	}
	// The outbox is searched too, and nobody else's mail is: dana sees none.
	if p := list("alice", mailroom.ListInput{Box: "outbox", Query: "comet"}); p.TotalCount != 3 || !p.TotalCountExact {
		t.Fatalf("alice's outbox search: %d exact %v, want 3", p.TotalCount, p.TotalCountExact)
	}
	if got := walkSearch(t, list, "dana", mailroom.ListInput{Query: "harbor", Limit: &lim}); len(got) != 0 {
		t.Fatalf("dana found %d messages she was never sent", len(got))
	}
}

// testSearchOffsetPastTheScan: an offset past the rows a stopped scan found
// is an error naming the offset and how to go on (the rows at that
// position lie below the scan: an empty page would pass over them); at
// exactly the rows found the page is empty and its cursor carries on; past
// the end of a search that examined every match the page is the last.
func testSearchOffsetPastTheScan(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	b := mailroom.SearchBounds{Scan: 30, Count: 10}
	list := func(in mailroom.ListInput) (mailroom.Page, error) {
		f, err := in.Filter()
		if err != nil {
			t.Fatal(err)
		}
		f.SearchBounds = b
		return s.List(e.as("bob"), f)
	}
	for _, m := range []struct {
		to, body string
		n        int
	}{{"@bob", "the harbor at dawn", 4}, {"@bob", "the harbor at noon", b.Scan}, {"@bob", "the harbor at dusk", 3}, {"@bob", "a comet", 2}} {
		for range m.n {
			r, err := e.trySend("alice", mailroom.SendInput{To: []string{m.to}, Body: m.body})
			if err != nil {
				t.Fatal(err)
			}
			// bob's search reaches the noon mail; his inbox does not show
			// what he archived.
			if strings.HasSuffix(m.body, "noon") {
				if _, err := s.Archive(e.as("bob"), r.MessageID); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// The scan's 30 newest harbor matches hold bob's 3 at dusk.
	if _, err := list(mailroom.ListInput{Query: "harbor", Offset: ptr(4)}); mailroom.ErrorCode(err) != mailroom.EINVALID ||
		!strings.HasPrefix(err.Error(), "offset 4 is past the 3 rows this search found") {
		t.Fatalf("offset 4 past a stopped scan of 3 rows: %v", err)
	}
	p, err := list(mailroom.ListInput{Query: "harbor", Offset: ptr(3)})
	if err != nil || len(p.Messages) != 0 || p.TotalCountExact || p.NextCursor == nil || p.NextOffset != nil {
		t.Fatalf("offset 3, at the rows found: %+v %v; want an empty page, a lower bound and a cursor", p, err)
	}
	if p, err = list(mailroom.ListInput{Query: "harbor", Cursor: p.NextCursor}); err != nil || len(p.Messages) != 4 || p.NextCursor != nil {
		t.Fatalf("its cursor page: %d rows %v, nextCursor %v; want bob's 4 at dawn, the last page", len(p.Messages), err, p.NextCursor)
	}
	if p, err = list(mailroom.ListInput{Query: "comet", Offset: ptr(5)}); err != nil || len(p.Messages) != 0 || !p.TotalCountExact || p.TotalCount != 2 || p.NextCursor != nil {
		t.Fatalf("offset 5 past a search that examined every match: %+v %v; want an empty last page of an exact 2", p, err)
	}
}

// walkSearch pages a search by cursor until nextCursor is null and returns
// the row ids, failing on a repeat. Unlike env.walk it allows a page with
// fewer rows than the limit, even none, before the end.
func walkSearch(t *testing.T, list func(string, mailroom.ListInput) mailroom.Page, who string, in mailroom.ListInput) []string {
	t.Helper()
	var got []string
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("cursor paging does not end")
		}
		p := list(who, in)
		for _, r := range p.Messages {
			if seen[r.MessageID] {
				t.Fatalf("page %d repeats %s", page, r.MessageID)
			}
			seen[r.MessageID] = true
			got = append(got, r.MessageID)
		}
		if p.NextCursor == nil {
			return got
		}
		in.Offset, in.Cursor = nil, p.NextCursor
	}
}

// SearchFindsWhatListingsShow: a search for a word every message holds
// returns exactly the rows the same listing without the word returns, for
// every route a message takes into a mailbox (direct, broadcast, a role
// queue, a handoff to one's own next session, one's own sends, a read
// grant) and for each box, after deletes, archives, a role granted once
// its mail was sent, a role revoked, a retract, and for an identity made
// after mail to the shared next-session queue and a broadcast were sent. A store that narrows a search's candidates by who a
// message reaches must not narrow them below the listing.
func SearchFindsWhatListingsShow(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	e.agent("erin")
	for _, g := range [][2]string{{"bob", "triage"}, {"carol", "triage"}} {
		if err := s.GrantRole(e.ctx, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.GrantReadInbox(e.ctx, "human:dana", "@bob"); err != nil {
		t.Fatal(err)
	}
	n := 0
	send := func(from string, to ...string) string {
		t.Helper()
		n++
		r, err := e.trySend(from, mailroom.SendInput{To: to, Subject: "note", Body: "the kestrel " + strconv.Itoa(n)})
		if err != nil {
			t.Fatalf("send from %s to %v: %v", from, to, err)
		}
		return r.MessageID
	}
	send("alice", "@bob")
	send("alice", "*")
	send("alice", "role:triage")
	send("bob", "role:triage")
	send("bob", "role:next-session-of-bob")
	send("alice", "human:dana")
	send("carol", "@bob", "role:triage", "*")
	send("dana", "@bob", "@erin")
	send("bob", "@me")
	send("erin", "role:oncall", "@alice")
	gone := send("alice", "@bob", "@carol")
	shelved := send("carol", "@bob")
	if _, err := s.Delete(e.as("bob"), gone); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Archive(e.as("bob"), shelved); err != nil {
		t.Fatal(err)
	}
	if res := s.MarkRead(e.as("carol"), []string{gone}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	// Mail sent to a role before erin holds it reaches her once she does.
	if err := s.GrantRole(e.ctx, "erin", "oncall"); err != nil {
		t.Fatal(err)
	}
	send("bob", "role:oncall")
	// The shared next-session queue and a broadcast reach fay, made after
	// both were sent, only through the queue (the broadcast had no
	// delivery for her); the second broadcast reaches her. A role
	// revoked after its mail was sent hides that mail again; a human's
	// broadcast reaches every agent.
	send("alice", "role:next-session")
	send("bob", "*")
	e.agent("fay")
	send("carol", "*", "@fay", "role:next-session")
	send("dana", "*")
	if err := s.GrantRole(e.ctx, "alice", "oncall"); err != nil {
		t.Fatal(err)
	}
	send("carol", "role:oncall", "@alice")
	send("erin", "role:oncall")
	if err := s.RevokeRole(e.ctx, "erin", "oncall"); err != nil {
		t.Fatal(err)
	}
	if err := s.GrantReadInbox(e.ctx, "@fay", "@erin"); err != nil {
		t.Fatal(err)
	}
	// A retracted message no longer holds the word: the search leaves out
	// what the listing shows of it.
	retracted := send("alice", "@bob", "@fay")
	if _, err := s.Retract(e.as("alice"), retracted); err != nil {
		t.Fatal(err)
	}
	if fay := ids(e.list("fay", mailroom.ListInput{})); len(fay) != 4 {
		t.Fatalf("fay's inbox holds %d messages, want 4 (the next-session queue's two, two broadcasts and carol's, the retracted one): %v", len(fay), fay)
	}

	lim := 200
	for _, who := range []string{"alice", "bob", "carol", "dana", "erin", "fay"} {
		ins := []mailroom.ListInput{{}, {Box: "all"}, {Box: "outbox"}, {IncludeArchived: true}, {Box: "all", IncludeArchived: true},
			{Via: mailroom.ViaRole}, {Via: "broadcast"}, {Via: "direct"}, {UnreadOnly: true}, {ArchivedOnly: true}}
		if who == "fay" {
			ins = append(ins, mailroom.ListInput{Of: "@erin"}, mailroom.ListInput{Of: "@erin", Via: "broadcast"})
		}
		if who == "dana" {
			ins = append(ins, mailroom.ListInput{Of: "@bob"}, mailroom.ListInput{Of: "@bob", IncludeArchived: true})
		}
		for _, in := range ins {
			in.Limit = &lim
			wantp := e.list(who, in)
			all := ids(wantp)
			want := slices.DeleteFunc(slices.Clone(all), func(id string) bool { return id == retracted })
			wantTotal := wantp.TotalCount - (len(all) - len(want)) // a retraction has no words
			in.Query = "kestrel"
			gotp := e.list(who, in)
			got := ids(gotp)
			if !slices.Equal(got, want) {
				t.Errorf("%s: list_messages(%+v) returns %v, without the query %v", who, in, got, want)
			}
			// And counts them alike (a store may test a match by a
			// shortcut of the listing's rule; the page's rows may still
			// be read by the rule itself).
			if gotp.TotalCount != wantTotal || !gotp.TotalCountExact {
				t.Errorf("%s: list_messages(%+v) counts %d (exact %v), without the query %d", who, in, gotp.TotalCount, gotp.TotalCountExact, wantTotal)
			}
		}
	}
}

// SearchForgetsRetractedAndPurgedMail: a search finds none of a retracted
// message's old words, none of a deleted message, and after a purge none
// of the purged mail's words, not even in mail sent after the purge (a
// store that reuses the purged messages' keys must have dropped their
// index entries); rows and totals agree.
func SearchForgetsRetractedAndPurgedMail(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	send := func(from string, to []string, body string) string {
		t.Helper()
		r, err := e.trySend(from, mailroom.SendInput{To: to, Subject: "note", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return r.MessageID
	}
	search := func(who, box, q string, want ...string) {
		t.Helper()
		p := e.list(who, mailroom.ListInput{Box: box, IncludeArchived: true, Query: q})
		if got := ids(p); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) || p.TotalCount != len(want) || !p.TotalCountExact {
			t.Fatalf("%s searches %s for %q: %v, total %d (exact %v); want %v", who, box, q, got, p.TotalCount, p.TotalCountExact, want)
		}
	}
	kept := send("alice", []string{"@bob"}, "a zebra in the yard")
	retracted := send("alice", []string{"@bob", "role:triage"}, "a zebra at the gate")
	deleted := send("carol", []string{"@bob", "*"}, "a zebra on the roof")
	newest := send("alice", []string{"@bob"}, "a zebra by the door")
	if _, err := s.Retract(e.as("alice"), retracted); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(e.as("bob"), deleted); err != nil {
		t.Fatal(err)
	}
	search("bob", "all", "zebra", newest, kept)
	search("bob", "all", "gate")
	search("alice", "outbox", "zebra", newest, kept)
	search("carol", "all", "zebra", deleted)

	if rep, err := s.Purge(e.ctx, mailroom.PurgeRequest{Before: time.Now().Add(time.Hour), IncludeUnread: true}); err != nil || rep.Messages != 4 {
		t.Fatalf("purge: %+v %v", rep, err)
	}
	for _, who := range []string{"alice", "bob", "carol"} {
		search(who, "all", "zebra")
	}
	// New mail in the purged mail's place: found by its own words only.
	later := []string{send("alice", []string{"@bob"}, "an osprey"), send("carol", []string{"@bob", "*"}, "an osprey"),
		send("alice", []string{"@bob", "role:triage"}, "an osprey"), send("alice", []string{"@bob"}, "an osprey")}
	slices.Reverse(later)
	for _, who := range []string{"alice", "bob", "carol"} {
		for _, q := range []string{"zebra", "yard", "gate", "roof", "door"} {
			search(who, "all", q)
		}
	}
	search("bob", "all", "osprey", later...)
}

// SearchFollowsTheReadersMail: a search answers from the reader's mail as
// it is at that call, whatever it held at the last one. A store may leave
// out of a search what cannot match (a role whose queue holds no mail, an
// archive test for a reader with nothing archived, the test for a second
// role's copy when one role is held): each shortcut must end with the
// first archived message, the first mail to an empty queue, the second
// queue that holds a message. Rows and totals agree with the listing.
func SearchFollowsTheReadersMail(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	for _, r := range []string{"triage", "oncall"} {
		if err := s.GrantRole(e.ctx, "bob", r); err != nil {
			t.Fatal(err)
		}
	}
	send := func(to ...string) string {
		t.Helper()
		r, err := e.trySend("alice", mailroom.SendInput{To: to, Subject: "note", Body: "the heron " + strconv.Itoa(len(to))})
		if err != nil {
			t.Fatalf("send to %v: %v", to, err)
		}
		return r.MessageID
	}
	// check: bob's search in finds the listing's rows, and want when given.
	check := func(what string, in mailroom.ListInput, want ...string) {
		t.Helper()
		p := e.list("bob", in)
		if want != nil {
			wantIDs(t, what+": the listing", ids(p), want...)
		}
		in.Query = "heron"
		q := e.list("bob", in)
		wantIDs(t, what+": the search", ids(q), ids(p)...)
		if q.TotalCount != p.TotalCount || !q.TotalCountExact {
			t.Fatalf("%s: the search counts %d (exact %v), the listing %d", what, q.TotalCount, q.TotalCountExact, p.TotalCount)
		}
	}
	inbox, all, archived := mailroom.ListInput{}, mailroom.ListInput{Box: "all"}, mailroom.ListInput{IncludeArchived: true}
	direct := send("@bob")
	queued := send("role:triage")
	everyone := send("*")
	check("triage holds mail, oncall and bob's next-session queues none, nothing archived", inbox, everyone, queued, direct)
	if _, err := s.Archive(e.as("bob"), direct); err != nil {
		t.Fatal(err)
	}
	check("one archived", inbox, everyone, queued)
	check("one archived, box all", all, everyone, queued)
	check("one archived, archived too", archived, everyone, queued, direct)
	// A queue that was empty gets mail, and a message reaches two of bob's
	// queues: it shows once.
	handoff := send("role:next-session-of-bob")
	both := send("role:triage", "role:next-session-of-bob")
	check("a second queue", inbox, both, handoff, everyone, queued)
	// A queue whose only mail is archived and read still shows it to a
	// search with the archived mail; a message in two queues archived in
	// one of them shows as the listing shows it.
	paged := send("role:oncall")
	if _, err := s.Archive(e.as("bob"), paged); err != nil {
		t.Fatal(err)
	}
	if res := s.MarkRead(e.as("bob"), []string{paged}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	check("oncall's archived, read message", archived, paged, both, handoff, everyone, queued, direct)
	if _, err := s.Archive(e.as("bob"), both); err != nil {
		t.Fatal(err)
	}
	check("a message in two queues archived in one", inbox)
	check("a message in two queues archived in one, archived too", archived)
	if _, err := s.Unarchive(e.as("bob"), direct); err != nil {
		t.Fatal(err)
	}
	check("unarchived", inbox)
}
