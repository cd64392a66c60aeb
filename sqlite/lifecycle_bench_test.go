package sqlite_test

import (
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// BenchmarkMailboxStatus is mailbox_status for bob with 100,000 messages in
// his inbox: all of them unread (the worst case: every count walks the
// unread set), and 1,000 unread after the rest were read.
func BenchmarkMailboxStatus(b *testing.B) {
	e := newBenchEnv(b)
	e.seed(b, 100_000)
	// Each case also times list_messages({unreadOnly: true}) (first page
	// and totalCount) in the same run: on a shared machine the ratio says
	// more than either figure.
	unreadList, _ := mailroom.ListInput{UnreadOnly: true}.Filter()
	run := func(name string, unread int) {
		b.Run(name, func(b *testing.B) {
			c := startCPU()
			for b.Loop() {
				st, err := e.s.Status(e.bob)
				if err != nil || st.Unread.Total != unread {
					b.Fatalf("%+v %v", st.Unread, err)
				}
			}
			c.pause()
			c.report(b)
		})
		b.Run(name+"/list-unread", func(b *testing.B) {
			c := startCPU()
			for b.Loop() {
				if p, err := e.s.List(e.bob, unreadList); err != nil || p.TotalCount != unread {
					b.Fatalf("%d %v", p.TotalCount, err)
				}
			}
			c.pause()
			c.report(b)
		})
	}
	run("100k-unread", 100_000)
	if _, err := e.s.MarkAllRead(e.bob, "", false); err != nil {
		b.Fatal(err)
	}
	if err := e.s.SendMany(e.alice, draft(b, "@bob"), 1000); err != nil {
		b.Fatal(err)
	}
	run("1k-unread-of-101k", 1000)
}

// outboxIDs returns up to n of the caller's sent message ids, newest first.
func outboxIDs(b *testing.B, e benchEnv, n int) []string {
	var out []string
	for off := 0; len(out) < n; off += 200 {
		f, _ := mailroom.ListInput{Box: "outbox", Limit: ptr(200), Offset: ptr(off)}.Filter()
		p, err := e.s.List(e.alice, f)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Messages) == 0 {
			break
		}
		for _, r := range p.Messages {
			out = append(out, r.MessageID)
		}
	}
	return out[:min(n, len(out))]
}

// BenchmarkRetract is retract_message in a store of 100,000 messages: scrub
// the row, the full-text index (secure-delete) and the concept tags in one
// transaction, then checkpoint the WAL so the old text leaves the file.
func BenchmarkRetract(b *testing.B) {
	e := newBenchEnv(b)
	e.seed(b, 100_000)
	ids := outboxIDs(b, e, 2000)
	if _, err := e.s.Retract(e.alice, ids[0]); err != nil { // the first checkpoint copies the seeding WAL
		b.Fatal(err)
	}
	i := 1
	for b.Loop() {
		if i == len(ids) {
			b.Fatal("out of messages to retract; lower -benchtime")
		}
		if _, err := e.s.Retract(e.alice, ids[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPurge is mailroom purge of 100,000 old, read messages: every
// row, edge, index entry and concept tag, in batches of 2,000.
func BenchmarkPurge(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		e := newBenchEnv(b)
		e.seed(b, 100_000)
		if _, err := e.s.MarkAllRead(e.bob, "", false); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := e.s.Purge(e.alice, mailroom.PurgeRequest{Before: time.Now()})
		if err != nil || rep.Messages != 100_000 {
			b.Fatalf("%+v %v", rep, err)
		}
	}
}

// BenchmarkRelatedTo is list_messages({relatedTo}) in an inbox of 100,000
// messages that all share the target's concepts (the worst case: every
// message is related), a 50-row page with its totalCount.
func BenchmarkRelatedTo(b *testing.B) {
	e := newBenchEnv(b)
	d := draft(b, "@bob")
	d.Concepts = []mailroom.Concept{{ID: "CONCEPT:wal-checkpoint", Name: "WAL checkpoint"}, {ID: "CONCEPT:sqlite", Name: "SQLite"}, {ID: "CONCEPT:readers", Name: "readers"}}
	for range 10 {
		if err := e.s.SendMany(e.alice, d, 10_000); err != nil {
			b.Fatal(err)
		}
	}
	target := outboxIDs(b, e, 1)[0]
	f, err := mailroom.ListInput{RelatedTo: target}.Filter()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p, err := e.s.List(e.bob, f)
		if err != nil || len(p.Messages) != 50 {
			b.Fatalf("%d %v", len(p.Messages), err)
		}
	}
}
