package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mailroom/mailroom"
)

// testCountsMatchListings runs a seeded random mix of every operation that
// changes a mailbox (sends of each kind and priority, from agents and a
// human, marks single and listed, drains with and without roles, unread,
// archive, unarchive, delete from inbox and outbox, retract, purge, role
// grants and revokes) and checks, every few steps and at the end, that each
// mailbox_status count and the totalCount of each counter-answerable
// listing equal the number of rows a cursor walk of that listing returns.
// Stores may keep counts instead of counting (SPEC 9): this is the recount
// that catches a counter a write path forgot.
func testCountsMatchListings(t *testing.T, s mailroom.Store) { countsMatchListings(t, s, 11) }

func countsMatchListings(t *testing.T, s mailroom.Store, seed uint64) {
	e := newEnv(t, s)
	e.agent("erin")
	rng := rand.New(rand.NewPCG(seed, 13))
	people := []string{"alice", "bob", "carol", "erin", "dana"}
	agents := []string{"alice", "bob", "carol", "erin"}
	roles := []string{"triage", "oncall"}
	if err := s.GrantReadInbox(e.ctx, "human:dana", "@bob"); err != nil {
		t.Fatal(err)
	}
	addrs := func() []string {
		all := []string{"@alice", "@bob", "@carol", "@erin", "human:dana", "*", "role:triage", "role:oncall", "@me", "role:next-session-of-bob"}
		to := []string{all[rng.IntN(len(all))]}
		if rng.IntN(3) == 0 {
			to = append(to, all[rng.IntN(len(all))])
		}
		if rng.IntN(4) == 0 {
			// Role mail that also reaches a holder by another way: a
			// second role, a personal copy, or the holder's own send.
			to = append(to, []string{"role:triage", "role:oncall"}[rng.IntN(2)], all[rng.IntN(len(all))])
		}
		return unique(to)
	}
	var sent []mailroom.SendReceipt // every message ever sent, some gone since
	pick := func() string {
		if len(sent) == 0 {
			return "MESSAGE:none"
		}
		return sent[rng.IntN(len(sent))].MessageID
	}
	// Roles held from the start, so role queues fill from the first send.
	for _, g := range [][2]string{{"bob", "triage"}, {"carol", "triage"}, {"carol", "oncall"}} {
		if err := s.GrantRole(e.ctx, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	steps := 240 // checked every 40
	if smaller(s) {
		steps = 80
	}
	for step := range steps {
		who := people[rng.IntN(len(people))]
		ctx := e.as(who)
		var op string
		switch k := rng.IntN(24); {
		case k < 7:
			to := addrs()
			op = fmt.Sprintf("send %v", to)
			r, err := e.trySend(who, mailroom.SendInput{To: to, Priority: []string{"", "low", "normal", "high"}[rng.IntN(4)]})
			if err == nil {
				sent = append(sent, r)
			}
		case k < 9:
			ids := []string{pick()}
			if rng.IntN(2) == 0 {
				ids = append(ids, pick(), pick())
			}
			op = fmt.Sprintf("mark_read %v", ids)
			s.MarkRead(ctx, ids)
		case k < 10:
			// Through a row of the caller's listing at times; a drain
			// without roles says how much role mail it left, which is what
			// a walk lists up to there.
			through, withRoles := "", rng.IntN(2) == 0
			if rows := e.list(who, mailroom.ListInput{}).Messages; len(rows) > 0 && rng.IntN(2) == 0 {
				through = rows[rng.IntN(len(rows))].MessageID
			}
			op = fmt.Sprintf("drain through %q, roles %v", through, withRoles)
			var order []string
			for _, r := range sent {
				order = append(order, r.MessageID)
			}
			want := e.unreadRoleThrough(t, who, through, order)
			rc, err := s.MarkAllRead(ctx, through, withRoles)
			if err != nil {
				t.Fatalf("step %d: %s: %v", step, op, err)
			}
			if !withRoles && rc.WithheldRoleCount != want {
				t.Errorf("step %d: %s: %s: withheldRoleCount %d, a walk lists %d unread role messages up to it", step, who, op, rc.WithheldRoleCount, want)
			}
		case k < 12:
			op = "mark_unread"
			_, _ = s.MarkUnread(ctx, pick())
		case k < 14:
			op = "archive"
			_, _ = s.Archive(ctx, pick())
		case k < 15:
			op = "unarchive"
			_, _ = s.Unarchive(ctx, pick())
		case k < 16:
			op = "delete"
			_, _ = s.Delete(ctx, pick())
		case k < 17:
			op = "retract"
			_, _ = s.Retract(ctx, pick())
		case k < 18:
			a, r := agents[rng.IntN(len(agents))], roles[rng.IntN(len(roles))]
			if rng.IntN(2) == 0 {
				op = "grant " + a + " " + r
				if err := s.GrantRole(e.ctx, a, r); err != nil {
					t.Fatalf("%s: %v", op, err)
				}
			} else {
				op = "revoke " + a + " " + r
				_ = s.RevokeRole(e.ctx, a, r)
			}
		case k < 19:
			if len(sent) > 4 {
				before := sent[rng.IntN(len(sent)/2)].SentAt
				op = "purge"
				if _, err := s.Purge(e.ctx, mailroom.PurgeRequest{Before: before, IncludeUnread: rng.IntN(3) == 0}); err != nil {
					t.Fatalf("purge: %v", err)
				}
			}
		case k < 20:
			// A burst to one inbox, so listings run over more than a page.
			op = "burst"
			for range 5 + rng.IntN(20) {
				if r, err := e.trySend(who, mailroom.SendInput{To: []string{"@bob"}, Priority: "high"}); err == nil {
					sent = append(sent, r)
				}
			}
		case k < 23:
			// Through a listing's watermark while mail arrives, as an agent
			// drains what it listed: the whole inbox up to the watermark,
			// archived mail there read first (a store may drain that by a
			// mark through the watermark), and newer mail, archived at times.
			op = "drain through a watermark with newer mail"
			var archived []string
			for _, r := range e.list(who, mailroom.ListInput{ArchivedOnly: true, UnreadOnly: true, Limit: ptr(200)}).Messages {
				archived = append(archived, r.MessageID)
			}
			if len(archived) > 0 {
				s.MarkRead(ctx, archived)
			}
			wm := e.list(who, mailroom.ListInput{Limit: ptr(1)}).Watermark
			self := "@" + who
			if who == "dana" {
				self = "human:dana"
			}
			for range 1 + rng.IntN(3) {
				from := people[rng.IntN(len(people))]
				if r, err := e.trySend(from, mailroom.SendInput{To: []string{[]string{self, "*"}[rng.IntN(2)]}}); err == nil {
					sent = append(sent, r)
					if rng.IntN(3) == 0 {
						_, _ = s.Archive(ctx, r.MessageID)
					}
				}
			}
			if wm != nil {
				if _, err := s.MarkAllRead(ctx, *wm, false); err != nil {
					t.Fatalf("step %d: %s: %v", step, op, err)
				}
			}
		default:
			// The whole inbox, with no archived mail left unread (read
			// first), so the drain is of every unread, unarchived personal
			// delivery: a store may drain that by a read-through mark.
			// Every other one with roles, whose queues a store may drain
			// by a mark of each role (no draw of its own: the mix stays).
			withRoles := step%2 == 0
			op = fmt.Sprintf("drain all, roles %v", withRoles)
			var archived []string
			for _, r := range e.list(who, mailroom.ListInput{ArchivedOnly: true, UnreadOnly: true, Limit: ptr(200)}).Messages {
				archived = append(archived, r.MessageID)
			}
			if len(archived) > 0 {
				s.MarkRead(ctx, archived)
			}
			if _, err := s.MarkAllRead(ctx, "", withRoles); err != nil {
				t.Fatalf("step %d: %s: %v", step, op, err)
			}
		}
		if step%40 == 39 {
			for _, p := range people {
				e.checkCounts(t, p, fmt.Sprintf("after step %d (%s)", step, op))
			}
		}
	}
}

// checkCounts compares who's status counts and counter-answerable
// totalCounts with the rows a cursor walk of each listing returns.
func (e *env) checkCounts(t *testing.T, who, when string) {
	t.Helper()
	st, err := e.s.Status(e.as(who))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{
		"unread.total": st.Unread.Total, "unread.direct": st.Unread.Direct, "unread.broadcast": st.Unread.Broadcast,
		"unread.role": st.Unread.Role, "unread.human": st.Unread.Human, "unread.byPriority.high": st.Unread.ByPriority.High,
		"unread.byPriority.normal": st.Unread.ByPriority.Normal, "unread.byPriority.low": st.Unread.ByPriority.Low, "archived": st.Archived,
	}
	var roles []string
	for _, r := range st.Roles {
		counts["roles."+r.Role] = r.Unread
		roles = append(roles, r.Role)
	}
	e.checkOldest(t, who, st, when)
	queries := mailroom.StatusQueries(roles)
	for name, in := range queries {
		if n := e.walked(t, who, in); n != counts[name] {
			t.Errorf("%s: %s: %s = %d, a walk of list_messages(%+v) returns %d rows", when, who, name, counts[name], in, n)
		}
	}
	for _, in := range []mailroom.ListInput{{Box: "all", IncludeArchived: true, Priority: "high"}, {UnreadOnly: true, IncludeArchived: true},
		{}, {Via: mailroom.ViaRole, IncludeArchived: true}, {Via: mailroom.ViaRole, ArchivedOnly: true, From: mailroom.AnyHuman},
		{Box: "all", UnreadOnly: true, Priority: "low"}} {
		e.walked(t, who, in)
	}
	if who == "dana" {
		// A grantee's view of the owner's inbox counts the owner's mail.
		for _, in := range []mailroom.ListInput{{Of: "@bob", UnreadOnly: true, Via: "direct"}} {
			e.walked(t, who, in)
		}
	}
}

// walked walks the listing in with a cursor and checks that every page's
// totalCount is the number of rows the walk returns, which it returns.
func (e *env) walked(t *testing.T, who string, in mailroom.ListInput) int {
	t.Helper()
	shown := in
	in.Limit = ptr(40)
	n, total := 0, -1
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("cursor paging does not end")
		}
		p := e.list(who, in)
		if total >= 0 && p.TotalCount != total {
			t.Fatalf("%s: list_messages(%+v): totalCount moved from %d to %d without a write", who, shown, total, p.TotalCount)
		}
		total = p.TotalCount
		n += len(p.Messages)
		if p.NextCursor == nil {
			break
		}
		in.Cursor = p.NextCursor
	}
	if n != total {
		t.Errorf("%s: list_messages(%+v): totalCount %d, a walk returns %d rows", who, shown, total, n)
	}
	return n
}

func unique(list []string) []string {
	seen := map[string]bool{}
	out := list[:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
