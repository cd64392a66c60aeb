package postgres_test

import (
	"context"
	"testing"

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
