package storetest

import (
	"sync"
	"time"
)

// Clock is a test clock for a store's Now: every reading moves it on by one
// microsecond (the stored precision), so timestamps stay distinct and
// ordered, and Advance moves it on by more, so lease and backoff tests
// need not sleep on the wall clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock starting at the current wall-clock time.
func NewClock() *Clock { return &Clock{t: time.Now().UTC().Truncate(time.Microsecond)} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Microsecond)
	return c.t
}

// Advance moves the clock on by d, or back for a negative d (a wall
// clock stepped back: RunDrainAfterTheClockSteppedBack).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
