package concepts

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
)

// labelled is one message of testdata/labelled.json with the concepts a
// human reader expects of it.
type labelled struct {
	Subject  string   `json:"subject"`
	Body     string   `json:"body"`
	Concepts []string `json:"concepts"`
}

func loadLabelled(t testing.TB) []labelled {
	t.Helper()
	data, err := os.ReadFile("testdata/labelled.json")
	if err != nil {
		t.Fatal(err)
	}
	var set []labelled
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	return set
}

// matchWords folds a concept for matching: its slug's words, each stemmed.
func matchWords(s string) []string {
	words := strings.Split(mailroom.ConceptSlug(s), "-")
	for i, w := range words {
		words[i] = stem(w)
	}
	return words
}

// containsRun reports whether short occurs as a contiguous run in long.
func containsRun(long, short []string) bool {
	for i := 0; i+len(short) <= len(long); i++ {
		if slices.Equal(long[i:i+len(short)], short) {
			return true
		}
	}
	return false
}

// conceptsMatch is the evaluation's leniency: a predicted concept matches an
// expected one when, after folding both to their slug words and stemming each
// word, the word lists are equal or one is a contiguous run of the other
// ("refund webhook" matches "refund webhook retries" and "webhooks").
func conceptsMatch(predicted, expected string) bool {
	p, e := matchWords(predicted), matchWords(expected)
	return containsRun(p, e) || containsRun(e, p)
}

// Floors for the labelled evaluation, set just under what the extractor
// achieves so that a regression fails the test.
const (
	precisionFloor = 0.67
	recallFloor    = 0.69
)

func TestEmbeddedLabelled(t *testing.T) {
	set := loadLabelled(t)
	if len(set) < 50 {
		t.Fatalf("labelled set has %d messages, want at least 50", len(set))
	}
	stats := &MemStats{}
	for _, m := range set {
		stats.Add(Document{Subject: m.Subject, Body: m.Body})
	}
	precision, recall := evaluate(t, set, NewEmbedded(stats), testing.Verbose())
	t.Logf("embedded extractor, labelled set as IDF corpus: precision@5 %.3f, recall@5 %.3f (floors %.2f, %.2f)",
		precision, recall, precisionFloor, recallFloor)
	if precision < precisionFloor || recall < recallFloor {
		t.Errorf("precision %.3f, recall %.3f: below the floors %.2f, %.2f", precision, recall, precisionFloor, recallFloor)
	}
	// Without Stats only the prior ranks; reported, not held to a floor.
	precision, recall = evaluate(t, set, NewEmbedded(nil), false)
	t.Logf("embedded extractor, no Stats: precision@5 %.3f, recall@5 %.3f", precision, recall)
}

// evaluate returns e's micro-averaged precision and recall at 5 on set,
// matching with conceptsMatch.
func evaluate(t *testing.T, set []labelled, e Extractor, verbose bool) (precision, recall float64) {
	t.Helper()
	var predicted, predictedOK, expected, expectedOK int
	for i, m := range set {
		got, err := e.Extract(context.Background(), Document{Subject: m.Subject, Body: m.Body})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < 1 || len(got) > 5 {
			t.Errorf("message %d: %d concepts, want 1 to 5", i, len(got))
		}
		var names []string
		for _, c := range got {
			names = append(names, c.Name)
			predicted++
			if slices.ContainsFunc(m.Concepts, func(x string) bool { return conceptsMatch(c.Name, x) }) {
				predictedOK++
			}
		}
		var missed []string
		for _, x := range m.Concepts {
			expected++
			if slices.ContainsFunc(names, func(n string) bool { return conceptsMatch(n, x) }) {
				expectedOK++
			} else {
				missed = append(missed, x)
			}
		}
		if verbose {
			t.Logf("%2d %q\n   got %q\n   missed %q", i, m.Subject, names, missed)
		}
	}
	return float64(predictedOK) / float64(predicted), float64(expectedOK) / float64(expected)
}

func TestConceptsMatch(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"rate limit", "Rate-Limit", true},
		{"rate limiting", "rate limits", true},
		{"rate limit", "token bucket", false},
		{"refund webhooks", "refund webhook retries", true},
		{"webhook", "refund webhook retries", true},
		{"POL-358", "pol 358", true},
		{"retry", "refund webhook", false},
	}
	for _, tt := range tests {
		if got := conceptsMatch(tt.a, tt.b); got != tt.want {
			t.Errorf("conceptsMatch(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestEmbeddedDeterministic(t *testing.T) {
	set := loadLabelled(t)
	stats := &MemStats{}
	for _, m := range set {
		stats.Add(Document{Subject: m.Subject, Body: m.Body})
	}
	for _, s := range []Stats{nil, stats} {
		e := NewEmbedded(s)
		for _, m := range set[:10] {
			doc := Document{Subject: m.Subject, Body: m.Body}
			a, err := e.Extract(context.Background(), doc)
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				b, err := e.Extract(context.Background(), doc)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("Extract(%q) not deterministic: %v then %v", m.Subject, a, b)
				}
			}
		}
	}
}
