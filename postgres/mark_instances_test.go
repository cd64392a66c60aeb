package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

// waitFolded waits until no read mark is left (some instance's folder).
func waitFolded(t *testing.T, s *postgres.Store) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for len(marks(t, s)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the folders left %v", marks(t, s))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readAts is how many of bob's messages show each readAt (the zero time
// for unread ones), and how many there are.
func readAts(t *testing.T, s *postgres.Store, bob context.Context) (map[time.Time]int, int) {
	t.Helper()
	f, err := mailroom.ListInput{IncludeArchived: true, Limit: ptr(200)}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.List(bob, f)
	if err != nil {
		t.Fatal(err)
	}
	by := map[time.Time]int{}
	for _, m := range p.Messages {
		var at time.Time
		if m.ReadAt != nil {
			at = m.ReadAt.UTC()
		}
		by[at]++
	}
	return by, len(p.Messages)
}

// Two instances (two pools, two folders) on one database: bob drains
// through both at once while alice sends through both and each folder
// folds the other's marks in chunks. Every message is read by exactly one
// drain, at that drain's readAt: the drains' counts add up to what was
// sent, each drain's readAt is shown on exactly as many messages as it
// read, and the counters match a recount.
func TestTwoInstancesDrainSendAndFoldTogether(t *testing.T) {
	url := pgtest.URL(t)
	clock := storetest.NewClock()
	a := open(t, url, postgres.Options{Now: clock.Now})
	b := open(t, url, postgres.Options{Now: clock.Now})
	postgres.SetFoldChunk(a, 5)
	postgres.SetFoldChunk(b, 3)
	aliceA, bobA := agent(t, a, "alice"), agent(t, a, "bob")
	aliceB, bobB := agent(t, b, "alice"), agent(t, b, "bob")

	const rounds, perRound = 12, 15
	var (
		mu       sync.Mutex
		receipts []mailroom.DrainReceipt
		sent     int
		wg       sync.WaitGroup
	)
	errs := make(chan error, 16)
	for _, s := range []struct {
		st    *postgres.Store
		alice context.Context
	}{{a, aliceA}, {b, aliceB}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds * perRound / 2 {
				if _, err := s.st.Send(s.alice, draft(t, "@bob")); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				sent++
				mu.Unlock()
			}
		}()
	}
	for _, s := range []struct {
		st  *postgres.Store
		bob context.Context
	}{{a, bobA}, {b, bobB}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				rc, err := s.st.MarkAllRead(s.bob, "", false)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				receipts = append(receipts, rc)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rc, err := a.MarkAllRead(bobA, "", false)
	if err != nil {
		t.Fatal(err)
	}
	receipts = append(receipts, rc)
	waitFolded(t, b)
	checkNoMismatch(t, a, "after the drains and folds")

	by, n := readAts(t, b, bobB)
	if n != sent {
		t.Fatalf("bob lists %d messages, alice sent %d", n, sent)
	}
	if by[time.Time{}] != 0 {
		t.Errorf("%d of bob's messages unread after the last drain", by[time.Time{}])
	}
	total := 0
	for _, rc := range receipts {
		total += rc.ReadCount
		if rc.DurableCount != rc.ReadCount {
			t.Errorf("drain at %v: read %d, durable %d", rc.SnapshotAt, rc.ReadCount, rc.DurableCount)
		}
		if rc.ReadCount > 0 && by[rc.SnapshotAt.UTC()] != rc.ReadCount {
			t.Errorf("drain at %v read %d; %d messages show its readAt", rc.SnapshotAt, rc.ReadCount, by[rc.SnapshotAt.UTC()])
		}
	}
	if total != sent {
		t.Errorf("the drains read %d in all; alice sent %d", total, sent)
	}
	if postgres.MarkDrains(a)+postgres.MarkDrains(b) == 0 {
		t.Errorf("no drain used a mark: the test does not exercise it")
	}
	st, err := a.Status(bobA)
	if err != nil || st.Unread.Total != 0 {
		t.Errorf("status after the last drain: %+v %v", st.Unread, err)
	}
}

// Bob's other writes through a second instance while the first drains and
// its folder folds: afterwards what bob sees agrees with itself (listing,
// get, status, inbox state) and with a recount, and a last drain reads
// exactly what the listing showed unread.
func TestTwoInstancesWritesDuringDrainsAndFolds(t *testing.T) {
	url := pgtest.URL(t)
	clock := storetest.NewClock()
	a := open(t, url, postgres.Options{Now: clock.Now})
	b := open(t, url, postgres.Options{Now: clock.Now})
	postgres.SetFoldChunk(a, 4)
	postgres.SetFoldChunk(b, 4)
	aliceA, bobA, bobB := agent(t, a, "alice"), agent(t, a, "bob"), agent(t, b, "bob")
	var ids []string
	for range 60 {
		r, err := a.Send(aliceA, draft(t, "@bob"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageID)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stop := make(chan struct{})
	wg.Add(2)
	go func() { // drains until the writes are done, a send before each
		defer wg.Done()
		for range 100 {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := a.Send(aliceA, draft(t, "@bob")); err != nil {
				errs <- err
				return
			}
			if _, err := a.MarkAllRead(bobA, "", false); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		defer close(stop)
		for i, id := range ids {
			var err error
			switch i % 5 {
			case 0:
				_, err = b.MarkUnread(bobB, id)
			case 1:
				_, err = b.Archive(bobB, id)
			case 2:
				_, err = b.Unarchive(bobB, ids[i-1])
			case 3:
				if r := b.MarkRead(bobB, []string{id}); r[0].Err != nil {
					err = r[0].Err
				}
			case 4:
				_, err = b.Delete(bobB, id)
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkNoMismatch(t, a, "after the writes")
	storetest.View(t, a, bobA) // get and the listing agree on every readAt
	st, err := b.Status(bobB)
	if err != nil {
		t.Fatal(err)
	}
	uf, err := mailroom.ListInput{UnreadOnly: true, Limit: ptr(200)}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	u, err := b.List(bobB, uf)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unread.Total != u.TotalCount || len(u.Messages) != u.TotalCount {
		t.Fatalf("status counts %d unread, the listing %d (%d rows)", st.Unread.Total, u.TotalCount, len(u.Messages))
	}
	rc, err := b.MarkAllRead(bobB, "", false)
	if err != nil || rc.ReadCount != u.TotalCount {
		t.Fatalf("last drain read %d of %d listed unread (%v)", rc.ReadCount, u.TotalCount, err)
	}
	waitFolded(t, a)
	checkNoMismatch(t, b, "after the last fold")
	by, _ := readAts(t, a, bobA)
	if by[time.Time{}] != 0 || by[rc.SnapshotAt.UTC()] != rc.ReadCount {
		t.Fatalf("after the last drain: %d unread, %d at its readAt (read %d)", by[time.Time{}], by[rc.SnapshotAt.UTC()], rc.ReadCount)
	}
}

// A store closed mid-fold leaves its mark in place, still read as the
// drain's; the next instance's folder finishes it, and nothing bob sees
// changes on the way.
func TestMarkOutlivesItsStoreAndTheNextFolderFinishesIt(t *testing.T) {
	url := pgtest.URL(t)
	clock := storetest.NewClock()
	s1 := open(t, url, postgres.Options{Now: clock.Now, Hooks: &postgres.Hooks{HoldFold: true}})
	postgres.SetFoldChunk(s1, 4)
	alice, bob := agent(t, s1, "alice"), agent(t, s1, "bob")
	for range 30 {
		if _, err := s1.Send(alice, draft(t, "@bob")); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := s1.MarkAllRead(bob, "", false)
	if err != nil || postgres.MarkDrains(s1) != 1 {
		t.Fatalf("drain %+v %v", rc, err)
	}
	if more, err := postgres.FoldStep(context.Background(), s1); err != nil || !more {
		t.Fatalf("fold step: %v %v", more, err)
	}
	before := storetest.View(t, s1, bob)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if len(marks(t, open(t, url, postgres.Options{Now: clock.Now, Hooks: &postgres.Hooks{HoldFold: true}}))) != 1 {
		t.Fatal("the mark did not outlive its store")
	}
	s2 := open(t, url, postgres.Options{Now: clock.Now})
	bob2 := agent(t, s2, "bob")
	waitFolded(t, s2)
	checkNoMismatch(t, s2, "after the next instance's fold")
	if after := storetest.View(t, s2, bob2); after != before {
		t.Fatalf("what bob sees changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	if by, _ := readAts(t, s2, bob2); by[rc.SnapshotAt.UTC()] != 30 {
		t.Fatalf("%d messages at the drain's readAt, want 30", by[rc.SnapshotAt.UTC()])
	}
}

// Two instances draining one role queue: bob through one, carol through
// the other, both holding role:ops, while alice sends to the role through
// both and each folder folds the other's role marks in chunks. Every role
// message is read by exactly one drain, at its readAt and by its reader,
// for both holders; the drains' counts add up to what was sent, and the
// counters match a recount.
func TestTwoInstancesDrainARoleQueueTogether(t *testing.T) {
	url := pgtest.URL(t)
	clock := storetest.NewClock()
	a := open(t, url, postgres.Options{Now: clock.Now})
	b := open(t, url, postgres.Options{Now: clock.Now})
	postgres.SetFoldChunk(a, 5)
	postgres.SetFoldChunk(b, 3)
	aliceA, bobA := agent(t, a, "alice"), agent(t, a, "bob")
	aliceB, carolB := agent(t, b, "alice"), agent(t, b, "carol")
	for _, who := range []string{"bob", "carol"} {
		if err := a.GrantRole(context.Background(), who, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	const rounds, perRound = 10, 16
	var (
		mu       sync.Mutex
		receipts = map[string][]mailroom.DrainReceipt{}
		sent     int
		wg       sync.WaitGroup
	)
	errs := make(chan error, 16)
	for _, alice := range []struct {
		st  *postgres.Store
		ctx context.Context
	}{{a, aliceA}, {b, aliceB}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds * perRound / 2 {
				if _, err := alice.st.Send(alice.ctx, draft(t, "role:ops")); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				sent++
				mu.Unlock()
			}
		}()
	}
	for _, h := range []struct {
		name string
		st   *postgres.Store
		ctx  context.Context
	}{{"@bob", a, bobA}, {"@carol", b, carolB}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				rc, err := h.st.MarkAllRead(h.ctx, "", true)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				receipts[h.name] = append(receipts[h.name], rc)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rc, err := a.MarkAllRead(bobA, "", true)
	if err != nil {
		t.Fatal(err)
	}
	receipts["@bob"] = append(receipts["@bob"], rc)
	waitFolded(t, b)
	checkNoMismatch(t, a, "after the drains and folds")

	f, err := mailroom.ListInput{IncludeArchived: true, Limit: ptr(200)}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	type read struct {
		at time.Time
		by string
	}
	var views []map[read]int
	for _, who := range []struct {
		st  *postgres.Store
		ctx context.Context
	}{{b, bobA}, {a, carolB}} {
		p, err := who.st.List(who.ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Messages) != sent {
			t.Fatalf("a holder lists %d messages, alice sent %d", len(p.Messages), sent)
		}
		v := map[read]int{}
		for _, m := range p.Messages {
			if m.ReadAt == nil || m.ReadBy == nil {
				t.Fatalf("%s unread after the last drain: %v %v", m.MessageID, m.ReadAt, m.ReadBy)
			}
			v[read{m.ReadAt.UTC(), *m.ReadBy}]++
		}
		views = append(views, v)
	}
	if fmt.Sprint(views[0]) != fmt.Sprint(views[1]) {
		t.Fatalf("the holders see the queue read differently:\n%v\n%v", views[0], views[1])
	}
	total := 0
	for by, rcs := range receipts {
		for _, rc := range rcs {
			total += rc.ReadCount
			if rc.DurableCount != rc.ReadCount {
				t.Errorf("%s's drain at %v: read %d, durable %d", by, rc.SnapshotAt, rc.ReadCount, rc.DurableCount)
			}
			if rc.ReadCount > 0 && views[0][read{rc.SnapshotAt.UTC(), by}] != rc.ReadCount {
				t.Errorf("%s's drain at %v read %d; %d messages show it", by, rc.SnapshotAt, rc.ReadCount, views[0][read{rc.SnapshotAt.UTC(), by}])
			}
		}
	}
	if total != sent {
		t.Errorf("the drains read %d in all; alice sent %d", total, sent)
	}
	if postgres.QueueMarkDrains(a)+postgres.QueueMarkDrains(b) == 0 {
		t.Errorf("no drain wrote a role queue's mark: the test does not exercise it")
	}
	t.Logf("role queue marks: %d + %d", postgres.QueueMarkDrains(a), postgres.QueueMarkDrains(b))
	for _, who := range []context.Context{bobA, carolB} {
		if st, err := a.Status(who); err != nil || st.Unread.Total != 0 {
			t.Errorf("status after the last drain: %+v %v", st.Unread, err)
		}
	}
}
