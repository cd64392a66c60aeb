package mailroom

import (
	"strings"
	"unicode"
)

// Concept is a Concept node: what a message is about.
type Concept struct {
	ID   string `json:"id"`   // CONCEPT:<slug>
	Name string `json:"name"` // display name
}

// MaxConceptLen bounds a concept's display name.
const MaxConceptLen = 100

// ConceptSlug folds text to a concept slug: lowercase, with every run of
// anything but letters and digits folded to a single '-'.
func ConceptSlug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}

// CanonicalConcept turns a concept id (CONCEPT:slug) or free text into a
// Concept. Free text keeps its trimmed form as the display name.
func CanonicalConcept(s string) (Concept, error) {
	s = strings.TrimSpace(s)
	name := s
	if len(s) >= len(ConceptPrefix) && strings.EqualFold(s[:len(ConceptPrefix)], ConceptPrefix) {
		name = strings.ReplaceAll(s[len(ConceptPrefix):], "-", " ")
	}
	slug := ConceptSlug(name)
	if slug == "" {
		return Concept{}, Errorf(EINVALID, "taggedConcepts: %q has no letters or digits", s)
	}
	if len([]rune(name)) > MaxConceptLen {
		return Concept{}, Errorf(EINVALID, "taggedConcepts: %q is longer than %d characters", s, MaxConceptLen)
	}
	return Concept{ID: ConceptPrefix + slug, Name: strings.Join(strings.Fields(name), " ")}, nil
}

// CanonicalConcepts canonicalises a list, folding duplicates by id.
func CanonicalConcepts(list []string) ([]Concept, error) {
	out := make([]Concept, 0, len(list))
	seen := map[string]bool{}
	for _, s := range list {
		c, err := CanonicalConcept(s)
		if err != nil {
			return nil, err
		}
		if !seen[c.ID] {
			seen[c.ID] = true
			out = append(out, c)
		}
	}
	return out, nil
}
