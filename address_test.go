package mailroom_test

import (
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
)

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in, want string
		kind     mailroom.AddressKind
	}{
		{"@bob", "@bob", mailroom.AddrAgent},
		{"bob", "@bob", mailroom.AddrAgent},
		{"AGENT:bob", "@bob", mailroom.AddrAgent},
		{"AGENT:@bob", "@bob", mailroom.AddrAgent},
		{"agent:@bob", "@bob", mailroom.AddrAgent},
		{"@me", "@me", mailroom.AddrMe},
		{"human:dana", "human:dana", mailroom.AddrHuman},
		{"role:reviewer", "role:reviewer", mailroom.AddrRole},
		{"role:next-session-of-bob", "role:next-session-of-bob", mailroom.AddrRole},
		{"*", "*", mailroom.AddrBroadcast},
		{"AGENT:*", "*", mailroom.AddrBroadcast},
		{" @bob ", "@bob", mailroom.AddrAgent},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := mailroom.ParseAddress(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if a.String() != tt.want || a.Kind != tt.kind {
				t.Fatalf("got %v (%d), want %s (%d)", a, a.Kind, tt.want, tt.kind)
			}
		})
	}
	for _, bad := range []string{"", "@", "@Bob", "human:", "role:", "role:Big Role", "bob smith", "@" + strings.Repeat("a", 65), "AGENT:"} {
		t.Run("rejects "+bad, func(t *testing.T) {
			if _, err := mailroom.ParseAddress(bad); mailroom.ErrorCode(err) != mailroom.EINVALID {
				t.Fatalf("err = %v, want invalid", err)
			}
		})
	}
}

func TestParseAddressesLimits(t *testing.T) {
	if _, err := mailroom.ParseAddresses(nil); err == nil || err.Error() != "to must name at least one recipient" {
		t.Fatalf("empty: %v", err)
	}
	many := make([]string, 51)
	for i := range many {
		many[i] = "@bob"
	}
	if _, err := mailroom.ParseAddresses(many); err == nil || err.Error() != "to accepts at most 50 addresses (got 51)" {
		t.Fatalf("51: %v", err)
	}
	got, err := mailroom.ParseAddresses([]string{"@bob", "bob", "AGENT:bob"})
	if err != nil || len(got) != 1 {
		t.Fatalf("duplicates not folded: %v %v", got, err)
	}
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"@bob", "AGENT:@x", "human:y", "role:z", "*", "@me", "ROLE:A", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := mailroom.ParseAddress(s)
		if err != nil {
			return
		}
		// A parsed address reparses to itself.
		b, err := mailroom.ParseAddress(a.String())
		if err != nil || b != a {
			t.Fatalf("%q -> %v -> %v (%v)", s, a, b, err)
		}
	})
}
