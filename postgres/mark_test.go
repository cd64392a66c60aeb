package postgres_test

import (
	"context"
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
			if postgres.MarkDrains(s)+postgres.QueueMarkDrains(s) == 0 {
				t.Error("no drain of this case was by a mark")
			}
			if strings.Contains(t.Name(), "/RoleDrain") && postgres.QueueMarkDrains(s) == 0 {
				t.Error("no drain of this role case wrote a role queue's mark")
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
		for _, role := range []bool{false, true} {
			name := tc.name
			if role {
				// A role queue's mark, the write another holder's.
				name = "role queue/" + name
			}
			t.Run(name, func(t *testing.T) { testDrainByMarkHoldsWrites(t, tc.name, role, tc.write, tc.read) })
		}
	}
}

func testDrainByMarkHoldsWrites(t *testing.T, name string, role bool, write func(bob context.Context, s *postgres.Store, id string) error, read bool) {
	tc := struct {
		name  string
		write func(bob context.Context, s *postgres.Store, id string) error
		read  bool
	}{name, write, read}
	ctx := context.Background()
	var during func()
	s := heldFold(t, storetest.NewClock().Now, postgres.Hooks{AfterMark: func() { during() }})
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	to, writer, drains := "@bob", bob, postgres.MarkDrains
	if role {
		carol := agent(t, s, "carol")
		for _, who := range []string{"bob", "carol"} {
			if err := s.GrantRole(ctx, who, "ops"); err != nil {
				t.Fatal(err)
			}
		}
		to, writer, drains = "role:ops", carol, postgres.QueueMarkDrains
	}
	var ids []string
	for range 5 {
		r, err := s.Send(alice, draft(t, to))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageID)
	}
	var wg sync.WaitGroup
	var werr error
	during = func() {
		wg.Add(1)
		go func() { defer wg.Done(); werr = tc.write(writer, s, ids[2]) }()
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
	rc, err := s.MarkAllRead(bob, "", role)
	wg.Wait()
	if err != nil || werr != nil || rc.MatchedCount != 5 || drains(s) != 1 {
		t.Fatalf("drain %+v %v, %s %v", rc, err, tc.name, werr)
	}
	checkNoMismatch(t, s, "after the drain and the "+tc.name)
	st, err := s.Status(writer)
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
		m, err := s.Get(writer, ids[2])
		if err != nil || (m.ReadAt != nil) != tc.read {
			t.Fatalf("after the %s: readAt %v %v", tc.name, m.ReadAt, err)
		}
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
	before := storetest.View(t, s, bob)
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
	if after := storetest.View(t, s, bob); after != before {
		t.Fatalf("the fold changed what bob sees:\nbefore\n%s\nafter\n%s", before, after)
	}
	if !strings.Contains(before, rc.SnapshotAt.String()) || strings.Contains(before, "read <nil>") {
		t.Fatalf("bob's mail is not read at the drain's %v:\n%s", rc.SnapshotAt, before)
	}
}

// The fold stepped by the test (storetest.RunFold): a fold changes nothing
// anyone sees, whatever runs between its chunks.
func TestFoldStepped(t *testing.T) {
	storetest.RunFold(t, func(t *testing.T) storetest.HeldFold {
		return foldHooks(heldFold(t, storetest.NewClock().Now, postgres.Hooks{}))
	})
}

// foldHooks is the storetest.HeldFold hook set of s.
func foldHooks(s *postgres.Store) storetest.HeldFold {
	return storetest.HeldFold{
		Store:          s,
		Step:           func(ctx context.Context) (bool, error) { return postgres.FoldStep(ctx, s) },
		SetChunk:       func(n int) { postgres.SetFoldChunk(s, n) },
		Marks:          func(ctx context.Context) ([]string, error) { return postgres.ReadMarks(ctx, s) },
		MarkDrains:     func() int { return postgres.MarkDrains(s) },
		RoleMarkDrains: func() int { return postgres.QueueMarkDrains(s) },
		Check:          func(t *testing.T, when string) { checkNoMismatch(t, s, when) },
	}
}

// A write that makes a message unread, racing a purge stopped between its
// decision and its deletes (storetest.RunPurgeRace), with marks held.
func TestPurgeRace(t *testing.T) {
	storetest.RunPurgeRace(t, func(t *testing.T, decided func()) storetest.PausedPurge {
		s := heldFold(t, storetest.NewClock().Now, postgres.Hooks{PurgeDecided: decided})
		return storetest.PausedPurge{Store: s, Waiting: func() bool {
			w, err := postgres.PurgeWaited(context.Background(), s)
			if err != nil {
				t.Error(err)
			}
			return w
		}}
	})
}

// A drain with includeRoles by a holder with personal mail too: the
// personal part is a mark and the queue's a role mark, in one drain; both
// holders' views do not change through the fold, mail sent after the
// drain stays unread, and counts match a recount.
func TestDrainWithRolesMarksBothParts(t *testing.T) {
	ctx := context.Background()
	s := heldFold(t, storetest.NewClock().Now, postgres.Hooks{})
	alice, bob, carol := agent(t, s, "alice"), agent(t, s, "bob"), agent(t, s, "carol")
	for _, who := range []string{"bob", "carol"} {
		if err := s.GrantRole(ctx, who, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	for range 12 {
		for _, to := range []string{"@bob", "role:ops"} {
			if _, err := s.Send(alice, draft(t, to)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rc, err := s.MarkAllRead(bob, "", true)
	if err != nil || rc.ReadCount != 24 || rc.DurableCount != 24 || postgres.MarkDrains(s) != 1 || postgres.QueueMarkDrains(s) != 1 {
		t.Fatalf("drain %+v %v (personal marks %d, role marks %d)", rc, err, postgres.MarkDrains(s), postgres.QueueMarkDrains(s))
	}
	if len(marks(t, s)) != 2 {
		t.Fatalf("marks %v, want bob's and the queue's", marks(t, s))
	}
	checkNoMismatch(t, s, "after the drain")
	late, err := s.Send(alice, draft(t, "@bob"))
	if err != nil {
		t.Fatal(err)
	}
	views := func() string { return storetest.View(t, s, bob) + storetest.View(t, s, carol) }
	before := views()
	for i := 0; ; i++ {
		more, err := postgres.FoldStep(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if now := views(); now != before {
			t.Fatalf("fold step %d changed what the holders see:\n%s\n%s", i, before, now)
		}
		if !more {
			break
		}
	}
	checkNoMismatch(t, s, "after the fold")
	if m, err := s.Get(bob, late.MessageID); err != nil || m.ReadAt != nil {
		t.Fatalf("mail after the drain: %v %v", m.ReadAt, err)
	}
	if st, err := s.Status(carol); err != nil || st.Unread.Total != 0 {
		t.Fatalf("carol after bob's drain: %+v %v", st.Unread, err)
	}
}
