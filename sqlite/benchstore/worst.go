package benchstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// WorstWords are in every message of the Worst recipe, so a query of any of
// them (up to the 16-term limit) matches everything.
var WorstWords = strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec")

// WorstTags are the mailroom.MaxConceptFilter caller concepts every Worst
// message carries, so a taggedConcepts filter at its limit matches
// everything and list_concepts has the most concept rows a message can have
// from its sender.
func WorstTags() []string {
	tags := make([]string, mailroom.MaxConceptFilter)
	for i := range tags {
		tags[i] = fmt.Sprintf("topic %02d", i)
	}
	return tags
}

// Worst fills bob's inbox so that every listing filter is as costly as
// the limits let it be: n messages from alice that each hold the 17
// WorstWords and the 50 WorstTags, then 100 more that hold 100,000 distinct
// words across 16 initial letters, for one-letter prefix queries to expand.
// (No concept worker runs, so messages carry only their caller's concepts.)
var Worst = Recipe{Name: "worst-v1", Seed: seedWorst}

func seedWorst(alice, _ context.Context, s *sqlite.Store, n int) (string, error) {
	d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: "worst case " + strings.Join(WorstWords[:4], " "),
		Body: strings.Join(WorstWords, " "), TaggedConcepts: WorstTags()}.Draft(0)
	if err != nil {
		return "", err
	}
	d.OriginSessionID = "SESSION:bench"
	if err := s.SendMany(alice, d, n); err != nil {
		return "", err
	}
	for m := range 100 {
		var w strings.Builder
		for j := range 1000 {
			fmt.Fprintf(&w, "%c%x ", 'a'+rune(j%16), m*1000+j)
		}
		d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: "distinct words", Body: w.String()}.Draft(0)
		if err != nil {
			return "", err
		}
		d.OriginSessionID = "SESSION:bench"
		if _, err := s.Send(alice, d); err != nil {
			return "", err
		}
	}
	return "", nil
}
