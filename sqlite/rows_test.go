package sqlite_test

import (
	"testing"

	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/storetest"
)

// The listing rows' check with the drain's read mark left in place, so
// the drained rows' readAt comes from the mark rather than folded rows.
func TestListingRowsWithTheMarkHeld(t *testing.T) {
	t.Parallel()
	s := heldFold(t, storetest.NewClock().Now)
	storetest.ListingRowsAreTheMessages(t, s)
	if sqlite.MarkDrains(s) == 0 {
		t.Error("the drain was not by a mark")
	}
}
