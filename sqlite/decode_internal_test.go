package sqlite

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// parseTSReference is parseTS as it was before parseStoredTS.
func parseTSReference(s string) time.Time {
	t, err := time.Parse(timeFormat, s)
	if err != nil {
		t, _ = time.Parse(time.RFC3339Nano, s)
	}
	return t
}

func TestParseTSMatchesTimeParse(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"2026-12-01T19:29:45.299288Z", "2024-02-29T00:00:00.000000Z", "2023-02-29T00:00:00.000000Z",
		"2026-04-31T10:00:00.000000Z", "2026-12-31T23:59:59.999999Z", "0001-01-01T00:00:00.000000Z",
		"2026-13-01T00:00:00.000000Z", "2026-12-01T24:00:00.000000Z", "2026-12-01T19:29:45Z",
		"2026-12-01T19:29:45.2992881Z", "2026-12-01T19:29:45.299288+01:00", "2026-12-01 19:29:45.299288Z",
		"2026-12-0xT19:29:45.299288Z", "", "garbage",
	} {
		if got, want := parseTS(s), parseTSReference(s); !got.Equal(want) || got.Location() != want.Location() || !reflect.DeepEqual(got, want) {
			t.Errorf("parseTS(%q) = %v, want %v", s, got, want)
		}
	}
	now := time.Now()
	for i := range 1000 {
		s := ts(now.Add(time.Duration(i) * 7919 * time.Hour))
		if _, ok := parseStoredTS(s); !ok {
			t.Errorf("parseStoredTS(%q) fell back", s)
		}
		if got, want := parseTS(s), parseTSReference(s); !reflect.DeepEqual(got, want) {
			t.Errorf("parseTS(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestAddressesMatchJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		`[]`, `["@agent-0"]`, `["@a","role:reviewer","*","human:x.y_z"]`, `["a\"b"]`, `["a\\","b"]`,
		`["",""]`, `[""]`, `["a","b"`, `[1]`, `["a", "b"]`, `null`, `["a""b"]`, `["\u0041"]`,
	} {
		got, gerr := addresses(s)
		var want []string
		werr := json.Unmarshal([]byte(s), &want)
		if (gerr == nil) != (werr == nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("addresses(%q) = %#v %v, want %#v %v", s, got, gerr, want, werr)
		}
	}
}

// FuzzAddresses: wherever the split path answers, it answers as
// encoding/json does.
func FuzzAddresses(f *testing.F) {
	for _, s := range []string{`[]`, `["@agent-0"]`, `["@a","role:b","*"]`, `["a\"b"]`, `[""]`, `["a", "b"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, gerr := addresses(s)
		var want []string
		werr := json.Unmarshal([]byte(s), &want)
		if (gerr == nil) != (werr == nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("addresses(%q) = %#v %v, want %#v %v", s, got, gerr, want, werr)
		}
	})
}

// FuzzParseTS: parseTS answers as time.Parse does.
func FuzzParseTS(f *testing.F) {
	for _, s := range []string{"2026-12-01T19:29:45.299288Z", "2024-02-30T00:00:00.000000Z", "2026-12-01T19:29:45Z", "9999-99-99T99:99:99.999999Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := parseTS(s), parseTSReference(s); !reflect.DeepEqual(got, want) {
			t.Errorf("parseTS(%q) = %v, want %v", s, got, want)
		}
	})
}
