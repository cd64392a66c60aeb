package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

// pgTwin is one store of the differential test: the same operations go to
// a store that drains by read marks, personal and role queues' (folded at
// random moments, closed and reopened mid-fold), and to one that marks row
// by row, and what every identity sees must be the same (review8b: the
// port of sqlite/mark_diff_test.go, for the role marks of migration 0013).
type pgTwin struct {
	path  string
	s     *postgres.Store
	ids   map[string]mailroom.Identity
	sent  []string       // message ids by send order
	index map[string]int // message id -> send order
}

func (w *pgTwin) as(name string) context.Context {
	return mailroom.WithCaller(context.Background(), w.ids[name])
}

// readArchivedUnread marks who's archived unread mail read, so that a
// drain of the whole inbox can be a mark (none is left archived unread).
func (w *pgTwin) readArchivedUnread(t *testing.T, who string) {
	t.Helper()
	f, _ := mailroom.ListInput{ArchivedOnly: true, UnreadOnly: true, Limit: ptr(200)}.Filter()
	p, err := w.s.List(w.as(who), f)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range p.Messages {
		ids = append(ids, r.MessageID)
	}
	if len(ids) > 0 {
		w.s.MarkRead(w.as(who), ids)
	}
}

// TestMarkDrainsAsRowsDo runs a seeded mix of every write of read state
// on two stores, one draining by marks (personal and role queues', the
// fold held and stepped at random, the store reopened mid-fold) and one
// by rows, and compares after every step each identity's whole inbox
// (read or not, archived or not, who read a role message, which messages
// share a readAt), its counts, its wake state and its new mail. bob and
// carol share triage, carol and erin oncall (a message to both is a
// second delivery carol's branch hides, erin's shows), dana reads bob's
// inbox.
func TestMarkDrainsAsRowsDo(t *testing.T) {
	t.Parallel()
	seeds, steps := []uint64{1, 2, 3}, 70
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			pgReviewDiff(t, seed, steps)
		})
	}
}

func pgReviewDiff(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	people := []string{"alice", "bob", "carol", "erin", "dana"}
	openTwin := func(name string, hooks *postgres.Hooks) *pgTwin {
		w := &pgTwin{path: pgtest.URL(t), ids: map[string]mailroom.Identity{}, index: map[string]int{}}
		w.s = open(t, w.path, postgres.Options{Now: storetest.NewClock().Now, Hooks: hooks})
		for _, n := range people[:4] {
			id, err := w.s.EnsureAgent(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			w.ids[n] = id
		}
		id, err := w.s.AddIdentity(ctx, "dana", mailroom.KindHuman)
		if err != nil {
			t.Fatal(err)
		}
		w.ids["dana"] = id
		for _, g := range [][2]string{{"bob", "triage"}, {"carol", "triage"}, {"carol", "oncall"}, {"erin", "oncall"}} {
			if err := w.s.GrantRole(ctx, g[0], g[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.s.GrantReadInbox(ctx, "human:dana", "@bob"); err != nil {
			t.Fatal(err)
		}
		return w
	}
	marked := openTwin("mark", &postgres.Hooks{HoldFold: true})
	postgres.SetFoldChunk(marked.s, 3)
	// An AfterSnapshot hook that does nothing makes every drain mark rows.
	rows := openTwin("rows", &postgres.Hooks{HoldFold: true, AfterSnapshot: func() {}})
	both := []*pgTwin{marked, rows}

	var byMark, roleMarks int64 // drains by a mark, role queues' marks, by stores closed since
	rng := rand.New(rand.NewPCG(seed, 99))
	pickN := func() int { return rng.IntN(max(len(marked.sent), 1)) }
	idOf := func(w *pgTwin, i int) string {
		if i >= len(w.sent) {
			return "MESSAGE:none"
		}
		return w.sent[i]
	}
	addrs := func() []string {
		all := []string{"@alice", "@bob", "@bob", "@bob", "@carol", "@erin", "human:dana", "*", "role:triage", "role:oncall", "@me"}
		to := []string{all[rng.IntN(len(all))]}
		if rng.IntN(3) == 0 {
			to = append(to, all[rng.IntN(len(all))])
		}
		seen := map[string]bool{}
		var out []string
		for _, a := range to {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
		return out
	}
	send := func(who string, to []string) {
		for _, w := range both {
			d, err := mailroom.SendInput{To: to, Subject: "s", Body: "b"}.Draft(0)
			if err != nil {
				t.Fatal(err)
			}
			d.OriginSessionID = "SESSION:review"
			r, err := w.s.Send(w.as(who), d)
			if err != nil {
				t.Fatalf("send %v: %v", to, err)
			}
			w.index[r.MessageID] = len(w.sent)
			w.sent = append(w.sent, r.MessageID)
		}
	}
	// The lifecycle calls on one message, each compared by its error code.
	singleIDOps := [...]struct {
		name string
		do   func(s *postgres.Store, ctx context.Context, id string) error
	}{
		{"mark_unread", func(s *postgres.Store, ctx context.Context, id string) error {
			_, err := s.MarkUnread(ctx, id)
			return err
		}},
		{"archive", func(s *postgres.Store, ctx context.Context, id string) error {
			_, err := s.Archive(ctx, id)
			return err
		}},
		{"unarchive", func(s *postgres.Store, ctx context.Context, id string) error {
			_, err := s.Unarchive(ctx, id)
			return err
		}},
		{"delete", func(s *postgres.Store, ctx context.Context, id string) error { _, err := s.Delete(ctx, id); return err }},
		{"retract", func(s *postgres.Store, ctx context.Context, id string) error {
			_, err := s.Retract(ctx, id)
			return err
		}},
	}
	for step := 0; step < steps; step++ {
		who := people[rng.IntN(len(people))]
		var op string
		var out [2]string // each store's answer, which must agree
		switch k := rng.IntN(26); {
		case k < 6:
			to := addrs()
			op = fmt.Sprintf("%s sends %v", who, to)
			send(who, to)
		case k < 7:
			op = "burst to bob"
			for range 3 + rng.IntN(8) {
				send("alice", []string{"@bob"})
			}
		case k < 9:
			ns := []int{pickN()}
			if rng.IntN(2) == 0 {
				ns = append(ns, pickN(), pickN())
			}
			op = fmt.Sprintf("%s mark_read %v", who, ns)
			for i, w := range both {
				var ids []string
				for _, n := range ns {
					ids = append(ids, idOf(w, n))
				}
				for _, r := range w.s.MarkRead(w.as(who), ids) {
					out[i] += r.Status + " "
				}
			}
		case k < 14:
			n := pickN()
			one := singleIDOps[k-9]
			op = fmt.Sprintf("%s %s %d", who, one.name, n)
			for i, w := range both {
				out[i] = fmt.Sprint(mailroom.ErrorCode(one.do(w.s, w.as(who), idOf(w, n))))
			}
		case k < 15:
			if len(marked.sent) < 6 {
				continue
			}
			n, all := rng.IntN(len(marked.sent)), rng.IntN(3) == 0
			if rng.IntN(4) == 0 {
				n = len(marked.sent) - 1 // the newest message too, at times
			}
			op = fmt.Sprintf("purge before %d (unread too: %v)", n, all)
			for i, w := range both {
				m, err := w.s.Get(w.as("alice"), idOf(w, n))
				before := m.SentAt
				if err != nil {
					// Not alice's to see: any message's sentAt, from its sender.
					for _, p := range people {
						if m, err := w.s.Get(w.as(p), idOf(w, n)); err == nil {
							before = m.SentAt
							break
						}
					}
				}
				if before.IsZero() {
					out[i] = "gone"
					continue
				}
				if n == len(w.sent)-1 {
					before = before.Add(time.Microsecond)
				}
				rep, err := w.s.Purge(ctx, mailroom.PurgeRequest{Before: before, IncludeUnread: all})
				if err != nil {
					t.Fatal(err)
				}
				out[i] = fmt.Sprintf("%d messages, %d kept", rep.Messages, rep.Kept)
			}
		case k < 17:
			// The whole inbox, archived unread mail read first, so the
			// marked store drains it by a mark.
			op = fmt.Sprintf("%s drains all", who)
			for i, w := range both {
				w.readArchivedUnread(t, who)
				rc, err := w.s.MarkAllRead(w.as(who), "", false)
				if err != nil {
					t.Fatal(err)
				}
				out[i] = fmt.Sprintf("%s matched %d read %d durable %d withheld %d", rc.Status, rc.MatchedCount, rc.ReadCount, rc.DurableCount, rc.WithheldRoleCount)
			}
		case k < 19:
			// Through a listing's watermark while mail arrives: newer mail
			// to who (archived at times), archived unread mail up to the
			// watermark read first at times, so the marked store may drain
			// by a mark through the watermark.
			readArchived := rng.IntN(3) > 0
			var to [][]string
			var archive []bool
			self := "@" + who
			if who == "dana" {
				self = "human:" + who
			}
			for range 1 + rng.IntN(3) {
				to = append(to, [][]string{{self}, {self}, {"*"}, addrs()}[rng.IntN(4)])
				archive = append(archive, rng.IntN(3) == 0)
			}
			op = fmt.Sprintf("%s drains through its watermark, then %v arrive (archived %v; archived read first %v)", who, to, archive, readArchived)
			// Mail before the watermark too: a drain that leaves more
			// newer mail than it reads marks rows.
			for range rng.IntN(5) {
				send(people[rng.IntN(len(people))], []string{self})
			}
			wms := make([]string, 2)
			for i, w := range both {
				if readArchived {
					w.readArchivedUnread(t, who)
				}
				f, _ := mailroom.ListInput{Limit: ptr(1)}.Filter()
				p, err := w.s.List(w.as(who), f)
				if err != nil {
					t.Fatal(err)
				}
				if p.Watermark != nil {
					wms[i] = *p.Watermark
				}
			}
			for j, a := range to {
				send(people[rng.IntN(len(people))], a)
				if archive[j] {
					for _, w := range both {
						_, _ = w.s.Archive(w.as(who), w.sent[len(w.sent)-1])
					}
				}
			}
			for i, w := range both {
				rc, err := w.s.MarkAllRead(w.as(who), wms[i], false)
				out[i] = fmt.Sprintf("%v %s matched %d read %d durable %d withheld %d", mailroom.ErrorCode(err), rc.Status, rc.MatchedCount, rc.ReadCount, rc.DurableCount, rc.WithheldRoleCount)
			}
		case k < 20:
			// Through a watermark, or a message, with or without roles.
			n, roles := pickN(), rng.IntN(2) == 0
			useWM := rng.IntN(2) == 0
			op = fmt.Sprintf("%s drains through %d (watermark %v) roles %v", who, n, useWM, roles)
			for i, w := range both {
				through := idOf(w, n)
				if useWM {
					f, _ := mailroom.ListInput{Limit: ptr(1)}.Filter()
					p, err := w.s.List(w.as(who), f)
					if err != nil {
						t.Fatal(err)
					}
					through = ""
					if p.Watermark != nil {
						through = *p.Watermark
					}
				}
				rc, err := w.s.MarkAllRead(w.as(who), through, roles)
				out[i] = fmt.Sprintf("%v %s matched %d read %d durable %d withheld %d", mailroom.ErrorCode(err), rc.Status, rc.MatchedCount, rc.ReadCount, rc.DurableCount, rc.WithheldRoleCount)
			}
		case k < 23:
			// The whole inbox with roles, archived unread mail read
			// first, so the marked store drains each role queue its
			// inbox shows whole by a mark of the role; mail to the
			// queues arrives just before at times, some archived.
			if rng.IntN(4) > 0 {
				who = []string{"bob", "carol", "erin"}[rng.IntN(3)] // the role holders, mostly
			}
			op = fmt.Sprintf("%s drains all with roles", who)
			for range 1 + rng.IntN(4) {
				to := [][]string{{"role:triage"}, {"role:oncall"}, {"role:triage", "role:oncall"}}[rng.IntN(3)]
				send(people[rng.IntN(len(people))], to)
				if rng.IntN(4) == 0 {
					for _, w := range both {
						_, _ = w.s.Archive(w.as(who), w.sent[len(w.sent)-1])
					}
				}
			}
			readArchived := rng.IntN(4) > 0
			for i, w := range both {
				if readArchived {
					w.readArchivedUnread(t, who)
				}
				rc, err := w.s.MarkAllRead(w.as(who), "", true)
				out[i] = fmt.Sprintf("%v %s matched %d read %d durable %d withheld %d", mailroom.ErrorCode(err), rc.Status, rc.MatchedCount, rc.ReadCount, rc.DurableCount, rc.WithheldRoleCount)
			}
		case k < 25: // (sqlite's copy has this case after k < 23: never reached)
			op = "fold steps"
			for range 1 + rng.IntN(8) {
				if _, err := postgres.FoldStep(ctx, marked.s); err != nil {
					t.Fatal(err)
				}
			}
		default:
			op = "close and reopen the marked store"
			byMark, roleMarks = byMark+int64(postgres.MarkDrains(marked.s)), roleMarks+int64(postgres.QueueMarkDrains(marked.s))
			marked.s.Close()
			marked.s = open(t, marked.path, postgres.Options{Now: storetest.NewClock().Now, Hooks: &postgres.Hooks{HoldFold: true}})
			postgres.SetFoldChunk(marked.s, 3)
		}
		if out[0] != out[1] {
			t.Fatalf("step %d: %s: the marked store answered %q, the row store %q", step, op, out[0], out[1])
		}
		// The caller each step; everyone (and get_message of every read
		// row) every fourth step and at the end: a difference, once made,
		// stays until a later write of the same rows.
		look, full := []string{who}, step%4 == 3 || step == steps-1
		if full {
			look = people
		}
		for _, p := range look {
			a, b := pgSeen(t, marked, p, full), pgSeen(t, rows, p, full)
			if a != b {
				marks, _ := postgres.ReadMarks(ctx, marked.s)
				t.Fatalf("step %d: %s: %s sees a difference (marks %v):\nmarked store:\n%s\nrow store:\n%s", step, op, p, marks, pgDiffLines(a, b), pgDiffLines(b, a))
			}
		}
		if step%25 == 0 {
			checkNoMismatch(t, marked.s, fmt.Sprintf("step %d (%s)", step, op))
		}
	}
	byMark, roleMarks = byMark+int64(postgres.MarkDrains(marked.s)), roleMarks+int64(postgres.QueueMarkDrains(marked.s))
	t.Logf("seed %d: %d drains by a mark; %d role marks", seed, byMark, roleMarks)
	if byMark == 0 {
		t.Error("no drain was by a mark")
	}
	if roleMarks == 0 {
		t.Error("no role queue was drained by a mark")
	}
	checkNoMismatch(t, marked.s, "at the end")
}

// seen is everything who sees of read state in w, with messages named by
// their send order: the inbox walked whole, and the counts.
func pgSeen(t *testing.T, w *pgTwin, who string, gets bool) string {
	t.Helper()
	ctx := w.as(who)
	var b strings.Builder
	group := map[string]int{} // readAt -> the first message shown with it
	var oldest *time.Time     // the oldest unread, unarchived message listed
	in := mailroom.ListInput{IncludeArchived: true, Limit: ptr(100)}
	for {
		f, err := in.Filter()
		if err != nil {
			t.Fatal(err)
		}
		p, err := w.s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Messages {
			n := w.index[r.MessageID]
			read := "unread"
			if r.ReadAt == nil && r.ArchivedAt == nil && (oldest == nil || r.SentAt.Before(*oldest)) {
				oldest = &r.SentAt
			}
			if r.ReadAt != nil {
				k := r.ReadAt.String()
				if _, ok := group[k]; !ok {
					group[k] = n
				}
				read = fmt.Sprintf("read(with %d)", group[k])
				if gets {
					if m, err := w.s.Get(ctx, r.MessageID); err != nil || m.ReadAt == nil || !m.ReadAt.Equal(*r.ReadAt) {
						t.Fatalf("%s: get %d: readAt %v %v, the listing %v", who, n, m.ReadAt, err, r.ReadAt)
					}
				}
			}
			by := ""
			if r.ReadBy != nil {
				by = " by " + *r.ReadBy
			}
			fmt.Fprintf(&b, "%d %s%s archived %v\n", n, read, by, r.ArchivedAt != nil)
		}
		if p.NextCursor == nil {
			break
		}
		in.Cursor = p.NextCursor
	}
	// Pages by offset read their rows by another statement than the
	// first page and cursor pages do.
	for off := 7; ; off += 7 {
		f, err := mailroom.ListInput{IncludeArchived: true, Limit: ptr(7), Offset: ptr(off)}.Filter()
		if err != nil {
			t.Fatal(err)
		}
		p, err := w.s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Messages {
			read := "unread"
			if r.ReadAt != nil {
				read = fmt.Sprintf("read(with %d)", group[r.ReadAt.String()])
			}
			by := ""
			if r.ReadBy != nil {
				by = *r.ReadBy
			}
			fmt.Fprintf(&b, "offset: %d %s by %q\n", w.index[r.MessageID], read, by)
		}
		if len(p.Messages) < 7 {
			break
		}
	}
	uf, _ := mailroom.ListInput{UnreadOnly: true, IncludeArchived: true, Limit: ptr(100)}.Filter()
	u, err := w.s.List(ctx, uf)
	if err != nil {
		t.Fatal(err)
	}
	st, err := w.s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	is, err := w.s.InboxState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nm, err := w.s.NewMail(ctx, "", true, 500)
	if err != nil {
		t.Fatal(err)
	}
	// mailbox_status's oldest unread is the listing's (each store's own
	// clock: compared within the store).
	oldestOK := (oldest == nil) == (st.OldestUnreadAt == nil) && (oldest == nil || oldest.Equal(*st.OldestUnreadAt))
	fmt.Fprintf(&b, "unread %+v archived %d oldest as listed %v state %d listed unread %d new mail %d per role %+v\n",
		st.Unread, st.Archived, oldestOK, is.UnreadCount, u.TotalCount, len(nm.Messages), st.Roles)
	return b.String()
}

// diffLines is the lines of a not in b.
func pgDiffLines(a, b string) string {
	in := map[string]bool{}
	for _, l := range strings.Split(b, "\n") {
		in[l] = true
	}
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !in[l] {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
