package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
	"github.com/mailroom/mailroom/storetest"
)

// marksGone waits (up to within) for s to hold no read mark; it reports
// whether none is left.
func marksGone(t *testing.T, s *sqlite.Store, within time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		m, err := sqlite.ReadMarks(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			t.Logf("marks still there after %v: %v", within, m)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A mark written by a store that closed before folding it (a CLI drain, a
// stdio server whose session ended) is folded by a store that stays open
// on the same file: otherwise it stays until some later Open, and the
// recipient's next drain or mark_unread pays the whole fold in its request.
func TestReviewMarkLeftByAClosedStoreIsFoldedByAnOpenOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	// The server looks for marks others left every 20 ms, not every 2 s.
	server := open(t, path, sqlite.Options{NoSync: true, Hooks: &sqlite.Hooks{FoldPoll: 20 * time.Millisecond}})
	cli, err := sqlite.Open(ctx, path, sqlite.Options{NoSync: true, Hooks: &sqlite.Hooks{HoldFold: true}})
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := agent(t, cli, "alice"), agent(t, cli, "bob")
	if err := cli.SendMany(alice, benchstore.Draft(), 50); err != nil {
		t.Fatal(err)
	}
	rc, err := cli.MarkAllRead(bob, "", false)
	if err != nil || rc.ReadCount != 50 || sqlite.MarkDrains(cli) != 1 {
		t.Fatalf("drain %+v %v (by mark %d)", rc, err, sqlite.MarkDrains(cli))
	}
	want := storetest.View(t, cli, bob)
	if got := storetest.View(t, server, bob); got != want {
		t.Fatalf("the other store's view of the mark:\n%s\nwant\n%s", got, want)
	}
	cli.Close()
	if !marksGone(t, server, 10*time.Second) {
		t.Error("the store still open on the file never folds the mark a closed store left")
	}
	if got := storetest.View(t, server, bob); got != want {
		t.Fatalf("after the close:\n%s\nwant\n%s", got, want)
	}
	checkNoMismatch(t, server, "at the end")
}

// A store closed in the middle of a fold (a crash between chunks) leaves a
// partly folded mark: reopened, it shows the same, and folds the rest.
func TestReviewCloseMidFoldThenReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	clock := time.Now
	s, err := sqlite.Open(ctx, path, sqlite.Options{Now: clock, NoSync: true, Hooks: &sqlite.Hooks{HoldFold: true}})
	if err != nil {
		t.Fatal(err)
	}
	sqlite.SetFoldChunk(s, 4)
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	var ids []string
	for range 30 {
		r, err := s.Send(alice, benchstore.Draft())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageID)
	}
	if res := s.MarkRead(bob, []string{ids[2], ids[20]}); res[0].Err != nil || res[1].Err != nil {
		t.Fatal(res)
	}
	if _, err := s.Archive(bob, ids[20]); err != nil {
		t.Fatal(err)
	}
	if rc, err := s.MarkAllRead(bob, "", false); err != nil || rc.ReadCount != 28 || sqlite.MarkDrains(s) != 1 {
		t.Fatalf("drain %+v %v", rc, err)
	}
	for range 3 {
		if _, err := sqlite.FoldStep(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Archive(bob, ids[25]); err != nil {
		t.Fatal(err)
	}
	want := storetest.View(t, s, bob)
	marks, _ := sqlite.ReadMarks(ctx, s)
	if len(marks) != 1 {
		t.Fatalf("marks %v, want one partly folded", marks)
	}
	s.Close()

	held := open(t, path, sqlite.Options{NoSync: true, Hooks: &sqlite.Hooks{HoldFold: true}})
	if now, _ := sqlite.ReadMarks(ctx, held); fmt.Sprint(now) != fmt.Sprint(marks) {
		t.Fatalf("reopened: marks %v, want %v", now, marks)
	}
	if got := storetest.View(t, held, bob); got != want {
		t.Fatalf("reopened, mark held:\n%s\nwant\n%s", got, want)
	}
	checkNoMismatch(t, held, "reopened, mark held")
	held.Close()

	s = open(t, path, sqlite.Options{NoSync: true})
	if !marksGone(t, s, 5*time.Second) {
		t.Fatal("reopened: the mark is not folded")
	}
	if got := storetest.View(t, s, bob); got != want {
		t.Fatalf("reopened and folded:\n%s\nwant\n%s", got, want)
	}
	checkNoMismatch(t, s, "reopened and folded")
	// And it goes on as any inbox: unread, drained again.
	if _, err := s.MarkUnread(bob, ids[10]); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Status(bob); st.Unread.Total != 1 {
		t.Fatalf("unread %+v", st.Unread)
	}
	if rc, err := s.MarkAllRead(bob, "", false); err != nil || rc.ReadCount != 1 {
		t.Fatalf("drain %+v %v", rc, err)
	}
	checkNoMismatch(t, s, "at the end")
}

// Two stores on one file: one drains again and again, the other sends to
// the drained inbox and folds (its own folder and stepped by hand) all the
// while. Every message is read by exactly one drain (the drains' read
// counts add up to what is read), every receipt is durable, and both
// stores show the same, with counts that match a recount.
func TestReviewTwoStoresDrainFoldAndSendTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	a := open(t, path, sqlite.Options{NoSync: true})
	b := open(t, path, sqlite.Options{NoSync: true})
	sqlite.SetFoldChunk(a, 7)
	sqlite.SetFoldChunk(b, 7)
	aliceB, bobA := agent(t, b, "alice"), agent(t, a, "bob")
	bobB := agent(t, b, "bob")
	if err := b.SendMany(aliceB, benchstore.Draft(), 300); err != nil {
		t.Fatal(err)
	}
	const sends = 150
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(done)
		for range sends {
			if _, err := b.Send(aliceB, benchstore.Draft()); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := sqlite.FoldStep(ctx, b); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	read, drains := 0, 0
	for {
		rc, err := a.MarkAllRead(bobA, "", false)
		if err != nil {
			t.Fatal(err)
		}
		if rc.MatchedCount > 0 && (rc.Status != "read" || rc.DurableCount != rc.ReadCount) {
			t.Errorf("drain %d: %+v", drains, rc)
		}
		read += rc.ReadCount
		drains++
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	wg.Wait()
	t.Logf("%d drains, %d by a mark", drains, sqlite.MarkDrains(a))
	for {
		more, err := sqlite.FoldStep(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
	st, err := a.Status(bobA)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unread.Total != 300+sends-read {
		t.Errorf("unread %d, want %d (sent %d, the drains read %d)", st.Unread.Total, 300+sends-read, 300+sends, read)
	}
	if va, vb := storetest.View(t, a, bobA), storetest.View(t, b, bobB); va != vb {
		t.Fatalf("the two stores differ:\n%s\n%s", va, vb)
	}
	checkNoMismatch(t, a, "at the end")
}

// Full-text search with unreadOnly consults the mark too (the bounded
// search's own statement, and relatedTo's).
func TestReviewSearchUnreadUnderAMark(t *testing.T) {
	t.Parallel()
	s := heldFold(t, nil)
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	d := benchstore.Draft()
	for range 5 {
		if _, err := s.Send(alice, d); err != nil {
			t.Fatal(err)
		}
	}
	if rc, err := s.MarkAllRead(bob, "", false); err != nil || rc.ReadCount != 5 || sqlite.MarkDrains(s) != 1 {
		t.Fatalf("drain %+v %v", rc, err)
	}
	fresh, err := s.Send(alice, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []mailroom.ListInput{
		{UnreadOnly: true, Query: "checkpoint"},
		{UnreadOnly: true, Query: "checkpoint readers", IncludeArchived: true},
		{UnreadOnly: true, Query: "checkpoint", Box: "inbox"},
	} {
		f, err := in.Filter()
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.List(bob, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Messages) != 1 || p.Messages[0].MessageID != fresh.MessageID || p.TotalCount != 1 {
			t.Errorf("%+v: %d rows (total %d), want only the fresh one", in, len(p.Messages), p.TotalCount)
		}
	}
	checkNoMismatch(t, s, "at the end")
}

// Migration 0012 on a store made before it (0011's count triggers, no
// read_mark; on main a store may have 0013 applied already, so 0012 runs
// after it): the triggers are replaced by ones that consult the mark, and
// a drain by a mark, a delete of a covered delivery and a send keep counts.
func TestReviewMigration0012OnAnOlderStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{NoSync: true})
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	if err := s.SendMany(alice, benchstore.Draft(), 20); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// 0011's personal count triggers, as a store made before 0012 has them.
	execRaw(t, path,
		`DROP TRIGGER delivery_count_insert`,
		`DROP TRIGGER delivery_count_delete`,
		`CREATE TRIGGER delivery_count_insert AFTER INSERT ON delivery WHEN NEW.recipient_id IS NOT NULL
		BEGIN
			INSERT INTO mailbox_count (recipient_id, archived, unread, via, priority, human, n, seqs)
				SELECT NEW.recipient_id, NEW.archived_at IS NOT NULL, NEW.read_at IS NULL, NEW.via, m.priority, s.kind = 'human', 1, NEW.message_seq
				FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = NEW.message_seq
				ON CONFLICT DO UPDATE SET n = n + 1, seqs = seqs + excluded.seqs;
		END`,
		`CREATE TRIGGER delivery_count_delete AFTER DELETE ON delivery WHEN OLD.recipient_id IS NOT NULL
		BEGIN
			UPDATE mailbox_count SET n = n - 1, seqs = seqs - OLD.message_seq
				WHERE recipient_id = OLD.recipient_id AND archived = (OLD.archived_at IS NOT NULL) AND unread = (OLD.read_at IS NULL) AND via = OLD.via
				AND (priority, human) = (SELECT m.priority, s.kind = 'human' FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = OLD.message_seq);
		END`,
		`DROP TABLE read_mark`,
		`DELETE FROM schema_migration WHERE version = 12`,
	)
	s = open(t, path, sqlite.Options{NoSync: true, Hooks: &sqlite.Hooks{HoldFold: true}})
	drainsAfterMigration(t, s, alice, bob)
	if m, _ := sqlite.ReadMarks(ctx, s); len(m) != 1 {
		t.Fatalf("marks %v", m)
	}
}
