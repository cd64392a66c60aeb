package sqlite_test

import (
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
	"github.com/mailroom/mailroom/storetest"
)

// The drain edge cases and the random mix with marks held and a fold chunk
// of 1 (review8a): a mark with more than one delivery left stays for the
// folder, so nearly every drain after a drain by a mark reads its own mail
// above that mark by rows (markLeft, roleMarkLeft), which the cases with
// the default chunk never reach.
func TestDrainEdgesOverMarksLeftToTheFolder(t *testing.T) {
	t.Parallel()
	storetest.RunDrainEdges(t, func(t *testing.T) mailroom.Store {
		t.Parallel()
		s := heldFold(t, storetest.NewClock().Now)
		sqlite.SetFoldChunk(s, 1)
		t.Cleanup(func() { checkNoMismatch(t, s, "at the end") })
		return s
	})
}

func TestCountsMatchListingsOverMarksLeftToTheFolder(t *testing.T) {
	t.Parallel()
	s := heldFold(t, storetest.NewClock().Now)
	sqlite.SetFoldChunk(s, 1)
	storetest.CountsMatchListings(t, s, 12)
	if n := sqlite.MarkDrains(s); n < 1 {
		t.Errorf("%d drains by a mark in the mix, want some", n)
	}
	checkNoMismatch(t, s, "at the end")
}

// A drain marked by rows after the wall clock stepped back (an NTP step,
// or another process's clock behind this one's) still reads the mail its
// snapshot holds: mail delivered "later" than the drain's readAt by the
// clock was there when the drain looked.
func TestDrainByRowsAfterTheClockSteppedBack(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock()
	s := heldFold(t, clock.Now)
	sqlite.SetFoldChunk(s, 1)
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	for range 3 {
		if _, err := s.Send(alice, benchstore.Draft()); err != nil {
			t.Fatal(err)
		}
	}
	if rc, err := s.MarkAllRead(bob, "", false); err != nil || rc.ReadCount != 3 || sqlite.MarkDrains(s) != 1 {
		t.Fatalf("first drain %+v %v", rc, err)
	}
	sent, err := s.Send(alice, benchstore.Draft())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(-time.Second)
	// The first drain's mark has 3 left to fold, more than a chunk: this
	// drain reads by rows.
	rc, err := s.MarkAllRead(bob, "", false)
	if err != nil || rc.ReadCount != 1 || rc.DurableCount != 1 {
		t.Errorf("drain after the clock stepped back: %+v %v, want the message sent before it read", rc, err)
	}
	if m, err := s.Get(bob, sent.MessageID); err != nil || m.ReadAt == nil {
		t.Errorf("the message sent before the drain: readAt %v %v", m.ReadAt, err)
	}
	checkNoMismatch(t, s, "at the end")
}
