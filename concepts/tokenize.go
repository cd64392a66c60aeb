package concepts

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokenKind says what part a token can play in a concept.
type tokenKind uint8

const (
	kindStop  tokenKind = iota // stop word, number, URL, handle: never in a concept
	kindWord                   // plain word, possibly hyphenated: stemmed, joins phrases
	kindIdent                  // identifier, path, ticket id: a concept on its own
)

// token is one word-like run of a text.
type token struct {
	text    string // surface form, trimmed of surrounding punctuation
	key     string // stems for words (hyphen parts joined by spaces), lower case for identifiers
	kind    tokenKind
	brk     bool // punctuation or a line break separates it from the previous token
	initial bool // first token of a sentence, where capitalisation says nothing
	file    bool // an identifier that names a file or path
}

// joiners may appear inside a token: they hold identifiers, paths and
// contractions together.
const joiners = "_-./:@#'’+"

// isTokenRune reports whether r can be part of a token.
func isTokenRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || strings.ContainsRune(joiners, r)
}

// tokenize splits s into tokens, recording where punctuation separates them.
func tokenize(s string) []token {
	var out []token
	brk, initial := true, true
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isTokenRune(r) {
			if r != ' ' && r != '\t' {
				brk = true
				if r != ',' && r != ';' && r != '(' && r != ')' && r != '"' && r != '*' && r != '`' {
					initial = true
				}
			}
			i += n
			continue
		}
		j := i
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if !isTokenRune(r) {
				break
			}
			j += n
		}
		raw := s[i:j]
		i = j
		text := strings.TrimLeft(raw, "-.:'’+_")
		if len(text) != len(raw) {
			brk = true
		}
		trimmed := strings.TrimRight(text, "-.:'’/+@#_")
		trail := text[len(trimmed):]
		text = trimmed
		if text != "" {
			t := classify(text)
			t.brk, t.initial = brk, initial
			out = append(out, t)
			brk, initial = false, false
		}
		if trail != "" {
			brk = true
			if strings.ContainsAny(trail, ".:") {
				initial = true
			}
		}
	}
	return out
}

// classify decides the kind and key of a token's text.
func classify(text string) token {
	t := token{text: text}
	lower := strings.ToLower(strings.ReplaceAll(text, "’", "'"))
	if isStopWord(lower) {
		return t
	}
	for _, suffix := range []string{"'s", "’s", "'S", "’S"} {
		if strings.HasSuffix(text, suffix) {
			text = text[:len(text)-len(suffix)]
			t.text = text
			lower = strings.ToLower(strings.ReplaceAll(text, "’", "'"))
			break
		}
	}
	first, _ := utf8.DecodeRuneInString(text)
	switch {
	case text == "" || strings.Contains(lower, "'") || isStopWord(lower):
		return t // contractions are function words
	case strings.Contains(lower, "://") || strings.HasPrefix(lower, "www."):
		return t
	case first == '@' || first == '#' || unicode.IsDigit(first):
		return t // handles, issue refs, numbers, times, versions
	case !strings.ContainsFunc(text, unicode.IsLetter):
		return t
	}
	if isPlainWord(text) {
		if utf8.RuneCountInString(text) < 2 || isWeakLy(lower) {
			return t
		}
		t.kind = kindWord
		t.key = wordKey(text)
		return t
	}
	t.kind = kindIdent
	t.key = lower
	t.file = isFile(lower)
	return t
}

// isPlainWord reports whether text is letters, with single hyphens between
// them, and not camelCase: an ordinary (possibly compound) word.
func isPlainWord(text string) bool {
	prev := rune(0)
	for _, r := range text {
		switch {
		case r == '-':
			if prev == '-' {
				return false
			}
		case unicode.IsLetter(r) || unicode.Is(unicode.Mn, r):
			if unicode.IsUpper(r) && unicode.IsLower(prev) {
				return false // camelCase is an identifier
			}
		default:
			return false
		}
		prev = r
	}
	return true
}

// wordKey folds a plain word: each hyphen-separated part lower-cased and
// stemmed, acronyms (all capitals) kept unstemmed, parts joined by spaces so
// that "multi-stage" and "multi stage" are the same key.
func wordKey(text string) string {
	parts := strings.Split(text, "-")
	keys := parts[:0:0]
	for _, p := range parts {
		if p == "" {
			continue
		}
		lp := strings.ToLower(p)
		if utf8.RuneCountInString(p) >= 2 && strings.ToUpper(p) == p {
			keys = append(keys, lp)
			continue
		}
		keys = append(keys, stem(lp))
	}
	return strings.Join(keys, " ")
}

// fileExts are extensions that make a dotted identifier a file name.
var fileExts = makeSet(`go mod sum md sql json yaml yml toml txt csv tsx ts js jsx css html
py rs java c h cc cpp rb sh env lock proto ini cfg conf log xml`)

// isFile reports whether an identifier names a file or a path: it says where
// something is rather than what it is about. A single slash without an
// extension is more often a package or image name (log/slog) than a path.
func isFile(lower string) bool {
	if strings.HasPrefix(lower, "/") || strings.HasPrefix(lower, ".") || strings.Count(lower, "/") >= 2 {
		return true
	}
	dot := strings.LastIndexByte(lower, '.')
	return dot > 0 && fileExts[lower[dot+1:]]
}
