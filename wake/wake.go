// Package wake turns a store's change signal into per-identity wake-ups:
// one subscription to the store per process, one cheap inbox check
// (Store.InboxState) per watched identity per signal, and a signal to every
// listener of an identity whose inbox changed. The MCP resource
// subscriptions, wait_for_mail and `mailroom watch` all listen here.
package wake

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mailroom/mailroom"
)

// Options configure a Watcher.
type Options struct {
	Logger *slog.Logger
	// Duty bounds the share of wall time spent checking inboxes under a
	// stream of commits: after a round of checks that took d, the next
	// starts no sooner than d*(1-Duty)/Duty later (bursts in between
	// coalesce). 0 means 0.1.
	Duty float64
	// MaxPause caps that pause, so latency stays bounded with many
	// identities; 0 means 100 ms.
	MaxPause time.Duration
}

// Watcher watches inboxes for listeners. The zero value is not usable: use
// New.
type Watcher struct {
	store mailroom.Store
	opts  Options
	log   *slog.Logger

	mu        sync.Mutex
	entries   map[int64]*entry
	listeners int
	sub       *mailroom.Subscription // while anyone listens
	stop      chan struct{}
	gen       int // rounds started
}

type entry struct {
	id        mailroom.Identity
	state     mailroom.InboxState
	ready     bool // state holds a baseline
	listeners map[*Listener]struct{}
}

// New returns a Watcher on store.
func New(store mailroom.Store, opts Options) *Watcher {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Duty <= 0 || opts.Duty > 1 {
		opts.Duty = 0.1
	}
	if opts.MaxPause <= 0 {
		opts.MaxPause = 100 * time.Millisecond
	}
	return &Watcher{store: store, opts: opts, log: opts.Logger, entries: map[int64]*entry{}}
}

// Listener is signalled when its identity's inbox changes (a delivery to
// it, directly, by broadcast or to a role it holds, or a change of its
// unread set), by any process sharing the store.
type Listener struct {
	c  chan struct{}
	w  *Watcher
	id int64
	mu sync.Once
}

// C receives a value when the inbox changed since the last receive; it
// holds at most one and is never closed.
func (l *Listener) C() <-chan struct{} { return l.c }

// Close stops the listener; safe to call more than once.
func (l *Listener) Close() { l.mu.Do(func() { l.w.remove(l) }) }

// Listen returns a listener for id's inbox. Changes committed after Listen
// returns are signalled; a caller that must not miss mail checks the store
// after Listen and before waiting on C.
func (w *Watcher) Listen(ctx context.Context, id mailroom.Identity) (*Listener, error) {
	l := &Listener{c: make(chan struct{}, 1), w: w, id: id.ID}
	// Subscribe before taking the baseline, so that no commit falls between.
	w.mu.Lock()
	if w.sub == nil {
		w.sub, w.stop = w.store.Subscribe(), make(chan struct{})
		go w.run(w.sub, w.stop)
	}
	w.listeners++
	e := w.entries[id.ID]
	fresh := e == nil
	if fresh {
		e = &entry{id: id, listeners: map[*Listener]struct{}{}}
		w.entries[id.ID] = e
	}
	e.listeners[l] = struct{}{}
	w.mu.Unlock()
	if !fresh {
		return l, nil
	}
	// Rounds skip an entry until it has a baseline. A round that starts
	// while the baseline is read may have seen a commit the baseline
	// missed, so read it again then; what commits during Listen is the
	// caller's to check.
	for try := 0; ; try++ {
		w.mu.Lock()
		gen := w.gen
		w.mu.Unlock()
		st, err := w.store.InboxState(mailroom.WithCaller(ctx, id))
		if err != nil {
			l.Close()
			return nil, err
		}
		w.mu.Lock()
		if w.gen == gen || try == 3 {
			e.state, e.ready = st, true
			w.mu.Unlock()
			return l, nil
		}
		w.mu.Unlock()
	}
}

func (w *Watcher) remove(l *Listener) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entries[l.id]
	if e == nil {
		return
	}
	if _, ok := e.listeners[l]; !ok {
		return
	}
	delete(e.listeners, l)
	w.listeners--
	if len(e.listeners) == 0 {
		delete(w.entries, l.id)
	}
	if w.listeners == 0 && w.sub != nil {
		w.sub.Close()
		close(w.stop)
		w.sub, w.stop = nil, nil
	}
}

// Len returns the number of open listeners whose inbox has its baseline,
// so that every change committed from now on is signalled to them. Tests
// use it to prove that finished calls leave none behind, and to know when
// a commit they make must wake a listener: counted before its baseline, a
// listener could take the tests' commit into the baseline and never be
// woken by it (a subscription test saw that under load).
func (w *Watcher) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.entries {
		if e.ready {
			n += len(e.listeners)
		}
	}
	return n
}

func (w *Watcher) run(sub *mailroom.Subscription, stop chan struct{}) {
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		select {
		case <-stop:
			return
		case <-sub.C():
		}
		start := time.Now()
		w.round(sub.Take())
		d := time.Since(start)
		wait := min(time.Duration(float64(d)*(1-w.opts.Duty)/w.opts.Duty), w.opts.MaxPause)
		pause.Reset(wait)
		select {
		case <-stop:
			return
		case <-pause.C:
		}
	}
}

// round checks every watched identity the change may touch and signals the
// listeners of those whose inbox changed.
func (w *Watcher) round(c mailroom.Change) {
	w.mu.Lock()
	w.gen++
	todo := make([]*entry, 0, len(w.entries))
	for _, e := range w.entries {
		if e.ready && c.Touches(e.id.ID, e.state.Roles) {
			todo = append(todo, e)
		}
	}
	w.mu.Unlock()
	ctx := context.Background()
	for _, e := range todo {
		st, err := w.store.InboxState(mailroom.WithCaller(ctx, e.id))
		if err != nil {
			// The change may be this inbox's: wake its listeners (they
			// re-read and see the error or the mail) rather than drop it;
			// the baseline stays, so the next round compares as before.
			w.log.Warn("wake: inbox check", "identity", e.id.Address(), "err", err)
		}
		w.mu.Lock()
		changed := err != nil || st.Fingerprint != e.state.Fingerprint
		if err == nil {
			e.state = st
		}
		if changed {
			for l := range e.listeners {
				select {
				case l.c <- struct{}{}:
				default:
				}
			}
		}
		w.mu.Unlock()
	}
}
