package sqlite_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// twin is one store of the differential test: the same operations go to a
// store that drains by read marks (folded at random moments, closed and
// reopened mid-fold) and to one that marks row by row, and what every
// identity sees must be the same.
type twin struct {
	path  string
	s     *sqlite.Store
	ids   map[string]mailroom.Identity
	sent  []string       // message ids by send order
	index map[string]int // message id -> send order
}

func (w *twin) as(name string) context.Context {
	return mailroom.WithCaller(context.Background(), w.ids[name])
}

// readArchivedUnread marks who's archived unread mail read, so that a
// drain of the whole inbox can be a mark (none is left archived unread).
func (w *twin) readArchivedUnread(t *testing.T, who string) {
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
// on both stores and compares, after every step, each identity's whole
// inbox (read or not, archived or not, who read a role message, and which
// messages share a readAt: a drain, or one mark_read call, gives its
// messages one), its counts and its wake state. Drains of the whole inbox
// and through a listing's watermark while mail arrives reach the mark
// path. (From the session-5 review, branch review5-tests; fewer steps
// under the race detector, where SQLite's C is checked access by access.)
func TestMarkDrainsAsRowsDo(t *testing.T) {
	// In parallel with the package's other tests: run serially, its seeds
	// held back every parallel test for 5 s, one core idle for part of it.
	t.Parallel()
	seeds, steps := []uint64{1, 2, 3}, 90
	if raceDetector {
		seeds, steps = []uint64{4}, 30
	}
	// What the mix must reach is asked of the run's seeds together: since
	// a drain over an unfinished mark marks by rows, one seed of 90 steps
	// can go without a drain by a mark over newer mail.
	var mu sync.Mutex
	var overNewer, roleMarks int64
	t.Cleanup(func() {
		if overNewer == 0 {
			t.Error("no drain through a watermark with newer mail was by a mark")
		}
		if roleMarks == 0 {
			t.Error("no role queue was drained by a mark")
		}
	})
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			o, r := reviewDiff(t, seed, steps)
			mu.Lock()
			overNewer, roleMarks = overNewer+o, roleMarks+r
			mu.Unlock()
		})
	}
}

// reviewDiff runs one seed's mix and returns how many drains over newer
// mail and role drains were by a mark.
func reviewDiff(t *testing.T, seed uint64, steps int) (int64, int64) {
	ctx := context.Background()
	dir := t.TempDir()
	people := []string{"alice", "bob", "carol", "erin", "dana"}
	openTwin := func(name string, hooks *sqlite.Hooks) *twin {
		w := &twin{path: filepath.Join(dir, name+".db"), ids: map[string]mailroom.Identity{}, index: map[string]int{}}
		benchstore.Empty(t, w.path)
		w.s = open(t, w.path, sqlite.Options{NoSync: true, Now: storetest.NewClock().Now, Hooks: hooks})
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
		for _, g := range [][2]string{{"bob", "triage"}, {"carol", "triage"}, {"carol", "oncall"}} {
			if err := w.s.GrantRole(ctx, g[0], g[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.s.GrantReadInbox(ctx, "human:dana", "@bob"); err != nil {
			t.Fatal(err)
		}
		return w
	}
	marked := openTwin("mark", &sqlite.Hooks{HoldFold: true})
	sqlite.SetFoldChunk(marked.s, 3)
	// A FailMark hook that fails nothing makes every drain mark rows.
	rows := openTwin("rows", &sqlite.Hooks{HoldFold: true, FailMark: func(string) error { return nil }})
	both := []*twin{marked, rows}

	var byMark, overNewer, roleMarks int64 // drains by a mark, by stores closed since
	rng := rand.New(rand.NewPCG(seed, 99))
	pickN := func() int { return rng.IntN(max(len(marked.sent), 1)) }
	idOf := func(w *twin, i int) string {
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
		do   func(s *sqlite.Store, ctx context.Context, id string) error
	}{
		{"mark_unread", func(s *sqlite.Store, ctx context.Context, id string) error {
			_, err := s.MarkUnread(ctx, id)
			return err
		}},
		{"archive", func(s *sqlite.Store, ctx context.Context, id string) error { _, err := s.Archive(ctx, id); return err }},
		{"unarchive", func(s *sqlite.Store, ctx context.Context, id string) error {
			_, err := s.Unarchive(ctx, id)
			return err
		}},
		{"delete", func(s *sqlite.Store, ctx context.Context, id string) error { _, err := s.Delete(ctx, id); return err }},
		{"retract", func(s *sqlite.Store, ctx context.Context, id string) error { _, err := s.Retract(ctx, id); return err }},
	}
	for step := 0; step < steps; step++ {
		who := people[rng.IntN(len(people))]
		var op string
		var out [2]string // each store's answer, which must agree
		switch k := rng.IntN(24); {
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
		case k < 21:
			op = "fold steps"
			for range 1 + rng.IntN(12) {
				if _, err := sqlite.FoldStep(ctx, marked.s); err != nil {
					t.Fatal(err)
				}
			}
		case k < 23:
			// The whole inbox with roles, archived unread mail read
			// first, so the marked store drains each role queue its
			// inbox shows whole by a mark of the role; mail to the
			// queues arrives just before at times, some archived.
			op = fmt.Sprintf("%s drains all with roles", who)
			for range rng.IntN(3) {
				to := []string{[]string{"role:triage", "role:oncall"}[rng.IntN(2)]}
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
		default:
			op = "close and reopen the marked store"
			byMark, overNewer = byMark+sqlite.MarkDrains(marked.s), overNewer+sqlite.MarkDrainsOverNewer(marked.s)
			roleMarks += sqlite.RoleMarkDrains(marked.s)
			marked.s.Close()
			marked.s = open(t, marked.path, sqlite.Options{NoSync: true, Now: storetest.NewClock().Now, Hooks: &sqlite.Hooks{HoldFold: true}})
			sqlite.SetFoldChunk(marked.s, 3)
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
			a, b := seen(t, marked, p, full), seen(t, rows, p, full)
			if a != b {
				marks, _ := sqlite.ReadMarks(ctx, marked.s)
				rmarks, _ := sqlite.RoleMarks(ctx, marked.s)
				marks = append(marks, rmarks...)
				t.Fatalf("step %d: %s: %s sees a difference (marks %v):\nmarked store:\n%s\nrow store:\n%s", step, op, p, marks, diffLines(a, b), diffLines(b, a))
			}
		}
		if step%25 == 0 {
			checkNoMismatch(t, marked.s, fmt.Sprintf("step %d (%s)", step, op))
		}
	}
	byMark, overNewer = byMark+sqlite.MarkDrains(marked.s), overNewer+sqlite.MarkDrainsOverNewer(marked.s)
	roleMarks += sqlite.RoleMarkDrains(marked.s)
	t.Logf("seed %d: %d drains by a mark, %d of them through a watermark with newer mail; %d role marks", seed, byMark, overNewer, roleMarks)
	checkNoMismatch(t, marked.s, "at the end")
	return overNewer, roleMarks
}

// seen is everything who sees of read state in w, with messages named by
// their send order: the inbox walked whole, and the counts.
func seen(t *testing.T, w *twin, who string, gets bool) string {
	t.Helper()
	ctx := w.as(who)
	var b strings.Builder
	group := map[string]int{} // readAt -> the first message shown with it
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
	fmt.Fprintf(&b, "unread %+v archived %d oldest set %v state %d listed unread %d new mail %d\n",
		st.Unread, st.Archived, st.OldestUnreadAt != nil, is.UnreadCount, u.TotalCount, len(nm.Messages))
	return b.String()
}

// diffLines is the lines of a not in b.
func diffLines(a, b string) string {
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
