package mailroom

import (
	"slices"
	"strconv"
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
// at most once per process, only while anyone is subscribed (SQLite waits
// for file events on the database and confirms them with PRAGMA
// data_version on one connection; PostgreSQL LISTENs on one connection) and
// fans out in-process through a ChangeHub.
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

// Merge adds o to c, keeping the lists short: once All, lists are dropped.
func (c *Change) Merge(o Change) {
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
		s.pend.Merge(c)
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
	idle   chan struct{} // closed while there is none
}

var _ ChangeSignal = (*ChangeHub)(nil)

// NewChangeHub returns a hub with no subscribers.
func NewChangeHub() *ChangeHub {
	idle := make(chan struct{})
	close(idle)
	return &ChangeHub{subs: map[*Subscription]struct{}{}, active: make(chan struct{}), idle: idle}
}

// Subscribe returns a new subscription.
func (h *ChangeHub) Subscribe() *Subscription {
	s := &Subscription{c: make(chan struct{}, 1), hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	if len(h.subs) == 1 {
		close(h.active)
		h.idle = make(chan struct{})
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
		close(h.idle)
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

// Idle returns a channel that is closed once the hub has no subscriber, so
// a watcher can stop watching at once.
func (h *ChangeHub) Idle() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.idle
}

// Len returns the number of subscribers (tests use it to prove that
// finished waiters leave none behind).
func (h *ChangeHub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// InboxState is a cheap summary of the caller's inbox, enough to tell
// whether it changed: the unread count (unread, unarchived, personal and
// role mail), the watermark, and a fingerprint that changes whenever the
// unread set or the watermark does.
type InboxState struct {
	UnreadCount int
	Watermark   *string
	Fingerprint string
	// Roles are the roles the caller holds (explicit and implicit), for
	// Change.Touches: sorted, each once.
	Roles []string
}

// NewMail is wait_for_mail's result: unread inbox messages committed after
// a point, oldest first.
type NewMail struct {
	Messages  []Row   `json:"messages"`
	Watermark *string `json:"watermark"`
	TimedOut  bool    `json:"timedOut"`
}

// wait_for_mail's bounds.
const (
	DefaultWaitSeconds = 25
	MaxWaitSeconds     = 60
	MaxNewMail         = 50
)

// WaitInput is wait_for_mail's arguments as decoded by a transport; nil
// pointers are absent arguments.
type WaitInput struct {
	Since          string
	TimeoutSeconds *int
	IncludeRoles   *bool
}

// WaitRequest is a validated wait_for_mail call.
type WaitRequest struct {
	Since        string // "" means the caller's watermark when the call starts
	Timeout      int    // seconds
	IncludeRoles bool
}

// Request validates in.
func (in WaitInput) Request() (WaitRequest, error) {
	r := WaitRequest{Since: in.Since, Timeout: DefaultWaitSeconds, IncludeRoles: true}
	if in.Since != "" {
		if err := ValidateMessageID("since", in.Since); err != nil {
			return WaitRequest{}, err
		}
	}
	if in.TimeoutSeconds != nil {
		if t := *in.TimeoutSeconds; t < 1 || t > MaxWaitSeconds {
			return WaitRequest{}, Errorf(EINVALID, "timeoutSeconds must be between 1 and %d (got %d)", MaxWaitSeconds, t)
		}
		r.Timeout = *in.TimeoutSeconds
	}
	if in.IncludeRoles != nil {
		r.IncludeRoles = *in.IncludeRoles
	}
	return r, nil
}

// InboxFingerprint is InboxState.Fingerprint from the unread count, the
// sum of the unread messages' seqs and the watermark: a new arrival, a
// mark and a mark-unread each change one of them, even between two checks.
func InboxFingerprint(unread int, seqSum int64, watermark *string) string {
	wm := ""
	if watermark != nil {
		wm = *watermark
	}
	return strconv.Itoa(unread) + "/" + strconv.FormatInt(seqSum, 10) + "/" + wm
}
