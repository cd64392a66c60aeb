package concepts

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mailroom/mailroom"
)

// checkConcepts fails unless list holds at most most distinct, canonical
// concepts whose names are at most maxRunes long.
func checkConcepts(t *testing.T, list []mailroom.Concept, most, maxRunes int) {
	t.Helper()
	if len(list) > most {
		t.Fatalf("%d concepts, want at most %d", len(list), most)
	}
	seen := map[string]bool{}
	for _, c := range list {
		canon, err := mailroom.CanonicalConcept(c.Name)
		if err != nil {
			t.Fatalf("concept %+v: name does not canonicalise: %v", c, err)
		}
		if canon != c {
			t.Fatalf("concept %+v is not canonical (want %+v)", c, canon)
		}
		if n := utf8.RuneCountInString(c.Name); n > maxRunes {
			t.Fatalf("concept name %q has %d characters, want at most %d", c.Name, n, maxRunes)
		}
		if seen[c.ID] {
			t.Fatalf("concept %s twice in %v", c.ID, list)
		}
		seen[c.ID] = true
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{
		"Handoff: POL-358 refund webhook retries",
		"see billing/webhooks_test.go and grpc.NewClient(); MaxOpenConns=50, snake_case_name",
		"it's the server’s max_connections — don't",
		"https://example.com/x?y=1 @alice #482 14:05-14:40 UTC 1.14",
	} {
		f.Add(s)
	}
	e := NewEmbedded(nil)
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range tokenize(s) {
			if tok.text == "" || !strings.Contains(s, tok.text) {
				t.Fatalf("token %q is not a piece of %q", tok.text, s)
			}
			if (tok.kind == kindStop) != (tok.key == "") {
				t.Fatalf("token %+v: a key iff it can be a concept", tok)
			}
		}
		got, err := e.Extract(context.Background(), Document{Subject: s, Body: s})
		if err != nil {
			t.Fatal(err)
		}
		checkConcepts(t, got, maxConcepts, maxNameRunes)
		if len(got) == 0 && len(Terms(Document{Body: s})) > 0 {
			t.Fatalf("no concepts for %q, which has terms %q", s, Terms(Document{Body: s}))
		}
	})
}
