package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// MarkDiff is what RunMarkDiff needs of a store: two stores on new, empty
// databases, both with their folders held.
type MarkDiff struct {
	// Marked opens the store that drains by read marks where it can, the
	// personal and the role queues' (HeldFold, with Reopen set).
	Marked func(t *testing.T) HeldFold
	// Rows opens the model: a store whose every drain marks row by row,
	// through whichever test hook forces that path on the store.
	Rows func(t *testing.T) mailroom.Store
}

// RunMarkDiff is the differential test of read marks: a seeded mix of
// every write of read state (sends, single-id marks and lifecycle calls,
// purges, drains of the whole inbox, through a watermark while mail
// arrives and with roles, fold steps, the marked store closed and reopened
// mid-fold) goes to both stores, and after every step each identity's
// whole inbox (read or not, archived or not, who read a role message,
// which messages share a readAt: a drain, or one mark_read call, gives its
// messages one), its counts (per role too), its oldest unread, its wake
// state and its new mail must be the same. bob and carol share triage,
// carol and erin oncall (a message to both is a second delivery carol's
// branch hides and erin's shows), dana reads bob's inbox. (From the
// session-5 review's SQLite test and session 8's PostgreSQL port.)
func RunMarkDiff(t *testing.T, d MarkDiff) {
	// What the mix must reach: a drain by a mark, of every seed; the rest
	// of the run's seeds together (since a drain over an unfinished mark
	// marks by rows, one seed can go without a drain by a mark over newer
	// mail, and a queue whose oldest unread row a drainer's branch hides
	// gets no role mark from that drainer: seed 2 has none).
	var mu sync.Mutex
	var total diffReach
	var counted bool // the store counts its drains over newer mail itself
	t.Cleanup(func() {
		if t.Failed() || t.Skipped() { // a store with no server skips in d.Marked
			return
		}
		if total.overNewer == 0 {
			t.Error("no drain through a watermark with newer mail was by a mark")
		}
		if counted && total.storeOverNewer == 0 {
			t.Error("the store counted no drain by a mark over newer mail")
		}
		if total.roleMarks == 0 {
			t.Error("no role queue was drained by a mark")
		}
		if total.folds == 0 {
			t.Error("the mix never stepped the folder over a mark")
		}
	})
	// Seeds 1-3 of 90 steps; under the race detector on SQLite (smaller),
	// where 90 steps take minutes, seed 4 of 30.
	first := d.Marked(t)
	seeds, steps := []uint64{1, 2, 3}, 90
	if smaller(first.Store) {
		seeds, steps = []uint64{4}, 30
	}
	for i, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			marked := first
			if i > 0 {
				marked = d.Marked(t)
			}
			r := markDiff(t, seed, steps, marked, d.Rows(t))
			mu.Lock()
			defer mu.Unlock()
			total.add(r)
			counted = marked.MarkDrainsOverNewer != nil
		})
	}
}

// diffReach is what one seed's mix reached on the marked store.
type diffReach struct {
	byMark, overNewer, storeOverNewer, roleMarks, folds int
}

func (r *diffReach) add(o diffReach) {
	r.byMark += o.byMark
	r.overNewer += o.overNewer
	r.storeOverNewer += o.storeOverNewer
	r.roleMarks += o.roleMarks
	r.folds += o.folds
}

// diffTwin is one store of the differential test with what its identities
// and messages are called.
type diffTwin struct {
	s     mailroom.Store
	ids   map[string]mailroom.Identity
	sent  []string       // message ids by send order
	index map[string]int // message id -> send order
}

func (w *diffTwin) as(name string) context.Context {
	return mailroom.WithCaller(context.Background(), w.ids[name])
}

// readArchivedUnread marks who's archived unread mail read, so that a
// drain of the whole inbox can be a mark (none is left archived unread).
func (w *diffTwin) readArchivedUnread(t *testing.T, who string) {
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

// watermark is who's listing's watermark ("" for none).
func (w *diffTwin) watermark(t *testing.T, who string) string {
	t.Helper()
	f, _ := mailroom.ListInput{Limit: ptr(1)}.Filter()
	p, err := w.s.List(w.as(who), f)
	if err != nil {
		t.Fatal(err)
	}
	if p.Watermark == nil {
		return ""
	}
	return *p.Watermark
}

// unreadAfter counts who's unread, unarchived personal mail sent after
// the message through.
func (w *diffTwin) unreadAfter(t *testing.T, who, through string) int {
	t.Helper()
	n := 0
	for _, via := range []string{"direct", "broadcast"} {
		f, err := mailroom.ListInput{UnreadOnly: true, Via: via, Limit: ptr(200)}.Filter()
		if err != nil {
			t.Fatal(err)
		}
		p, err := w.s.List(w.as(who), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Messages {
			if w.index[r.MessageID] > w.index[through] {
				n++
			}
		}
	}
	return n
}

// markDiff runs one seed's mix and returns what it reached.
func markDiff(t *testing.T, seed uint64, steps int, h HeldFold, rowStore mailroom.Store) diffReach {
	ctx := context.Background()
	people := []string{"alice", "bob", "carol", "erin", "dana"}
	setUp := func(s mailroom.Store) *diffTwin {
		w := &diffTwin{s: s, ids: map[string]mailroom.Identity{}, index: map[string]int{}}
		for _, n := range people[:4] {
			id, err := s.EnsureAgent(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			w.ids[n] = id
		}
		id, err := s.AddIdentity(ctx, "dana", mailroom.KindHuman)
		if err != nil {
			t.Fatal(err)
		}
		w.ids["dana"] = id
		for _, g := range [][2]string{{"bob", "triage"}, {"carol", "triage"}, {"carol", "oncall"}, {"erin", "oncall"}} {
			if err := s.GrantRole(ctx, g[0], g[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.GrantReadInbox(ctx, "human:dana", "@bob"); err != nil {
			t.Fatal(err)
		}
		return w
	}
	h.SetChunk(3)
	marked, rows := setUp(h.Store), setUp(rowStore)
	both := []*diffTwin{marked, rows}

	// Drains by a mark etc., by the marked store's instances closed since.
	var r diffReach
	tally := func() {
		r.byMark += h.MarkDrains()
		r.roleMarks += h.RoleMarkDrains()
		if h.MarkDrainsOverNewer != nil {
			r.storeOverNewer += h.MarkDrainsOverNewer()
		}
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	pickN := func() int { return rng.IntN(max(len(marked.sent), 1)) }
	idOf := func(w *diffTwin, i int) string {
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
	// purge purges before message n (just after it for the newest),
	// unread mail too if all, and says what it removed.
	purge := func(w *diffTwin, n int, all bool) string {
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
			return "gone"
		}
		if n == len(w.sent)-1 {
			before = before.Add(time.Microsecond)
		}
		rep, err := w.s.Purge(ctx, mailroom.PurgeRequest{Before: before, IncludeUnread: all})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d messages, %d kept", rep.Messages, rep.Kept)
	}
	receipt := func(rc mailroom.DrainReceipt, err error) string {
		return fmt.Sprintf("%v %s matched %d read %d durable %d withheld %d", mailroom.ErrorCode(err), rc.Status, rc.MatchedCount, rc.ReadCount, rc.DurableCount, rc.WithheldRoleCount)
	}
	// The lifecycle calls on one message, each compared by its error code.
	singleIDOps := [...]struct {
		name string
		do   func(s mailroom.Store, ctx context.Context, id string) error
	}{
		{"mark_unread", func(s mailroom.Store, ctx context.Context, id string) error {
			_, err := s.MarkUnread(ctx, id)
			return err
		}},
		{"archive", func(s mailroom.Store, ctx context.Context, id string) error { _, err := s.Archive(ctx, id); return err }},
		{"unarchive", func(s mailroom.Store, ctx context.Context, id string) error {
			_, err := s.Unarchive(ctx, id)
			return err
		}},
		{"delete", func(s mailroom.Store, ctx context.Context, id string) error { _, err := s.Delete(ctx, id); return err }},
		{"retract", func(s mailroom.Store, ctx context.Context, id string) error { _, err := s.Retract(ctx, id); return err }},
	}
	modelSeen := map[string]string{} // the row store's views since its last write
	for step := 0; step < steps; step++ {
		who := people[rng.IntN(len(people))]
		var op string
		var out [2]string  // each store's answer, which must agree
		modelKept := false // the step wrote the marked store only
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
				out[i] = purge(w, n, all)
			}
		case k < 17:
			// The whole inbox, archived unread mail read first, so the
			// marked store drains it by a mark; then at times a purge of
			// read mail, which meets rows the mark covers, not yet folded.
			n, thenPurge := pickN(), rng.IntN(3) == 0
			op = fmt.Sprintf("%s drains all (then purge before %d: %v)", who, n, thenPurge)
			for i, w := range both {
				w.readArchivedUnread(t, who)
				rc, err := w.s.MarkAllRead(w.as(who), "", false)
				if err != nil {
					t.Fatal(err)
				}
				out[i] = receipt(rc, nil)
				if thenPurge {
					out[i] += "; " + purge(w, n, false)
				}
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
				wms[i] = w.watermark(t, who)
			}
			for j, a := range to {
				send(people[rng.IntN(len(people))], a)
				if archive[j] {
					for _, w := range both {
						_, _ = w.s.Archive(w.as(who), w.sent[len(w.sent)-1])
					}
				}
			}
			byMark := h.MarkDrains()
			for i, w := range both {
				out[i] = receipt(w.s.MarkAllRead(w.as(who), wms[i], false))
			}
			// A drain by a mark that left newer mail unread (seen in the
			// model, where the store does not count them itself).
			if h.MarkDrains() > byMark && wms[1] != "" && rows.unreadAfter(t, who, wms[1]) > 0 {
				r.overNewer++
			}
		case k < 20:
			// Through a watermark, or a message, with or without roles.
			n, roles := pickN(), rng.IntN(2) == 0
			useWM := rng.IntN(2) == 0
			op = fmt.Sprintf("%s drains through %d (watermark %v) roles %v", who, n, useWM, roles)
			for i, w := range both {
				through := idOf(w, n)
				if useWM {
					through = w.watermark(t, who)
				}
				out[i] = receipt(w.s.MarkAllRead(w.as(who), through, roles))
			}
		case k < 23:
			// The whole inbox with roles, mostly by a role holder, archived
			// unread mail read first at times, so the marked store drains
			// each role queue its inbox shows whole by a mark of the role;
			// mail to the queues (to both at times) arrives just before,
			// some archived.
			if rng.IntN(4) > 0 {
				who = []string{"bob", "carol", "erin"}[rng.IntN(3)]
			}
			op = fmt.Sprintf("%s drains all with roles", who)
			for range rng.IntN(5) {
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
				out[i] = receipt(w.s.MarkAllRead(w.as(who), "", true))
			}
		case k < 25:
			op, modelKept = "fold steps", true
			for range 1 + rng.IntN(12) {
				if len(h.marks(t)) > 0 {
					r.folds++
				}
				if _, err := h.Step(ctx); err != nil {
					t.Fatal(err)
				}
			}
		default:
			op, modelKept = "close and reopen the marked store", true
			tally()
			h = h.Reopen(t)
			h.SetChunk(3)
			marked.s = h.Store
		}
		if out[0] != out[1] {
			t.Fatalf("step %d: %s: the marked store answered %q, the row store %q", step, op, out[0], out[1])
		}
		// The caller each step; everyone (and get_message of every read
		// row) every fourth step and at the end: a difference, once made,
		// stays until a later write of the same rows. The row store's
		// views are read again only after it was written.
		look, full := []string{who}, step%4 == 3 || step == steps-1
		if full {
			look = people
		}
		if !modelKept {
			clear(modelSeen)
		}
		for _, p := range look {
			b, ok := modelSeen[p]
			if !ok {
				b = rows.seen(t, p, true, false)
				modelSeen[p] = b
			}
			a := marked.seen(t, p, false, full)
			if a != b {
				t.Fatalf("step %d: %s: %s sees a difference (marks %v):\nmarked store:\n%s\nrow store:\n%s", step, op, p, h.marks(t), DiffLines(a, b), DiffLines(b, a))
			}
		}
		if step%25 == 0 {
			h.Check(t, fmt.Sprintf("step %d (%s)", step, op))
		}
	}
	tally()
	counted := ""
	if h.MarkDrainsOverNewer != nil {
		counted = fmt.Sprintf(" (%d by the store's count)", r.storeOverNewer)
	}
	t.Logf("seed %d: %d drains by a mark, %d of them through a watermark with newer mail%s; %d role marks; %d fold steps over a mark",
		seed, r.byMark, r.overNewer, counted, r.roleMarks, r.folds)
	if r.byMark == 0 {
		t.Error("no drain was by a mark")
	}
	h.Check(t, "at the end")
	return r
}

// seen is everything who sees of read state in w, with messages named by
// their send order: the inbox walked whole (by cursor and by offset), the
// counts, the oldest unread, the inbox state and the new mail. Of the row
// store (model), which has no marks to read through, it asks the cursor
// walk only and derives what the offset pages and the unread listing's
// total must show from it; the marked store answers each itself, and
// get_message of every read row too when gets is set.
func (w *diffTwin) seen(t *testing.T, who string, model, gets bool) string {
	t.Helper()
	ctx := w.as(who)
	var b strings.Builder
	group := map[string]int{} // readAt -> the first message shown with it
	var oldest *time.Time     // the oldest unread, unarchived message listed
	var offsetLines []string  // what the offset pages must show, in order
	unread := 0
	offsetLine := func(r mailroom.Row) string {
		read := "unread"
		if r.ReadAt != nil {
			read = fmt.Sprintf("read(with %d)", group[r.ReadAt.String()])
		}
		by := ""
		if r.ReadBy != nil {
			by = *r.ReadBy
		}
		return fmt.Sprintf("offset: %d %s by %q\n", w.index[r.MessageID], read, by)
	}
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
			if r.ReadAt == nil && r.ArchivedAt == nil && (oldest == nil || r.SentAt.Before(*oldest)) {
				oldest = &r.SentAt
			}
			read := "unread"
			if r.ReadAt == nil {
				unread++
			} else {
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
			offsetLines = append(offsetLines, offsetLine(r))
		}
		if p.NextCursor == nil {
			break
		}
		in.Cursor = p.NextCursor
	}
	if model {
		for _, l := range offsetLines[min(7, len(offsetLines)):] {
			b.WriteString(l)
		}
	} else {
		// Pages by offset read their rows by another statement than the
		// first page and cursor pages do: from the eighth message on, in
		// pages as large as a listing allows (pages of 7, a query per 7
		// messages, were a third of the run's CPU for the same rows
		// through the same statement).
		for off := 7; ; off += mailroom.MaxLimit {
			f, err := mailroom.ListInput{IncludeArchived: true, Limit: ptr(mailroom.MaxLimit), Offset: ptr(off)}.Filter()
			if err != nil {
				t.Fatal(err)
			}
			p, err := w.s.List(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Messages {
				b.WriteString(offsetLine(r))
			}
			if len(p.Messages) < mailroom.MaxLimit {
				break
			}
		}
		uf, _ := mailroom.ListInput{UnreadOnly: true, IncludeArchived: true, Limit: ptr(1)}.Filter() // its total
		u, err := w.s.List(ctx, uf)
		if err != nil {
			t.Fatal(err)
		}
		unread = u.TotalCount
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
		st.Unread, st.Archived, oldestOK, is.UnreadCount, unread, len(nm.Messages), st.Roles)
	return b.String()
}

// DiffLines is the lines of a not in b (a failure message's two sides).
func DiffLines(a, b string) string {
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
