package storetest

import (
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// RunLifecycle runs the lifecycle part of the suite (SPEC sections 9 and
// 10); Run includes it.
func RunLifecycle(t *testing.T, open func(t *testing.T) mailroom.Store) {
	t.Run("Unarchive", func(t *testing.T) { testUnarchive(t, open(t)) })
	t.Run("MarkUnread", func(t *testing.T) { testMarkUnread(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, open(t)) })
	t.Run("Retract", func(t *testing.T) { testRetract(t, open(t)) })
	t.Run("StatusCounts", func(t *testing.T) { testStatusCounts(t, open(t)) })
	t.Run("Purge", func(t *testing.T) { testPurge(t, open(t)) })
	t.Run("ReadGrant", func(t *testing.T) { testReadGrant(t, open(t)) })
	t.Run("RelatedTo", func(t *testing.T) { testRelatedTo(t, open(t)) })
	t.Run("CountsMatchListings", func(t *testing.T) { testCountsMatchListings(t, open(t)) })
	t.Run("RoleCountEdges", func(t *testing.T) { testRoleCountEdges(t, open(t)) })
}

func (e *env) row(who, id string, in mailroom.ListInput) (mailroom.Row, bool) {
	e.t.Helper()
	in.IncludeArchived = true
	in.Limit = ptr(200)
	for _, r := range e.list(who, in).Messages {
		if r.MessageID == id {
			return r, true
		}
	}
	return mailroom.Row{}, false
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func testUnarchive(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	r := e.send("alice", "@bob", "@carol")
	if _, err := s.Archive(e.as("bob"), r.MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Archive(e.as("carol"), r.MessageID); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "archived mail is hidden", ids(e.list("bob", mailroom.ListInput{})))
	rc, err := s.Unarchive(e.as("bob"), r.MessageID)
	if err != nil || rc.Status != "unarchived" || rc.ArchivedAt != nil || rc.MessageID != r.MessageID {
		t.Fatalf("unarchive: %+v %v", rc, err)
	}
	wantIDs(t, "bob's inbox after unarchive", ids(e.list("bob", mailroom.ListInput{})), r.MessageID)
	if row, _ := e.row("carol", r.MessageID, mailroom.ListInput{}); row.ArchivedAt == nil {
		t.Fatal("bob's unarchive unarchived carol's copy")
	}
	// Already unarchived: success, nothing changes (as archive keeps its first archivedAt).
	if _, err := s.Unarchive(e.as("bob"), r.MessageID); err != nil {
		t.Fatalf("unarchive again: %v", err)
	}
	_, err = s.Unarchive(e.as("alice"), r.MessageID)
	wantErr(t, err, "Not a recipient: "+r.MessageID)
	_, err = s.Unarchive(e.as("dana"), r.MessageID)
	wantErr(t, err, "Message not found: "+r.MessageID)
	_, err = s.Unarchive(e.as("bob"), "MESSAGE:nope")
	wantErr(t, err, "Message not found: MESSAGE:nope")
}

func testMarkUnread(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	r := e.send("alice", "*")
	for _, who := range []string{"bob", "carol"} {
		if res := s.MarkRead(e.as(who), []string{r.MessageID}); res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
	}
	rc, err := s.MarkUnread(e.as("bob"), r.MessageID)
	if err != nil || rc.Status != "unread" || rc.ReadAt != nil {
		t.Fatalf("mark unread: %+v %v", rc, err)
	}
	wantIDs(t, "bob's unread", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), r.MessageID)
	wantIDs(t, "carol stays read", ids(e.list("carol", mailroom.ListInput{UnreadOnly: true})))
	if _, err := s.MarkUnread(e.as("bob"), r.MessageID); err != nil {
		t.Fatalf("mark unread again: %v", err)
	}
	// A new read after an explicit unread gets a new readAt.
	if res := s.MarkRead(e.as("bob"), []string{r.MessageID}); res[0].Err != nil || res[0].ReadAt == nil {
		t.Fatalf("read again: %+v", res[0])
	}
	_, err = s.MarkUnread(e.as("alice"), r.MessageID)
	wantErr(t, err, "Not a recipient: "+r.MessageID)
	_, err = s.MarkUnread(e.as("dana"), r.MessageID)
	wantErr(t, err, "Message not found: "+r.MessageID)

	// A role message's state is shared: unread goes back for every holder.
	for _, who := range []string{"bob", "carol"} {
		if err := s.GrantRole(e.ctx, who, "triage"); err != nil {
			t.Fatal(err)
		}
	}
	q := e.send("alice", "role:triage")
	if res := s.MarkRead(e.as("carol"), []string{q.MessageID}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if _, err := s.MarkUnread(e.as("bob"), q.MessageID); err != nil {
		t.Fatal(err)
	}
	if row, _ := e.row("carol", q.MessageID, mailroom.ListInput{}); row.ReadAt != nil || row.ReadBy != nil {
		t.Fatalf("role state did not go back for carol: %+v", row)
	}
}

func testDelete(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	r := e.send("alice", "@bob", "@carol")
	rc, err := s.Delete(e.as("bob"), r.MessageID)
	if err != nil || rc.Status != "deleted" || rc.DeletedAt.IsZero() {
		t.Fatalf("delete: %+v %v", rc, err)
	}
	notFound := "Message not found: " + r.MessageID
	wantIDs(t, "bob's inbox", ids(e.list("bob", mailroom.ListInput{Box: "all", IncludeArchived: true})))
	_, err = s.Get(e.as("bob"), r.MessageID)
	wantErr(t, err, notFound)
	res := s.MarkRead(e.as("bob"), []string{r.MessageID})
	wantErr(t, res[0].Err, notFound)
	_, err = s.Delete(e.as("bob"), r.MessageID)
	wantErr(t, err, notFound) // already deleted: it no longer exists for bob
	wantIDs(t, "carol unaffected", ids(e.list("carol", mailroom.ListInput{})), r.MessageID)
	wantIDs(t, "sender's outbox unaffected", ids(e.list("alice", mailroom.ListInput{Box: "outbox"})), r.MessageID)
	if st, err := s.Status(e.as("bob")); err != nil || st.Unread.Total != 0 {
		t.Fatalf("deleted mail is counted: %+v %v", st, err)
	}

	// The sender deletes from its outbox; recipients keep theirs.
	if _, err := s.Delete(e.as("alice"), r.MessageID); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "alice's outbox", ids(e.list("alice", mailroom.ListInput{Box: "outbox"})))
	_, err = s.Get(e.as("alice"), r.MessageID)
	wantErr(t, err, notFound)
	if _, err := s.Get(e.as("carol"), r.MessageID); err != nil {
		t.Fatalf("carol lost her copy: %v", err)
	}
	_, err = s.Delete(e.as("dana"), r.MessageID)
	wantErr(t, err, notFound)

	// A role message: gone for the one holder who deleted it, not the queue.
	for _, who := range []string{"bob", "carol"} {
		if err := s.GrantRole(e.ctx, who, "triage"); err != nil {
			t.Fatal(err)
		}
	}
	q := e.send("alice", "role:triage")
	if _, err := s.Delete(e.as("bob"), q.MessageID); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "bob's view of the queue", ids(e.list("bob", mailroom.ListInput{})))
	wantIDs(t, "carol's view of the queue", ids(e.list("carol", mailroom.ListInput{})), q.MessageID, r.MessageID)
	// Personal and role delivery together: deleting hides both for the caller.
	both := e.send("alice", "@bob", "role:triage")
	if _, err := s.Delete(e.as("bob"), both.MessageID); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(e.as("bob"), both.MessageID)
	wantErr(t, err, "Message not found: "+both.MessageID)
	if drain, err := s.MarkAllRead(e.as("bob"), "", true); err != nil || drain.MatchedCount != 0 {
		t.Fatalf("a drain reached deleted mail: %+v %v", drain, err)
	}
}

func testRetract(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	r, err := e.trySend("alice", mailroom.SendInput{To: []string{"@bob"}, Subject: "wrong recipient zeppelin", Body: "the zeppelin launch codes", TaggedConcepts: []string{"launch"}})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := e.trySend("bob", mailroom.SendInput{To: []string{"@alice"}, InReplyTo: r.MessageID})
	if err != nil {
		t.Fatal(err)
	}
	// An extractor tagged it before the retraction.
	if job, ok, err := claim1(s, "w", time.Minute); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	} else if job.MessageID == r.MessageID {
		if err := complete1(s, job, []mailroom.Concept{{ID: "CONCEPT:zeppelin", Name: "zeppelin"}}, []string{"zeppelin"}); err != nil {
			t.Fatal(err)
		}
	}
	if res := s.MarkRead(e.as("bob"), []string{r.MessageID}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	_, err = s.Retract(e.as("bob"), r.MessageID)
	wantErr(t, err, "Not the sender: "+r.MessageID)
	_, err = s.Retract(e.as("carol"), r.MessageID)
	wantErr(t, err, "Message not found: "+r.MessageID)
	rc, err := s.Retract(e.as("alice"), r.MessageID)
	if err != nil || rc.Status != "retracted" || !rc.Retracted {
		t.Fatalf("retract: %+v %v", rc, err)
	}
	for _, who := range []string{"alice", "bob"} {
		m, err := s.Get(e.as(who), r.MessageID)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if !m.Retracted || m.Subject != "" || m.Body != "" {
			t.Fatalf("%s sees %+v", who, m)
		}
		if m.ThreadID != r.ThreadID || len(m.To) != 1 || m.To[0] != "@bob" {
			t.Fatalf("edges changed: %+v", m)
		}
		for _, c := range m.TaggedConcepts {
			if c.ID == "CONCEPT:zeppelin" {
				t.Fatalf("%s still sees the extracted tag: %+v", who, m.TaggedConcepts)
			}
		}
		for _, q := range []string{"zeppelin", "launch", "codes"} {
			if p := e.list(who, mailroom.ListInput{Box: "all", Query: q}); p.TotalCount != 0 {
				t.Fatalf("%s: query %q still finds %v", who, q, ids(p))
			}
		}
	}
	if m, _ := s.Get(e.as("bob"), r.MessageID); m.ReadAt == nil {
		t.Fatal("retraction changed bob's read state")
	}
	if m, _ := s.Get(e.as("bob"), r.MessageID); len(m.TaggedConcepts) != 1 || m.TaggedConcepts[0].ID != "CONCEPT:launch" {
		t.Fatalf("the sender's own tags are edges and stay: %+v", m.TaggedConcepts)
	}
	if m, err := s.Get(e.as("alice"), reply.MessageID); err != nil || m.InReplyTo == nil || *m.InReplyTo != r.MessageID {
		t.Fatalf("reply edge: %+v %v", m, err)
	}
	if cs, err := s.Concepts(e.as("bob"), 100, mailroom.ConceptScan); err != nil {
		t.Fatal(err)
	} else {
		for _, c := range cs.Concepts {
			if c.ID == "CONCEPT:zeppelin" {
				t.Fatalf("list_concepts still shows the retracted tag: %+v", cs)
			}
		}
	}
	// Already retracted: success, nothing changes.
	if _, err := s.Retract(e.as("alice"), r.MessageID); err != nil {
		t.Fatalf("retract again: %v", err)
	}
	// A message still queued for extraction is never tagged afterwards.
	q, err := e.trySend("alice", mailroom.SendInput{To: []string{"@bob"}, Subject: "queued", Body: "airship"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retract(e.as("alice"), q.MessageID); err != nil {
		t.Fatal(err)
	}
	for {
		job, ok, err := claim1(s, "w2", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if job.MessageID == q.MessageID {
			t.Fatalf("a retracted message's job is still queued: %+v", job)
		}
		if err := complete1(s, job, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// testStatusCounts checks every mailbox_status count against the
// totalCount of its list_messages call, for direct, broadcast, role and
// human mail of every priority.
func testStatusCounts(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	for _, who := range []string{"bob", "carol"} {
		if err := s.GrantRole(e.ctx, who, "triage"); err != nil {
			t.Fatal(err)
		}
	}
	sends := []struct {
		from     string
		to       []string
		priority string
	}{
		{"alice", []string{"@bob"}, "high"},
		{"alice", []string{"@bob", "@carol"}, "low"},
		{"carol", []string{"*"}, "normal"},
		{"alice", []string{"*", "@bob"}, "high"}, // bob: personal, counted as direct
		{"alice", []string{"role:triage"}, "normal"},
		{"alice", []string{"role:triage", "@bob"}, "low"},
		{"alice", []string{"role:next-session"}, ""},
		{"carol", []string{"role:next-session-of-bob"}, "high"},
		{"dana", []string{"@bob"}, "high"},
		{"dana", []string{"role:triage"}, "low"},
		{"dana", []string{"*"}, ""},
		{"bob", []string{"@me"}, ""},
		{"bob", []string{"role:triage"}, ""}, // not in bob's own inbox
		{"alice", []string{"human:dana"}, ""},
	}
	var got []string
	for _, sd := range sends {
		r, err := e.trySend(sd.from, mailroom.SendInput{To: sd.to, Priority: sd.priority})
		if err != nil {
			t.Fatalf("%+v: %v", sd, err)
		}
		got = append(got, r.MessageID)
	}
	// Some read, some archived, one deleted, one unread again.
	s.MarkRead(e.as("bob"), []string{got[1], got[4]})
	s.Archive(e.as("bob"), got[2])
	s.Archive(e.as("bob"), got[9])
	s.Delete(e.as("bob"), got[1])
	s.MarkRead(e.as("bob"), []string{got[0]})
	s.MarkUnread(e.as("bob"), got[0])
	s.MarkRead(e.as("carol"), []string{got[3]})

	for _, who := range []string{"bob", "carol", "alice", "dana"} {
		st, err := s.Status(e.as(who))
		if err != nil {
			t.Fatal(err)
		}
		if st.Identity != e.ids[who].Address() {
			t.Fatalf("identity %s, want %s", st.Identity, e.ids[who].Address())
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
		queries := mailroom.StatusQueries(roles)
		if len(queries) != len(counts) {
			t.Fatalf("%s: %d counts, %d queries", who, len(counts), len(queries))
		}
		for name, in := range queries {
			if p := e.list(who, in); p.TotalCount != counts[name] {
				t.Errorf("%s: %s = %d, list_messages(%+v).totalCount = %d", who, name, counts[name], in, p.TotalCount)
			}
		}
		if st.Unread.Direct+st.Unread.Broadcast+st.Unread.Role != st.Unread.Total {
			t.Errorf("%s: direct+broadcast+role != total: %+v", who, st.Unread)
		}
		p := e.list(who, mailroom.ListInput{UnreadOnly: true, Limit: ptr(200)})
		if len(p.Messages) > 0 {
			oldest := p.Messages[len(p.Messages)-1].SentAt
			if st.OldestUnreadAt == nil || !st.OldestUnreadAt.Equal(oldest) {
				t.Errorf("%s: oldestUnreadAt %v, want %v", who, st.OldestUnreadAt, oldest)
			}
		} else if st.OldestUnreadAt != nil {
			t.Errorf("%s: oldestUnreadAt %v with nothing unread", who, st.OldestUnreadAt)
		}
		if w := e.list(who, mailroom.ListInput{}).Watermark; deref(w) != deref(st.Watermark) {
			t.Errorf("%s: watermark %q, list says %q", who, deref(st.Watermark), deref(w))
		}
	}
	// Fixed expectations for bob, so the test cannot pass on two equal bugs.
	st, _ := s.Status(e.as("bob"))
	want := mailroom.UnreadCounts{Total: 8, Direct: 5, Broadcast: 1, Role: 2, Human: 2, ByPriority: mailroom.PriorityCounts{High: 4, Normal: 3, Low: 1}}
	if st.Unread != want || st.Archived != 2 {
		t.Errorf("bob: %+v archived %d, want %+v archived 2", st.Unread, st.Archived, want)
	}
}

func testPurge(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	old := e.send("alice", "@bob", "@carol")
	oldUnread := e.send("alice", "@bob", "@carol")
	oldRole := e.send("alice", "role:next-session")
	reply, err := e.trySend("bob", mailroom.SendInput{To: []string{"@alice"}, InReplyTo: old.MessageID, TaggedConcepts: []string{"keep me"}})
	if err != nil {
		t.Fatal(err)
	}
	s.MarkRead(e.as("bob"), []string{old.MessageID, oldUnread.MessageID})
	s.Archive(e.as("carol"), old.MessageID)
	s.MarkRead(e.as("bob"), []string{oldRole.MessageID})
	s.MarkRead(e.as("alice"), []string{reply.MessageID})
	cut := time.Now().Add(time.Second)

	dry, err := s.Purge(e.ctx, mailroom.PurgeRequest{Before: reply.SentAt, DryRun: true})
	if err != nil || dry.Messages != 2 || dry.Kept != 1 || dry.Deliveries != 3 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if _, err := s.Get(e.as("bob"), old.MessageID); err != nil {
		t.Fatalf("a dry run removed something: %v", err)
	}
	rep, err := s.Purge(e.ctx, mailroom.PurgeRequest{Before: reply.SentAt})
	if err != nil || rep.Messages != 2 || rep.Kept != 1 {
		t.Fatalf("purge: %+v %v", rep, err)
	}
	for _, id := range []string{old.MessageID, oldRole.MessageID} {
		for _, who := range []string{"alice", "bob", "carol"} {
			_, err := s.Get(e.as(who), id)
			wantErr(t, err, "Message not found: "+id)
		}
	}
	wantIDs(t, "carol keeps her unread old mail", ids(e.list("carol", mailroom.ListInput{})), oldUnread.MessageID)
	if m, err := s.Get(e.as("alice"), reply.MessageID); err != nil || m.InReplyTo != nil || len(m.TaggedConcepts) != 1 {
		t.Fatalf("the surviving reply: %+v %v", m, err)
	}
	if p := e.list("alice", mailroom.ListInput{Box: "all", Query: "body"}); len(p.Messages) != 2 {
		t.Fatalf("full-text index after purge: %v", ids(p))
	}
	rep, err = s.Purge(e.ctx, mailroom.PurgeRequest{Before: cut, IncludeUnread: true})
	if err != nil || rep.Messages != 2 {
		t.Fatalf("purge --include-unread: %+v %v", rep, err)
	}
	wantIDs(t, "everything old is gone", ids(e.list("alice", mailroom.ListInput{Box: "all", IncludeArchived: true})))
	if cs, _ := s.Concepts(e.as("bob"), 10, mailroom.ConceptScan); len(cs.Concepts) != 0 {
		t.Fatalf("concepts survive purge: %+v", cs)
	}
	// The store still works after a purge.
	e.send("alice", "@bob")
}

func testReadGrant(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	r := e.send("bob", "@alice")
	other := e.send("alice", "@bob") // alice's outbox: not her inbox
	if _, err := s.GetOf(e.as("dana"), "alice", mailroom.KindAgent, r.MessageID); err == nil || err.Error() != "No read grant for @alice" {
		t.Fatalf("without a grant: %v", err)
	}
	f, _ := mailroom.ListInput{Of: "@alice"}.Filter()
	if _, err := s.List(e.as("dana"), f); err == nil || err.Error() != "No read grant for @alice" {
		t.Fatalf("list without a grant: %v", err)
	}
	if err := s.GrantReadInbox(e.ctx, "human:dana", "@alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.GrantReadInbox(e.ctx, "human:dana", "@alice"); err != nil {
		t.Fatalf("grant again: %v", err)
	}
	if err := s.GrantReadInbox(e.ctx, "human:dana", "@zed"); err == nil {
		t.Fatal("a grant on an unknown owner")
	}
	p := e.list("dana", mailroom.ListInput{Of: "@alice"})
	wantIDs(t, "dana reads alice's inbox", ids(p), r.MessageID)
	if p.Messages[0].ReadAt != nil {
		t.Fatal("unread for alice, but not in dana's view")
	}
	s.MarkRead(e.as("alice"), []string{r.MessageID})
	m, err := s.GetOf(e.as("dana"), "alice", "", r.MessageID)
	if err != nil || m.ReadAt == nil || m.Body == "" {
		t.Fatalf("dana sees alice's read state: %+v %v", m, err)
	}
	_, err = s.GetOf(e.as("dana"), "alice", "", other.MessageID)
	wantErr(t, err, "Message not found: "+other.MessageID)
	// Read-only by construction: every changing call acts for the caller,
	// and the owner's mail is not the grantee's.
	s.MarkUnread(e.as("alice"), r.MessageID)
	nf := "Message not found: " + r.MessageID
	res := s.MarkRead(e.as("dana"), []string{r.MessageID})
	wantErr(t, res[0].Err, nf)
	for name, op := range map[string]func() error{
		"archive":     func() error { _, err := s.Archive(e.as("dana"), r.MessageID); return err },
		"unarchive":   func() error { _, err := s.Unarchive(e.as("dana"), r.MessageID); return err },
		"mark_unread": func() error { _, err := s.MarkUnread(e.as("dana"), r.MessageID); return err },
		"delete":      func() error { _, err := s.Delete(e.as("dana"), r.MessageID); return err },
		"retract":     func() error { _, err := s.Retract(e.as("dana"), r.MessageID); return err },
		"reply": func() error {
			_, err := e.trySend("dana", mailroom.SendInput{To: []string{"@bob"}, InReplyTo: r.MessageID})
			return err
		},
	} {
		if err := op(); err == nil || err.Error() != nf {
			t.Errorf("grantee %s: %v, want %q", name, err, nf)
		}
	}
	if d, err := s.MarkAllRead(e.as("dana"), "", true); err != nil || d.MatchedCount != 0 {
		t.Errorf("grantee drain: %+v %v", d, err)
	}
	if m, _ := s.Get(e.as("alice"), r.MessageID); m.ReadAt != nil || m.ArchivedAt != nil {
		t.Fatalf("the grantee changed alice's mail: %+v", m)
	}
	if found, err := s.RevokeReadInbox(e.ctx, "dana", "alice"); err != nil || !found {
		t.Fatalf("revoke: %v %v", found, err)
	}
	if found, err := s.RevokeReadInbox(e.ctx, "dana", "alice"); err != nil || found {
		t.Fatalf("revoke again: %v %v", found, err)
	}
	_, err = s.GetOf(e.as("dana"), "alice", "", r.MessageID)
	wantErr(t, err, "No read grant for @alice")
}

func testRelatedTo(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	send := func(from, to string, concepts ...string) string {
		r, err := e.trySend(from, mailroom.SendInput{To: []string{to}, TaggedConcepts: concepts})
		if err != nil {
			t.Fatal(err)
		}
		return r.MessageID
	}
	target := send("alice", "@bob", "wal", "migration", "sqlite")
	one := send("carol", "@bob", "wal")
	three := send("alice", "@bob", "wal", "migration", "sqlite", "other")
	two := send("carol", "@bob", "sqlite", "migration")
	oneNewer := send("alice", "@bob", "migration")
	unrelated := send("alice", "@bob", "lunch")
	hidden := send("alice", "@carol", "wal", "migration", "sqlite") // not bob's
	_ = unrelated
	_ = hidden
	p := e.list("bob", mailroom.ListInput{RelatedTo: target})
	wantIDs(t, "related, most shared first then newest", ids(p), three, two, oneNewer, one)
	if p.TotalCount != 4 {
		t.Fatalf("totalCount %d", p.TotalCount)
	}
	wantIDs(t, "with from", ids(e.list("bob", mailroom.ListInput{RelatedTo: target, From: "@carol"})), two, one)
	wantIDs(t, "paged", ids(e.list("bob", mailroom.ListInput{RelatedTo: target, Limit: ptr(2), Offset: ptr(1)})), two, oneNewer)
	_, err := s.List(e.as("dana"), mustFilter(t, mailroom.ListInput{RelatedTo: target}))
	wantErr(t, err, "Message not found: "+target)
	// With a query: the related mail holding its words.
	r, err := e.trySend("carol", mailroom.SendInput{To: []string{"@bob"}, Body: "a kestrel", TaggedConcepts: []string{"wal"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := e.list("bob", mailroom.ListInput{RelatedTo: target, Query: "kestrel"}); p.TotalCount != 1 || len(p.Messages) != 1 || p.Messages[0].MessageID != r.MessageID {
		t.Fatalf("related with a query: %v, total %d; want %s", ids(p), p.TotalCount, r.MessageID)
	}
}

func mustFilter(t *testing.T, in mailroom.ListInput) mailroom.ListFilter {
	t.Helper()
	f, err := in.Filter()
	if err != nil {
		t.Fatal(err)
	}
	return f
}
