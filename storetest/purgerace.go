package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// PausedPurge is a store whose purge the test can stop between choosing a
// batch and deleting it (RunPurgeRace).
type PausedPurge struct {
	Store mailroom.Store
	// Waiting reports whether some write of the store is waiting for
	// another's transaction (a lock), so the test knows a write it started
	// is held by the paused purge rather than still on its way.
	Waiting func() bool
}

// RunPurgeRace runs the cases of a write racing a purge: open returns a
// store whose purge calls decided inside its transaction once it has
// chosen a batch, before it deletes it. An unread message is never
// purged: a write that makes a message unread either lands before the
// purge decides (and the message stays) or after it deletes (and finds no
// message).
func RunPurgeRace(t *testing.T, open func(t *testing.T, decided func()) PausedPurge) {
	for _, tc := range []struct {
		name string
		// setup leaves id read or archived by bob, so a purge may take it.
		setup func(e *env, id string)
		// write makes id unread and unarchived for bob again.
		write func(e *env, id string) error
	}{
		{"MarkUnreadOfARead", func(e *env, id string) {
			if r := e.s.MarkRead(e.as("bob"), []string{id}); r[0].Err != nil {
				e.t.Fatal(r[0].Err)
			}
		}, func(e *env, id string) error { _, err := e.s.MarkUnread(e.as("bob"), id); return err }},
		{"MarkUnreadOfADrained", func(e *env, id string) { e.drainAll("bob", "", 1) },
			func(e *env, id string) error { _, err := e.s.MarkUnread(e.as("bob"), id); return err }},
		{"UnarchiveOfArchivedUnread", func(e *env, id string) {
			if _, err := e.s.Archive(e.as("bob"), id); err != nil {
				e.t.Fatal(err)
			}
		}, func(e *env, id string) error { _, err := e.s.Unarchive(e.as("bob"), id); return err }},
		{"MarkUnreadOfARoleMessage", func(e *env, id string) {
			if r := e.s.MarkRead(e.as("carol"), []string{id}); r[0].Err != nil {
				e.t.Fatal(r[0].Err)
			}
		}, func(e *env, id string) error { _, err := e.s.MarkUnread(e.as("bob"), id); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var during func()
			p := open(t, func() { during() })
			e := newEnv(t, p.Store)
			to := "@bob"
			if tc.name == "MarkUnreadOfARoleMessage" {
				e.grant("bob", "ops")
				e.grant("carol", "ops")
				to = "role:ops"
			}
			id := e.send("alice", to).MessageID
			tc.setup(e, id)
			cut := e.send("alice", "@carol").SentAt // unread: kept
			var (
				once   sync.Once
				wg     sync.WaitGroup
				werr   error
				paused bool
			)
			during = func() {
				once.Do(func() {
					paused = true
					done := make(chan struct{})
					wg.Add(1)
					go func() { defer wg.Done(); defer close(done); werr = tc.write(e, id) }()
					// Go on deleting once the write has landed or waits
					// for the purge.
					deadline := time.Now().Add(20 * time.Second)
					for {
						select {
						case <-done:
							return
						default:
						}
						if p.Waiting() || time.Now().After(deadline) {
							return
						}
						time.Sleep(time.Millisecond)
					}
				})
			}
			rep, err := p.Store.Purge(e.ctx, mailroom.PurgeRequest{Before: cut})
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if !paused {
				t.Fatalf("the purge never stopped between deciding and deleting (report %+v)", rep)
			}
			m, gerr := p.Store.Get(e.as("bob"), id)
			switch {
			case werr == nil:
				// The write said the message is unread: it must be there.
				if gerr != nil || m.ReadAt != nil || m.ArchivedAt != nil || rep.Messages != 0 {
					t.Fatalf("the write answered unread, then the purge (%+v) left: %+v %v", rep, m.Row, gerr)
				}
				if n := e.unread("bob"); n != 1 {
					t.Fatalf("bob's unread count %d, want 1", n)
				}
			default:
				// The purge went first: the write finds no message.
				wantErr(t, werr, "Message not found: "+id)
				wantErr(t, gerr, "Message not found: "+id)
				if rep.Messages != 1 {
					t.Fatalf("the write found no message, the purge says %+v", rep)
				}
			}
			e.checkCounts(t, "bob", "after a write raced a purge")
		})
	}
}
