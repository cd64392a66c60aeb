package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

// deadlockCounter is a log handler that counts the store's retries of a
// transaction PostgreSQL aborted as a deadlock victim (postgres.go retry
// logs each at debug level): retried, a deadlock never reaches a caller,
// so only the log tells that the lock order has a cycle.
type deadlockCounter struct{ n *atomic.Int64 }

func (h deadlockCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h deadlockCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "retrying transaction" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" && strings.Contains(a.Value.String(), "40P01") {
				h.n.Add(1)
			}
			return true
		})
	}
	return nil
}
func (h deadlockCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h deadlockCounter) WithGroup(string) slog.Handler      { return h }

// Two holders of role:ops drain with roles through two instances (so by
// role marks, their folders folding each other's in small chunks), while a
// third holder marks read, marks unread, archives and unarchives the
// queue's mail and alice sends to it. A role delivery's read state is its
// holders' one: afterwards every holder sees every message in the same
// state, by a reader that holds the role, the counters match a recount,
// each holder's counts equal its listing's, no drain's receipt claims
// more than storage holds, no transaction was a deadlock victim (the
// drains take the queues' mark locks exclusive, the single-id writes
// shared, each in mailbox order after the caller's own), and a last drain
// reads exactly what mailbox_status counted unread. (review8b)
func TestRoleQueueDrainsBesideAnotherHoldersWrites(t *testing.T) {
	url := pgtest.URL(t)
	var deadlocks atomic.Int64
	log := slog.New(deadlockCounter{&deadlocks})
	clock := storetest.NewClock()
	a := open(t, url, postgres.Options{Now: clock.Now, Logger: log})
	b := open(t, url, postgres.Options{Now: clock.Now, Logger: log})
	postgres.SetFoldChunk(a, 3)
	postgres.SetFoldChunk(b, 4)
	aliceA, bobA, daveA := agent(t, a, "alice"), agent(t, a, "bob"), agent(t, a, "dave")
	aliceB, carolB := agent(t, b, "alice"), agent(t, b, "carol")
	for _, who := range []string{"bob", "carol", "dave"} {
		if err := a.GrantRole(context.Background(), who, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	const rounds, perRound = 8, 12
	var (
		mu       sync.Mutex
		receipts []mailroom.DrainReceipt
		sent     []string
		wg       sync.WaitGroup
		stop     atomic.Bool
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
				r, err := alice.st.Send(alice.ctx, draft(t, "role:ops"))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				sent = append(sent, r.MessageID)
				mu.Unlock()
			}
		}()
	}
	var drainers sync.WaitGroup
	for _, h := range []struct {
		st  *postgres.Store
		ctx context.Context
	}{{a, bobA}, {b, carolB}} {
		wg.Add(1)
		drainers.Add(1)
		go func() {
			defer wg.Done()
			defer drainers.Done()
			for range rounds {
				rc, err := h.st.MarkAllRead(h.ctx, "", true)
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
	wg.Add(1)
	go func() { // dave, until the drains end
		defer wg.Done()
		rng := rand.New(rand.NewPCG(8, 2))
		for !stop.Load() {
			mu.Lock()
			if len(sent) == 0 {
				mu.Unlock()
				continue
			}
			id := sent[rng.IntN(len(sent))]
			mu.Unlock()
			var err error
			switch rng.IntN(5) {
			case 0:
				if r := a.MarkRead(daveA, []string{id}); r[0].Err != nil {
					err = r[0].Err
				}
			case 1, 2:
				_, err = a.MarkUnread(daveA, id)
			case 3:
				_, err = a.Archive(daveA, id)
			default:
				_, err = a.Unarchive(daveA, id)
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { drainers.Wait(); stop.Store(true) }()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkNoMismatch(t, a, "after the drains and writes")
	t.Logf("%d role marks by drains (%d + %d)", postgres.QueueMarkDrains(a)+postgres.QueueMarkDrains(b), postgres.QueueMarkDrains(a), postgres.QueueMarkDrains(b))
	for _, rc := range receipts {
		if rc.DurableCount > rc.ReadCount || rc.MatchedCount != rc.ReadCount {
			t.Errorf("drain at %v: matched %d read %d durable %d", rc.SnapshotAt, rc.MatchedCount, rc.ReadCount, rc.DurableCount)
		}
	}

	holders := []struct {
		name string
		st   *postgres.Store
		ctx  context.Context
	}{{"@bob", b, bobA}, {"@carol", a, carolB}, {"@dave", b, daveA}}
	view := func(st *postgres.Store, ctx context.Context) (string, int) {
		f, err := mailroom.ListInput{IncludeArchived: true, Limit: ptr(200)}.Filter()
		if err != nil {
			t.Fatal(err)
		}
		p, err := st.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Messages) != len(sent) {
			t.Fatalf("a holder lists %d messages, alice sent %d", len(p.Messages), len(sent))
		}
		var v strings.Builder
		unread := 0
		for _, m := range p.Messages {
			state := "unread"
			if m.ReadAt != nil {
				by := "?"
				if m.ReadBy != nil {
					by = *m.ReadBy
				}
				if by != "@bob" && by != "@carol" && by != "@dave" {
					t.Errorf("%s read by %q", m.MessageID, by)
				}
				state = m.ReadAt.UTC().Format(time.RFC3339Nano) + " by " + by
			} else if m.ArchivedAt == nil {
				unread++
			}
			g, err := st.Get(ctx, m.MessageID)
			if err != nil {
				t.Fatal(err)
			}
			if (g.ReadAt == nil) != (m.ReadAt == nil) || (g.ReadAt != nil && !g.ReadAt.Equal(*m.ReadAt)) {
				t.Errorf("%s: get_message readAt %v, the listing %v", m.MessageID, g.ReadAt, m.ReadAt)
			}
			fmt.Fprintf(&v, "%s %s archived %v\n", m.MessageID, state, m.ArchivedAt != nil)
		}
		return v.String(), unread
	}
	var first string
	for _, h := range holders {
		v, unread := view(h.st, h.ctx)
		if first == "" {
			first = v
		} else if v != first {
			t.Fatalf("%s sees the queue otherwise than @bob:\n%s\n@bob:\n%s", h.name, storetest.DiffLines(v, first), storetest.DiffLines(first, v))
		}
		st, err := h.st.Status(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		is, err := h.st.InboxState(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		uf, _ := mailroom.ListInput{UnreadOnly: true, Limit: ptr(200)}.Filter()
		u, err := h.st.List(h.ctx, uf)
		if err != nil {
			t.Fatal(err)
		}
		if st.Unread.Role != unread || is.UnreadCount != unread || u.TotalCount != unread || len(u.Messages) != unread {
			t.Errorf("%s: %d unread listed; status %d, inbox state %d, unreadOnly total %d rows %d", h.name, unread, st.Unread.Role, is.UnreadCount, u.TotalCount, len(u.Messages))
		}
	}
	_, unread := view(b, bobA)
	rc, err := a.MarkAllRead(bobA, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if rc.ReadCount != unread || rc.DurableCount != unread {
		t.Errorf("the last drain read %d (durable %d); %d were unread", rc.ReadCount, rc.DurableCount, unread)
	}
	checkNoMismatch(t, a, "after the last drain")
	if n := deadlocks.Load(); n > 0 {
		t.Errorf("%d transactions were deadlock victims", n)
	}
}
