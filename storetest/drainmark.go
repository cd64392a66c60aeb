package storetest

import (
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// RunDrainEdges runs the cases of a drain of a whole inbox followed by
// every other operation on what it read: a store may mark such a drain by
// a read-through mark instead of row by row (SQLite does, and folds it
// later), and each case checks what a user sees, whatever the store keeps.
// Run calls it; a store also runs it with its own variations (SQLite: with
// the fold held, so every read meets the mark).
func RunDrainEdges(t *testing.T, open func(t *testing.T) mailroom.Store) {
	t.Run("DrainThenMarkUnread", func(t *testing.T) { testDrainThenMarkUnread(t, open(t)) })
	t.Run("DrainThenArchive", func(t *testing.T) { testDrainThenArchive(t, open(t)) })
	t.Run("DrainThenPurge", func(t *testing.T) { testDrainThenPurge(t, open(t)) })
	t.Run("DrainTwice", func(t *testing.T) { testDrainTwice(t, open(t)) })
	t.Run("DrainThroughWatermark", func(t *testing.T) { testDrainThroughWatermark(t, open(t)) })
	t.Run("DrainThroughWatermarkWithNewerMail", func(t *testing.T) { testDrainThroughWatermarkWithNewerMail(t, open(t)) })
	t.Run("DrainLeavesArchivedUnread", func(t *testing.T) { testDrainLeavesArchivedUnread(t, open(t)) })
	t.Run("DrainThroughWatermarkLeavesArchivedUnread", func(t *testing.T) { testDrainThroughWatermarkLeavesArchivedUnread(t, open(t)) })
	t.Run("DrainThenReadPaths", func(t *testing.T) { testDrainThenReadPaths(t, open(t)) })
	t.Run("RoleDrainIsSharedByHolders", func(t *testing.T) { testRoleDrainIsSharedByHolders(t, open(t)) })
	t.Run("RoleDrainThenGrant", func(t *testing.T) { testRoleDrainThenGrant(t, open(t)) })
	t.Run("RoleDrainLeavesHiddenRoleMail", func(t *testing.T) { testRoleDrainLeavesHiddenRoleMail(t, open(t)) })
	t.Run("RoleDrainThenMarkUnread", func(t *testing.T) { testRoleDrainThenMarkUnread(t, open(t)) })
	t.Run("RoleDrainThenPurge", func(t *testing.T) { testRoleDrainThenPurge(t, open(t)) })
	t.Run("RoleDrainLeavesArchivedAndNewer", func(t *testing.T) { testRoleDrainLeavesArchivedAndNewer(t, open(t)) })
	t.Run("RoleDrainThenViews", func(t *testing.T) { testRoleDrainThenViews(t, open(t)) })
	t.Run("RoleDrainThenArchivedUnread", func(t *testing.T) { testRoleDrainThenArchivedUnread(t, open(t)) })
	t.Run("RoleDrainTwoRolesEitherOrder", func(t *testing.T) { testRoleDrainTwoRolesEitherOrder(t, open(t)) })
	t.Run("RoleDrainOwnHandoffs", func(t *testing.T) { testRoleDrainOwnHandoffs(t, open(t)) })
	t.Run("RoleDrainThroughWatermarkThenRevoke", func(t *testing.T) { testRoleDrainThroughWatermarkThenRevoke(t, open(t)) })
	t.Run("WithheldRoleCountBesideARoleDrain", func(t *testing.T) { testWithheldRoleCountBesideARoleDrain(t, open(t)) })
	t.Run("ConcurrentDrainsReadEachMessageOnce", func(t *testing.T) { testConcurrentDrainsReadEachMessageOnce(t, open(t)) })
	t.Run("DrainReadAtIsItsSnapshotAt", func(t *testing.T) { testDrainReadAtIsItsSnapshotAt(t, open(t)) })
}

// CountsMatchListings is the random mix of RunLifecycle's
// CountsMatchListings with its own seed, for a store's own variations.
func CountsMatchListings(t *testing.T, s mailroom.Store, seed uint64) {
	countsMatchListings(t, s, seed)
}

// readAt is who's readAt of id as get_message shows it.
func (e *env) readAt(who, id string) *time.Time {
	e.t.Helper()
	m, err := e.s.Get(e.as(who), id)
	if err != nil {
		e.t.Fatalf("get %s for %s: %v", id, who, err)
	}
	return m.ReadAt
}

// drainAll drains who's inbox (no roles) and checks the receipt.
func (e *env) drainAll(who, through string, want int) mailroom.DrainReceipt {
	e.t.Helper()
	rc, err := e.s.MarkAllRead(e.as(who), through, false)
	if err != nil {
		e.t.Fatal(err)
	}
	status := "read"
	if want == 0 {
		status = "noop"
	}
	if rc.Status != status || rc.MatchedCount != want || rc.ReadCount != want || rc.FailureCount != 0 {
		e.t.Fatalf("drain of %s: receipt %+v, want %d read", who, rc, want)
	}
	if e.s.Durable() && rc.DurableCount != want {
		e.t.Fatalf("drain of %s: durableCount %d, want %d", who, rc.DurableCount, want)
	}
	return rc
}

// sends sends n messages from alice to bob.
func (e *env) sends(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = e.send("alice", "@bob").MessageID
	}
	return out
}

// sameReadAt checks that every id has readAt want for who, in get_message
// and in a listing row.
func (e *env) sameReadAt(what, who string, want time.Time, ids ...string) {
	e.t.Helper()
	for _, id := range ids {
		if got := e.readAt(who, id); got == nil || !got.Equal(want) {
			e.t.Fatalf("%s: get %s: readAt %v, want %v", what, id, got, want)
		}
		r, ok := e.row(who, id, mailroom.ListInput{})
		if !ok || r.ReadAt == nil || !r.ReadAt.Equal(want) {
			e.t.Fatalf("%s: listed %s: found %v, readAt %v, want %v", what, id, ok, r.ReadAt, want)
		}
	}
}

func (e *env) unread(who string) int {
	e.t.Helper()
	st, err := e.s.Status(e.as(who))
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Unread.Total
}

func testDrainThenMarkUnread(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	m := e.sends(4)
	early := s.MarkRead(e.as("bob"), []string{m[0]})[0].ReadAt
	rc := e.drainAll("bob", "", 3)
	e.sameReadAt("read before the drain", "bob", *early, m[0])
	at := *e.readAt("bob", m[1])
	if !at.After(*early) || at.Before(rc.SnapshotAt) {
		t.Fatalf("drained readAt %v: not after the first read %v, or before the snapshot %v", at, early, rc.SnapshotAt)
	}
	e.sameReadAt("drained", "bob", at, m[1], m[2], m[3])
	// mark_unread of one read before the drain, below what it drained.
	if _, err := s.MarkUnread(e.as("bob"), m[0]); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "unread after mark_unread of an earlier read", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), m[0])
	if r := e.readAt("bob", m[0]); r != nil {
		t.Fatalf("mark_unread left readAt %v", r)
	}
	e.sameReadAt("drained ones keep their readAt", "bob", at, m[1], m[2], m[3])

	// A second drain, then mark_unread of one it drained.
	e.drainAll("bob", "", 1)
	second := *e.readAt("bob", m[0])
	if _, err := s.MarkUnread(e.as("bob"), m[2]); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "unread after mark_unread", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), m[2])
	if n := e.unread("bob"); n != 1 {
		t.Fatalf("status unread %d, want 1", n)
	}
	if r := e.readAt("bob", m[2]); r != nil {
		t.Fatalf("mark_unread left readAt %v", r)
	}
	e.sameReadAt("the others keep the first drain's readAt", "bob", at, m[1], m[3])
	e.sameReadAt("and the second drain's", "bob", second, m[0])
	// Marking read again: a new readAt for the unread one, the first one
	// kept for the others.
	res := s.MarkRead(e.as("bob"), []string{m[2], m[3]})
	if res[0].ReadAt == nil || !res[0].ReadAt.After(second) || res[1].ReadAt == nil || !res[1].ReadAt.Equal(at) {
		t.Fatalf("mark_read after mark_unread: %+v", res)
	}
	e.checkCounts(t, "bob", "after drains and mark_unread")
}

func testDrainThenArchive(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	m := e.sends(3)
	e.drainAll("bob", "", 3)
	at := *e.readAt("bob", m[0])
	if _, err := s.Archive(e.as("bob"), m[1]); err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(e.as("bob"))
	if err != nil || st.Unread.Total != 0 || st.Archived != 1 {
		t.Fatalf("status after archive: %+v %v", st, err)
	}
	wantIDs(t, "archived", ids(e.list("bob", mailroom.ListInput{ArchivedOnly: true})), m[1])
	wantIDs(t, "archived unread", ids(e.list("bob", mailroom.ListInput{ArchivedOnly: true, UnreadOnly: true})))
	if p := e.list("bob", mailroom.ListInput{ArchivedOnly: true, UnreadOnly: true}); p.TotalCount != 0 {
		t.Fatalf("archived unread totalCount %d", p.TotalCount)
	}
	e.sameReadAt("archived after the drain", "bob", at, m[1])
	if _, err := s.Unarchive(e.as("bob"), m[1]); err != nil {
		t.Fatal(err)
	}
	e.sameReadAt("unarchived", "bob", at, m[0], m[1], m[2])
	wantIDs(t, "unread after unarchive", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})))
	// A drain after an archive of drained mail: nothing unread.
	if _, err := s.Archive(e.as("bob"), m[2]); err != nil {
		t.Fatal(err)
	}
	late := e.sends(1)
	e.drainAll("bob", "", 1)
	e.sameReadAt("archived, then drained again", "bob", at, m[2])
	if e.readAt("bob", late[0]) == nil {
		t.Fatal("the second drain left its message unread")
	}
}

func testDrainThenPurge(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	m := e.sends(3)
	e.drainAll("bob", "", 3)
	fresh := e.send("alice", "@bob")
	cut := fresh.SentAt.Add(time.Microsecond)
	dry, err := s.Purge(e.ctx, mailroom.PurgeRequest{Before: cut, DryRun: true})
	if err != nil || dry.Messages != 3 || dry.Kept != 1 {
		t.Fatalf("dry run: drained mail is read, the fresh one unread: %+v %v", dry, err)
	}
	rep, err := s.Purge(e.ctx, mailroom.PurgeRequest{Before: cut})
	if err != nil || rep.Messages != 3 || rep.Kept != 1 {
		t.Fatalf("purge of read mail: %+v %v", rep, err)
	}
	for _, id := range m {
		_, err := s.Get(e.as("bob"), id)
		wantErr(t, err, "Message not found: "+id)
	}
	wantIDs(t, "left", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), fresh.MessageID)
	e.checkCounts(t, "bob", "after purging drained mail")
	// Drain again, purge everything, and mail that arrives after must be
	// unread whatever it is numbered.
	e.drainAll("bob", "", 1)
	rep, err = s.Purge(e.ctx, mailroom.PurgeRequest{Before: cut, IncludeUnread: true})
	if err != nil || rep.Messages != 1 {
		t.Fatalf("purge of everything: %+v %v", rep, err)
	}
	after := e.sends(2)
	wantIDs(t, "arrived after the purge", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), after[1], after[0])
	if n := e.unread("bob"); n != 2 {
		t.Fatalf("status unread %d, want 2", n)
	}
	for _, id := range after {
		if r := e.readAt("bob", id); r != nil {
			t.Fatalf("mail after the purge shows read at %v", r)
		}
	}
	e.checkCounts(t, "bob", "after purging everything")
}

func testDrainTwice(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	m := e.sends(3)
	e.drainAll("bob", "", 3)
	first := *e.readAt("bob", m[0])
	late := e.sends(2)
	wantIDs(t, "arrived after the drain", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), late[1], late[0])
	for _, id := range late {
		if r := e.readAt("bob", id); r != nil {
			t.Fatalf("arrived after the drain, shows read at %v", r)
		}
	}
	e.drainAll("bob", "", 2)
	second := *e.readAt("bob", late[0])
	if !second.After(first) {
		t.Fatalf("second drain's readAt %v not after the first's %v", second, first)
	}
	e.sameReadAt("first drain kept", "bob", first, m...)
	e.sameReadAt("second drain", "bob", second, late...)
	e.drainAll("bob", "", 0)
	e.checkCounts(t, "bob", "after two drains")
}

func testDrainThroughWatermark(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	m := e.sends(3)
	wm := e.list("bob", mailroom.ListInput{}).Watermark
	late := e.sends(1)
	e.drainAll("bob", *wm, 3)
	wantIDs(t, "after the watermark", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), late[0])
	at := *e.readAt("bob", m[0])
	e.sameReadAt("through the watermark", "bob", at, m...)
	// Through the newest message: the whole inbox.
	wm = e.list("bob", mailroom.ListInput{}).Watermark
	e.drainAll("bob", *wm, 1)
	after := e.sends(1)
	wantIDs(t, "after the second watermark", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), after[0])
	e.sameReadAt("first drain kept", "bob", at, m...)
	e.checkCounts(t, "bob", "after drains through watermarks")
}

// testDrainThroughWatermarkWithNewerMail is what an agent does after
// listing a page: it drains through the page's watermark while mail keeps
// arriving. What came after the watermark stays unread and counted unread
// (direct and broadcast, archived or not), whatever is unread at or below
// it is read, and every later write sees the line between them: a
// single-id mark of each side, mark_unread below it, archive of each side,
// a second drain through a later watermark, a purge below it, a drain of
// everything.
func testDrainThroughWatermarkWithNewerMail(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	old := e.sends(4)
	oldB := e.send("carol", "*").MessageID
	early := s.MarkRead(e.as("bob"), []string{old[1]})[0].ReadAt
	wm := *e.list("bob", mailroom.ListInput{Limit: ptr(2)}).Watermark
	if wm != oldB {
		t.Fatalf("watermark %s, want the newest message %s", wm, oldB)
	}
	newer := e.sends(3)
	newB := e.send("carol", "*").MessageID
	newer = append(newer, newB)
	// Newer mail archived unread, and newer mail read, are left as they are.
	if _, err := s.Archive(e.as("bob"), newer[0]); err != nil {
		t.Fatal(err)
	}
	readNewer := s.MarkRead(e.as("bob"), []string{newer[1]})[0].ReadAt
	rc := e.drainAll("bob", wm, 4)
	at := *e.readAt("bob", old[0])
	if at.Before(rc.SnapshotAt.Add(-time.Second)) || !at.After(*early) {
		t.Fatalf("drained readAt %v: snapshot %v, earlier read %v", at, rc.SnapshotAt, early)
	}
	e.sameReadAt("through the watermark", "bob", at, old[0], old[2], old[3], oldB)
	e.sameReadAt("read before the drain", "bob", *early, old[1])
	e.sameReadAt("newer, read before the drain", "bob", *readNewer, newer[1])
	for _, id := range []string{newer[0], newer[2], newB} {
		if r := e.readAt("bob", id); r != nil {
			t.Fatalf("mail after the watermark %s shows read at %v", id, r)
		}
	}
	wantIDs(t, "unread after the drain", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true, IncludeArchived: true})), newB, newer[2], newer[0])
	if r := e.readAt("carol", oldB); r != nil {
		t.Fatalf("carol's copy of the broadcast was drained: %v", r)
	}
	st, err := s.Status(e.as("bob"))
	if err != nil || st.Unread.Total != 2 || st.Unread.Direct != 1 || st.Unread.Broadcast != 1 || st.Archived != 1 || st.OldestUnreadAt == nil {
		t.Fatalf("status %+v archived %d oldest %v %v", st.Unread, st.Archived, st.OldestUnreadAt, err)
	}
	if is := e.state("bob"); is.UnreadCount != 2 {
		t.Fatalf("inbox state %+v", is)
	}
	nm, err := s.NewMail(e.as("bob"), "", false, 10)
	if err != nil || len(nm.Messages) != 2 {
		t.Fatalf("new mail %+v %v", nm, err)
	}
	e.checkCounts(t, "bob", "after a drain through a watermark with newer mail")
	e.checkCounts(t, "carol", "after bob's drain")

	// Writes on both sides of the watermark.
	if res := s.MarkRead(e.as("bob"), []string{old[2], newer[2]}); res[0].ReadAt == nil || !res[0].ReadAt.Equal(at) || res[1].ReadAt == nil || res[1].ReadAt.Equal(at) {
		t.Fatalf("mark_read of a drained and a newer message: %+v", res)
	}
	if _, err := s.MarkUnread(e.as("bob"), old[3]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Archive(e.as("bob"), old[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Unarchive(e.as("bob"), newer[0]); err != nil {
		t.Fatal(err)
	}
	e.sameReadAt("drained, then archived", "bob", at, old[0])
	e.sameReadAt("drained, kept", "bob", at, old[2], oldB)
	wantIDs(t, "unread after writes on both sides", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true, IncludeArchived: true})), newB, newer[0], old[3])
	e.checkCounts(t, "bob", "after writes on both sides of the watermark")

	// A second drain through a later watermark, with newer mail again.
	wm2 := *e.list("bob", mailroom.ListInput{}).Watermark
	last := e.sends(2)
	rc2 := e.drainAll("bob", wm2, 3)
	second := *e.readAt("bob", newB)
	if !second.After(at) || second.Before(rc2.SnapshotAt.Add(-time.Second)) {
		t.Fatalf("second drain's readAt %v, first %v, snapshot %v", second, at, rc2.SnapshotAt)
	}
	e.sameReadAt("second drain", "bob", second, newB, newer[0], old[3])
	e.sameReadAt("first drain kept", "bob", at, old[0], old[2], oldB)
	wantIDs(t, "after the second watermark", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true, IncludeArchived: true})), last[1], last[0])
	e.checkCounts(t, "bob", "after a second drain through a watermark")

	// A purge of what was drained, then a drain of everything.
	cut := e.readSentAt("bob", newer[0])
	rep, err := s.Purge(e.ctx, mailroom.PurgeRequest{Before: cut})
	if err != nil || rep.Messages != 4 || rep.Kept != 1 {
		t.Fatalf("purge of the drained mail before the first watermark: %+v %v", rep, err)
	}
	wantIDs(t, "after the purge", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true, IncludeArchived: true})), last[1], last[0])
	e.checkCounts(t, "bob", "after a purge below the watermarks")
	e.drainAll("bob", "", 2)
	e.sameReadAt("second drain kept", "bob", second, newB, newer[0])
	e.checkCounts(t, "bob", "after draining everything")
}

// readSentAt is id's sentAt as who sees it.
func (e *env) readSentAt(who, id string) time.Time {
	e.t.Helper()
	m, err := e.s.Get(e.as(who), id)
	if err != nil {
		e.t.Fatalf("get %s for %s: %v", id, who, err)
	}
	return m.SentAt
}

func testDrainLeavesArchivedUnread(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	m := e.sends(3)
	if _, err := s.Archive(e.as("bob"), m[0]); err != nil {
		t.Fatal(err)
	}
	e.drainAll("bob", "", 2)
	if r := e.readAt("bob", m[0]); r != nil {
		t.Fatalf("archived mail was drained: readAt %v", r)
	}
	if _, err := s.Unarchive(e.as("bob"), m[0]); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "unarchived", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), m[0])
	e.drainAll("bob", "", 1)
	e.checkCounts(t, "bob", "after draining around archived mail")
}

// testDrainThroughWatermarkLeavesArchivedUnread: unread mail archived at
// or below the watermark stays unread when the drain stops there with
// newer mail after it, and so does mail archived after the watermark.
func testDrainThroughWatermarkLeavesArchivedUnread(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	m := e.sends(3)
	wm := *e.list("bob", mailroom.ListInput{}).Watermark
	late := e.sends(2)
	for _, id := range []string{m[1], late[0]} {
		if _, err := s.Archive(e.as("bob"), id); err != nil {
			t.Fatal(err)
		}
	}
	e.drainAll("bob", wm, 2)
	for _, id := range []string{m[1], late[0], late[1]} {
		if r := e.readAt("bob", id); r != nil {
			t.Fatalf("%s shows read at %v: archived, or after the watermark", id, r)
		}
	}
	wantIDs(t, "archived unread", ids(e.list("bob", mailroom.ListInput{ArchivedOnly: true, UnreadOnly: true})), late[0], m[1])
	for _, id := range []string{m[1], late[0]} {
		if _, err := s.Unarchive(e.as("bob"), id); err != nil {
			t.Fatal(err)
		}
	}
	wantIDs(t, "unread after unarchive", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), late[1], late[0], m[1])
	e.checkCounts(t, "bob", "after a drain through a watermark around archived mail")
	e.drainAll("bob", "", 3)
	e.checkCounts(t, "bob", "after the drain of everything")
}

// testDrainThenReadPaths checks each other reader of read state after a
// drain: status, the wake path's state, new mail, a grantee's view, role
// mail left alone, a single-id mark, delete and retract.
func testDrainThenReadPaths(t *testing.T, s mailroom.Store) {
	e := newEnv(t, s)
	if err := s.GrantRole(e.ctx, "bob", "ops"); err != nil {
		t.Fatal(err)
	}
	if err := s.GrantReadInbox(e.ctx, "human:dana", "@bob"); err != nil {
		t.Fatal(err)
	}
	m := e.sends(3)
	bcast := e.send("carol", "*").MessageID
	role := e.send("alice", "role:ops").MessageID
	rc := e.drainAll("bob", "", 4)
	if rc.WithheldRoleCount != 1 {
		t.Fatalf("withheld %d", rc.WithheldRoleCount)
	}
	at := *e.readAt("bob", m[0])
	e.sameReadAt("drained", "bob", at, m[0], m[1], m[2], bcast)
	wantIDs(t, "role mail left", ids(e.list("bob", mailroom.ListInput{UnreadOnly: true})), role)
	if r := e.readAt("carol", bcast); r != nil {
		t.Fatalf("carol's copy of the broadcast was drained: %v", r)
	}
	st, err := s.Status(e.as("bob"))
	if err != nil || st.Unread.Total != 1 || st.Unread.Role != 1 || st.Unread.Direct != 0 || st.Unread.Broadcast != 0 {
		t.Fatalf("status %+v %v", st.Unread, err)
	}
	is, err := s.InboxState(e.as("bob"))
	if err != nil || is.UnreadCount != 1 {
		t.Fatalf("inbox state %+v %v", is, err)
	}
	nm, err := s.NewMail(e.as("bob"), "", true, 10)
	if err != nil || len(nm.Messages) != 1 || nm.Messages[0].MessageID != role {
		t.Fatalf("new mail %+v %v", nm, err)
	}
	if nm, err := s.NewMail(e.as("bob"), "", false, 10); err != nil || len(nm.Messages) != 0 {
		t.Fatalf("new personal mail %+v %v", nm, err)
	}
	// A grantee sees the owner's read state.
	p := e.list("dana", mailroom.ListInput{Of: "@bob", UnreadOnly: true, Via: "direct"})
	if p.TotalCount != 0 || len(p.Messages) != 0 {
		t.Fatalf("dana's view of bob's unread: %v (%d)", ids(p), p.TotalCount)
	}
	for _, r := range e.list("dana", mailroom.ListInput{Of: "@bob", Via: "direct"}).Messages {
		if r.ReadAt == nil || !r.ReadAt.Equal(at) {
			t.Fatalf("dana's view of %s: readAt %v, want %v", r.MessageID, r.ReadAt, at)
		}
	}
	// A single-id mark of drained mail keeps the drain's readAt.
	res := s.MarkRead(e.as("bob"), []string{m[1]})
	if res[0].ReadAt == nil || !res[0].ReadAt.Equal(at) {
		t.Fatalf("mark_read of drained mail: %+v, want readAt %v", res[0], at)
	}
	// Delete and retract of drained mail.
	if _, err := s.Delete(e.as("bob"), m[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retract(e.as("alice"), m[2]); err != nil {
		t.Fatal(err)
	}
	e.sameReadAt("retracted", "bob", at, m[2])
	if n := e.unread("bob"); n != 1 {
		t.Fatalf("unread after delete and retract %d, want 1", n)
	}
	e.checkCounts(t, "bob", "after the read paths")
	// Unread mail after the drain through a filter the counts do not
	// answer (a thread).
	fresh := e.send("alice", "@bob")
	thread := e.list("bob", mailroom.ListInput{UnreadOnly: true, ThreadID: fresh.ThreadID})
	wantIDs(t, "unread in the fresh thread", ids(thread), fresh.MessageID)
	if old := e.list("bob", mailroom.ListInput{UnreadOnly: true, From: "@alice", Box: "inbox"}); old.TotalCount != 2 {
		t.Fatalf("unread from alice: %v (%d)", ids(old), old.TotalCount)
	}
}
