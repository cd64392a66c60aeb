package sqlite_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// worstWords are in every seeded message, for queries whose every term
// matches everything.
var worstWords = strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec")

// seedWorst fills bob's inbox with 100,000 messages that make every listing
// filter as expensive as it can be: each carries the 17 worstWords and the
// same 50 caller concepts, and 100 more messages add 100,000 distinct words
// across 16 initial letters for prefix queries to expand.
func (e benchEnv) seedWorst(b *testing.B) []string {
	start := time.Now()
	tags := make([]string, mailroom.MaxConceptFilter)
	for i := range tags {
		tags[i] = fmt.Sprintf("topic %02d", i)
	}
	d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: "worst case " + strings.Join(worstWords[:4], " "),
		Body: strings.Join(worstWords, " "), TaggedConcepts: tags}.Draft(0)
	if err != nil {
		b.Fatal(err)
	}
	d.OriginSessionID = "SESSION:bench"
	if err := e.s.SendMany(e.alice, d, 100_000); err != nil {
		b.Fatal(err)
	}
	for m := range 100 {
		var w strings.Builder
		for j := range 1000 {
			fmt.Fprintf(&w, "%c%x ", 'a'+rune(j%16), m*1000+j)
		}
		d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: "distinct words", Body: w.String()}.Draft(0)
		if err != nil {
			b.Fatal(err)
		}
		d.OriginSessionID = "SESSION:bench"
		if _, err := e.s.Send(e.alice, d); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("seeded in %v", time.Since(start))
	return tags
}

// BenchmarkWorstArguments runs list_messages and list_concepts at 100,000
// messages with the most expensive arguments the limits allow, and reports
// CPU per call (cpu-ms/op) next to wall time: the machine is shared.
func BenchmarkWorstArguments(b *testing.B) {
	e := newBenchEnv(b)
	tags := e.seedWorst(b)
	prefixes := make([]string, 16)
	for i := range prefixes {
		prefixes[i] = string(rune('a'+i)) + "*"
	}
	q16 := strings.Join(worstWords[:16], " ")
	cases := []struct {
		name string
		in   mailroom.ListInput
	}{
		{"first-page", mailroom.ListInput{}},
		{"query-1-term-every-message", mailroom.ListInput{Query: worstWords[0]}},
		{"query-16-terms-every-message", mailroom.ListInput{Query: q16}},
		{"query-16-prefixes-1-letter", mailroom.ListInput{Query: strings.Join(prefixes, " ")}},
		{"query-500-chars", mailroom.ListInput{Query: strings.Repeat("x", 500)}},
		{"tags-50-every-message", mailroom.ListInput{TaggedConcepts: tags}},
		{"tags-50-and-query-16", mailroom.ListInput{TaggedConcepts: tags, Query: q16}},
		{"deep-offset", mailroom.ListInput{Offset: ptr(99_950)}},
		{"box-all-from-to", mailroom.ListInput{Box: "all", From: "@alice", To: "@bob", UnreadOnly: false}},
	}
	for _, tc := range cases {
		f, err := tc.in.Filter()
		if err != nil {
			b.Fatal(err)
		}
		b.Run("list/"+tc.name, func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				if _, err := e.s.List(e.bob, f); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
	b.Run("concepts/limit-500", func(b *testing.B) {
		cpu := cpuTime()
		for b.Loop() {
			if _, err := e.s.Concepts(e.bob, mailroom.MaxConceptLimit); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	})
}
