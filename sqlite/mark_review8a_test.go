package sqlite_test

import (
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
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
