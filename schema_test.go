package mailroom_test

import (
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
)

func TestCheckSchema(t *testing.T) {
	for _, c := range []struct{ stored, known int }{{0, 13}, {12, 13}, {13, 13}} {
		if err := mailroom.CheckSchema(c.stored, c.known); err != nil {
			t.Errorf("CheckSchema(%d, %d) = %v, want nil", c.stored, c.known, err)
		}
	}
	err := mailroom.CheckSchema(14, 13)
	if mailroom.ErrorCode(err) != mailroom.ECONFLICT || !strings.Contains(err.Error(), "version 14 is newer than this mailroom knows (13)") {
		t.Fatalf("CheckSchema(14, 13) = %v, want a conflict naming both versions", err)
	}
}
