package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
	"github.com/mailroom/mailroom/storetest"
)

// heldFold opens a store whose folder does not run: marks stay until the
// test folds them with FoldStep.
func heldFold(t *testing.T, now func() time.Time) *sqlite.Store {
	// A copy of a migrated empty store, as TestStore's (migrating each
	// file cost more CPU than some of these tests' own work).
	path := filepath.Join(t.TempDir(), "m.db")
	benchstore.Empty(t, path)
	return open(t, path, sqlite.Options{Now: now, NoSync: true, Hooks: &sqlite.Hooks{HoldFold: true}})
}

// The drain edge cases with every mark left in place, so every read after
// a drain meets the mark rather than folded rows.
func TestDrainEdgesWithTheMarkHeld(t *testing.T) {
	t.Parallel()
	storetest.RunDrainEdges(t, func(t *testing.T) mailroom.Store {
		t.Parallel()
		s := heldFold(t, storetest.NewClock().Now)
		t.Cleanup(func() {
			if sqlite.MarkDrains(s)+sqlite.RoleMarkDrains(s) == 0 {
				t.Error("no drain of this case was by a mark")
			}
			if strings.Contains(t.Name(), "/RoleDrain") && sqlite.RoleMarkDrains(s) == 0 {
				t.Error("no role queue of this case was drained by a mark")
			}
			checkNoMismatch(t, s, "at the end")
		})
		return s
	})
}

// The random mix of every operation, with marks held: it reaches the mark
// path, and counts and listings agree with it.
func TestCountsMatchListingsWithTheMarkHeld(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{11} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			s := heldFold(t, storetest.NewClock().Now)
			storetest.CountsMatchListings(t, s, seed)
			if n := sqlite.MarkDrains(s); n < 3 {
				t.Errorf("%d drains by a mark in the mix, want several", n)
			}
			if n := sqlite.MarkDrainsOverNewer(s); n < 3 {
				t.Errorf("%d drains by a mark through a watermark with newer mail in the mix, want several", n)
			}
			t.Logf("%d drains by a mark, %d of them through a watermark with newer mail; %d role marks", sqlite.MarkDrains(s), sqlite.MarkDrainsOverNewer(s), sqlite.RoleMarkDrains(s))
			checkNoMismatch(t, s, "after the mix")
		})
	}
}

// view is everything bob can see of read state: each message's readAt and
// archivedAt in a full listing, and his counts.
func view(t *testing.T, s *sqlite.Store, bob context.Context) string {
	t.Helper()
	f, err := mailroom.ListInput{IncludeArchived: true, Limit: ptr(200)}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.List(bob, f)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range p.Messages {
		m, err := s.Get(bob, r.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(m.ReadAt) != fmt.Sprint(r.ReadAt) {
			t.Fatalf("%s: get says readAt %v, the listing %v", r.MessageID, m.ReadAt, r.ReadAt)
		}
		fmt.Fprintf(&b, "%s read %v archived %v\n", r.MessageID, r.ReadAt, r.ArchivedAt)
	}
	st, err := s.Status(bob)
	if err != nil {
		t.Fatal(err)
	}
	is, err := s.InboxState(bob)
	if err != nil {
		t.Fatal(err)
	}
	uf, _ := mailroom.ListInput{UnreadOnly: true, IncludeArchived: true, Limit: ptr(200)}.Filter()
	u, err := s.List(bob, uf)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "unread %+v archived %d oldest %v state %d %s listed %d %v", st.Unread, st.Archived, st.OldestUnreadAt, is.UnreadCount, is.Fingerprint, u.TotalCount, len(u.Messages))
	return b.String()
}

// A fold changes nothing anyone sees: here every operation runs between
// the fold's chunks (4 deliveries each, stepped by the test), and after
// each step what bob sees is what it was before the step, and counts
// match a recount.
func TestFoldInterleavedWithEveryOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := heldFold(t, storetest.NewClock().Now)
	sqlite.SetFoldChunk(s, 4)
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	var ids []string
	send := func() string {
		r, err := s.Send(alice, benchstore.Draft())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageID)
		return r.MessageID
	}
	for range 30 {
		send()
	}
	early := ids[3]
	if res := s.MarkRead(bob, []string{early}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	drain := func(want int) {
		t.Helper()
		rc, err := s.MarkAllRead(bob, "", false)
		if err != nil || rc.ReadCount != want || rc.DurableCount != want {
			t.Fatalf("drain: %+v %v, want %d", rc, err, want)
		}
	}
	drain(29)
	if m, _ := sqlite.ReadMarks(ctx, s); len(m) != 1 {
		t.Fatalf("marks %v, want bob's", m)
	}
	// Each operation, then a fold step; the view after the step is the
	// view before it.
	ops := []struct {
		name string
		do   func() error
	}{
		{"archive a covered message", func() error { _, err := s.Archive(bob, ids[10]); return err }},
		{"send", func() error { send(); return nil }},
		{"mark_read a covered message", func() error { return s.MarkRead(bob, []string{ids[20]})[0].Err }},
		{"unarchive", func() error { _, err := s.Unarchive(bob, ids[10]); return err }},
		{"delete a covered message", func() error { _, err := s.Delete(bob, ids[25]); return err }},
		{"retract", func() error { _, err := s.Retract(alice, ids[26]); return err }},
		{"archive an unfolded one", func() error { _, err := s.Archive(bob, ids[28]); return err }},
		{"mark_read the new one", func() error { return s.MarkRead(bob, []string{ids[30]})[0].Err }},
	}
	steps := 0
	for i := 0; ; i++ {
		if i < len(ops) {
			if err := ops[i].do(); err != nil {
				t.Fatalf("%s: %v", ops[i].name, err)
			}
		}
		before := view(t, s, bob)
		more, err := sqlite.FoldStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		steps++
		if after := view(t, s, bob); after != before {
			t.Fatalf("fold step %d (after %d ops) changed what bob sees:\nbefore\n%s\nafter\n%s", steps, min(i+1, len(ops)), before, after)
		}
		checkNoMismatch(t, s, fmt.Sprintf("after fold step %d", steps))
		if !more {
			break
		}
	}
	if steps < 8 {
		t.Fatalf("the fold took %d steps of 4 deliveries, want about 8", steps)
	}
	if m, _ := sqlite.ReadMarks(ctx, s); len(m) != 0 {
		t.Fatalf("marks left after the fold: %v", m)
	}
	// A drain and a partial fold, then operations that must fold first.
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"mark_unread of a covered message", func() error { _, err := s.MarkUnread(bob, ids[5]); return err }},
		{"mark_unread of one read before the drain", func() error { _, err := s.MarkUnread(bob, early); return err }},
		{"a second drain", func() error { send(); drain(1); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send()
			st, err := s.Status(bob)
			if err != nil {
				t.Fatal(err)
			}
			drain(st.Unread.Total)
			if n := sqlite.MarkDrains(s); n == 0 {
				t.Fatal("no drain by a mark")
			}
			if _, err := sqlite.FoldStep(ctx, s); err != nil {
				t.Fatal(err)
			}
			marks, _ := sqlite.ReadMarks(ctx, s)
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			checkNoMismatch(t, s, "after "+tc.name)
			// The mark is folded (a second drain writes its own).
			if now, _ := sqlite.ReadMarks(ctx, s); len(now) > 0 && fmt.Sprint(now) == fmt.Sprint(marks) {
				t.Fatalf("the mark %v is left after a write that must fold it", now)
			}
			if tc.name != "a second drain" {
				storeAgreesWithRows(t, s, bob)
			}
		})
	}
	// Purge everything under a partly folded mark: a new message reusing a
	// purged seq must arrive unread.
	send()
	drain(1)
	if _, err := sqlite.FoldStep(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(ctx, mailroom.PurgeRequest{Before: time.Now().Add(24 * time.Hour), IncludeUnread: true}); err != nil {
		t.Fatal(err)
	}
	fresh := send()
	if m, err := s.Get(bob, fresh); err != nil || m.ReadAt != nil {
		t.Fatalf("mail after a purge under a mark: readAt %v %v", m.ReadAt, err)
	}
	if st, _ := s.Status(bob); st.Unread.Total != 1 {
		t.Fatalf("unread after purge %+v", st.Unread)
	}
	checkNoMismatch(t, s, "after the purge")
}

// A drain through a watermark with newer mail is a mark through the
// watermark: the newer mail, archived or not, stays unread and counted so
// while the fold writes the mark into the rows below it, chunk by chunk
// (3 deliveries each), and after it.
func TestDrainThroughAWatermarkIsAPartialMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := heldFold(t, storetest.NewClock().Now)
	sqlite.SetFoldChunk(s, 3)
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	send := func() string {
		r, err := s.Send(alice, benchstore.Draft())
		if err != nil {
			t.Fatal(err)
		}
		return r.MessageID
	}
	for range 12 {
		send()
	}
	f, _ := mailroom.ListInput{Limit: ptr(5)}.Filter()
	p, err := s.List(bob, f)
	if err != nil {
		t.Fatal(err)
	}
	var newer []string
	for range 4 {
		newer = append(newer, send())
	}
	if _, err := s.Archive(bob, newer[1]); err != nil {
		t.Fatal(err)
	}
	rc, err := s.MarkAllRead(bob, *p.Watermark, false)
	if err != nil || rc.ReadCount != 12 || rc.DurableCount != 12 || sqlite.MarkDrainsOverNewer(s) != 1 {
		t.Fatalf("drain through the watermark: %+v %v (by a mark over newer mail: %d)", rc, err, sqlite.MarkDrainsOverNewer(s))
	}
	unread := func(when string) {
		t.Helper()
		uf, _ := mailroom.ListInput{UnreadOnly: true, IncludeArchived: true}.Filter()
		u, err := s.List(bob, uf)
		if err != nil || u.TotalCount != 4 || len(u.Messages) != 4 {
			t.Fatalf("%s: unread %d %v", when, u.TotalCount, err)
		}
		for i, r := range u.Messages {
			if r.MessageID != newer[3-i] || r.ReadAt != nil {
				t.Fatalf("%s: unread row %d: %s read %v, want %s unread", when, i, r.MessageID, r.ReadAt, newer[3-i])
			}
		}
	}
	unread("under the mark")
	steps := 0
	for {
		before := view(t, s, bob)
		more, err := sqlite.FoldStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		steps++
		if after := view(t, s, bob); after != before {
			t.Fatalf("fold step %d changed what bob sees:\nbefore\n%s\nafter\n%s", steps, before, after)
		}
		checkNoMismatch(t, s, fmt.Sprintf("after fold step %d", steps))
		if !more {
			break
		}
	}
	if steps != 5 { // 4 chunks, then a step that finds no mark
		t.Fatalf("the fold of 12 took %d steps of 3, want 5", steps)
	}
	storeAgreesWithRows(t, s, bob)
	unread("after the fold")
}

// storeAgreesWithRows checks that what bob is shown unread is what the
// rows hold once no mark covers them: no mark may be left when a write
// needed a fold.
func storeAgreesWithRows(t *testing.T, s *sqlite.Store, bob context.Context) {
	t.Helper()
	marks, err := sqlite.ReadMarks(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) != 0 {
		t.Fatalf("a mark is left after a write that must fold it: %v", marks)
	}
}

// Migration 0012 on a store that had mail: the mark table and the
// triggers that consult it are made, and a drain by a mark keeps counts.
func TestReadMarkMigration(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{NoSync: true})
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	if err := s.SendMany(alice, benchstore.Draft(), 20); err != nil {
		t.Fatal(err)
	}
	s.Close()
	execRaw(t, path, `DROP TABLE read_mark`, `DELETE FROM schema_migration WHERE version = 12`)
	s = open(t, path, sqlite.Options{NoSync: true, Hooks: &sqlite.Hooks{HoldFold: true}})
	alice, bob = agent(t, s, "alice"), agent(t, s, "bob")
	drainsAfterMigration(t, s, alice, bob)
}

// drainsAfterMigration: on a store just migrated to 0012, bob's 20 unread
// drain by a mark, and a delete and a send after it keep the counts.
func drainsAfterMigration(t *testing.T, s *sqlite.Store, alice, bob context.Context) {
	t.Helper()
	rc, err := s.MarkAllRead(bob, "", false)
	if err != nil || rc.ReadCount != 20 || rc.DurableCount != 20 || sqlite.MarkDrains(s) != 1 {
		t.Fatalf("drain after the migration: %+v %v (by mark %d)", rc, err, sqlite.MarkDrains(s))
	}
	f, _ := mailroom.ListInput{Limit: ptr(1)}.Filter()
	p, err := s.List(bob, f)
	if err != nil || len(p.Messages) != 1 {
		t.Fatal(err)
	}
	if _, err := s.Delete(bob, p.Messages[0].MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(alice, benchstore.Draft()); err != nil {
		t.Fatal(err)
	}
	checkNoMismatch(t, s, "after the migration, a drain, a delete and a send")
	if st, _ := s.Status(bob); st.Unread.Total != 1 {
		t.Fatalf("unread %+v", st.Unread)
	}
}

// A drain that would be a mark decides so in its read, and again in its
// write transaction, where it takes its snapshot: here a message is
// archived unread between the two (from the statement hook, while the
// read runs), so the write finds archived unread mail a mark would cover,
// and marks the rest row by row; the archived message stays unread.
func TestDrainByMarkRechecksInItsWrite(t *testing.T) {
	t.Parallel()
	var (
		s        *sqlite.Store
		bob      context.Context
		archived string
		once     sync.Once
	)
	hooks := &sqlite.Hooks{HoldFold: true, Statement: func(q string, args []any) {
		if strings.Contains(q, "FILTER (WHERE archived = 1)") && archived != "" {
			once.Do(func() {
				if _, err := s.Archive(bob, archived); err != nil {
					t.Error(err)
				}
			})
		}
	}}
	s = open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{NoSync: true, Hooks: hooks})
	alice := agent(t, s, "alice")
	bob = agent(t, s, "bob")
	var ids []string
	for range 3 {
		r, err := s.Send(alice, benchstore.Draft())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageID)
	}
	archived = ids[0]
	rc, err := s.MarkAllRead(bob, "", false)
	if err != nil || rc.MatchedCount != 2 || rc.ReadCount != 2 || rc.DurableCount != 2 || rc.Status != "read" {
		t.Fatalf("%+v %v", rc, err)
	}
	if n := sqlite.MarkDrains(s); n != 0 {
		t.Fatalf("%d drains by a mark, want the row path", n)
	}
	if m, _ := s.Get(bob, archived); m.ReadAt != nil || m.ArchivedAt == nil {
		t.Fatalf("the message archived mid-drain: readAt %v archivedAt %v", m.ReadAt, m.ArchivedAt)
	}
	for _, id := range ids[1:] {
		if m, _ := s.Get(bob, id); m.ReadAt == nil {
			t.Fatalf("%s left unread", id)
		}
	}
	checkNoMismatch(t, s, "after a drain that fell back in its write")
}
