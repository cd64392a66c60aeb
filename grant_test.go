package mailroom

import (
	"errors"
	"testing"
)

// directory is an IdentityByName over a fixed set of identities.
func directory(ids ...Identity) IdentityByName {
	return func(name string) (Identity, error) {
		if name == "broken" {
			return Identity{}, errors.New("connection reset")
		}
		for _, id := range ids {
			if id.Name == name {
				return Identity{ID: id.ID, Kind: id.Kind}, nil // a store may leave Name unset
			}
		}
		return Identity{}, Errorf(ENOTFOUND, "Unknown identity: %s", name)
	}
}

var (
	alice = Identity{ID: 1, Name: "alice", Kind: KindAgent}
	bob   = Identity{ID: 2, Name: "bob", Kind: KindAgent}
	yann  = Identity{ID: 3, Name: "yann", Kind: KindHuman}
)

func TestReader(t *testing.T) {
	dir := directory(alice, bob, yann)
	grants := map[[2]int64]bool{{alice.ID, bob.ID}: true, {alice.ID, yann.ID}: true}
	for _, tc := range []struct {
		of      string
		kind    Kind
		want    Identity
		wantErr string
	}{
		{"", "", alice, ""},
		{"alice", KindAgent, alice, ""}, // one's own inbox needs no grant
		{"bob", KindAgent, bob, ""},
		{"bob", "", bob, ""},
		{"yann", KindHuman, yann, ""},
		{"yann", KindAgent, Identity{}, "No read grant for @yann"}, // the wrong kind does not exist
		{"bob", KindHuman, Identity{}, "No read grant for human:bob"},
		{"nobody", "", Identity{}, "No read grant for @nobody"}, // same answer as no grant
		{"broken", "", Identity{}, "connection reset"},
	} {
		got, err := Reader(alice, tc.of, tc.kind, dir, func(o Identity) (bool, error) { return grants[[2]int64{alice.ID, o.ID}], nil })
		if msg := errText(err); msg != tc.wantErr || got != tc.want {
			t.Errorf("Reader(%q, %q) = %+v, %q; want %+v, %q", tc.of, tc.kind, got, msg, tc.want, tc.wantErr)
		}
	}
	// Without a grant: forbidden, named as the owner is addressed.
	_, err := Reader(bob, "alice", "", dir, func(Identity) (bool, error) { return false, nil })
	if ErrorCode(err) != EFORBIDDEN || errText(err) != "No read grant for @alice" {
		t.Errorf("no grant: %v", err)
	}
}

func TestGrantPair(t *testing.T) {
	dir := directory(alice, bob, yann)
	for _, tc := range []struct {
		grantee, owner string
		g, o           Identity
		wantErr        string
	}{
		{"@alice", "human:yann", alice, yann, ""},
		{"alice", "AGENT:bob", alice, bob, ""},
		{"@alice", "@alice", Identity{}, Identity{}, "@alice already reads its own inbox"},
		{"@carol", "@bob", Identity{}, Identity{}, "grantee: unknown identity @carol"},
		{"@alice", "human:bob", Identity{}, Identity{}, "owner: unknown identity human:bob"},
		{"role:x", "@bob", Identity{}, Identity{}, `grantee: "role:x" is not an identity (use @name or human:login)`},
	} {
		g, o, err := GrantPair(tc.grantee, tc.owner, dir)
		if msg := errText(err); msg != tc.wantErr || (err == nil && (g != tc.g || o != tc.o)) {
			t.Errorf("GrantPair(%q, %q) = %+v, %+v, %q; want %+v, %+v, %q", tc.grantee, tc.owner, g, o, msg, tc.g, tc.o, tc.wantErr)
		}
	}
}

func TestInboxFingerprintChangesWithTheUnreadSet(t *testing.T) {
	wm := func(s string) *string { return &s }
	seen := map[string]bool{}
	for _, fp := range []string{
		InboxFingerprint(0, 0, nil),
		InboxFingerprint(1, 7, wm("MESSAGE:7")),
		InboxFingerprint(1, 8, wm("MESSAGE:8")), // 7 read, 8 arrived: same count
		InboxFingerprint(0, 0, wm("MESSAGE:8")), // everything read
	} {
		if seen[fp] {
			t.Fatalf("fingerprint %q repeats for a different unread set", fp)
		}
		seen[fp] = true
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
