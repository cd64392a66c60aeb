package mailroom

import (
	"context"
	"strings"
	"time"
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

// ConceptJob is one queued concept extraction, leased to one worker.
type ConceptJob struct {
	Seq       int64 // the store's handle of the message
	MessageID string
	Subject   string
	Body      string
	Attempts  int    // including this one
	Worker    string // the lease holder
}

// ConceptResult is what a worker found for one job.
type ConceptResult struct {
	Job      ConceptJob
	Concepts []Concept
	Source   string   // the extractor's name
	Terms    []string // for document frequencies
}

// ConceptCount is a concept and how many of the caller's counted messages
// carry it.
type ConceptCount struct {
	Concept
	Count int `json:"count"`
}

// ConceptStore is the concept side of a store: a durable extraction queue
// that any server process sharing the database may work, the document
// frequencies the embedded extractor scores rarity with, and the caller's
// concepts.
type ConceptStore interface {
	// ClaimConceptJobs leases up to max due jobs, oldest first, to worker
	// for lease; none when none is due. A job whose lease ran out (its
	// worker died) is due again.
	ClaimConceptJobs(ctx context.Context, worker string, lease time.Duration, max int) ([]ConceptJob, error)
	// CompleteConceptJobs, in one transaction, tags each result's message
	// with its concepts, adds its terms to the document frequencies and
	// removes its job. A job whose lease was lost is left to its new owner
	// and returned in lost.
	CompleteConceptJobs(ctx context.Context, results []ConceptResult) (lost []ConceptJob, err error)
	// PendingConceptJobs counts the jobs not yet completed, leased or not:
	// the extraction backlog.
	PendingConceptJobs(ctx context.Context) (int, error)
	// RetryConceptJob releases job to run again after the delay.
	RetryConceptJob(ctx context.Context, job ConceptJob, reason string, after time.Duration) error
	// DocFreq returns how many processed messages contain each term, and
	// how many messages were processed.
	DocFreq(ctx context.Context, terms []string) (df map[string]int, total int, err error)
	// Concepts lists the concepts of the caller's scan newest visible
	// messages (inbox and outbox, in commit order), most used first, at
	// most limit. It reads at most scan+1 of the caller's messages, so its
	// cost does not grow with the mailbox.
	Concepts(ctx context.Context, limit, scan int) (ConceptList, error)
}

// ConceptList is list_concepts' answer.
type ConceptList struct {
	Concepts []ConceptCount
	// Counted is how many of the caller's newest messages the counts cover.
	Counted int
	// Complete says Counted is every message the caller can see.
	Complete bool
}

// Concept listing limits.
const (
	DefaultConceptLimit = 100
	MaxConceptLimit     = 500
	// ConceptScan is how many of the caller's newest messages list_concepts
	// counts: an exact count over the whole mailbox grows with it (5M concept
	// rows at 100k messages took seconds), and recent mail is what the
	// listing is for. With the 50 caller concepts a message may carry on
	// every message it costs about 20 ms of CPU (docs/benchmarks.md).
	ConceptScan = 500
)

// ConceptLimit validates list_concepts' limit; nil means the default.
func ConceptLimit(limit *int) (int, error) {
	if limit == nil {
		return DefaultConceptLimit, nil
	}
	if *limit < 1 || *limit > MaxConceptLimit {
		return 0, Errorf(EINVALID, "limit must be between 1 and %d (got %d)", MaxConceptLimit, *limit)
	}
	return *limit, nil
}
