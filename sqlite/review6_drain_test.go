package sqlite_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/storetest"
)

// A drain by a mark through a watermark with newer mail reads its
// snapshot twice: once to decide, then again in its write transaction.
// Here the inbox moves between the two (a send, an archive, a single
// mark_read, another role holder's archive and a new role message), from
// a statement hook in the read: what the write sees is what is marked,
// nothing newer than the watermark, nothing archived, a read keeps its
// readAt, and the counts stay the rows' (review6).
func TestReviewDrainByAMarkWhileTheInboxMoves(t *testing.T) {
	t.Parallel()
	type world struct {
		s                 *sqlite.Store
		alice, bob, carol context.Context
		p, r              []string // bob's personal mail, ops' role mail, in send order
	}
	send := func(t *testing.T, w *world, to string) string {
		t.Helper()
		d, _ := mailroom.SendInput{To: []string{to}, Subject: "s", Body: "b"}.Draft(0)
		d.OriginSessionID = "SESSION:review6"
		r, err := w.s.Send(w.alice, d)
		if err != nil {
			t.Fatal(err)
		}
		return r.MessageID
	}
	for _, tc := range []struct {
		name  string
		roles bool
		// during runs once, between the drain's read and its write.
		during func(t *testing.T, w *world)
		// unread: p and r indexes left unread (p3 and r3 came after the
		// watermark; p2 was read before), and the receipt's matched count.
		unreadP, unreadR []int
		matched          int
	}{
		{name: "a send", during: func(t *testing.T, w *world) { w.p = append(w.p, send(t, w, "@bob")) },
			unreadP: []int{3, 4}, unreadR: []int{0, 1, 2, 3}, matched: 2},
		{name: "an archive", during: func(t *testing.T, w *world) {
			if _, err := w.s.Archive(w.bob, w.p[1]); err != nil {
				t.Error(err)
			}
		}, unreadP: []int{1, 3}, unreadR: []int{0, 1, 2, 3}, matched: 1},
		{name: "a mark_read", during: func(t *testing.T, w *world) {
			if res := w.s.MarkRead(w.bob, []string{w.p[0]}); res[0].Err != nil {
				t.Error(res[0].Err)
			}
		}, unreadP: []int{3}, unreadR: []int{0, 1, 2, 3}, matched: 1},
		{name: "roles: a send of each, another holder reads one and archives one", roles: true, during: func(t *testing.T, w *world) {
			w.p = append(w.p, send(t, w, "@bob"))
			w.r = append(w.r, send(t, w, "role:ops"))
			if res := w.s.MarkRead(w.carol, []string{w.r[1]}); res[0].Err != nil {
				t.Error(res[0].Err)
			}
			if _, err := w.s.Archive(w.carol, w.r[0]); err != nil {
				t.Error(err)
			}
		}, unreadP: []int{3, 4}, unreadR: []int{0, 3, 4}, matched: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := &world{}
			var armed atomic.Bool
			hooks := &sqlite.Hooks{HoldFold: true, Statement: func(q string, _ []any) {
				// markWhole's statement, first met in the drain's read.
				if strings.Contains(q, "FROM mailbox_count WHERE recipient_id = ?1 AND unread = 1") && armed.CompareAndSwap(true, false) {
					tc.during(t, w)
				}
			}}
			w.s = open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{NoSync: true, Now: storetest.NewClock().Now, Hooks: hooks})
			ctx := context.Background()
			w.alice, w.bob, w.carol = agent(t, w.s, "alice"), agent(t, w.s, "bob"), agent(t, w.s, "carol")
			for _, who := range []string{"bob", "carol"} {
				if err := w.s.GrantRole(ctx, who, "ops"); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				w.p = append(w.p, send(t, w, "@bob"))
				w.r = append(w.r, send(t, w, "role:ops"))
			}
			// A read one before the drain keeps its readAt.
			pre := w.s.MarkRead(w.bob, []string{w.p[2]})
			f, _ := mailroom.ListInput{Limit: ptr(1)}.Filter()
			page, err := w.s.List(w.bob, f)
			if err != nil || page.Watermark == nil {
				t.Fatal(page, err)
			}
			w.p = append(w.p, send(t, w, "@bob"))     // p3: after the watermark
			w.r = append(w.r, send(t, w, "role:ops")) // r3: after the watermark
			armed.Store(true)
			rc, err := w.s.MarkAllRead(w.bob, *page.Watermark, tc.roles)
			if err != nil {
				t.Fatal(err)
			}
			if armed.Load() {
				t.Fatal("the hook never ran")
			}
			if rc.MatchedCount != tc.matched || rc.ReadCount != tc.matched || rc.DurableCount != tc.matched {
				t.Errorf("receipt %+v, want %d matched, read and durable", rc, tc.matched)
			}
			if !tc.roles && rc.WithheldRoleCount != 3 {
				t.Errorf("withheld %d, want the 3 unread role messages up to the watermark", rc.WithheldRoleCount)
			}
			if by, want := sqlite.MarkDrains(w.s), int64(1); tc.name == "an archive" && by != 0 || tc.name != "an archive" && by != want {
				t.Errorf("%d drains by a mark, want the archive's only by rows", by)
			}
			checkNoMismatch(t, w.s, "after the drain")
			check := func(when string) {
				t.Helper()
				unread := 0
				for _, part := range []struct {
					ids    []string
					unread []int
					role   bool
				}{{w.p, tc.unreadP, false}, {w.r, tc.unreadR, true}} {
					for i, id := range part.ids {
						m, err := w.s.Get(w.bob, id)
						if err != nil {
							t.Fatal(err)
						}
						want := !contains(part.unread, i)
						if (m.ReadAt != nil) != want {
							t.Errorf("%s: role %v #%d read %v, want %v (archived %v)", when, part.role, i, m.ReadAt != nil, want, m.ArchivedAt != nil)
						}
						if !want && m.ArchivedAt == nil {
							unread++
						}
						if !part.role && i == 2 && (m.ReadAt == nil || !m.ReadAt.Equal(*pre[0].ReadAt)) {
							t.Errorf("%s: read before the drain: readAt %v, want %v", when, m.ReadAt, pre[0].ReadAt)
						}
					}
				}
				st, err := w.s.Status(w.bob)
				if err != nil || st.Unread.Total != unread {
					t.Errorf("%s: status unread %+v %v, want %d", when, st.Unread, err, unread)
				}
				uf, _ := mailroom.ListInput{UnreadOnly: true}.Filter()
				if p, err := w.s.List(w.bob, uf); err != nil || p.TotalCount != unread || len(p.Messages) != unread {
					t.Errorf("%s: unread listing total %d rows %d %v, want %d", when, p.TotalCount, len(p.Messages), err, unread)
				}
			}
			check("under the mark")
			// A later single-id mark_read of everything keeps every readAt.
			readAt := map[string]string{}
			for _, id := range append(append([]string{}, w.p...), w.r...) {
				if m, _ := w.s.Get(w.bob, id); m.ReadAt != nil {
					readAt[id] = m.ReadAt.String()
				}
			}
			for range 3 {
				if _, err := sqlite.FoldStep(ctx, w.s); err != nil {
					t.Fatal(err)
				}
			}
			check("folded")
			if marks, _ := sqlite.ReadMarks(ctx, w.s); len(marks) != 0 {
				t.Errorf("marks left after folding: %v", marks)
			}
			for id, at := range readAt {
				res := w.s.MarkRead(w.bob, []string{id})
				if res[0].Err != nil || res[0].ReadAt.String() != at {
					t.Errorf("%s: mark_read after the drain: readAt %v %v, want %s", id, res[0].ReadAt, res[0].Err, at)
				}
			}
			checkNoMismatch(t, w.s, "at the end")
		})
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// Two stores on one file, the folder held in both: drains through
// watermarks (one the caller's own sent message, one lower than a mark
// not yet folded, one higher), with a mark_unread, an archive and an
// unarchive of mail above a mark from the other store, and each store
// folding the other's mark part way. Every message's read state, and
// the counts, stay what row marking gives (review6).
func TestReviewDrainsThroughWatermarksFromTwoStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	clock := storetest.NewClock()
	a := open(t, path, sqlite.Options{NoSync: true, Now: clock.Now, Hooks: &sqlite.Hooks{HoldFold: true}})
	b := open(t, path, sqlite.Options{NoSync: true, Now: clock.Now, Hooks: &sqlite.Hooks{HoldFold: true}})
	sqlite.SetFoldChunk(a, 2)
	sqlite.SetFoldChunk(b, 2)
	alice, bob := agent(t, a, "alice"), agent(t, a, "bob")
	var ids []string
	read := map[string]bool{} // what row marking would have read
	sendAs := func(s *sqlite.Store, who context.Context, to string) string {
		t.Helper()
		d, _ := mailroom.SendInput{To: []string{to}, Subject: "s", Body: "b"}.Draft(0)
		d.OriginSessionID = "SESSION:review6"
		r, err := s.Send(who, d)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageID)
		return r.MessageID
	}
	drain := func(s *sqlite.Store, through string, want int) {
		t.Helper()
		rc, err := s.MarkAllRead(bob, through, false)
		if err != nil || rc.MatchedCount != want || rc.ReadCount != want || rc.DurableCount != want {
			t.Fatalf("drain through %s: %+v %v, want %d", through, rc, err, want)
		}
	}
	check := func(when string) {
		t.Helper()
		for _, s := range []*sqlite.Store{a, b} {
			unread := 0
			for _, id := range ids {
				m, err := s.Get(bob, id)
				if err != nil {
					continue // alice's to carol
				}
				if (m.ReadAt != nil) != read[id] {
					t.Errorf("%s: %s read %v, want %v", when, id, m.ReadAt != nil, read[id])
				}
				if m.ReadAt == nil && m.ArchivedAt == nil && m.From != "@bob" {
					unread++
				}
			}
			if st, err := s.Status(bob); err != nil || st.Unread.Total != unread {
				t.Errorf("%s: status unread %+v %v, want %d", when, st.Unread, err, unread)
			}
		}
		checkNoMismatch(t, a, when)
	}
	var p []string
	for range 4 {
		p = append(p, sendAs(a, alice, "@bob"))
	}
	own := sendAs(b, bob, "@alice") // bob's own sent message as the watermark
	for range 3 {
		p = append(p, sendAs(b, alice, "@bob"))
	}
	// Through bob's own message: p0-p3, the three after it stay unread.
	drain(a, own, 4)
	for _, id := range p[:4] {
		read[id] = true
	}
	check("through bob's own sent message")
	// A lower watermark under the mark: nothing.
	drain(b, p[1], 0)
	check("through a lower watermark")
	// From the other store, above the mark: an archive and its undoing,
	// a read and its undoing, then the other store folds part of the mark.
	if _, err := b.Archive(bob, p[5]); err != nil {
		t.Fatal(err)
	}
	if r := b.MarkRead(bob, []string{p[6]}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	read[p[6]] = true
	if _, err := sqlite.FoldStep(ctx, b); err != nil {
		t.Fatal(err)
	}
	check("archive and read above the mark, folded in part by the other store")
	if _, err := b.MarkUnread(bob, p[6]); err != nil {
		t.Fatal(err)
	}
	read[p[6]] = false
	if _, err := a.Unarchive(bob, p[5]); err != nil {
		t.Fatal(err)
	}
	check("mark_unread and unarchive above the mark")
	// Through p5 (a higher watermark), then more mail, then everything.
	p = append(p, sendAs(a, alice, "@bob"))
	drain(b, p[5], 2)
	read[p[4]], read[p[5]] = true, true
	check("through a higher watermark")
	if _, err := sqlite.FoldStep(ctx, a); err != nil {
		t.Fatal(err)
	}
	drain(a, "", 2)
	read[p[6]], read[p[7]] = true, true
	check("the whole inbox")
	// Not bob's to see: refused, nothing changes.
	carol := agent(t, a, "carol")
	hidden := sendAs(a, carol, "@alice")
	if _, err := a.MarkAllRead(bob, hidden, false); mailroom.ErrorCode(err) == "" {
		t.Fatalf("drain through a message bob cannot see: %v", err)
	}
	check("after a refused drain")
	for range 6 {
		if _, err := sqlite.FoldStep(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if marks, _ := sqlite.ReadMarks(ctx, a); len(marks) != 0 {
		t.Errorf("marks left: %v", marks)
	}
	check("folded")
	if n := sqlite.MarkDrainsOverNewer(a) + sqlite.MarkDrainsOverNewer(b); n != 2 {
		t.Errorf("%d drains by a mark through a watermark with newer mail, want 2", n)
	}
}
