package mailroom

import (
	"fmt"
	"testing"
	"time"
)

func TestParseAge(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90d", 90 * 24 * time.Hour, true},
		{"2w", 14 * 24 * time.Hour, true},
		{"12h", 12 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{" 1d ", 24 * time.Hour, true},
		{"0d", 0, false},
		{"-3d", 0, false},
		{"-1h", 0, false},
		{"d", 0, false},
		{"1.5d", 0, false},
		{"soon", 0, false},
		{"", 0, false},
	} {
		got, err := ParseAge(c.in)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && ErrorCode(err) != EINVALID {
			t.Errorf("ParseAge(%q): code %s", c.in, ErrorCode(err))
		}
	}
}

func TestLifecycleFilters(t *testing.T) {
	for _, c := range []struct {
		name string
		in   ListInput
		err  string
		ok   func(ListFilter) bool
	}{
		{"via", ListInput{Via: "role"}, "", func(f ListFilter) bool { return f.Via == "role" }},
		{"bad via", ListInput{Via: "carrier pigeon"}, `via must be one of direct, broadcast, role (got "carrier pigeon")`, nil},
		{"priority", ListInput{Priority: "high"}, "", func(f ListFilter) bool { return f.Priority == PriorityHigh }},
		{"bad priority", ListInput{Priority: "urgent"}, `priority must be one of low, normal, high (got "urgent")`, nil},
		{"any human", ListInput{From: "human:*"}, "", func(f ListFilter) bool { return f.FromHuman && f.FromName == "" }},
		{"archived only", ListInput{ArchivedOnly: true}, "", func(f ListFilter) bool { return f.ArchivedOnly && f.IncludeArchived }},
		{"of", ListInput{Of: "@alice"}, "", func(f ListFilter) bool { return f.OfName == "alice" && f.OfKind == KindAgent }},
		{"of a human", ListInput{Of: "human:dana"}, "", func(f ListFilter) bool { return f.OfName == "dana" && f.OfKind == KindHuman }},
		{"of a bare name", ListInput{Of: "dana"}, "", func(f ListFilter) bool { return f.OfName == "dana" && f.OfKind == "" }},
		{"of the outbox", ListInput{Of: "@alice", Box: "outbox"}, `of reads another identity's inbox only: box must be inbox (got "outbox")`, nil},
		{"of a role", ListInput{Of: "role:x"}, `of: "role:x" is not an identity (use @name or human:login)`, nil},
		{"related", ListInput{RelatedTo: "MESSAGE:x"}, "", func(f ListFilter) bool { return f.RelatedTo == "MESSAGE:x" }},
		{"related, not an id", ListInput{RelatedTo: "x"}, "Message not found: x", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := c.in.Filter()
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !c.ok(f) {
				t.Fatalf("%+v %v", f, err)
			}
		})
	}
}

// A listing by its owner's own address reads the owner's direct mail on
// its inbox side; any other address, another route or the outbox alone
// keeps the filter.
func TestOwnersDirectMail(t *testing.T) {
	bob := Identity{ID: 7, Name: "bob", Kind: KindAgent}
	dana := Identity{ID: 8, Name: "dana", Kind: KindHuman}
	for _, c := range []struct {
		owner Identity
		f     ListFilter
		ok    bool
	}{
		{bob, ListFilter{To: "@me"}, true},
		{bob, ListFilter{To: "@bob", Box: BoxAll}, true},
		{bob, ListFilter{To: "@bob", Via: ViaDirect, UnreadOnly: true}, true},
		{dana, ListFilter{To: "human:dana"}, true},
		{dana, ListFilter{To: "@dana"}, false},
		{bob, ListFilter{To: "@alice"}, false},
		{bob, ListFilter{To: "role:bob"}, false},
		{bob, ListFilter{To: "@me", Via: ViaBroadcast}, false},
		{bob, ListFilter{To: "@me", Via: ViaRole}, false},
		{bob, ListFilter{To: "@me", Box: BoxOutbox}, false},
		{bob, ListFilter{}, false},
	} {
		got, ok := c.f.OwnersDirectMail(c.owner)
		if ok != c.ok {
			t.Errorf("%s %+v: %v, want %v", c.owner.Address(), c.f, ok, c.ok)
			continue
		}
		want := c.f
		if ok {
			want.To, want.Via = "", ViaDirect
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s %+v: inbox filter %+v, want %+v", c.owner.Address(), c.f, got, want)
		}
	}
}
