package concepts

import "github.com/kljensen/snowball/english"

// stem returns the English Snowball (Porter2) stem of a lower-case word.
func stem(w string) string { return english.Stem(w, true) }

// isStopWord reports whether a lower-case word carries no topic: an English
// stop word of the Snowball list, or one of mailroom's own (stopwords.go).
func isStopWord(lower string) bool { return english.IsStopWord(lower) || stopWords[lower] }
