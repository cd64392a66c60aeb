package ollama

import (
	"encoding/json"
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

func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		`{"concepts":["rate limiting","POL-358"]}`,
		`{"concepts":[]}`,
		`{"concepts":["a"],"x":1}`,
		`{"concepts":[1,2]}`,
		"```json\n{\"concepts\":[\"x\"]}\n```",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		got, err := parseAnswer(content)
		if err != nil {
			return
		}
		if len(got) == 0 {
			t.Fatalf("parseAnswer(%q) accepted no concepts", content)
		}
		checkConcepts(t, got, maxOllamaAnswer, maxOllamaRunes)
		// What was accepted is accepted again when written back.
		names := make([]string, len(got))
		for i, c := range got {
			names[i] = c.Name
		}
		again, _ := json.Marshal(map[string][]string{"concepts": names})
		if _, err := parseAnswer(string(again)); err != nil {
			t.Fatalf("parseAnswer(%q) accepted, but its own result %s is rejected: %v", content, again, err)
		}
	})
}
