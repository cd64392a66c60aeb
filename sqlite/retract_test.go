package sqlite_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/concepts"
	"github.com/mailroom/mailroom/sqlite"
)

// fileHolds reports whether the database file or its WAL holds word.
func fileHolds(t *testing.T, path, word string) []string {
	t.Helper()
	var where []string
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(bytes.ToLower(b), []byte(word)) {
			where = append(where, filepath.Base(p))
		}
	}
	return where
}

// TestRetractionLeavesNoTextInTheFile proves a retraction scrubs the old
// text from the bytes of the database: the message row, the full-text
// index, the extracted concepts and their term statistics, and the WAL.
func TestRetractionLeavesNoTextInTheFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	terms := func(subject, body string) []string {
		return concepts.Terms(concepts.Document{Subject: subject, Body: body})
	}
	s := open(t, path, sqlite.Options{Terms: terms})
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	const marker = "xqzvorpalfjord"
	send := func(subject, body string) mailroom.SendReceipt {
		d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: subject, Body: body}.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:t"
		r, err := s.Send(mailroom.WithCaller(ctx, alice), d)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Neighbours on both sides, so the marker sits inside pages that stay live.
	for range 20 {
		send("weekly report", "nothing unusual this week in the build farm")
	}
	r := send("Wrong recipient: "+marker+" plan", "The "+marker+" rollout plan. Deploy "+marker+" to staging; "+marker+" keys rotate Friday.")
	for range 20 {
		send("weekly report", "nothing unusual this week in the build farm")
	}
	w := concepts.NewWorker(s, concepts.NewEmbedded(s), concepts.WorkerOptions{})
	for {
		worked, err := w.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !worked {
			break
		}
	}
	m, err := s.Get(mailroom.WithCaller(ctx, bob), r.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	tagged := false
	for _, c := range m.TaggedConcepts {
		tagged = tagged || bytes.Contains([]byte(c.ID), []byte(marker))
	}
	if !tagged {
		t.Fatalf("the extractor did not tag the marker (%+v); the test would prove nothing about concepts", m.TaggedConcepts)
	}
	if where := fileHolds(t, path, marker); len(where) == 0 {
		t.Fatal("the marker is not in the file before retraction; the scan would prove nothing")
	}

	if _, err := s.Retract(mailroom.WithCaller(ctx, alice), r.MessageID); err != nil {
		t.Fatal(err)
	}
	if where := fileHolds(t, path, marker); len(where) > 0 {
		t.Fatalf("after retraction the old text is still in %v", where)
	}
	// Still true once the store is closed and everything is checkpointed.
	s.Close()
	if where := fileHolds(t, path, marker); len(where) > 0 {
		t.Fatalf("after close the old text is in %v", where)
	}
	s2 := open(t, path, sqlite.Options{})
	f, _ := mailroom.ListInput{Query: marker}.Filter()
	if p, err := s2.List(mailroom.WithCaller(ctx, bob), f); err != nil || p.TotalCount != 0 {
		t.Fatalf("query after reopen: %+v %v", p, err)
	}
	f, _ = mailroom.ListInput{Query: "weekly"}.Filter()
	if p, err := s2.List(mailroom.WithCaller(ctx, bob), f); err != nil || p.TotalCount != 40 {
		t.Fatalf("the index lost its neighbours: %d %v", p.TotalCount, err)
	}
	if err := sqlite.FTSIntegrity(ctx, s2); err != nil {
		t.Fatalf("the index after a retraction: %v", err)
	}
}

// TestPurgeLeavesNoTextInTheFile: purged mail leaves the database file's
// bytes too, index included, while the rest of the index keeps working.
func TestPurgeLeavesNoTextInTheFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{})
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	const marker = "qqvelocipedezz"
	send := func(subject string) mailroom.SendReceipt {
		d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: subject, Body: subject + " body"}.Draft(0)
		d.OriginSessionID = "SESSION:t"
		r, err := s.Send(mailroom.WithCaller(ctx, alice), d)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var old []string
	for range 30 {
		old = append(old, send("old "+marker+" mail").MessageID)
	}
	s.MarkRead(mailroom.WithCaller(ctx, bob), old)
	cut := send("cutoff").SentAt
	send("fresh weekly mail")
	if len(fileHolds(t, path, marker)) == 0 {
		t.Fatal("the marker is not in the file before the purge")
	}
	rep, err := s.Purge(ctx, mailroom.PurgeRequest{Before: cut})
	if err != nil || rep.Messages != 30 {
		t.Fatalf("%+v %v", rep, err)
	}
	if where := fileHolds(t, path, marker); len(where) > 0 {
		t.Fatalf("purged text still in %v", where)
	}
	f, _ := mailroom.ListInput{Query: "weekly"}.Filter()
	if p, err := s.List(mailroom.WithCaller(ctx, bob), f); err != nil || p.TotalCount != 1 {
		t.Fatalf("index after purge: %d %v", p.TotalCount, err)
	}
	if err := sqlite.FTSIntegrity(ctx, s); err != nil {
		t.Fatalf("the index after a purge: %v", err)
	}
}
