package mailroom_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
)

func TestDraftValidation(t *testing.T) {
	ok := mailroom.SendInput{To: []string{"@bob"}, Subject: "s", Body: "b"}
	tests := []struct {
		name    string
		edit    func(*mailroom.SendInput)
		wantErr string
	}{
		{"a plain message is valid", func(*mailroom.SendInput) {}, ""},
		{"empty to", func(in *mailroom.SendInput) { in.To = nil }, "to must name at least one recipient"},
		{"empty subject", func(in *mailroom.SendInput) { in.Subject = " " }, "subject must not be empty"},
		{"200 characters of subject is fine", func(in *mailroom.SendInput) { in.Subject = strings.Repeat("é", 200) }, ""},
		{"201 characters of subject", func(in *mailroom.SendInput) { in.Subject = strings.Repeat("a", 201) }, "subject is 201 characters; the limit is 200"},
		{"body over 64 KiB", func(in *mailroom.SendInput) { in.Body = strings.Repeat("a", 64*1024+1) }, "body is 65537 bytes; the limit is 65536"},
		{"invalid UTF-8 body", func(in *mailroom.SendInput) { in.Body = "a\xffb" }, "subject and body must be valid UTF-8"},
		{"bad priority", func(in *mailroom.SendInput) { in.Priority = "urgent" }, `priority must be one of low, normal, high (got "urgent")`},
		{"bad ticket", func(in *mailroom.SendInput) { in.RelatedTickets = []string{"123"} }, `relatedTickets: invalid ticket "123" (use #123 or owner/repo#123)`},
		{"reply to a malformed id", func(in *mailroom.SendInput) { in.InReplyTo = "nope" }, "Message not found: nope"},
		{"concept without letters", func(in *mailroom.SendInput) { in.TaggedConcepts = []string{"--"} }, `taggedConcepts: "--" has no letters or digits`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := ok
			tt.edit(&in)
			_, err := in.Draft(0)
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestDraftCanonicalises(t *testing.T) {
	d, err := mailroom.SendInput{To: []string{"bob"}, Subject: "s", Body: "b",
		RelatedSessions: []string{"abc", "SESSION:abc"}, RelatedTickets: []string{"#1", "o/r#2"},
		TaggedConcepts: []string{"WAL migration", "CONCEPT:wal-migration", "SQLite"}}.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.RelatedSessions) != 1 || d.RelatedSessions[0] != "SESSION:abc" {
		t.Errorf("sessions: %v", d.RelatedSessions)
	}
	if len(d.Concepts) != 2 || d.Concepts[0] != (mailroom.Concept{ID: "CONCEPT:wal-migration", Name: "WAL migration"}) || d.Concepts[1].ID != "CONCEPT:sqlite" {
		t.Errorf("concepts: %v", d.Concepts)
	}
	if d.Priority != mailroom.PriorityNormal {
		t.Errorf("priority %q", d.Priority)
	}
}

func TestListFilter(t *testing.T) {
	n := func(i int) *int { return &i }
	tests := []struct {
		name    string
		in      mailroom.ListInput
		wantErr string
	}{
		{"defaults", mailroom.ListInput{}, ""},
		{"limit 0", mailroom.ListInput{Limit: n(0)}, "limit must be between 1 and 200 (got 0)"},
		{"limit 201", mailroom.ListInput{Limit: n(201)}, "limit must be between 1 and 200 (got 201)"},
		{"offset -1", mailroom.ListInput{Offset: n(-1)}, "offset must be 0 or more (got -1)"},
		{"bad box", mailroom.ListInput{Box: "sent"}, `box must be one of inbox, outbox, all (got "sent")`},
		{"from a role", mailroom.ListInput{From: "role:x"}, `from: "role:x" is not an identity (use @name or human:login)`},
		{"bad thread", mailroom.ListInput{ThreadID: "x"}, `threadId must be a THREAD: id (got "x")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := tt.in.Filter()
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if err == nil && (f.Limit != 50 || f.Box != mailroom.BoxInbox) {
				t.Fatalf("defaults: %+v", f)
			}
		})
	}
}

func TestNextOffset(t *testing.T) {
	if got := mailroom.NextOffsetFor(0, 50, 120); got == nil || *got != 50 {
		t.Fatalf("first page: %v", got)
	}
	if got := mailroom.NextOffsetFor(100, 20, 120); got != nil {
		t.Fatalf("last page: %v", *got)
	}
	if got := mailroom.NextOffsetFor(500, 0, 120); got != nil {
		t.Fatalf("past the end: %v", *got)
	}
}

func TestConceptSlug(t *testing.T) {
	tests := map[string]string{
		"WAL migration":       "wal-migration",
		"  SQLite -- BUSY!! ": "sqlite-busy",
		"Über Straße":         "über-straße",
		"POL-358":             "pol-358",
	}
	for in, want := range tests {
		if got := mailroom.ConceptSlug(in); got != want {
			t.Errorf("ConceptSlug(%q) = %q, want %q", in, got, want)
		}
	}
	c, err := mailroom.CanonicalConcept("CONCEPT:wal-migration")
	if err != nil || c.ID != "CONCEPT:wal-migration" || c.Name != "wal migration" {
		t.Fatalf("id form: %+v %v", c, err)
	}
}

func TestSearchTerms(t *testing.T) {
	got := mailroom.SearchTerms("  POL-358\x00wal* * \"x \xff(")
	want := []mailroom.SearchTerm{{Word: "POL-358"}, {Word: "wal", Prefix: true}, {Word: `"x`}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("SearchTerms = %v, want %v", got, want)
	}
	if got := mailroom.SearchTerms("* ( -- "); got != nil {
		t.Fatalf("no words: %v", got)
	}
}
