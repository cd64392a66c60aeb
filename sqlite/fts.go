package sqlite

import (
	"strings"

	"github.com/mailroom/mailroom"
)

// ftsQuery renders search terms as a safe FTS5 query: each word becomes a
// quoted phrase (so operators, quotes and punctuation are plain text), all
// words must match, and a prefix term keeps its trailing *. It returns ""
// for no terms.
func ftsQuery(terms []mailroom.SearchTerm) string {
	parts := make([]string, 0, len(terms))
	for _, t := range terms {
		p := `"` + strings.ReplaceAll(t.Word, `"`, `""`) + `"`
		if t.Prefix {
			p += "*"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}
