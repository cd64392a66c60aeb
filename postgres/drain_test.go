package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
)

// A drain marks what its statement saw and nothing sent while its
// transaction is still open: one send commits in the window (its count
// row is not one the drain holds), another waits for the drain's count
// row and commits after it. Both stay unread, the receipt reads back
// exactly the drain's messages, and the counts agree with the mail.
func TestDrainLeavesMailSentDuringItUnread(t *testing.T) {
	ctx := context.Background()
	var during func() // runs inside the drain's transaction, once marked
	s := open(t, pgtest.URL(t), postgres.Options{Hooks: &postgres.Hooks{AfterSnapshot: func() { during() }}})
	var ids = map[string]mailroom.Identity{}
	for _, name := range []string{"alice", "bob", "carol"} {
		id, err := s.EnsureAgent(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	alice, bob := mailroom.WithCaller(ctx, ids["alice"]), mailroom.WithCaller(ctx, ids["bob"])
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
	archived := send("@bob", mailroom.PriorityNormal)
	if _, err := s.Archive(bob, archived); err != nil {
		t.Fatal(err)
	}

	var inWindow, afterCommit string
	waited := make(chan string)
	during = func() {
		inWindow = send("@bob", mailroom.PriorityHigh)
		go func() { waited <- send("@bob", mailroom.PriorityNormal) }()
	}
	rc, err := s.MarkAllRead(bob, "", false)
	afterCommit = <-waited
	if err != nil || rc.Status != "read" || rc.MatchedCount != 4 || rc.ReadCount != 4 || rc.DurableCount != 4 {
		t.Fatalf("receipt %+v %v", rc, err)
	}
	f, _ := mailroom.ListInput{UnreadOnly: true}.Filter()
	p, err := s.List(bob, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != 2 || p.TotalCount != 2 || !(p.Messages[0].MessageID == afterCommit && p.Messages[1].MessageID == inWindow) {
		t.Fatalf("unread after the drain: total %d, %+v; want %s and %s", p.TotalCount, p.Messages, afterCommit, inWindow)
	}
	st, err := s.Status(bob)
	if err != nil || st.Unread.Total != 2 || st.Unread.ByPriority.High != 1 || st.Unread.ByPriority.Normal != 1 || st.Unread.Broadcast != 0 || st.Archived != 1 {
		t.Fatalf("status after the drain: %+v archived %d %v", st.Unread, st.Archived, err)
	}
	if st, err := s.Status(mailroom.WithCaller(ctx, ids["carol"])); err != nil || st.Unread.Total != 1 || st.Unread.Broadcast != 1 {
		t.Fatalf("carol's broadcast copy: %+v %v", st.Unread, err)
	}
	// The next drain takes both, and counts them out too.
	during = func() {}
	if rc, err := s.MarkAllRead(bob, "", false); err != nil || rc.MatchedCount != 2 || rc.DurableCount != 2 {
		t.Fatalf("second drain %+v %v", rc, err)
	}
	if st, err := s.Status(bob); err != nil || st.Unread.Total != 0 {
		t.Fatalf("status after the second drain: %+v %v", st.Unread, err)
	}
}

// A drain with the role queues marks what its statement saw unread and
// unarchived; a role message another holder archives while the drain waits
// for its row is archived mail by the time the drain marks, and stays
// unread, and the queue's counts stay those of its rows. Twice: on the row
// path (the AfterSnapshot hook), the archive holding the row; and as the
// store archives, the archive holding the queue's mark lock shared first
// (lockMailboxes), which a drain that may write the queue's mark waits for.
func TestDrainLeavesRoleMailArchivedDuringItUnread(t *testing.T) {
	for _, byLock := range []bool{false, true} {
		t.Run(fmt.Sprint("mark lock ", byLock), func(t *testing.T) { testDrainLeavesRoleMailArchivedDuringItUnread(t, byLock) })
	}
}

func testDrainLeavesRoleMailArchivedDuringItUnread(t *testing.T, byLock bool) {
	ctx := context.Background()
	var hooks postgres.Hooks
	if !byLock {
		hooks.AfterSnapshot = func() {}
	}
	s := open(t, pgtest.URL(t), postgres.Options{Hooks: &hooks})
	ids := map[string]mailroom.Identity{}
	for _, name := range []string{"alice", "bob", "carol"} {
		id, err := s.EnsureAgent(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	for _, who := range []string{"bob", "carol"} {
		if err := s.GrantRole(ctx, who, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	alice, bob := mailroom.WithCaller(ctx, ids["alice"]), mailroom.WithCaller(ctx, ids["bob"])
	var sent []string
	for range 3 {
		rc, err := s.Send(alice, draft(t, "role:ops"))
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, rc.MessageID)
	}
	// carol's archive of the first, held open (the row locked) while the
	// drain's statement reaches the row and waits for it.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if byLock {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(hashtextextended('mailroom.mark.' || current_schema(), mailbox_id)) FROM role WHERE name = 'ops'`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE delivery SET archived_at = now() WHERE recipient = (SELECT mailbox_id FROM role WHERE name = 'ops')
		AND message_seq = (SELECT seq FROM message WHERE id = $1)`, sent[0]); err != nil {
		t.Fatal(err)
	}
	type result struct {
		rc  mailroom.DrainReceipt
		err error
	}
	done := make(chan result)
	go func() {
		rc, err := s.MarkAllRead(bob, "", true)
		done <- result{rc, err}
	}()
	for waiting := false; !waiting; {
		if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.rc.ReadCount != 2 {
		t.Errorf("drain %+v %v, want the two unarchived role messages read", r.rc, r.err)
	}
	if m, err := s.Get(bob, sent[0]); err != nil || m.ReadAt != nil {
		t.Errorf("the role message archived during the drain: %v, read %v", err, m.ReadAt)
	}
	var wrong []string
	rows, err := s.Pool().Query(ctx, `SELECT k::text FROM (
			SELECT recipient, archived, unread, via, priority, human, n FROM mailbox_count WHERE n <> 0
			EXCEPT SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, count(*) FROM delivery GROUP BY 1, 2, 3, 4, 5, 6) k
		UNION ALL SELECT u::text FROM (SELECT recipient, message_seq FROM role_unread
			EXCEPT SELECT recipient, message_seq FROM delivery WHERE via = 'role' AND read_at IS NULL AND archived_at IS NULL) u`)
	if err != nil {
		t.Fatal(err)
	}
	if wrong, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(wrong) > 0 {
		t.Errorf("counts the rows do not have: %v", wrong)
	}
}
