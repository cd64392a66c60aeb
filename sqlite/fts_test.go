package sqlite

import (
	"testing"

	"github.com/mailroom/mailroom"
)

func TestFTSQuery(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"POL-358":        `"POL-358"`,
		`"unbalanced`:    `"""unbalanced"`,
		"AND OR":         `"AND" "OR"`,
		"*":              ``,
		"wal*":           `"wal"*`,
		"  migrate  WAL": `"migrate" "WAL"`,
		"NEAR(a b)":      `"NEAR(a" "b)"`,
		"a\x00b":         `"a" "b"`,
	}
	for in, want := range tests {
		if got := ftsQuery(mailroom.SearchTerms(in)); got != want {
			t.Errorf("ftsQuery(%q) = %q, want %q", in, got, want)
		}
	}
}
