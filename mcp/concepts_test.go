package mcp_test

import "testing"

type conceptCount struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func TestListConceptsCountsVisibleMail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob, carol := e.as("alice"), e.as("bob"), e.as("carol")
	alice.send(map[string]any{"to": "@bob", "subject": "wal", "body": "b", "taggedConcepts": []string{"WAL migration", "SQLite"}})
	alice.send(map[string]any{"to": "@bob", "subject": "wal again", "body": "b", "taggedConcepts": []string{"CONCEPT:wal-migration"}})
	carol.send(map[string]any{"to": "@alice", "subject": "private", "body": "b", "taggedConcepts": []string{"payroll"}})

	var out struct {
		Concepts []conceptCount `json:"concepts"`
		Counted  *int           `json:"messagesCounted"`
		Complete *bool          `json:"complete"`
	}
	bob.ok("list_concepts", map[string]any{}, &out)
	if len(out.Concepts) != 2 || out.Concepts[0] != (conceptCount{"CONCEPT:wal-migration", "WAL migration", 2}) || out.Concepts[1].ID != "CONCEPT:sqlite" {
		t.Fatalf("bob's concepts: %+v", out.Concepts)
	}
	if out.Counted == nil || *out.Counted != 2 || out.Complete == nil || !*out.Complete {
		t.Fatalf("bob's 2 messages are all counted: %+v", out)
	}
	var page struct {
		TotalCount int `json:"totalCount"`
	}
	bob.ok("list_messages", map[string]any{"taggedConcepts": []string{out.Concepts[0].ID}}, &page)
	if page.TotalCount != 2 {
		t.Fatalf("filtering by a listed concept found %d", page.TotalCount)
	}
	bob.ok("list_messages", map[string]any{"taggedConcepts": []string{"wal migration", "sqlite"}}, &page)
	if page.TotalCount != 1 {
		t.Fatalf("every tag must match: found %d", page.TotalCount)
	}
	bob.ok("list_concepts", map[string]any{"limit": 1}, &out)
	if len(out.Concepts) != 1 {
		t.Fatalf("limit 1 gave %d", len(out.Concepts))
	}
	bob.failWith("list_concepts", map[string]any{"limit": 0}, "limit must be between 1 and 500 (got 0)")
}
