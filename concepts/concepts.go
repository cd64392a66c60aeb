// Package concepts extracts the concepts a message is about, for the
// TAGGED_CONCEPT edges of SPEC.md section 6.
//
// Two extractors implement Extractor. Embedded, the default, is pure Go: it
// needs no network and gives the same answer for the same input and
// statistics. Ollama asks a Gemma model served by Ollama's HTTP API and falls
// back to another extractor (Embedded unless told otherwise) when the model is
// unreachable, slow, or answers outside its schema.
//
// # The embedded extractor
//
// It is a keyphrase extractor in the RAKE/YAKE family:
//
//   - Tokenising keeps code-shaped tokens whole: ticket ids (POL-358),
//     paths (billing/webhooks.go), snake_case, camelCase, dotted names
//     (grpc.NewClient) and mixed letters and digits (UUIDv7). Such an
//     identifier is a candidate on its own and is never stemmed or joined
//     into a phrase; it counts half again as much as a phrase, being a
//     distinctive name, while file paths count half, since they say where
//     rather than what. Numbers, times, URLs, @handles and #refs are never
//     candidates.
//   - Stop words (the Snowball English stop list, github.com/kljensen/snowball,
//     widened in stopwords.go with the verbs and adverbs of engineering
//     prose and agent-mail boilerplate such as "please", "thanks",
//     "handoff", "ruling", "follow-up"), the inflected forms of common
//     verbs, -ly adverbs, and punctuation split the text into runs of
//     content words; every 1- to 3-word sequence inside a run is a
//     candidate phrase.
//   - Words are folded with the English Snowball (Porter2) stemmer of the
//     same module.
//   - A candidate scores by its frequency in the message (subject
//     occurrences count three times), by the mean frequency of its words, and
//     by rarity across the mailbox (IDF from Stats). The IDF is smoothed
//     with a prior of a few pseudo-documents in which ordinary words are
//     rare and generic engineering words ("test", "error", "file") common, so
//     a new mailbox, or no Stats at all, still ranks sensibly.
//   - The best candidates are taken greedily, skipping any that shares a word
//     with one already taken and stopping at five or when the score falls
//     well below the best one. Ties break on the candidate's key, so the
//     result is deterministic.
//   - A concept's display name is its most common surface form, preferring
//     forms not at the start of a sentence (where capitalisation says
//     nothing), then the first seen.
//
// Terms returns the keys the extractor asks Stats about, so a store can record
// document frequencies as it processes messages.
package concepts

import (
	"context"
	"sort"
	"sync"
	"unicode/utf8"

	"github.com/mailroom/mailroom"
)

// Document is what an extractor sees of a message.
type Document struct {
	Subject, Body string
}

// Stats answers rarity questions about the mailbox's own messages: how many
// messages' documents contain each term or phrase (document frequency), and
// how many documents there are.
type Stats interface {
	// DocFreq returns the document frequency of each of terms (absent means
	// zero) and the number of documents counted.
	DocFreq(ctx context.Context, terms []string) (df map[string]int, total int, err error)
}

// Extractor finds the concepts of a message.
type Extractor interface {
	// Extract returns 1 to 5 concepts for doc, best first, canonicalised
	// with mailroom.CanonicalConcept. It returns none for a document with no
	// letters or digits worth a concept.
	Extract(ctx context.Context, doc Document) ([]mailroom.Concept, error)
	// Name identifies the extractor in logs.
	Name() string
}

// Sourced is an Extractor that may hand a document to another extractor
// (a fallback) and says which one answered.
type Sourced interface {
	Extractor
	ExtractFrom(ctx context.Context, doc Document) (concepts []mailroom.Concept, source string, err error)
}

// Terms returns the candidate terms and phrases of doc, sorted and without
// duplicates: the keys the embedded extractor passes to Stats.DocFreq. A
// store records them when it processes a message so that later extractions
// see document frequencies.
func Terms(doc Document) []string {
	c := collect(doc)
	out := make([]string, 0, len(c.cands))
	for k := range c.cands {
		out = append(out, k)
	}
	// Keep the document's most frequent candidates: a long body has
	// thousands, and recording all of them would make each completion a
	// large write. A term never recorded counts as rare, which is what a
	// phrase seen once in one long message is.
	sort.Slice(out, func(i, j int) bool {
		a, b := c.cands[out[i]], c.cands[out[j]]
		if a.tf != b.tf {
			return a.tf > b.tf
		}
		return out[i] < out[j]
	})
	if len(out) > MaxTerms {
		out = out[:MaxTerms]
	}
	sort.Strings(out)
	return out
}

// MaxTerms bounds the terms Terms returns for one document.
const MaxTerms = 200

// MemStats is an in-memory Stats, safe for concurrent use. Its zero value is
// an empty corpus.
type MemStats struct {
	mu    sync.RWMutex
	df    map[string]int
	total int
}

// Add counts doc as one more document of the corpus.
func (s *MemStats) Add(doc Document) {
	terms := Terms(doc)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.df == nil {
		s.df = make(map[string]int)
	}
	for _, t := range terms {
		s.df[t]++
	}
	s.total++
}

// DocFreq implements Stats.
func (s *MemStats) DocFreq(ctx context.Context, terms []string) (map[string]int, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	df := make(map[string]int, len(terms))
	for _, t := range terms {
		if n := s.df[t]; n > 0 {
			df[t] = n
		}
	}
	return df, s.total, nil
}

// truncate cuts s to at most n bytes without splitting a character: the
// start of a message says what it is about.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
