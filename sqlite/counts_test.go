package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
	"github.com/mailroom/mailroom/storetest"
)

func checkNoMismatch(t *testing.T, s *sqlite.Store, when string) {
	t.Helper()
	bad, err := sqlite.CountMismatches(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("%s: mailbox_count differs from a recount: %v", when, bad)
	}
}

// A drain whose snapshot is every unread delivery takes the counted path
// (counts moved in two statements); one whose snapshot no longer is, at
// write time, must count row by row: here one snapshot message is read
// and a new one arrives between snapshot and write, so the snapshot has as
// many ids as the inbox has unread mail, but not the same ones. The one
// read meanwhile is that mark_read's, not the drain's: the drain counts
// the 4 its write read.
func TestDrainKeepsCountsWhenTheInboxMovesUnderIt(t *testing.T) {
	t.Parallel()
	var (
		s           *sqlite.Store
		alice, bob  context.Context
		once        sync.Once
		first, late string
	)
	hooks := &sqlite.Hooks{AfterSnapshot: func() {
		once.Do(func() {
			if res := s.MarkRead(bob, []string{first}); res[0].Err != nil {
				t.Error(res[0].Err)
			}
			r, err := s.Send(alice, benchstore.Draft())
			if err != nil {
				t.Error(err)
			}
			late = r.MessageID
		})
	}}
	s = open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{Hooks: hooks})
	alice, bob = agent(t, s, "alice"), agent(t, s, "bob")
	for i := range 5 {
		r, err := s.Send(alice, benchstore.Draft())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r.MessageID
		}
	}
	rc, err := s.MarkAllRead(bob, "", false)
	if err != nil || rc.MatchedCount != 4 || rc.ReadCount != 4 || rc.DurableCount != 4 || rc.Status != "read" {
		t.Fatalf("%+v %v", rc, err)
	}
	checkNoMismatch(t, s, "after a drain that raced a read and a send")
	st, err := s.Status(bob)
	if err != nil || st.Unread.Total != 1 {
		t.Fatalf("unread %+v %v, want only %s", st.Unread, err, late)
	}
	// Now the snapshot is the whole unread set: the counted path.
	if rc, err := s.MarkAllRead(bob, "", false); err != nil || rc.ReadCount != 1 {
		t.Fatalf("%+v %v", rc, err)
	}
	checkNoMismatch(t, s, "after a drain of the whole unread set")
	if st, _ := s.Status(bob); st.Unread.Total != 0 {
		t.Fatalf("unread %+v", st.Unread)
	}
	f, _ := mailroom.ListInput{}.Filter()
	if p, err := s.List(bob, f); err != nil || p.TotalCount != 6 {
		t.Fatalf("inbox total %d %v", p.TotalCount, err)
	}
}

// A drain with includeRoles whose role queue moves between its snapshot
// and its write: another holder reads one snapshot message and archives
// another. The one read keeps its readAt and its count; the archived one
// is marked read (as the single-id path marks archived mail) and moves in
// the archived counts; the drain counts the 4 its write read.
func TestRoleDrainKeepsCountsWhenTheQueueMovesUnderIt(t *testing.T) {
	t.Parallel()
	var (
		s              *sqlite.Store
		carol          context.Context
		once           sync.Once
		read, archived string
		readAt         string
	)
	hooks := &sqlite.Hooks{AfterSnapshot: func() {
		once.Do(func() {
			res := s.MarkRead(carol, []string{read})
			if res[0].Err != nil {
				t.Error(res[0].Err)
			}
			readAt = res[0].ReadAt.String()
			if _, err := s.Archive(carol, archived); err != nil {
				t.Error(err)
			}
		})
	}}
	s = open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{Hooks: hooks})
	ctx := context.Background()
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	carol = agent(t, s, "carol")
	for _, who := range []string{"bob", "carol"} {
		if err := s.GrantRole(ctx, who, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := mailroom.SendInput{To: []string{"role:ops"}, Subject: "s", Body: "b"}.Draft(0)
	d.OriginSessionID = "SESSION:test"
	var ids []string
	for range 5 {
		r, err := s.Send(alice, d)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageID)
	}
	read, archived = ids[1], ids[3]
	rc, err := s.MarkAllRead(bob, "", true)
	if err != nil || rc.MatchedCount != 4 || rc.ReadCount != 4 || rc.DurableCount != 4 || rc.Status != "read" {
		t.Fatalf("%+v %v", rc, err)
	}
	checkNoMismatch(t, s, "after a role drain that raced a read and an archive")
	if m, err := s.Get(bob, read); err != nil || m.ReadAt == nil || m.ReadAt.String() != readAt || m.ReadBy == nil || *m.ReadBy != "@carol" {
		t.Fatalf("read by carol during the drain: %+v %v", m.Row, err)
	}
	if m, err := s.Get(bob, archived); err != nil || m.ReadAt == nil || m.ArchivedAt == nil {
		t.Fatalf("archived during the drain: %+v %v", m.Row, err)
	}
	st, err := s.Status(carol)
	if err != nil || st.Unread.Total != 0 || st.Archived != 1 {
		t.Fatalf("carol's status %+v %v", st, err)
	}
}

// Two drains of one mailbox whose snapshots hold the same mail: the
// second runs whole between the first's snapshot and its write. Each
// message is counted by the drain whose write read it, so the first,
// finding its whole snapshot read, reads nothing (as on PostgreSQL,
// where it would wait for the second and then snapshot); the receipts add
// up to what was sent, and mail that came after the first's snapshot
// stays unread.
func TestConcurrentDrainsCountEachMessageOnce(t *testing.T) {
	t.Parallel()
	var (
		s          *sqlite.Store
		alice, bob context.Context
		inner      mailroom.DrainReceipt
		late       string
		ran        bool
	)
	hooks := &sqlite.Hooks{AfterSnapshot: func() {
		if ran {
			return // the inner drain's own
		}
		ran = true
		var err error
		if inner, err = s.MarkAllRead(bob, "", false); err != nil {
			t.Error(err)
		}
		r, err := s.Send(alice, benchstore.Draft())
		if err != nil {
			t.Error(err)
		}
		late = r.MessageID
	}}
	s = open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{Hooks: hooks, Now: storetest.NewClock().Now})
	alice, bob = agent(t, s, "alice"), agent(t, s, "bob")
	if err := s.SendMany(alice, benchstore.Draft(), 5); err != nil {
		t.Fatal(err)
	}
	outer, err := s.MarkAllRead(bob, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if inner.MatchedCount != 5 || inner.ReadCount != 5 || inner.DurableCount != 5 || inner.Status != "read" {
		t.Fatalf("the inner drain: %+v", inner)
	}
	if outer.MatchedCount != 0 || outer.ReadCount != 0 || outer.DurableCount != 0 || outer.Status != "noop" {
		t.Fatalf("the outer drain, whose snapshot the inner one read: %+v", outer)
	}
	checkNoMismatch(t, s, "after two drains of one snapshot")
	st, err := s.Status(bob)
	if err != nil || st.Unread.Total != 1 {
		t.Fatalf("unread %+v %v, want only %s", st.Unread, err, late)
	}
}

// A purge between a drain's snapshot and its write that removes the
// newest message frees its seq and its delivery's id (a rowid is the
// largest plus one), and a message sent then gets them: the drain must
// not read that message, which it never snapshotted.
func TestDrainLeavesMailReusingAPurgedIDUnread(t *testing.T) {
	t.Parallel()
	var (
		s                    *sqlite.Store
		alice, bob           context.Context
		newest, late, reused string
		ran                  bool
	)
	ctx := context.Background()
	hooks := &sqlite.Hooks{AfterSnapshot: func() {
		if ran {
			return
		}
		ran = true
		if _, err := s.Archive(bob, newest); err != nil { // read or archived: a purge may take it
			t.Error(err)
		}
		if rep, err := s.Purge(ctx, mailroom.PurgeRequest{Before: time.Now().Add(time.Hour)}); err != nil || rep.Messages != 1 {
			t.Errorf("purge %+v %v", rep, err)
		}
		r, err := s.Send(alice, benchstore.Draft())
		if err != nil {
			t.Error(err)
		}
		late = r.MessageID
		reused = fmt.Sprint(sqlite.DeliveryIDs(ctx, t, s))
	}}
	s = open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{Hooks: hooks, Now: storetest.NewClock().Now})
	alice, bob = agent(t, s, "alice"), agent(t, s, "bob")
	var ids []string
	for range 3 {
		r, err := s.Send(alice, benchstore.Draft())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageID)
	}
	newest = ids[2]
	before := fmt.Sprint(sqlite.DeliveryIDs(ctx, t, s))
	rc, err := s.MarkAllRead(bob, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if reused != before {
		t.Fatalf("the new message did not reuse the purged delivery's id: %s, then %s", before, reused)
	}
	m, err := s.Get(bob, late)
	if err != nil || m.ReadAt != nil {
		t.Fatalf("the message sent after the snapshot, on a purged id: readAt %v %v", m.ReadAt, err)
	}
	if rc.ReadCount != 2 || rc.DurableCount != 2 {
		t.Fatalf("receipt %+v, want the 2 left of the snapshot", rc)
	}
	checkNoMismatch(t, s, "after the drain")
	if st, err := s.Status(bob); err != nil || st.Unread.Total != 1 {
		t.Fatalf("unread %+v %v, want only %s", st.Unread, err, late)
	}
}

// A database from before migration 0009 gets its counts from the
// migration's backfill: here the counter table and its triggers are taken
// away, mail changes meanwhile, and opening the store again recreates them.
func TestCountsMigrationBackfillsExistingMail(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{})
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	if err := s.SendMany(alice, benchstore.Draft(), 30); err != nil {
		t.Fatal(err)
	}
	s.Close()
	execRaw(t, path, append(downgrade(9),
		// Mail that changed before the upgrade: 10 read, 5 archived.
		`UPDATE delivery SET read_at = delivered_at WHERE id <= 10`,
		`UPDATE delivery SET archived_at = delivered_at WHERE id > 25`,
	)...)
	s = open(t, path, sqlite.Options{})
	checkNoMismatch(t, s, "after the backfill")
	st, err := s.Status(bob)
	if err != nil || st.Unread.Total != 15 || st.Archived != 5 {
		t.Fatalf("status after the backfill: %+v archived %d %v", st.Unread, st.Archived, err)
	}
}

// A database from before migration 0010 gets its role counts and
// candidates from the migration's backfill: the same rows the triggers
// would have kept, and counts that match a recount and a walk.
func TestRoleCountsMigrationBackfillsExistingMail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{})
	alice, bob, carol := agent(t, s, "alice"), agent(t, s, "bob"), agent(t, s, "carol")
	for _, g := range [][2]string{{"bob", "ops"}, {"bob", "triage"}, {"carol", "ops"}} {
		if err := s.GrantRole(ctx, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	send := func(from context.Context, to ...string) string {
		t.Helper()
		r, err := s.Send(from, draftTo(t, to...))
		if err != nil {
			t.Fatal(err)
		}
		return r.MessageID
	}
	send(alice, "role:ops")
	send(alice, "role:ops", "role:triage") // later delivery: triage
	send(alice, "role:ops", "@bob")        // bob's personal copy
	send(bob, "role:ops")                  // bob's own send
	deleted := send(carol, "role:triage")
	if _, err := s.Delete(bob, deleted); err != nil {
		t.Fatal(err)
	}
	if err := s.SendMany(alice, draftTo(t, "role:ops"), 5); err != nil {
		t.Fatal(err)
	}
	want, err := sqlite.RoleCandidates(ctx, s)
	if err != nil || len(want) < 5 {
		t.Fatalf("candidates before: %v %v", want, err)
	}
	s.Close()
	execRaw(t, path, append(downgrade(10),
		// Role mail read and archived before the upgrade.
		`UPDATE delivery SET read_at = delivered_at, read_by = recipient_id WHERE id IN (SELECT id FROM delivery WHERE role = 'ops' ORDER BY id LIMIT 2)`,
		`UPDATE delivery SET archived_at = delivered_at WHERE id IN (SELECT id FROM delivery WHERE role = 'ops' ORDER BY id DESC LIMIT 1)`,
	)...)
	s = open(t, path, sqlite.Options{})
	checkNoMismatch(t, s, "after the backfill")
	got, err := sqlite.RoleCandidates(ctx, s)
	if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("candidates after the backfill:\n%v\nwant (kept by the triggers):\n%v\n%v", got, want, err)
	}
	st, err := s.Status(bob)
	if err != nil {
		t.Fatal(err)
	}
	f, err := mailroom.ListInput{UnreadOnly: true, Via: mailroom.ViaRole, Limit: ptr(100)}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.List(bob, f)
	if err != nil || st.Unread.Role != len(p.Messages) || p.TotalCount != len(p.Messages) {
		t.Fatalf("bob's unread role mail: status %d, totalCount %d, listed %d %v", st.Unread.Role, p.TotalCount, len(p.Messages), err)
	}
	// Four of the bulk five: alice's first two ops messages are read (the
	// two-role one shown through ops), ops+@bob is bob's personally, his
	// own send is his, the triage one deleted, the last bulk one archived.
	if len(p.Messages) != 4 {
		t.Errorf("bob lists %d unread role messages, want 4", len(p.Messages))
	}
}

func draftTo(t testing.TB, to ...string) mailroom.Draft {
	t.Helper()
	d, err := mailroom.SendInput{To: to, Subject: "s", Body: "b"}.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	d.OriginSessionID = "SESSION:test"
	return d
}

// downgrade is the SQL that takes a store back to before migration
// version (9, 10): the counts' tables, triggers and columns of it and of
// every later counts migration (up to 11) go, and so do their records.
// Later migrations stay applied: they do not touch the counts.
func downgrade(version int) []string {
	q := []string{
		`DROP TABLE IF EXISTS read_mark`,
		`DROP TRIGGER IF EXISTS delivery_count_insert`, `DROP TRIGGER IF EXISTS delivery_count_delete`,
		`DROP TRIGGER IF EXISTS delivery_role_count_insert`, `DROP TRIGGER IF EXISTS delivery_role_count_delete`,
		`DROP TABLE role_count`, `DROP TABLE role_hint`, `DROP TABLE role_later`, `DROP INDEX delivery_role_unread`,
		`DELETE FROM sqlite_stat1 WHERE tbl IN ('role_count', 'role_hint', 'role_later') OR idx = 'delivery_role_unread'`,
	}
	if version <= 9 {
		q = append(q, `DROP TABLE mailbox_count`)
	} else {
		q = append(q, `ALTER TABLE mailbox_count DROP COLUMN seqs`)
	}
	return append(q, `DELETE FROM schema_migration WHERE version BETWEEN `+strconv.Itoa(version)+` AND 12`)
}

// InboxState's fingerprint comes from counts: it matches the unread set
// after each step of a random mix, and the counts match a recount.
func TestInboxStateMatchesTheUnreadSet(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{NoSync: true})
	storetest.InboxStateMatchesTheUnreadSet(t, s, func(c context.Context) (int, int64, error) { return sqlite.ExactUnread(c, s) })
	checkNoMismatch(t, s, "after the mix")
}
