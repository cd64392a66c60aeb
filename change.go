package mailroom

import (
	"slices"
	"sync"
)

// ChangeSignal is a store's change signal: the one wake-up mechanism of
// mailroom. A subscription is signalled after every commit, by any process
// or instance sharing the store's database, that may have changed an inbox
// (a delivery, a read-state or archive change). It says that something may
// have changed, and, when the backend knows, whose inbox: consumers re-read
// what they show, so a spurious signal costs a query and a missed one never
// happens.
//
// Signals coalesce: a subscription holds at most one pending signal, and the
// Change it carries accumulates until Take. A backend watches its database
// at most once per process (SQLite polls PRAGMA data_version on one
// connection while anyone is subscribed; PostgreSQL can LISTEN on one
// connection) and fans out in-process through a ChangeHub.
type ChangeSignal interface {
	// Subscribe returns a new subscription, signalled for commits that
	// follow the call. The caller must Close it.
	Subscribe() *Subscription
}

// Change says whose inbox a commit may have changed. All is true when the
// backend cannot tell (SQLite's data_version only says "something
// changed"); otherwise Identities (identity ids) and Roles (role names)
// list the deliveries touched. A broadcast lists every recipient or sets
// All.
type Change struct {
	All        bool
	Identities []int64
	Roles      []string
}

// Touches reports whether the change may concern an identity that holds
// roles (explicit and implicit).
func (c Change) Touches(id int64, roles []string) bool {
	if c.All || slices.Contains(c.Identities, id) {
		return true
	}
	for _, r := range c.Roles {
		if slices.Contains(roles, r) {
			return true
		}
	}
	return false
}

// merge adds o to c, keeping the lists short: once All, lists are dropped.
func (c *Change) merge(o Change) {
	if c.All || o.All {
		*c = Change{All: true}
		return
	}
	for _, id := range o.Identities {
		if !slices.Contains(c.Identities, id) {
			c.Identities = append(c.Identities, id)
		}
	}
	for _, r := range o.Roles {
		if !slices.Contains(c.Roles, r) {
			c.Roles = append(c.Roles, r)
		}
	}
	// A huge touched set is no cheaper to test than a full re-check.
	if len(c.Identities)+len(c.Roles) > 1024 {
		*c = Change{All: true}
	}
}

// Subscription is one subscriber of a ChangeSignal. C receives a value
// when a change is pending; Take returns it.
type Subscription struct {
	c    chan struct{}
	hub  *ChangeHub
	mu   sync.Mutex
	pend Change
	has  bool
	once sync.Once
}

// C returns the channel that receives a value when a change is pending.
// It holds at most one value and is never closed.
func (s *Subscription) C() <-chan struct{} { return s.c }

// Take returns the changes accumulated since the last Take (the zero Change
// when none is pending) and clears them.
func (s *Subscription) Take() Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.pend
	s.pend, s.has = Change{}, false
	return c
}

// Close unsubscribes; it is safe to call more than once.
func (s *Subscription) Close() {
	s.once.Do(func() { s.hub.remove(s) })
}

func (s *Subscription) notify(c Change) {
	s.mu.Lock()
	if s.has {
		s.pend.merge(c)
	} else {
		s.pend, s.has = Change{All: c.All, Identities: slices.Clone(c.Identities), Roles: slices.Clone(c.Roles)}, true
	}
	s.mu.Unlock()
	select {
	case s.c <- struct{}{}:
	default: // already pending: coalesced
	}
}

// ChangeHub fans changes out to in-process subscribers. Backends publish
// into it from their one watcher (and after their own commits); it never
// blocks a publisher. The zero value is not usable: use NewChangeHub.
type ChangeHub struct {
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	active chan struct{} // closed while there is at least one subscriber
}

var _ ChangeSignal = (*ChangeHub)(nil)

// NewChangeHub returns a hub with no subscribers.
func NewChangeHub() *ChangeHub {
	return &ChangeHub{subs: map[*Subscription]struct{}{}, active: make(chan struct{})}
}

// Subscribe returns a new subscription.
func (h *ChangeHub) Subscribe() *Subscription {
	s := &Subscription{c: make(chan struct{}, 1), hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	if len(h.subs) == 1 {
		close(h.active)
	}
	h.mu.Unlock()
	return s
}

func (h *ChangeHub) remove(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; !ok {
		return
	}
	delete(h.subs, s)
	if len(h.subs) == 0 {
		h.active = make(chan struct{})
	}
}

// Publish signals every subscriber.
func (h *ChangeHub) Publish(c Change) {
	h.mu.Lock()
	subs := make([]*Subscription, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	for _, s := range subs {
		s.notify(c)
	}
}

// Active returns a channel that is closed once the hub has a subscriber. A
// backend's watcher waits on it, so an unwatched store costs nothing.
func (h *ChangeHub) Active() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.active
}

// Len returns the number of subscribers (tests use it to prove that
// finished waiters leave none behind).
func (h *ChangeHub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
