package mailroom

import (
	"bytes"
	"testing"
)

func TestTokenSelectorDigestRange(t *testing.T) {
	for _, c := range []struct {
		prefix string
		lo, hi []byte // hi nil: to the end
	}{
		{"abcd", []byte{0xab, 0xcd}, []byte{0xab, 0xce}},
		{"abc", []byte{0xab, 0xc0}, []byte{0xab, 0xd0}},
		{"abff", []byte{0xab, 0xff}, []byte{0xac}},
		{"ffff", []byte{0xff, 0xff}, nil},
		{"fff", []byte{0xff, 0xf0}, nil},
	} {
		lo, hi := TokenSelector{Prefix: c.prefix}.DigestRange()
		if !bytes.Equal(lo, c.lo) || !bytes.Equal(hi, c.hi) || (hi == nil) != (c.hi == nil) {
			t.Errorf("%q: range [%x, %x), want [%x, %x)", c.prefix, lo, hi, c.lo, c.hi)
		}
	}
}

func TestTokenSelectorCheckRevoke(t *testing.T) {
	byName := TokenSelector{Name: "alice", Kind: KindAgent}
	byPrefix := TokenSelector{Prefix: "abcd"}
	for _, c := range []struct {
		sel   TokenSelector
		found int
		code  string
	}{
		{byName, 0, ENOTFOUND}, {byName, 1, ""}, {byName, 3, ""},
		{byPrefix, 0, ENOTFOUND}, {byPrefix, 1, ""}, {byPrefix, 2, ECONFLICT},
	} {
		err := c.sel.CheckRevoke(c.found)
		if got := ErrorCode(err); (err == nil) != (c.code == "") || (err != nil && got != c.code) {
			t.Errorf("%+v with %d found: %v (code %q), want code %q", c.sel, c.found, err, got, c.code)
		}
	}
}
