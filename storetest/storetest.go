// Package storetest is the behaviour every mailroom.Store must have, written
// once and run by each backend's tests.
package storetest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// Open returns a new, empty store whose clock is now (timestamps, leases,
// backoffs).
type Open func(t *testing.T, now func() time.Time) mailroom.Store

// Run runs the suite against stores made by openAt; each store gets its own
// test clock, which lease and backoff tests move on instead of sleeping.
// The subtests run in parallel, so openAt is called concurrently.
func Run(t *testing.T, openAt Open) {
	// Every subtest opens its own store first thing, and runs in parallel
	// with the others from there.
	open := func(t *testing.T) mailroom.Store {
		t.Parallel()
		return openAt(t, NewClock().Now)
	}
	t.Run("Identities", func(t *testing.T) { testIdentities(t, open(t)) })
	t.Run("DirectMail", func(t *testing.T) { testDirectMail(t, open(t)) })
	t.Run("Isolation", func(t *testing.T) { testIsolation(t, open(t)) })
	t.Run("Broadcast", func(t *testing.T) { testBroadcast(t, open(t)) })
	t.Run("Roles", func(t *testing.T) { testRoles(t, open(t)) })
	t.Run("OperatorListings", func(t *testing.T) { testOperatorListings(t, open(t)) })
	t.Run("Tokens", func(t *testing.T) { testTokens(t, open(t)) })
	t.Run("Threads", func(t *testing.T) { testThreads(t, open(t)) })
	t.Run("ConceptFilters", func(t *testing.T) { testConceptFilters(t, open(t)) })
	t.Run("Pagination", func(t *testing.T) { testPagination(t, open(t)) })
	t.Run("ListingRowsAreTheMessages", func(t *testing.T) { ListingRowsAreTheMessages(t, open(t)) })
	t.Run("RoleCountsOfReadersWithoutCandidates", func(t *testing.T) { testRoleCountsOfReadersWithoutCandidates(t, open(t)) })
	t.Run("CursorPaging", func(t *testing.T) { testCursorPaging(t, open(t)) })
	RunSearch(t, open)
	t.Run("MarkRead", func(t *testing.T) { testMarkRead(t, open(t)) })
	t.Run("Drain", func(t *testing.T) { testDrain(t, open(t)) })
	t.Run("ConcurrentSends", func(t *testing.T) { testConcurrentSends(t, open(t)) })
	t.Run("ConceptQueue", func(t *testing.T) { t.Parallel(); c := NewClock(); testConceptQueue(t, openAt(t, c.Now), c) })
	t.Run("ConceptBatch", func(t *testing.T) { testConceptBatch(t, open(t)) })
	t.Run("ConceptListing", func(t *testing.T) { testConceptListing(t, open(t)) })
	t.Run("ChangeSignal", func(t *testing.T) { testChangeSignal(t, open(t)) })
	t.Run("LifecycleChangesNameTheirInboxes", func(t *testing.T) { testLifecycleChanges(t, open(t)) })
	RunLifecycle(t, open)
	RunDrainEdges(t, open)
	t.Run("DrainAfterTheClockSteppedBack", func(t *testing.T) { t.Parallel(); RunDrainAfterTheClockSteppedBack(t, openAt) })
	t.Run("InboxState", func(t *testing.T) { testInboxState(t, open(t)) })
	t.Run("NewMail", func(t *testing.T) { testNewMail(t, open(t)) })
	t.Run("Announce", func(t *testing.T) { testAnnounce(t, open(t)) })
}

// RunSearch runs the suite's full-text cases (part of Run), for a store
// that can search in more than one way to run under each.
func RunSearch(t *testing.T, open func(t *testing.T) mailroom.Store) {
	t.Run("ListFilters", func(t *testing.T) { testListFilters(t, open(t)) })
	t.Run("FilterValuesInAnyOrder", func(t *testing.T) { testFilterValuesInAnyOrder(t, open(t)) })
	t.Run("SearchIsBounded", func(t *testing.T) { testSearchIsBounded(t, open(t)) })
	t.Run("SearchOffsetPastTheScan", func(t *testing.T) { testSearchOffsetPastTheScan(t, open(t)) })
	t.Run("SearchFindsWhatListingsShow", func(t *testing.T) { SearchFindsWhatListingsShow(t, open(t)) })
	t.Run("SearchForgetsRetractedAndPurgedMail", func(t *testing.T) { SearchForgetsRetractedAndPurgedMail(t, open(t)) })
	t.Run("SearchFollowsTheReadersMail", func(t *testing.T) { SearchFollowsTheReadersMail(t, open(t)) })
}

// env is a store with agents alice, bob, carol and a human dana.
type env struct {
	t     *testing.T
	s     mailroom.Store
	ids   map[string]mailroom.Identity
	ctx   context.Context
	count int
}

func newEnv(t *testing.T, s mailroom.Store) *env {
	e := &env{t: t, s: s, ids: map[string]mailroom.Identity{}, ctx: context.Background()}
	for _, n := range []string{"alice", "bob", "carol"} {
		e.agent(n)
	}
	id, err := s.AddIdentity(e.ctx, "dana", mailroom.KindHuman)
	if err != nil {
		t.Fatal(err)
	}
	e.ids["dana"] = id
	return e
}

func (e *env) agent(name string) mailroom.Identity {
	e.t.Helper()
	id, err := e.s.EnsureAgent(e.ctx, name)
	if err != nil {
		e.t.Fatal(err)
	}
	e.ids[name] = id
	return id
}

func (e *env) as(name string) context.Context {
	id, ok := e.ids[name]
	if !ok {
		e.t.Fatalf("no identity %s", name)
	}
	return mailroom.WithCaller(e.ctx, id)
}

// send sends from one identity and fails the test on error.
func (e *env) send(from string, to ...string) mailroom.SendReceipt {
	e.t.Helper()
	r, err := e.trySend(from, mailroom.SendInput{To: to})
	if err != nil {
		e.t.Fatalf("send from %s to %v: %v", from, to, err)
	}
	return r
}

func (e *env) trySend(from string, in mailroom.SendInput) (mailroom.SendReceipt, error) {
	e.count++
	if in.Subject == "" {
		in.Subject = fmt.Sprintf("subject %d", e.count)
	}
	if in.Body == "" {
		in.Body = fmt.Sprintf("body %d", e.count)
	}
	d, err := in.Draft(0)
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	if d.OriginSessionID == "" {
		d.OriginSessionID = "SESSION:test"
	}
	return e.s.Send(e.as(from), d)
}

func (e *env) list(who string, in mailroom.ListInput) mailroom.Page {
	e.t.Helper()
	f, err := in.Filter()
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := e.s.List(e.as(who), f)
	if err != nil {
		e.t.Fatalf("list for %s: %v", who, err)
	}
	return p
}

func ids(p mailroom.Page) []string {
	out := make([]string, len(p.Messages))
	for i, r := range p.Messages {
		out[i] = r.MessageID
	}
	return out
}

func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func wantErr(t *testing.T, err error, msg string) {
	t.Helper()
	if err == nil || err.Error() != msg {
		t.Fatalf("err = %v, want %q", err, msg)
	}
}

func testIdentities(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	again, err := s.EnsureAgent(e.ctx, "alice")
	if err != nil || again.ID != e.ids["alice"].ID {
		t.Fatalf("EnsureAgent is not idempotent: %v %v", again, err)
	}
	if _, err := s.EnsureAgent(e.ctx, "dana"); mailroom.ErrorCode(err) == "" {
		t.Fatal("an agent took a human's name")
	}
	if _, err := s.AddIdentity(e.ctx, "Bad Name", mailroom.KindAgent); mailroom.ErrorCode(err) != mailroom.EINVALID {
		t.Fatalf("bad name: %v", err)
	}
	token, digest := mailroom.NewToken()
	if err := s.AddToken(e.ctx, e.ids["bob"].ID, digest); err != nil {
		t.Fatal(err)
	}
	got, err := s.IdentityByToken(e.ctx, mailroom.TokenDigest(token))
	if err != nil || got.Name != "bob" {
		t.Fatalf("token lookup: %v %v", got, err)
	}
	if _, err := s.IdentityByToken(e.ctx, mailroom.TokenDigest(token+"x")); mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
		t.Fatalf("bad token: %v", err)
	}
	if err := s.GrantRole(e.ctx, "nobody", "x"); mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
		t.Fatalf("grant to unknown: %v", err)
	}
	if _, err := s.Send(e.ctx, mailroom.Draft{}); mailroom.ErrorCode(err) != mailroom.EUNAUTHORIZED {
		t.Fatalf("send without caller: %v", err)
	}
}

func testDirectMail(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	r := e.send("alice", "@bob", "human:dana")
	if r.RecipientCount != 2 || r.Status != "sent" || !strings.HasPrefix(r.MessageID, "MESSAGE:") || !strings.HasPrefix(r.ThreadID, "THREAD:") {
		t.Fatalf("receipt %+v", r)
	}
	wantIDs(t, "bob's inbox", ids(e.list("bob", mailroom.ListInput{})), r.MessageID)
	wantIDs(t, "dana's inbox", ids(e.list("dana", mailroom.ListInput{})), r.MessageID)
	wantIDs(t, "alice's inbox", ids(e.list("alice", mailroom.ListInput{})))
	out := e.list("alice", mailroom.ListInput{Box: "outbox"})
	wantIDs(t, "alice's outbox", ids(out), r.MessageID)
	row := out.Messages[0]
	if row.From != "@alice" || strings.Join(row.To, ",") != "@bob,human:dana" || row.ReadAt != nil {
		t.Fatalf("outbox row %+v", row)
	}
	m, err := s.Get(e.as("bob"), r.MessageID)
	if err != nil || m.Body == "" || m.OriginSessionID != "SESSION:test" || m.ReadAt != nil {
		t.Fatalf("get: %+v %v", m, err)
	}
	self := e.send("alice", "@me", "@alice")
	wantIDs(t, "a note to self", ids(e.list("alice", mailroom.ListInput{})), self.MessageID)
	if to := e.list("alice", mailroom.ListInput{}).Messages[0].To; strings.Join(to, ",") != "@alice" {
		t.Fatalf("@me and @alice are one address: %v", to)
	}
	if p := e.list("alice", mailroom.ListInput{Box: "outbox", UnreadOnly: true}); p.Watermark == nil || *p.Watermark != self.MessageID || p.TotalCount != 0 {
		t.Fatalf("an unread-only outbox listing still reports the inbox watermark: %+v", p)
	}
	wantIDs(t, "all box shows it once", ids(e.list("alice", mailroom.ListInput{Box: "all"})), self.MessageID, r.MessageID)

	before := e.list("bob", mailroom.ListInput{Box: "all", IncludeArchived: true}).TotalCount
	for _, to := range []string{"@nobody", "human:nobody", "human:alice", "@dana", "role:next-session-of-nobody"} {
		_, err := e.trySend("alice", mailroom.SendInput{To: []string{"@bob", to}})
		if mailroom.ErrorCode(err) != mailroom.EINVALID || !strings.HasPrefix(err.Error(), "Unknown recipient: ") {
			t.Fatalf("to %s: %v", to, err)
		}
	}
	if after := e.list("bob", mailroom.ListInput{Box: "all", IncludeArchived: true}).TotalCount; after != before {
		t.Fatalf("a refused send stored something: %d -> %d", before, after)
	}
}

func testIsolation(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	r := e.send("alice", "@bob")
	notFound := "Message not found: " + r.MessageID
	_, err := s.Get(e.as("carol"), r.MessageID)
	wantErr(t, err, notFound)
	_, err = s.Archive(e.as("carol"), r.MessageID)
	wantErr(t, err, notFound)
	res := s.MarkRead(e.as("carol"), []string{r.MessageID})
	wantErr(t, res[0].Err, notFound)
	_, err = e.trySend("carol", mailroom.SendInput{To: []string{"@alice"}, InReplyTo: r.MessageID})
	wantErr(t, err, notFound)
	_, err = s.Get(e.as("carol"), "MESSAGE:does-not-exist")
	wantErr(t, err, "Message not found: MESSAGE:does-not-exist")
	res = s.MarkRead(e.as("alice"), []string{r.MessageID})
	wantErr(t, res[0].Err, "Not a recipient: "+r.MessageID)
	if _, err := s.Get(e.as("alice"), r.MessageID); err != nil {
		t.Fatalf("the sender cannot see their message: %v", err)
	}
}

func testBroadcast(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	r := e.send("alice", "*")
	if r.RecipientCount != 2 {
		t.Fatalf("broadcast reached %d, want bob and carol", r.RecipientCount)
	}
	e.agent("late")
	wantIDs(t, "an agent created later", ids(e.list("late", mailroom.ListInput{})))
	wantIDs(t, "the human", ids(e.list("dana", mailroom.ListInput{})))
	if res := s.MarkRead(e.as("bob"), []string{r.MessageID}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if row := e.list("bob", mailroom.ListInput{}).Messages[0]; row.ReadAt == nil {
		t.Fatal("bob's read did not stick")
	}
	if row := e.list("carol", mailroom.ListInput{}).Messages[0]; row.ReadAt != nil {
		t.Fatal("bob's read marked carol's copy")
	}
	wantIDs(t, "carol's unread", ids(e.list("carol", mailroom.ListInput{UnreadOnly: true})), r.MessageID)
}

func testRoles(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	if err := s.GrantRole(e.ctx, "bob", "reviewer"); err != nil {
		t.Fatal(err)
	}
	if err := s.GrantRole(e.ctx, "carol", "reviewer"); err != nil {
		t.Fatal(err)
	}
	r := e.send("alice", "role:reviewer")
	if r.RecipientCount != 1 {
		t.Fatalf("a role counts once, got %d", r.RecipientCount)
	}
	wantIDs(t, "bob sees the queue", ids(e.list("bob", mailroom.ListInput{})), r.MessageID)
	wantIDs(t, "carol sees the queue", ids(e.list("carol", mailroom.ListInput{})), r.MessageID)
	wantIDs(t, "the sender's inbox", ids(e.list("alice", mailroom.ListInput{})))
	if res := s.MarkRead(e.as("carol"), []string{r.MessageID}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	row := e.list("bob", mailroom.ListInput{}).Messages[0]
	if row.ReadAt == nil || row.ReadBy == nil || *row.ReadBy != "@carol" {
		t.Fatalf("shared role state: %+v", row)
	}

	queued := e.send("alice", "role:nobody-yet")
	if err := s.GrantRole(e.ctx, "bob", "nobody-yet"); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "a waiting queue", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), queued.MessageID)

	next := e.send("alice", "role:next-session")
	own := e.send("alice", "role:next-session-of-bob")
	wantIDs(t, "bob's implicit roles", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), own.MessageID, next.MessageID, queued.MessageID)
	wantIDs(t, "carol's implicit roles", ids(e.list("carol", mailroom.ListInput{UnreadOnly: true})), next.MessageID)
	wantIDs(t, "a human holds no implicit role", ids(e.list("dana", mailroom.ListInput{})))
	// A handoff to one's own successor reaches the next session of the same
	// identity; a plain role message never reaches its sender.
	self := e.send("bob", "role:next-session-of-bob", "role:reviewer")
	if m, err := s.Get(e.as("bob"), self.MessageID); err != nil || m.ReadAt != nil {
		t.Fatalf("bob's own handoff: %+v %v", m, err)
	}
	found := false
	for _, r := range e.list("bob", mailroom.ListInput{}).Messages {
		found = found || r.MessageID == self.MessageID
	}
	if !found {
		t.Fatal("bob's next session does not see the handoff he left for it")
	}
	// In every box it is one row: bob's inbox shows it, so his outbox
	// part does not show it again.
	all := e.list("bob", mailroom.ListInput{Box: "all", Limit: ptr(200)})
	if n := len(unique(ids(all))); n != len(all.Messages) || all.TotalCount != n {
		t.Fatalf("box all lists %d rows of %d messages, totalCount %d", len(all.Messages), n, all.TotalCount)
	}
	if res := s.MarkRead(e.as("bob"), []string{self.MessageID}); res[0].Err != nil {
		t.Fatalf("bob cannot mark his own handoff read: %v", res[0].Err)
	}
	reviewerOnly := e.send("bob", "role:reviewer")
	for _, r := range e.list("bob", mailroom.ListInput{}).Messages {
		if r.MessageID == reviewerOnly.MessageID {
			t.Fatal("a role message reached its sender")
		}
	}

	// Personal and role delivery together: the personal one is the caller's state.
	both := e.send("alice", "@bob", "role:reviewer")
	if res := s.MarkRead(e.as("bob"), []string{both.MessageID}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	for _, row := range e.list("carol", mailroom.ListInput{}).Messages {
		if row.MessageID == both.MessageID && row.ReadAt != nil {
			t.Fatal("bob's personal read consumed the role queue")
		}
	}
}

func testOperatorListings(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	if err := s.Ping(e.ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	for _, g := range [][2]string{{"bob", "reviewer"}, {"dana", "reviewer"}, {"bob", "ops"}} {
		if err := s.GrantRole(e.ctx, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	e.send("alice", "role:waiting") // a role nobody holds yet is known too
	all, err := s.Identities(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range all {
		if i.CreatedAt.IsZero() || i.ID == 0 {
			t.Errorf("identity %+v lacks its id or creation time", i)
		}
		got = append(got, fmt.Sprintf("%s%v", i.Address(), i.Roles))
	}
	wantIDs(t, "identities", got, "@alice[]", "@bob[ops reviewer]", "@carol[]", "human:dana[reviewer]")

	roles, err := s.Roles(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, r := range roles {
		got = append(got, fmt.Sprintf("%s%v", r.Name, r.Holders))
	}
	wantIDs(t, "roles", got, "ops[@bob]", "reviewer[@bob human:dana]", "waiting[]")

	queued := e.send("alice", "role:reviewer")
	if err := s.RevokeRole(e.ctx, "bob", "reviewer"); err != nil {
		t.Fatal(err)
	}
	for _, r := range e.list("bob", mailroom.ListInput{}).Messages {
		if r.MessageID == queued.MessageID {
			t.Fatal("bob still reads role:reviewer after the revoke")
		}
	}
	wantIDs(t, "dana keeps the queue", ids(e.list("dana", mailroom.ListInput{})), queued.MessageID)
	wantErr(t, s.RevokeRole(e.ctx, "bob", "reviewer"), "@bob does not hold role:reviewer")
	if err := s.RevokeRole(e.ctx, "nobody", "reviewer"); mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
		t.Fatalf("revoke from an unknown identity: %v", err)
	}
	if err := s.RevokeRole(e.ctx, "bob", "Bad Role"); mailroom.ErrorCode(err) != mailroom.EINVALID {
		t.Fatalf("revoke a bad role name: %v", err)
	}
}

func testThreads(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	root := e.send("alice", "@bob")
	reply, err := e.trySend("bob", mailroom.SendInput{To: []string{"@alice"}, InReplyTo: root.MessageID, RelatedTickets: []string{"#12", "acme/api#34"}, RelatedSessions: []string{"s1"}, TaggedConcepts: []string{"WAL migration"}})
	if err != nil {
		t.Fatal(err)
	}
	if reply.ThreadID != root.ThreadID {
		t.Fatalf("reply opened thread %s, want %s", reply.ThreadID, root.ThreadID)
	}
	m, err := s.Get(e.as("alice"), reply.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	if m.InReplyTo == nil || *m.InReplyTo != root.MessageID || strings.Join(m.RelatedTickets, ",") != "#12,acme/api#34" ||
		strings.Join(m.RelatedSessions, ",") != "SESSION:s1" || len(m.TaggedConcepts) != 1 || m.TaggedConcepts[0].ID != "CONCEPT:wal-migration" {
		t.Fatalf("edges: %+v", m)
	}
	forward, err := e.trySend("bob", mailroom.SendInput{To: []string{"@carol"}, InReplyTo: root.MessageID})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := s.Get(e.as("carol"), forward.MessageID); err != nil || m.InReplyTo != nil {
		t.Fatalf("carol sees the id of a parent she may not see: %v %v", m.InReplyTo, err)
	}
	other := e.send("alice", "@bob")
	if other.ThreadID == root.ThreadID {
		t.Fatal("a new message joined an old thread")
	}
	wantIDs(t, "the thread", ids(e.list("alice", mailroom.ListInput{Box: "all", ThreadID: root.ThreadID})), reply.MessageID, root.MessageID)
}

// taggedConcepts: every concept given must be on the message.
func testConceptFilters(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	wal, _ := e.trySend("alice", mailroom.SendInput{To: []string{"@carol"}, Subject: "WAL", Body: "b", TaggedConcepts: []string{"wal"}})
	all, _ := e.trySend("alice", mailroom.SendInput{To: []string{"@carol"}, Subject: "all three", Body: "b", TaggedConcepts: []string{"wal", "checkpoint", "readers"}})
	list := func(cs ...string) []string { return ids(e.list("carol", mailroom.ListInput{TaggedConcepts: cs})) }
	wantIDs(t, "one concept", list("CONCEPT:wal"), all.MessageID, wal.MessageID)
	wantIDs(t, "two concepts", list("CONCEPT:wal", "CONCEPT:checkpoint"), all.MessageID)
	wantIDs(t, "three, any order, repeated", list("CONCEPT:readers", "CONCEPT:wal", "CONCEPT:checkpoint", "CONCEPT:wal"), all.MessageID)
	wantIDs(t, "one nobody has", list("CONCEPT:wal", "CONCEPT:checkpoint", "CONCEPT:zeppelin"))
}

// Listings of one shape of filters with different values answer each
// their own, whatever ran before: a store may walk another index for each
// (a sender's messages, a tag's) and keep each statement's text. The
// first listing walks the rare tag, the second carol's messages.
func testFilterValuesInAnyOrder(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	tagged := func(from string, n int, tags ...string) {
		for range n {
			if _, err := e.trySend(from, mailroom.SendInput{To: []string{"@bob"}, TaggedConcepts: tags}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tagged("alice", 3)
	tagged("alice", 4, "common")
	tagged("alice", 2, "rare")
	tagged("carol", 2, "common")
	rare := mailroom.ListInput{From: "@alice", TaggedConcepts: []string{"CONCEPT:rare"}}
	common := mailroom.ListInput{From: "@carol", TaggedConcepts: []string{"CONCEPT:common"}}
	for _, in := range []mailroom.ListInput{rare, common, rare, common, {From: "@alice", TaggedConcepts: []string{"CONCEPT:common"}}} {
		want := 2
		if in.From == "@alice" && in.TaggedConcepts[0] == "CONCEPT:common" {
			want = 4
		}
		if p := e.list("bob", in); p.TotalCount != want || len(p.Messages) != want {
			t.Errorf("%+v: %d rows, totalCount %d, want %d", in, len(p.Messages), p.TotalCount, want)
		}
	}
}

func testListFilters(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	wal, _ := e.trySend("alice", mailroom.SendInput{To: []string{"@carol"}, Subject: "WAL migration", Body: "ticket POL-358: the checkpoint starves readers", TaggedConcepts: []string{"wal"}})
	other, _ := e.trySend("bob", mailroom.SendInput{To: []string{"@carol", "role:ops"}, Subject: "lunch", Body: "AND OR NOT near"})
	wantIDs(t, "from", ids(e.list("carol", mailroom.ListInput{From: "@alice"})), wal.MessageID)
	wantIDs(t, "to a role", ids(e.list("carol", mailroom.ListInput{To: "role:ops"})), other.MessageID)
	wantIDs(t, "to @me", ids(e.list("alice", mailroom.ListInput{Box: "outbox", To: "@me"})))
	wantIDs(t, "query", ids(e.list("carol", mailroom.ListInput{Query: "POL-358"})), wal.MessageID)
	wantIDs(t, "stemmed query", ids(e.list("carol", mailroom.ListInput{Query: "starving"})), wal.MessageID)
	wantIDs(t, "prefix query", ids(e.list("carol", mailroom.ListInput{Query: "checkp*"})), wal.MessageID)
	wantIDs(t, "operators are words", ids(e.list("carol", mailroom.ListInput{Query: "AND OR"})), other.MessageID)
	for _, q := range []string{`"unbalanced`, "*", "NEAR(", "a:b", "'", "^", "(", "-x", "🙂"} {
		e.list("carol", mailroom.ListInput{Query: q}) // must not fail
	}
	wantIDs(t, "concept", ids(e.list("carol", mailroom.ListInput{TaggedConcepts: []string{"CONCEPT:wal"}})), wal.MessageID)
	f, _ := mailroom.ListInput{From: "@nobody"}.Filter()
	if _, err := s.List(e.as("carol"), f); mailroom.ErrorCode(err) != mailroom.EINVALID {
		t.Fatalf("unknown from: %v", err)
	}
	f, _ = mailroom.ListInput{To: "@nobody"}.Filter()
	if _, err := s.List(e.as("carol"), f); err == nil || err.Error() != "to: unknown identity @nobody" {
		t.Fatalf("unknown to: %v", err)
	}
	wantIDs(t, "to a role nobody holds", ids(e.list("carol", mailroom.ListInput{To: "role:nobody-holds-this"})))
	if _, err := s.Archive(e.as("carol"), wal.MessageID); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "archived hidden", ids(e.list("carol", mailroom.ListInput{})), other.MessageID)
	wantIDs(t, "archived shown", ids(e.list("carol", mailroom.ListInput{IncludeArchived: true})), other.MessageID, wal.MessageID)
	if m, _ := s.Get(e.as("carol"), wal.MessageID); m.ReadAt != nil || m.ArchivedAt == nil {
		t.Fatalf("archive is not read: %+v", m.Row)
	}
}

func testPagination(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	// More than two pages of the largest limit, the last one partial.
	// Listing has no code path that depends on the inbox's size, so this
	// walks the same code as 2,500 messages did (13 pages of 200): the
	// pages of 7 cross as many page boundaries and more.
	const n = 2*mailroom.MaxLimit + 50
	sent := make([]string, n)
	for i := range n {
		sent[n-1-i] = e.send("alice", "@bob").MessageID
	}
	for _, lim := range []int{mailroom.MaxLimit, 7} {
		seen, pages := 0, 0
		offset := 0
		for {
			lim := lim
			p := e.list("bob", mailroom.ListInput{Limit: &lim, Offset: &offset})
			pages++
			if p.TotalCount != n {
				t.Fatalf("limit %d: totalCount %d, want %d", lim, p.TotalCount, n)
			}
			if p.Watermark == nil || *p.Watermark != sent[0] {
				t.Fatalf("limit %d: watermark %v, want the newest", lim, p.Watermark)
			}
			if want := min(lim, n-offset); len(p.Messages) != want {
				t.Fatalf("limit %d, offset %d: %d rows, want %d", lim, offset, len(p.Messages), want)
			}
			for i, r := range p.Messages {
				if r.MessageID != sent[offset+i] {
					t.Fatalf("limit %d: row %d is %s, want %s (newest first)", lim, offset+i, r.MessageID, sent[offset+i])
				}
			}
			seen += len(p.Messages)
			if p.NextOffset == nil {
				break
			}
			offset = *p.NextOffset
		}
		if seen != n || pages != (n+lim-1)/lim {
			t.Fatalf("limit %d: walked %d rows in %d pages, want %d in %d", lim, seen, pages, n, (n+lim-1)/lim)
		}
	}
	past := n + 10
	if p := e.list("bob", mailroom.ListInput{Offset: &past}); len(p.Messages) != 0 || p.NextOffset != nil || p.TotalCount != n {
		t.Fatalf("past the end: %+v", p)
	}
}

// walk pages with cursors from the first page until nextCursor is null,
// calling between after every page but the last; it returns every row id.
func (e *env) walk(who string, in mailroom.ListInput, between func(page int)) []string {
	e.t.Helper()
	var got []string
	for page := 0; ; page++ {
		if page > 1000 {
			e.t.Fatal("cursor paging does not end")
		}
		p := e.list(who, in)
		if p.NextOffset != nil && in.Cursor != nil {
			e.t.Fatalf("page %d: nextOffset %d on a cursor page", page, *p.NextOffset)
		}
		got = append(got, ids(p)...)
		if p.NextCursor == nil {
			return got
		}
		if len(p.Messages) == 0 {
			e.t.Fatalf("page %d: empty page with a nextCursor", page)
		}
		in.Offset, in.Cursor = nil, p.NextCursor
		if between != nil {
			between(page)
		}
	}
}

func testCursorPaging(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	const n = 25
	sent := make([]string, n) // newest first
	for i := range n {
		sent[n-1-i] = e.send("alice", "@bob").MessageID
	}
	lim := 10
	wantIDs(t, "cursor pages", e.walk("bob", mailroom.ListInput{Limit: &lim}, nil), sent...)
	lim = 5 // pages that end exactly at the last row
	wantIDs(t, "cursor pages of 5", e.walk("bob", mailroom.ListInput{Limit: &lim}, nil), sent...)
	if p := e.list("bob", mailroom.ListInput{Limit: &lim}); p.NextCursor == nil || p.NextOffset == nil || *p.NextOffset != 5 {
		t.Fatalf("an offset page carries both: %v %v", p.NextCursor, p.NextOffset)
	}
	all := n + 1
	if p := e.list("bob", mailroom.ListInput{Limit: &all}); p.NextCursor != nil || len(p.Messages) != n {
		t.Fatalf("one page holds everything: nextCursor %v, %d rows", p.NextCursor, len(p.Messages))
	}

	// The boundary moves while paging: new mail arrives (newer than every
	// page, so it is not on the later ones) and mail on a page not yet
	// read is archived (gone). Nothing repeats and nothing is skipped.
	lim = 4
	var archived string
	got := e.walk("bob", mailroom.ListInput{Limit: &lim}, func(page int) {
		if page != 0 {
			return
		}
		e.send("carol", "@bob")
		e.send("alice", "@bob")
		archived = sent[6]
		if _, err := s.Archive(e.as("bob"), archived); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Archive(e.as("bob"), sent[1]); err != nil { // already listed
			t.Fatal(err)
		}
	})
	var want []string
	for _, id := range sent {
		if id != archived {
			want = append(want, id)
		}
	}
	wantIDs(t, "cursor pages while mail arrives and is archived", got, want...)

	// Cursors page filtered listings too: the outbox and every box.
	lim = 7
	wantIDs(t, "outbox by cursor", e.walk("alice", mailroom.ListInput{Box: "outbox", Limit: &lim}, nil),
		ids(e.list("alice", mailroom.ListInput{Box: "outbox", Limit: ptr(200)}))...)
	wantIDs(t, "every box by cursor", e.walk("bob", mailroom.ListInput{Box: "all", IncludeArchived: true, Limit: &lim}, nil),
		ids(e.list("bob", mailroom.ListInput{Box: "all", IncludeArchived: true, Limit: ptr(200)}))...)
}

func testMarkRead(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	a := e.send("alice", "@bob")
	b := e.send("alice", "@bob")
	res := s.MarkRead(e.as("bob"), []string{a.MessageID, "MESSAGE:bogus", b.MessageID})
	if len(res) != 3 || res[0].Status != "read" || res[1].Status != "error" || res[1].Error != "Message not found: MESSAGE:bogus" || res[2].Status != "read" {
		t.Fatalf("results %+v", res)
	}
	first := *res[0].ReadAt
	again := s.MarkRead(e.as("bob"), []string{a.MessageID})
	if !again[0].ReadAt.Equal(first) {
		t.Fatalf("a second mark moved readAt from %v to %v", first, again[0].ReadAt)
	}
	if _, err := s.Get(e.as("bob"), a.MessageID); err != nil {
		t.Fatal(err)
	}
	c := e.send("alice", "@bob")
	if m, _ := s.Get(e.as("bob"), c.MessageID); m.ReadAt != nil {
		t.Fatal("get marked a message read")
	}
	e.list("bob", mailroom.ListInput{})
	wantIDs(t, "listing marks nothing", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), c.MessageID)
}

func testDrain(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	rc, err := s.MarkAllRead(e.as("bob"), "", false)
	if err != nil || rc.Status != "noop" || rc.MatchedCount != 0 {
		t.Fatalf("empty inbox: %+v %v", rc, err)
	}
	if err := s.GrantRole(e.ctx, "bob", "ops"); err != nil {
		t.Fatal(err)
	}
	direct := e.send("alice", "@bob")
	bcast := e.send("alice", "*")
	role := e.send("alice", "role:ops")
	archived := e.send("alice", "@bob")
	if _, err := s.Archive(e.as("bob"), archived.MessageID); err != nil {
		t.Fatal(err)
	}
	watermark := e.list("bob", mailroom.ListInput{}).Watermark
	late := e.send("carol", "@bob")

	rc, err = s.MarkAllRead(e.as("bob"), *watermark, false)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Status != "read" || rc.MatchedCount != 2 || rc.ReadCount != 2 || rc.FailureCount != 0 || rc.WithheldRoleCount != 1 {
		t.Fatalf("receipt %+v", rc)
	}
	if s.Durable() && rc.DurableCount != 2 {
		t.Fatalf("durableCount %d", rc.DurableCount)
	}
	wantIDs(t, "left unread", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), late.MessageID, role.MessageID)
	wantIDs(t, "carol's broadcast copy", ids(e.list("carol", mailroom.ListInput{UnreadOnly: true})), bcast.MessageID)
	if m, _ := s.Get(e.as("bob"), archived.MessageID); m.ReadAt != nil {
		t.Fatal("an archived message was drained")
	}
	rc, err = s.MarkAllRead(e.as("bob"), "", true)
	if err != nil || rc.MatchedCount != 2 || rc.ReadCount != 2 || rc.WithheldRoleCount != 0 {
		t.Fatalf("includeRoles: %+v %v", rc, err)
	}
	if s.Durable() && rc.DurableCount != 2 {
		t.Fatalf("includeRoles: durableCount %d, want the role message and the late one", rc.DurableCount)
	}
	wantIDs(t, "all read", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})))
	// readBy names who drained a role message, and only role rows have it.
	for _, r := range e.list("bob", mailroom.ListInput{}).Messages {
		switch {
		case r.ReadAt == nil:
			t.Errorf("%s (%s) is unread after the drain", r.MessageID, r.Subject)
		case r.MessageID == role.MessageID && (r.ReadBy == nil || *r.ReadBy != "@bob"):
			t.Errorf("drained role message: readBy %v, want @bob", r.ReadBy)
		case r.MessageID != role.MessageID && r.ReadBy != nil:
			t.Errorf("personal message %s: readBy %q, want none", r.MessageID, *r.ReadBy)
		}
	}
	if _, err := s.MarkAllRead(e.as("carol"), direct.MessageID, false); err == nil || err.Error() != "Message not found: "+direct.MessageID {
		t.Fatalf("through an invisible message: %v", err)
	}
}

func testConcurrentSends(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := []string{"alice", "carol"}[w%2]
			for range each {
				d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: "s", Body: "b"}.Draft(0)
				d.OriginSessionID = "SESSION:c"
				if _, err := s.Send(e.as(from), d); err != nil {
					errs <- err
				}
				if _, err := s.MarkAllRead(e.as("bob"), "", false); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := e.list("bob", mailroom.ListInput{}).TotalCount; n != workers*each {
		t.Fatalf("%d messages, want %d", n, workers*each)
	}
}

// claim1 claims at most one job.
func claim1(s mailroom.Store, worker string, lease time.Duration) (mailroom.ConceptJob, bool, error) {
	jobs, err := s.ClaimConceptJobs(context.Background(), worker, lease, 1)
	if err != nil || len(jobs) == 0 {
		return mailroom.ConceptJob{}, false, err
	}
	return jobs[0], true, nil
}

// complete1 completes one job; a lost lease is ECONFLICT.
func complete1(s mailroom.Store, job mailroom.ConceptJob, cs []mailroom.Concept, terms []string) error {
	lost, err := s.CompleteConceptJobs(context.Background(), []mailroom.ConceptResult{{Job: job, Concepts: cs, Source: "embedded", Terms: terms}})
	if err == nil && len(lost) > 0 {
		return mailroom.Errorf(mailroom.ECONFLICT, "lease lost")
	}
	return err
}

func testConceptQueue(t *testing.T, s mailroom.Store, clock *Clock) {
	e := newEnv(t, s)
	a := e.send("alice", "@bob")
	b := e.send("alice", "@bob")
	ctx := e.ctx
	if n, err := s.PendingConceptJobs(ctx); err != nil || n != 2 {
		t.Fatalf("pending after two sends: %d %v", n, err)
	}

	// A worker that dies mid-job: its lease runs out and the job is due again.
	j1, ok, err := claim1(s, "w1", 500*time.Millisecond)
	if err != nil || !ok || j1.MessageID != a.MessageID || j1.Attempts != 1 || j1.Body == "" {
		t.Fatalf("first claim: %+v %v %v", j1, ok, err)
	}
	j2, ok, err := claim1(s, "w2", time.Minute)
	if err != nil || !ok || j2.MessageID != b.MessageID {
		t.Fatalf("second claim skips a leased job: %+v %v %v", j2, ok, err)
	}
	if _, ok, _ := claim1(s, "w3", time.Minute); ok {
		t.Fatal("a third claim found a job while both are leased")
	}
	clock.Advance(400 * time.Millisecond)
	if _, ok, _ := claim1(s, "w3", time.Minute); ok {
		t.Fatal("a lease was taken before it ran out")
	}
	clock.Advance(150 * time.Millisecond)
	j1b, ok, err := claim1(s, "w3", time.Minute)
	if err != nil || !ok || j1b.MessageID != a.MessageID || j1b.Attempts != 2 {
		t.Fatalf("expired lease not reclaimed: %+v %v %v", j1b, ok, err)
	}
	// The dead worker comes back: its completion is refused, so the job is done once.
	if err := complete1(s, j1, []mailroom.Concept{{ID: "CONCEPT:stale", Name: "stale"}}, nil); mailroom.ErrorCode(err) != mailroom.ECONFLICT {
		t.Fatalf("a lost lease completed: %v", err)
	}
	wal := mailroom.Concept{ID: "CONCEPT:wal-migration", Name: "WAL migration"}
	if err := complete1(s, j1b, []mailroom.Concept{wal}, []string{"wal", "migration", "wal"}); err != nil {
		t.Fatal(err)
	}
	m, err := s.Get(e.as("bob"), a.MessageID)
	if err != nil || len(m.TaggedConcepts) != 1 || m.TaggedConcepts[0] != wal {
		t.Fatalf("concepts on the message: %+v %v", m.TaggedConcepts, err)
	}
	df, total, err := s.DocFreq(ctx, []string{"wal", "migration", "absent"})
	if err != nil || total != 1 || df["wal"] != 1 || df["migration"] != 1 || df["absent"] != 0 {
		t.Fatalf("docfreq %v %d %v", df, total, err)
	}
	// A failed attempt is retried later, not lost.
	if err := s.RetryConceptJob(ctx, j2, "model unreachable", 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := claim1(s, "w4", time.Minute); ok {
		t.Fatal("a job was due before its backoff")
	}
	clock.Advance(550 * time.Millisecond)
	j2b, ok, err := claim1(s, "w4", time.Minute)
	if err != nil || !ok || j2b.MessageID != b.MessageID || j2b.Attempts != 2 {
		t.Fatalf("retry: %+v %v %v", j2b, ok, err)
	}
	if err := complete1(s, j2b, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := claim1(s, "w5", time.Minute); ok {
		t.Fatal("the queue is not empty after every job completed")
	}
	if n, err := s.PendingConceptJobs(ctx); err != nil || n != 0 {
		t.Fatalf("pending after every job completed: %d %v", n, err)
	}
	wantIDs(t, "filter by an extracted concept", ids(e.list("bob", mailroom.ListInput{TaggedConcepts: []string{"wal migration"}})), a.MessageID)
}

func testConceptListing(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	for _, tc := range []struct {
		from, to string
		tags     []string
	}{
		{"alice", "@bob", []string{"WAL", "SQLite"}},
		{"alice", "@bob", []string{"WAL"}},
		{"carol", "@alice", []string{"secret"}},
	} {
		if _, err := e.trySend(tc.from, mailroom.SendInput{To: []string{tc.to}, TaggedConcepts: tc.tags}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.Concepts(e.as("bob"), 10, mailroom.ConceptScan)
	if err != nil {
		t.Fatal(err)
	}
	got := list.Concepts
	if len(got) != 2 || got[0].ID != "CONCEPT:wal" || got[0].Count != 2 || got[1].ID != "CONCEPT:sqlite" || got[1].Count != 1 || list.Counted != 2 || !list.Complete {
		t.Fatalf("bob's concepts: %+v", list)
	}
	list, _ = s.Concepts(e.as("alice"), 10, mailroom.ConceptScan)
	if len(list.Concepts) != 3 || list.Counted != 3 || !list.Complete {
		t.Fatalf("alice sees her sent and received concepts: %+v", list)
	}
	if list, _ := s.Concepts(e.as("bob"), 1, mailroom.ConceptScan); len(list.Concepts) != 1 || list.Concepts[0].ID != "CONCEPT:wal" {
		t.Fatalf("limit 1: %+v", list)
	}

	// The window is the newest messages in commit order, inbox and outbox
	// together: alice's newest two are carol's (secret) and her second
	// send (WAL), not the first (WAL, SQLite).
	list, err = s.Concepts(e.as("alice"), 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	if list.Counted != 2 || list.Complete || len(list.Concepts) != 2 || list.Concepts[0].ID != "CONCEPT:secret" || list.Concepts[0].Count != 1 ||
		list.Concepts[1].ID != "CONCEPT:wal" || list.Concepts[1].Count != 1 {
		t.Fatalf("alice's two newest: %+v", list)
	}
	if list, _ := s.Concepts(e.as("bob"), 10, 2); list.Counted != 2 || !list.Complete || len(list.Concepts) != 2 {
		t.Fatalf("a window exactly as large as the mailbox is complete: %+v", list)
	}
	if list, _ := s.Concepts(e.as("carol"), 10, 1); list.Counted != 1 || !list.Complete {
		t.Fatalf("carol's one message: %+v", list)
	}
	if list, err := s.Concepts(e.as("dana"), 10, 1); err != nil || list.Counted != 0 || !list.Complete || list.Concepts == nil || len(list.Concepts) != 0 {
		t.Fatalf("no mail: %+v %v", list, err)
	}
}

func testConceptBatch(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	var sent []string
	for range 5 {
		sent = append(sent, e.send("alice", "@bob").MessageID)
	}
	jobs, err := s.ClaimConceptJobs(e.ctx, "w", time.Minute, 3)
	if err != nil || len(jobs) != 3 || jobs[0].MessageID != sent[0] || jobs[2].MessageID != sent[2] {
		t.Fatalf("a batch of 3, oldest first: %+v %v", jobs, err)
	}
	rest, err := s.ClaimConceptJobs(e.ctx, "w2", time.Minute, 10)
	if err != nil || len(rest) != 2 {
		t.Fatalf("the rest: %+v %v", rest, err)
	}
	stolen := jobs[1]
	stolen.Worker = "someone-else"
	var results []mailroom.ConceptResult
	for i, j := range jobs {
		if i == 1 {
			j = stolen
		}
		results = append(results, mailroom.ConceptResult{Job: j, Concepts: []mailroom.Concept{{ID: "CONCEPT:x", Name: "x"}}, Source: "embedded", Terms: []string{"x"}})
	}
	lost, err := s.CompleteConceptJobs(e.ctx, results)
	if err != nil || len(lost) != 1 || lost[0].MessageID != sent[1] {
		t.Fatalf("one lease lost: %+v %v", lost, err)
	}
	df, total, _ := s.DocFreq(e.ctx, []string{"x"})
	if total != 2 || df["x"] != 2 {
		t.Fatalf("docfreq counts the two completed: %v %d", df, total)
	}
	for i, id := range sent[:3] {
		m, _ := s.Get(e.as("bob"), id)
		if got := len(m.TaggedConcepts); (i == 1) != (got == 0) {
			t.Fatalf("message %d has %d concepts", i, got)
		}
	}
}

// signalled waits for a change signal on sub; a store must deliver it well
// within the bound (the bound only keeps a broken store from hanging).
func signalled(t *testing.T, sub *mailroom.Subscription, what string) mailroom.Change {
	t.Helper()
	select {
	case <-sub.C():
		return sub.Take()
	case <-time.After(10 * time.Second):
		t.Fatalf("no change signal after %s", what)
	}
	return mailroom.Change{}
}

func testChangeSignal(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	sub := s.Subscribe()
	defer sub.Close()
	r := e.send("alice", "@bob")
	if c := signalled(t, sub, "a send"); !c.Touches(e.ids["bob"].ID, nil) {
		t.Fatalf("change %+v does not touch the recipient", c)
	}
	if res := s.MarkRead(e.as("bob"), []string{r.MessageID}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if c := signalled(t, sub, "mark_read"); !c.Touches(e.ids["bob"].ID, nil) {
		t.Fatalf("change %+v does not touch the reader", c)
	}
	e.send("alice", "role:triage")
	if c := signalled(t, sub, "a role send"); !c.Touches(e.ids["carol"].ID, []string{"triage"}) {
		t.Fatalf("change %+v does not touch a role holder", c)
	}
	// Two subscribers each get the signal; a closed one gets none.
	other := s.Subscribe()
	sub.Close()
	sub.Close() // idempotent
	e.send("bob", "@alice")
	signalled(t, other, "a send to a second subscriber")
	other.Close()
	select {
	case <-sub.C():
		t.Fatal("a closed subscription was signalled")
	default:
	}
}

// testLifecycleChanges: every lifecycle write on bob's mail signals a
// change that touches bob (when it changes his mailbox) and never dana,
// who has nothing to do with it: a write that declares no inbox would wake
// every watcher in every process.
func testLifecycleChanges(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	danaRoles := e.state("dana").Roles
	a := e.send("alice", "@bob")
	b := e.send("alice", "@bob")
	c := e.send("alice", "@bob")
	sub := s.Subscribe()
	defer sub.Close()
	// collect returns what was signalled up to a marker send to carol: the
	// store signals in commit order, so the marker's arrival means the
	// step's change (if any) has arrived too.
	collect := func(step string) mailroom.Change {
		t.Helper()
		e.send("alice", "@carol")
		var got mailroom.Change
		for !got.Touches(e.ids["carol"].ID, nil) {
			got.Merge(signalled(t, sub, step))
		}
		return got
	}
	collect("the first marker") // anything signalled before the steps
	for _, st := range []struct {
		name       string
		touchesBob bool
		do         func() error
	}{
		{"archive", true, func() error { _, err := s.Archive(e.as("bob"), a.MessageID); return err }},
		{"unarchive", true, func() error { _, err := s.Unarchive(e.as("bob"), a.MessageID); return err }},
		{"mark_read", true, func() error { return s.MarkRead(e.as("bob"), []string{b.MessageID})[0].Err }},
		{"mark_unread", true, func() error { _, err := s.MarkUnread(e.as("bob"), b.MessageID); return err }},
		{"drain", true, func() error { _, err := s.MarkAllRead(e.as("bob"), "", false); return err }},
		{"mark_unread of drained mail", true, func() error { _, err := s.MarkUnread(e.as("bob"), a.MessageID); return err }},
		{"drain through", true, func() error { _, err := s.MarkAllRead(e.as("bob"), c.MessageID, false); return err }},
		{"delete", true, func() error { _, err := s.Delete(e.as("bob"), c.MessageID); return err }},
		{"retract", true, func() error { _, err := s.Retract(e.as("alice"), b.MessageID); return err }},
		{"grant read-inbox", false, func() error { return s.GrantReadInbox(e.ctx, "@carol", "@bob") }},
		{"revoke read-inbox", false, func() error { _, err := s.RevokeReadInbox(e.ctx, "@carol", "@bob"); return err }},
		{"purge", true, func() error {
			_, err := s.Purge(e.ctx, mailroom.PurgeRequest{Before: time.Now().Add(time.Hour), IncludeUnread: true})
			return err
		}},
	} {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := collect(st.name)
		if got.Touches(e.ids["dana"].ID, danaRoles) {
			t.Errorf("%s on bob's mail signalled %+v, which touches dana", st.name, got)
		}
		if st.touchesBob && !got.Touches(e.ids["bob"].ID, nil) {
			t.Errorf("%s on bob's mail signalled %+v, which does not touch bob", st.name, got)
		}
	}
}

// testTokens: listing shows identity, creation and last use, never a
// secret; last use is written at most once per TokenTouchInterval; revoking
// by identity or by id prefix stops the token at once.
func testTokens(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	issue := func(name string) (string, []byte) {
		t.Helper()
		tok, digest := mailroom.NewToken()
		if err := s.AddToken(e.ctx, e.ids[name].ID, digest); err != nil {
			t.Fatal(err)
		}
		return tok, digest
	}
	_, a1 := issue("alice")
	_, a2 := issue("alice")
	bobTok, b1 := issue("bob")
	_, d1 := issue("dana")
	list, err := s.Tokens(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tk := range list {
		if tk.CreatedAt.IsZero() || tk.LastUsedAt != nil || len(tk.ID) != mailroom.TokenIDLen || tk.Identity.ID == 0 {
			t.Errorf("token %+v", tk)
		}
		if strings.Contains(bobTok, tk.ID) {
			t.Errorf("token id %s is part of the secret", tk.ID)
		}
		got = append(got, tk.Identity.Address()+" "+tk.ID)
	}
	sort.Strings(got)
	want := []string{"@alice " + mailroom.TokenID(a1), "@alice " + mailroom.TokenID(a2), "@bob " + mailroom.TokenID(b1), "human:dana " + mailroom.TokenID(d1)}
	sort.Strings(want)
	wantIDs(t, "tokens", got, want...)

	t.Run("last use is written at most once per interval", func(t *testing.T) {
		at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		lastUse := func() *time.Time {
			t.Helper()
			list, err := s.Tokens(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range list {
				if tk.ID == mailroom.TokenID(b1) {
					return tk.LastUsedAt
				}
			}
			t.Fatal("bob's token is gone")
			return nil
		}
		for _, step := range []struct {
			at   time.Time
			want time.Time
		}{
			{at, at},
			{at.Add(30 * time.Second), at},
			{at.Add(59 * time.Second), at},
			{at.Add(61 * time.Second), at.Add(61 * time.Second)},
		} {
			if err := s.TouchToken(e.ctx, b1, step.at); err != nil {
				t.Fatal(err)
			}
			if got := lastUse(); got == nil || !got.Equal(step.want) {
				t.Fatalf("touch at %v: last use %v, want %v", step.at, got, step.want)
			}
		}
		if err := s.TouchToken(e.ctx, []byte("no such digest"), at); err != nil {
			t.Errorf("touching an unknown token: %v", err)
		}
	})
	t.Run("revoke by identity", func(t *testing.T) {
		gone, err := s.RevokeTokens(e.ctx, mailroom.TokenSelector{Name: "alice", Kind: mailroom.KindAgent})
		if err != nil || len(gone) != 2 {
			t.Fatalf("revoked %v, %v", gone, err)
		}
		for _, d := range [][]byte{a1, a2} {
			if _, err := s.IdentityByToken(e.ctx, d); mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
				t.Errorf("a revoked token still authenticates: %v", err)
			}
		}
		if _, err := s.IdentityByToken(e.ctx, b1); err != nil {
			t.Errorf("bob's token went too: %v", err)
		}
		if _, err := s.RevokeTokens(e.ctx, mailroom.TokenSelector{Name: "alice", Kind: mailroom.KindAgent}); mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
			t.Errorf("revoking again: %v", err)
		}
		if _, err := s.RevokeTokens(e.ctx, mailroom.TokenSelector{Name: "dana", Kind: mailroom.KindAgent}); mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
			t.Errorf("dana as an agent: %v", err)
		}
	})
	t.Run("revoke by prefix", func(t *testing.T) {
		// Enough tokens that some share a first hex digit.
		for range 20 {
			issue("carol")
		}
		list, _ := s.Tokens(e.ctx)
		byFirst := map[string]int{}
		for _, tk := range list {
			byFirst[tk.ID[:1]]++
		}
		for first, n := range byFirst {
			if n > 1 {
				// 24 tokens, 16 first digits: some prefix is shared, and
				// an ambiguous prefix revokes nothing.
				if _, err := s.RevokeTokens(e.ctx, mailroom.TokenSelector{Prefix: first}); mailroom.ErrorCode(err) != mailroom.ECONFLICT {
					t.Errorf("prefix %s matches %d tokens: %v", first, n, err)
				}
				break
			}
		}
		id := mailroom.TokenID(d1)
		gone, err := s.RevokeTokens(e.ctx, mailroom.TokenSelector{Prefix: id[:6]})
		if err != nil || len(gone) != 1 || gone[0].Identity.Address() != "human:dana" {
			t.Fatalf("revoke %s: %v %v", id[:6], gone, err)
		}
		if _, err := s.IdentityByToken(e.ctx, d1); mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
			t.Errorf("revoked by prefix, still authenticates: %v", err)
		}
		if _, err := s.RevokeTokens(e.ctx, mailroom.TokenSelector{Prefix: id[:6]}); mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
			t.Errorf("revoking the same prefix again: %v", err)
		}
		after, _ := s.Tokens(e.ctx)
		if len(after) != len(list)-1 {
			t.Errorf("%d tokens after revoking one of %d", len(after), len(list))
		}
	})
}

func (e *env) state(who string) mailroom.InboxState {
	e.t.Helper()
	st, err := e.s.InboxState(e.as(who))
	if err != nil {
		e.t.Fatalf("inbox state of %s: %v", who, err)
	}
	return st
}

func testInboxState(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	if err := s.GrantRole(e.ctx, "bob", "triage"); err != nil {
		t.Fatal(err)
	}
	empty := e.state("bob")
	if empty.UnreadCount != 0 || empty.Watermark != nil || !slices.Contains(empty.Roles, "triage") || !slices.Contains(empty.Roles, "next-session") {
		t.Fatalf("empty inbox state = %+v", empty)
	}
	if _, err := s.InboxState(e.ctx); mailroom.ErrorCode(err) != mailroom.EUNAUTHORIZED {
		t.Fatalf("InboxState without a caller: %v", err)
	}
	// Roles come sorted, each once: an implicit role granted explicitly
	// too is listed once.
	for _, r := range []string{"next-session", "alpha"} {
		if err := s.GrantRole(e.ctx, "bob", r); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if got, want := e.state("bob").Roles, []string{"alpha", "next-session", "next-session-of-bob", "triage"}; !slices.Equal(got, want) {
			t.Fatalf("bob's roles %q, want %q", got, want)
		}
	}
	m1 := e.send("alice", "@bob")
	one := e.state("bob")
	if one.UnreadCount != 1 || one.Watermark == nil || *one.Watermark != m1.MessageID || one.Fingerprint == empty.Fingerprint {
		t.Fatalf("after a direct send: %+v (before %+v)", one, empty)
	}
	m2 := e.send("carol", "role:triage")
	two := e.state("bob")
	if two.UnreadCount != 2 || *two.Watermark != m2.MessageID {
		t.Fatalf("role mail counts: %+v", two)
	}
	if other := e.state("carol"); other.UnreadCount != 0 {
		t.Fatalf("the sender's own role message is not in her inbox: %+v", other)
	}
	before := e.state("alice").Fingerprint
	e.send("bob", "@carol")
	if e.state("alice").Fingerprint != before {
		t.Fatal("mail to someone else changed alice's fingerprint")
	}
	// Reading one and receiving another leaves the count at 2; the
	// fingerprint still changes.
	if r := s.MarkRead(e.as("bob"), []string{m1.MessageID}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	e.send("alice", "@bob")
	three := e.state("bob")
	if three.UnreadCount != 2 || three.Fingerprint == two.Fingerprint {
		t.Fatalf("read one, got one: %+v vs %+v", three, two)
	}
	if _, err := s.Archive(e.as("bob"), m2.MessageID); err != nil {
		t.Fatal(err)
	}
	if st := e.state("bob"); st.UnreadCount != 1 || st.Fingerprint == three.Fingerprint {
		t.Fatalf("archived mail is not unread inbox mail: %+v", st)
	}
}

func newMailIDs(m mailroom.NewMail) []string {
	out := make([]string, len(m.Messages))
	for i, r := range m.Messages {
		out[i] = r.MessageID
	}
	return out
}

func testNewMail(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	if err := s.GrantRole(e.ctx, "bob", "triage"); err != nil {
		t.Fatal(err)
	}
	m1 := e.send("alice", "@bob")
	m2 := e.send("carol", "role:triage")
	m3 := e.send("alice", "*")
	e.send("bob", "@alice") // bob's own outbox is not new mail
	got, err := s.NewMail(e.as("bob"), "", true, 50)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "all unread, oldest first", newMailIDs(got), m1.MessageID, m2.MessageID, m3.MessageID)
	if got.Watermark == nil || *got.Watermark != m3.MessageID || got.Messages[0].ReadAt != nil {
		t.Fatalf("watermark %v, first row %+v", got.Watermark, got.Messages[0])
	}
	got, _ = s.NewMail(e.as("bob"), m1.MessageID, true, 50)
	wantIDs(t, "after m1", newMailIDs(got), m2.MessageID, m3.MessageID)
	got, _ = s.NewMail(e.as("bob"), m1.MessageID, false, 50)
	wantIDs(t, "after m1 without roles", newMailIDs(got), m3.MessageID)
	got, _ = s.NewMail(e.as("bob"), "", true, 2)
	wantIDs(t, "limit keeps the oldest", newMailIDs(got), m1.MessageID, m2.MessageID)
	if r := s.MarkRead(e.as("bob"), []string{m2.MessageID}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	got, _ = s.NewMail(e.as("bob"), "", true, 50)
	wantIDs(t, "read mail is not new", newMailIDs(got), m1.MessageID, m3.MessageID)
	// It never marks anything read.
	if p := e.list("bob", mailroom.ListInput{UnreadOnly: true}); p.TotalCount != 2 {
		t.Fatalf("unread after NewMail = %d, want 2", p.TotalCount)
	}
	// A since the caller cannot see does not exist for them.
	hidden := e.send("alice", "@carol")
	_, err = s.NewMail(e.as("bob"), hidden.MessageID, true, 50)
	wantErr(t, err, "Message not found: "+hidden.MessageID)
	got, err = s.NewMail(e.as("carol"), "", true, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got.Messages {
		if r.MessageID == m1.MessageID || r.MessageID == m2.MessageID {
			t.Fatalf("carol sees %s", r.MessageID)
		}
	}
}

func testAnnounce(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	m1 := e.send("alice", "@bob")
	m2 := e.send("alice", "@bob")
	hidden := e.send("alice", "@carol")
	fresh, err := s.Announce(e.as("bob"), "S1", []string{m1.MessageID, hidden.MessageID})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "first announcement (invisible ids ignored)", fresh, m1.MessageID)
	fresh, _ = s.Announce(e.as("bob"), "S1", []string{m2.MessageID, m1.MessageID})
	wantIDs(t, "second announcement in the same session", fresh, m2.MessageID)
	fresh, _ = s.Announce(e.as("bob"), "S1", []string{m2.MessageID, m1.MessageID})
	wantIDs(t, "nothing new", fresh)
	fresh, _ = s.Announce(e.as("bob"), "S2", []string{m1.MessageID})
	wantIDs(t, "another session starts afresh", fresh, m1.MessageID)
	// Sessions are per identity: carol's S1 is not bob's.
	fresh, _ = s.Announce(e.as("carol"), "S1", []string{hidden.MessageID})
	wantIDs(t, "carol's own session", fresh, hidden.MessageID)
	_, err = s.Announce(e.as("bob"), "", []string{m1.MessageID})
	wantErr(t, err, "session must not be empty")
}
