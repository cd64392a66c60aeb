package concepts

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/mailroom/mailroom"
)

// Tuning of the embedded extractor. The values were chosen on the labelled
// set in testdata (see TestEmbeddedLabelled).
const (
	subjectWeight  = 3.0      // a subject occurrence counts as this many body ones
	maxPhraseWords = 3        // longest candidate phrase, in tokens
	maxConcepts    = 5        // most concepts per message
	maxNameRunes   = 60       // longest display name; longer candidates are dropped
	maxBodyBytes   = 64 << 10 // bodies are read up to this size (SPEC's body limit)
	fileWeight     = 0.5      // file names and paths say where, not what
	identWeight    = 1.5      // other identifiers are names, and distinctive
	priorDocs      = 5.0      // pseudo-documents of the IDF prior
	priorRare      = 0.05     // share of prior documents holding an ordinary word
	priorGeneric   = 0.6      // share holding a generic engineering word
	phraseBonus    = 0.3      // score bonus per extra word of a phrase
	minScoreRatio  = 0.2      // candidates scoring below this share of the best are dropped
)

// Embedded is the default extractor: a deterministic keyphrase extractor in
// pure Go. Stats, when set, supplies the mailbox's document frequencies; when
// nil, a built-in prior stands in for them.
type Embedded struct {
	Stats Stats
}

// NewEmbedded returns an embedded extractor using stats (which may be nil).
func NewEmbedded(stats Stats) *Embedded { return &Embedded{Stats: stats} }

// Name implements Extractor.
func (e *Embedded) Name() string { return "embedded" }

// Extract implements Extractor. It fails only when ctx is done or Stats
// fails.
func (e *Embedded) Extract(ctx context.Context, doc Document) ([]mailroom.Concept, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := collect(doc)
	if len(c.cands) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(c.cands))
	for k := range c.cands {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var df map[string]int
	total := 0
	if e.Stats != nil {
		var err error
		df, total, err = e.Stats.DocFreq(ctx, keys)
		if err != nil {
			return nil, fmt.Errorf("concepts: document frequencies: %w", err)
		}
	}
	idf := func(key string, q float64) float64 {
		d := float64(df[key])
		n := math.Max(float64(total), d)
		return math.Log((n + priorDocs) / (d + priorDocs*q))
	}

	ranked := make([]*candidate, 0, len(keys))
	for _, k := range keys {
		cd := c.cands[k]
		q := 1.0
		word := 0.0
		for _, w := range cd.words {
			wq := priorOf(w, cd.ident)
			q = math.Min(q, wq)
			word += c.wordTF[w] * idf(w, wq)
		}
		word /= float64(len(cd.words))
		q *= math.Pow(0.5, float64(len(cd.words)-1))
		cd.score = (cd.tf*idf(k, q) + word) * (1 + phraseBonus*float64(len(cd.words)-1))
		switch {
		case cd.file:
			cd.score *= fileWeight
		case cd.ident:
			cd.score *= identWeight
		}
		ranked = append(ranked, cd)
	}
	sort.Slice(ranked, func(i, j int) bool {
		if ranked[i].score != ranked[j].score {
			return ranked[i].score > ranked[j].score
		}
		return ranked[i].key < ranked[j].key
	})

	var out []mailroom.Concept
	used := map[string]bool{}
	seen := map[string]bool{}
	best := ranked[0].score
	for _, cd := range ranked {
		if len(out) == maxConcepts || cd.score < best*minScoreRatio {
			break
		}
		if overlaps(cd, used) {
			continue
		}
		concept, err := mailroom.CanonicalConcept(cd.name())
		if err != nil || seen[concept.ID] {
			continue
		}
		seen[concept.ID] = true
		for _, a := range cd.atoms() {
			used[a] = true
		}
		out = append(out, concept)
	}
	return out, nil
}

// priorOf is the share of the prior's pseudo-documents that hold word.
func priorOf(word string, ident bool) float64 {
	if !ident && genericStems[word] {
		return priorGeneric
	}
	return priorRare
}

// genericStems are the keys of genericWords. Built once, never mutated.
var genericStems = func() map[string]bool {
	m := make(map[string]bool, len(genericWords))
	for w := range genericWords {
		m[wordKey(w)] = true
	}
	return m
}()

// overlaps reports whether cd shares a word with a chosen concept: a second
// concept repeating a word of the first is mostly redundant.
func overlaps(cd *candidate, used map[string]bool) bool {
	for _, a := range cd.atoms() {
		if used[a] {
			return true
		}
	}
	return false
}

// candidate is a phrase or identifier that may become a concept.
type candidate struct {
	key   string   // token keys joined by spaces
	words []string // token keys
	ident bool     // a single identifier
	file  bool     // a single file name or path
	tf    float64  // weighted occurrences in the document
	score float64
	forms []form // surface forms, in order of first appearance
}

// form is a surface form of a candidate and how often it appears, at the
// start of a sentence and elsewhere.
type form struct {
	text           string
	initial, plain float64
}

// atoms returns the stemmed words of cd.
func (cd *candidate) atoms() []string { return strings.Fields(cd.key) }

// name returns the display name: the most common surface form away from the
// start of a sentence, else the most common form, the first seen on ties.
func (cd *candidate) name() string {
	best, bestN := "", -1.0
	for _, f := range cd.forms {
		if f.plain > bestN {
			best, bestN = f.text, f.plain
		}
	}
	if bestN > 0 {
		return best
	}
	best, bestN = "", -1
	for _, f := range cd.forms {
		if f.initial > bestN {
			best, bestN = f.text, f.initial
		}
	}
	return best
}

// collection holds the candidates of one document.
type collection struct {
	cands  map[string]*candidate
	wordTF map[string]float64 // weighted occurrences of each token key
}

// collect gathers the candidates of doc: the subject weighted above the body.
func collect(doc Document) *collection {
	c := &collection{cands: map[string]*candidate{}, wordTF: map[string]float64{}}
	c.add(doc.Subject, subjectWeight)
	c.add(truncate(doc.Body, maxBodyBytes), 1)
	return c
}

// add counts the candidates of text with weight w: identifiers alone, and
// every 1- to maxPhraseWords-word sequence of each run of words.
func (c *collection) add(text string, w float64) {
	toks := tokenize(text)
	for i := 0; i < len(toks); {
		switch toks[i].kind {
		case kindStop:
			i++
			continue
		case kindIdent:
			c.wordTF[toks[i].key] += w
			c.addCand(toks[i:i+1], w)
			i++
			continue
		}
		j := i + 1
		for j < len(toks) && toks[j].kind == kindWord && !toks[j].brk {
			j++
		}
		run := toks[i:j]
		for a := range run {
			c.wordTF[run[a].key] += w
			for n := 1; n <= maxPhraseWords && a+n <= len(run); n++ {
				c.addCand(run[a:a+n], w)
			}
		}
		i = j
	}
}

// addCand counts one occurrence of the phrase made of toks.
func (c *collection) addCand(toks []token, w float64) {
	keys := make([]string, len(toks))
	texts := make([]string, len(toks))
	for i, t := range toks {
		keys[i], texts[i] = t.key, t.text
	}
	text := strings.Join(texts, " ")
	if utf8.RuneCountInString(text) > maxNameRunes {
		return
	}
	key := strings.Join(keys, " ")
	cd := c.cands[key]
	if cd == nil {
		cd = &candidate{key: key, words: keys, ident: toks[0].kind == kindIdent, file: toks[0].file}
		c.cands[key] = cd
	}
	cd.tf += w
	i := 0
	for i < len(cd.forms) && cd.forms[i].text != text {
		i++
	}
	if i == len(cd.forms) {
		cd.forms = append(cd.forms, form{text: text})
	}
	if toks[0].initial {
		cd.forms[i].initial += w
	} else {
		cd.forms[i].plain += w
	}
}
