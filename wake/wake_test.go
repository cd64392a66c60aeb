package wake_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/wake"
)

func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func send(t *testing.T, s mailroom.Store, from mailroom.Identity, to string) {
	t.Helper()
	d, err := mailroom.SendInput{To: []string{to}, Subject: "s", Body: "b"}.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	d.OriginSessionID = "SESSION:t"
	if _, err := s.Send(mailroom.WithCaller(context.Background(), from), d); err != nil {
		t.Fatal(err)
	}
}

func TestListenerWakesOnlyForItsInbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	a, b := openStore(t, path), openStore(t, path) // two instances: as two processes would
	ctx := context.Background()
	alice, _ := b.EnsureAgent(ctx, "alice")
	bob, _ := a.EnsureAgent(ctx, "bob")
	carol, _ := a.EnsureAgent(ctx, "carol")
	w := wake.New(a, wake.Options{})
	lb, err := w.Listen(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := w.Listen(ctx, carol)
	if err != nil {
		t.Fatal(err)
	}
	send(t, b, alice, "@carol")
	select {
	case <-lc.C():
	case <-time.After(10 * time.Second):
		t.Fatal("carol's listener was not woken by mail from another store instance")
	}
	// The round that woke carol also checked bob: nothing for him.
	select {
	case <-lb.C():
		t.Fatal("bob was woken by carol's mail")
	default:
	}
	send(t, b, alice, "@bob")
	select {
	case <-lb.C():
	case <-time.After(10 * time.Second):
		t.Fatal("bob's listener was not woken")
	}
	if n := w.Len(); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}
	lb.Close()
	lb.Close()
	lc.Close()
	if n := w.Len(); n != 0 {
		t.Fatalf("Len = %d after Close, want 0", n)
	}
	if n := a.Changes().Len(); n != 0 {
		t.Fatalf("the watcher still holds %d store subscriptions with no listener", n)
	}
}

func TestListenerWakesOnReadStateChange(t *testing.T) {
	s := openStore(t, sqlite.Memory)
	ctx := context.Background()
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	send(t, s, alice, "@bob")
	p, err := s.List(mailroom.WithCaller(ctx, bob), mailroom.ListFilter{Box: mailroom.BoxInbox, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w := wake.New(s, wake.Options{})
	l, err := w.Listen(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if r := s.MarkRead(mailroom.WithCaller(ctx, bob), []string{p.Messages[0].MessageID}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	select {
	case <-l.C():
	case <-time.After(10 * time.Second):
		t.Fatal("mark_read did not wake the listener")
	}
}

// flakyState fails InboxState while failing is set.
type flakyState struct {
	*sqlite.Store
	failing atomic.Bool
}

func (f *flakyState) InboxState(ctx context.Context) (mailroom.InboxState, error) {
	if f.failing.Load() {
		return mailroom.InboxState{}, errors.New("database is locked")
	}
	return f.Store.InboxState(ctx)
}

func TestFailedInboxCheckStillWakes(t *testing.T) {
	s := &flakyState{Store: openStore(t, sqlite.Memory)}
	ctx := context.Background()
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	w := wake.New(s, wake.Options{})
	l, err := w.Listen(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s.failing.Store(true)
	send(t, s, alice, "@bob")
	select {
	case <-l.C():
	case <-time.After(10 * time.Second):
		t.Fatal("a failed inbox check dropped bob's wake-up: his mail would wait for the next change")
	}
}

// slowState is a store whose first InboxState waits for release.
type slowState struct {
	mailroom.Store
	first            atomic.Bool
	entered, release chan struct{}
}

func (s *slowState) InboxState(ctx context.Context) (mailroom.InboxState, error) {
	if s.first.CompareAndSwap(false, true) {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Store.InboxState(ctx)
}

// A listener counts once its baseline is read: a commit made after Len
// says so is signalled, never taken into the baseline.
func TestLenCountsListenersWithABaseline(t *testing.T) {
	st := openStore(t, sqlite.Memory)
	ctx := context.Background()
	bob, _ := st.EnsureAgent(ctx, "bob")
	s := &slowState{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	w := wake.New(s, wake.Options{})
	done := make(chan *wake.Listener)
	go func() {
		l, err := w.Listen(ctx, bob)
		if err != nil {
			t.Error(err)
		}
		done <- l
	}()
	<-s.entered
	if n := w.Len(); n != 0 {
		t.Fatalf("Len = %d while the baseline is being read, want 0", n)
	}
	close(s.release)
	l := <-done
	if n := w.Len(); n != 1 {
		t.Fatalf("Len = %d after Listen, want 1", n)
	}
	l.Close()
}
