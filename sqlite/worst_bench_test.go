package sqlite_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite/benchstore"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWorstArguments calls every read-only store method behind a tool
// (list_messages, get_message, mailbox_status, list_concepts) at 100,000
// messages with the costliest arguments the limits allow, on
// benchstore.Worst (every filter at its limit matches everything), with no
// budget, and reports CPU per call (cpu-ms/op): the machine is shared. The
// store is built once and cached (benchstore.Dir()).
func BenchmarkWorstArguments(b *testing.B) {
	st := benchstore.OpenRecipe(b, benchstore.Worst, 100_000)
	tags := benchstore.WorstTags()
	words := benchstore.WorstWords
	prefixes := make([]string, 16)
	for i := range prefixes {
		prefixes[i] = string(rune('a'+i)) + "*"
	}
	q16 := strings.Join(words[:16], " ")
	// The newest message carrying the 50 tags (under the 100 untagged
	// newest), for get_message and relatedTo.
	tf, err := mailroom.ListInput{Limit: ptr(1), Offset: ptr(100)}.Filter()
	if err != nil {
		b.Fatal(err)
	}
	top, err := st.List(st.Bob, tf)
	if err != nil || len(top.Messages) != 1 {
		b.Fatal(top, err)
	}
	tagged := top.Messages[0].MessageID
	deep := mailroom.Cursor(200) // below all but the oldest 199 messages
	cases := []struct {
		name string
		in   mailroom.ListInput
	}{
		{"first-page", mailroom.ListInput{}},
		{"limit-200", mailroom.ListInput{Limit: ptr(200)}},
		{"unread", mailroom.ListInput{UnreadOnly: true}},
		{"query-1-term-every-message", mailroom.ListInput{Query: words[0]}},
		{"query-16-terms-every-message", mailroom.ListInput{Query: q16}},
		{"query-16-prefixes-1-letter", mailroom.ListInput{Query: strings.Join(prefixes, " ")}},
		{"query-500-chars", mailroom.ListInput{Query: strings.Repeat("x", 500)}},
		{"tags-50-every-message", mailroom.ListInput{TaggedConcepts: tags}},
		{"tags-50-and-query-16", mailroom.ListInput{TaggedConcepts: tags, Query: q16}},
		{"deep-offset", mailroom.ListInput{Offset: ptr(99_950)}},
		{"deep-cursor", mailroom.ListInput{Cursor: &deep}},
		{"box-all-from-to", mailroom.ListInput{Box: "all", From: "@alice", To: "@bob"}},
		{"related-to-50-concepts", mailroom.ListInput{RelatedTo: tagged}},
	}
	for _, tc := range cases {
		f, err := tc.in.Filter()
		if err != nil {
			b.Fatal(err)
		}
		b.Run("list/"+tc.name, func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				if _, err := st.List(st.Bob, f); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
	others := []struct {
		name string
		call func() error
	}{
		{"get/50-concepts", func() error { _, err := st.Get(st.Bob, tagged); return err }},
		{"status", func() error { _, err := st.Status(st.Bob); return err }},
		{"concepts/limit-500", func() error {
			_, err := st.Concepts(st.Bob, mailroom.MaxConceptLimit, mailroom.ConceptScan)
			return err
		}},
		{"concepts/sender-limit-500", func() error {
			_, err := st.Concepts(st.Alice, mailroom.MaxConceptLimit, mailroom.ConceptScan)
			return err
		}},
	}
	for _, tc := range others {
		b.Run(tc.name, func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				if err := tc.call(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}
