package storetest

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/mailroom/mailroom"
)

// InboxStateMatchesTheUnreadSet runs a seeded random mix of mailbox
// changes (sends to people, roles, everyone and a next-session role;
// marks; drains with and without roles; mark unread; archive; delete) and
// checks after each step that every identity's InboxState, which a store
// may answer from kept counts, has the unread count and fingerprint of
// its unread set as exact counts it (the caller's unread, unarchived inbox
// and the sum of its seqs, the slow way).
func InboxStateMatchesTheUnreadSet(t *testing.T, s mailroom.Store, exact func(context.Context) (int, int64, error)) {
	t.Helper()
	ctx := context.Background()
	names := []string{"alice", "bob", "carol"}
	who := map[string]context.Context{}
	for _, n := range names {
		id, err := s.EnsureAgent(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		who[n] = mailroom.WithCaller(ctx, id)
	}
	for _, g := range [][2]string{{"bob", "ops"}, {"bob", "triage"}, {"carol", "ops"}} {
		if err := s.GrantRole(ctx, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	addrs := []string{"@alice", "@bob", "@carol", "*", "role:ops", "role:triage", "role:next-session-of-bob"}
	rng := rand.New(rand.NewPCG(3, 5))
	var ids []string
	pick := func() string {
		if len(ids) == 0 {
			return "MESSAGE:none"
		}
		return ids[rng.IntN(len(ids))]
	}
	kinds := map[string]int{}
	steps := 300
	if smaller(s) {
		steps = 100
	}
	for step := range steps {
		c := who[names[rng.IntN(len(names))]]
		switch k := rng.IntN(10); {
		case k < 5:
			to := []string{addrs[rng.IntN(len(addrs))]}
			if a := addrs[rng.IntN(len(addrs))]; rng.IntN(2) == 0 && a != to[0] {
				to = append(to, a)
			}
			d, err := mailroom.SendInput{To: to, Subject: "s", Body: "b"}.Draft(0)
			if err != nil {
				t.Fatal(err)
			}
			d.OriginSessionID = "SESSION:test"
			if r, err := s.Send(c, d); err == nil {
				ids = append(ids, r.MessageID)
				kinds["send"]++
			}
		case k < 6:
			if r := s.MarkRead(c, []string{pick()}); r[0].Status == "read" {
				kinds["mark"]++
			}
		case k < 7:
			if rc, err := s.MarkAllRead(c, "", rng.IntN(2) == 0); err == nil && rc.ReadCount > 0 {
				kinds["drain"]++
			}
		case k < 8:
			if _, err := s.MarkUnread(c, pick()); err == nil {
				kinds["unread"]++
			}
		case k < 9:
			if _, err := s.Archive(c, pick()); err == nil {
				kinds["archive"]++
			}
		default:
			if _, err := s.Delete(c, pick()); err == nil {
				kinds["delete"]++
			}
		}
		for _, n := range names {
			st, err := s.InboxState(who[n])
			if err != nil {
				t.Fatal(err)
			}
			en, esum, err := exact(who[n])
			if err != nil {
				t.Fatal(err)
			}
			if want := mailroom.InboxFingerprint(en, esum, st.Watermark); st.UnreadCount != en || st.Fingerprint != want {
				t.Fatalf("step %d: %s: InboxState %d %s, the unread set %d %s", step, n, st.UnreadCount, st.Fingerprint, en, want)
			}
		}
	}
	for _, k := range []string{"send", "mark", "drain", "unread", "archive", "delete"} {
		if kinds[k] == 0 {
			t.Errorf("the mix had no %s that changed anything: %v", k, kinds)
		}
	}
}
