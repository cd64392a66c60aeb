package sqlite_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// FuzzListQuery sends any text as a full-text query: it must never reach
// SQLite as a syntax error, and text with no searchable word matches nothing.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"POL-358", `"unbalanced`, "AND OR", "*", "NEAR(", "a:b", "'", "^x", "-x", "(a OR b)", "col:term", `""`, "x*", "🙂", "\x00",
		strings.Repeat("a* ", 16), strings.Repeat("w ", 17), strings.Repeat("é", 501), strings.Repeat("- ", 200) + "x"} {
		f.Add(s)
	}
	ctx := context.Background()
	s := open(f, sqlite.Memory, sqlite.Options{})
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: "POL-358 WAL", Body: "and or near the checkpoint"}.Draft(0)
	d.OriginSessionID = "SESSION:f"
	if _, err := s.Send(mailroom.WithCaller(ctx, alice), d); err != nil {
		f.Fatal(err)
	}
	asBob := mailroom.WithCaller(ctx, bob)
	f.Fuzz(func(t *testing.T, q string) {
		flt, err := mailroom.ListInput{Query: q}.Filter()
		if err != nil {
			// Only the query limits may refuse text, and they say so.
			if msg := err.Error(); !strings.HasPrefix(msg, "query is ") && !strings.HasPrefix(msg, "query has ") {
				t.Fatal(err)
			}
			return
		}
		p, err := s.List(asBob, flt)
		if err != nil {
			t.Fatalf("query %q (terms %v): %v", q, flt.Search, err)
		}
		if flt.QueryEmpty && p.TotalCount != 0 {
			t.Fatalf("query %q has no words but matched %d", q, p.TotalCount)
		}
	})
}
