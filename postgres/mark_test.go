package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

// heldFold opens a store whose folder does not run: marks stay until the
// test folds them with FoldStep.
func heldFold(t *testing.T, now func() time.Time, hooks postgres.Hooks) *postgres.Store {
	hooks.HoldFold = true
	return open(t, pgtest.URL(t), postgres.Options{Now: now, Hooks: &hooks})
}

func checkNoMismatch(t *testing.T, s *postgres.Store, when string) {
	t.Helper()
	bad, err := postgres.CountMismatches(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("%s: mailbox_count differs from a recount: %v", when, bad)
	}
}

func agent(t *testing.T, s *postgres.Store, name string) context.Context {
	t.Helper()
	id, err := s.EnsureAgent(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return mailroom.WithCaller(context.Background(), id)
}

func marks(t *testing.T, s *postgres.Store) []string {
	t.Helper()
	m, err := postgres.ReadMarks(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The drain edge cases with every mark left in place, so every read after
// a drain meets the mark rather than folded rows.
func TestDrainEdgesWithTheMarkHeld(t *testing.T) {
	storetest.RunDrainEdges(t, func(t *testing.T) mailroom.Store {
		s := heldFold(t, storetest.NewClock().Now, postgres.Hooks{})
		t.Cleanup(func() {
			// Role drains mark role rows: PostgreSQL has no role mark.
			if postgres.MarkDrains(s) == 0 && !strings.Contains(t.Name(), "/RoleDrain") {
				t.Error("no drain of this case was by a mark")
			}
			checkNoMismatch(t, s, "at the end")
		})
		return s
	})
}

// The random mix of every operation, with marks held: it reaches the mark
// path, and counts and listings agree with it.
func TestCountsMatchListingsWithTheMarkHeld(t *testing.T) {
	s := heldFold(t, storetest.NewClock().Now, postgres.Hooks{})
	storetest.CountsMatchListings(t, s, 11)
	if n := postgres.MarkDrains(s); n < 3 {
		t.Errorf("%d drains by a mark in the mix, want several", n)
	}
	t.Logf("%d drains by a mark", postgres.MarkDrains(s))
	checkNoMismatch(t, s, "after the mix")
}

// view is everything bob can see of read state: each message's readAt and
// archivedAt in a full listing, and his counts.
func view(t *testing.T, s *postgres.Store, bob context.Context) string {
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
	ctx := context.Background()
	s := heldFold(t, storetest.NewClock().Now, postgres.Hooks{})
	postgres.SetFoldChunk(s, 4)
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	var ids []string
	send := func() string {
		r, err := s.Send(alice, draft(t, "@bob"))
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
	if m := marks(t, s); len(m) != 1 {
		t.Fatalf("marks %v, want bob's", m)
	}
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
		more, err := postgres.FoldStep(ctx, s)
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
	if m := marks(t, s); len(m) != 0 {
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
			if _, err := postgres.FoldStep(ctx, s); err != nil {
				t.Fatal(err)
			}
			before := marks(t, s)
			if len(before) != 1 {
				t.Fatalf("marks %v, want bob's, partly folded", before)
			}
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			checkNoMismatch(t, s, "after "+tc.name)
			// The mark is folded (a second drain writes its own).
			if now := marks(t, s); len(now) > 0 && fmt.Sprint(now) == fmt.Sprint(before) {
				t.Fatalf("the mark %v is left after a write that must fold it", now)
			}
		})
	}
	// Purge everything under a partly folded mark: new mail arrives unread.
	send()
	drain(1)
	if _, err := postgres.FoldStep(ctx, s); err != nil {
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
	ctx := context.Background()
	s := heldFold(t, storetest.NewClock().Now, postgres.Hooks{})
	postgres.SetFoldChunk(s, 3)
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	send := func() string {
		r, err := s.Send(alice, draft(t, "@bob"))
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
	if err != nil || rc.ReadCount != 12 || rc.DurableCount != 12 || postgres.MarkDrains(s) != 1 {
		t.Fatalf("drain through the watermark: %+v %v (by a mark: %d)", rc, err, postgres.MarkDrains(s))
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
		more, err := postgres.FoldStep(ctx, s)
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
	if m := marks(t, s); len(m) != 0 {
		t.Fatalf("marks left after the fold: %v", m)
	}
	unread("after the fold")
}

// A drain by a mark reads what its statement saw and nothing sent while
// its transaction is still open: one send commits in the window (its count
// row is not one the drain holds), another waits for the drain's count row
// and commits after it. Both stay unread, above the mark, and counted so.
func TestDrainByMarkLeavesMailSentDuringItUnread(t *testing.T) {
	var during func()
	s := heldFold(t, storetest.NewClock().Now, postgres.Hooks{AfterMark: func() { during() }})
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	agent(t, s, "carol")
	send := func(to string, p mailroom.Priority) string {
		d := draft(t, to)
		d.Priority = p
		rc, err := s.Send(alice, d)
		if err != nil {
			t.Error(err)
		}
		return rc.MessageID
	}
	for range 3 {
		send("@bob", mailroom.PriorityNormal)
	}
	send("*", mailroom.PriorityLow)
	var inWindow string
	waited := make(chan string)
	during = func() {
		inWindow = send("@bob", mailroom.PriorityHigh)
		go func() { waited <- send("@bob", mailroom.PriorityNormal) }()
	}
	rc, err := s.MarkAllRead(bob, "", false)
	afterCommit := <-waited
	if err != nil || rc.Status != "read" || rc.MatchedCount != 4 || rc.DurableCount != 4 || postgres.MarkDrains(s) != 1 {
		t.Fatalf("receipt %+v %v (by a mark: %d)", rc, err, postgres.MarkDrains(s))
	}
	f, _ := mailroom.ListInput{UnreadOnly: true}.Filter()
	p, err := s.List(bob, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != 2 || p.TotalCount != 2 || p.Messages[0].MessageID != afterCommit || p.Messages[1].MessageID != inWindow {
		t.Fatalf("unread after the drain: total %d, %+v; want %s and %s", p.TotalCount, p.Messages, afterCommit, inWindow)
	}
	st, err := s.Status(bob)
	if err != nil || st.Unread.Total != 2 || st.Unread.ByPriority.High != 1 || st.Unread.ByPriority.Normal != 1 || st.Unread.Broadcast != 0 {
		t.Fatalf("status after the drain: %+v %v", st.Unread, err)
	}
	checkNoMismatch(t, s, "after the drain")
	during = func() {}
	if rc, err := s.MarkAllRead(bob, "", false); err != nil || rc.MatchedCount != 2 || rc.DurableCount != 2 {
		t.Fatalf("second drain %+v %v", rc, err)
	}
	checkNoMismatch(t, s, "after the second drain")
}

// Writes to the drainer's read and archive state that start while a drain
// by a mark is open wait for it (it decided from its snapshot), then see
// the mark: each is started in the drain's transaction and the drain
// commits once the write is waiting for a lock. Counts then agree with a
// recount and with what bob is shown.
func TestDrainByMarkHoldsWritesToTheMailbox(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(bob context.Context, s *postgres.Store, id string) error
		read  bool // the message is read afterwards
	}{
		{"archive", func(bob context.Context, s *postgres.Store, id string) error {
			_, err := s.Archive(bob, id)
			return err
		}, true},
		{"mark_read", func(bob context.Context, s *postgres.Store, id string) error {
			return s.MarkRead(bob, []string{id})[0].Err
		}, true},
		{"mark_unread", func(bob context.Context, s *postgres.Store, id string) error {
			_, err := s.MarkUnread(bob, id)
			return err
		}, false},
		{"delete", func(bob context.Context, s *postgres.Store, id string) error { _, err := s.Delete(bob, id); return err }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var during func()
			s := heldFold(t, storetest.NewClock().Now, postgres.Hooks{AfterMark: func() { during() }})
			alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
			var ids []string
			for range 5 {
				r, err := s.Send(alice, draft(t, "@bob"))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.MessageID)
			}
			var wg sync.WaitGroup
			var werr error
			during = func() {
				wg.Add(1)
				go func() { defer wg.Done(); werr = tc.write(bob, s, ids[2]) }()
				// Commit once the write waits for a lock.
				deadline := time.Now().Add(20 * time.Second)
				for {
					var waiting bool
					if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted)`).Scan(&waiting); err != nil {
						t.Error(err)
						return
					}
					if waiting || time.Now().After(deadline) {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
			rc, err := s.MarkAllRead(bob, "", false)
			wg.Wait()
			if err != nil || werr != nil || rc.MatchedCount != 5 || postgres.MarkDrains(s) != 1 {
				t.Fatalf("drain %+v %v, %s %v", rc, err, tc.name, werr)
			}
			checkNoMismatch(t, s, "after the drain and the "+tc.name)
			st, err := s.Status(bob)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if tc.name == "mark_unread" {
				want = 1
			}
			if st.Unread.Total != want {
				t.Fatalf("unread after the drain and the %s: %+v, want %d", tc.name, st.Unread, want)
			}
			if tc.name != "delete" {
				m, err := s.Get(bob, ids[2])
				if err != nil || (m.ReadAt != nil) != tc.read {
					t.Fatalf("after the %s: readAt %v %v", tc.name, m.ReadAt, err)
				}
			}
		})
	}
}

// The store's own folder writes a drain's mark into the rows and deletes
// it, and what bob sees does not change.
func TestFolderFoldsAMarkInTheBackground(t *testing.T) {
	s := open(t, pgtest.URL(t), postgres.Options{Now: storetest.NewClock().Now})
	postgres.SetFoldChunk(s, 7)
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	for range 40 {
		if _, err := s.Send(alice, draft(t, "@bob")); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := s.MarkAllRead(bob, "", false)
	if err != nil || rc.DurableCount != 40 || postgres.MarkDrains(s) != 1 {
		t.Fatalf("drain %+v %v", rc, err)
	}
	// Whether or not the folder has begun: a fold changes nothing bob sees.
	before := view(t, s, bob)
	deadline := time.Now().Add(30 * time.Second)
	for len(marks(t, s)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the folder left %v", marks(t, s))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var unfolded int
	if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM delivery WHERE read_at IS NULL`).Scan(&unfolded); err != nil || unfolded != 0 {
		t.Fatalf("%d rows without their readAt after the fold (%v)", unfolded, err)
	}
	checkNoMismatch(t, s, "after the fold")
	if after := view(t, s, bob); after != before {
		t.Fatalf("the fold changed what bob sees:\nbefore\n%s\nafter\n%s", before, after)
	}
	if !strings.Contains(before, rc.SnapshotAt.String()) || strings.Contains(before, "read <nil>") {
		t.Fatalf("bob's mail is not read at the drain's %v:\n%s", rc.SnapshotAt, before)
	}
}
