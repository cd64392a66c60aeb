package mcp_test

import (
	"encoding/json"
	"testing"
)

// The context budget (issue 11): every session that lists the tools pays for
// them. With all twelve tools, tools/list stays within wholeBudget bytes and
// the part a model reads (names, descriptions, input schemas) within
// visibleBudget; output schemas and annotations count only toward the whole.
const (
	wholeBudget   = 12000
	visibleBudget = 6000
	allTools      = 12
	// Until wait_for_mail (issue 9) is served here, its share is reserved:
	// the tools present must leave this much room.
	waitVisibleReserve = 500
	waitWholeReserve   = 1000
)

func TestToolsListFitsTheContextBudget(t *testing.T) {
	t.Parallel()
	tools := listTools(t)
	whole, err := json.Marshal(map[string]any{"tools": tools})
	if err != nil {
		t.Fatal(err)
	}
	visible := 0
	hasWait := false
	for _, tl := range tools {
		b, err := json.Marshal(map[string]any{"name": tl.Name, "description": tl.Description, "inputSchema": tl.InputSchema})
		if err != nil {
			t.Fatal(err)
		}
		visible += len(b)
		hasWait = hasWait || tl.Name == "wait_for_mail"
	}
	wholeLimit, visibleLimit := wholeBudget, visibleBudget
	if !hasWait {
		wholeLimit -= waitWholeReserve
		visibleLimit -= waitVisibleReserve
		if len(tools) != allTools-1 {
			t.Errorf("%d tools without wait_for_mail, want %d", len(tools), allTools-1)
		}
	} else if len(tools) != allTools {
		t.Errorf("%d tools, want %d", len(tools), allTools)
	}
	t.Logf("tools/list: %d tools, %d bytes (limit %d), model-visible %d bytes (limit %d)", len(tools), len(whole), wholeLimit, visible, visibleLimit)
	if len(whole) > wholeLimit {
		t.Errorf("tools/list is %d bytes; the budget is %d", len(whole), wholeLimit)
	}
	if visible > visibleLimit {
		t.Errorf("names, descriptions and input schemas are %d bytes; the budget is %d", visible, visibleLimit)
	}
}

// TestToolAnnotationsAreTruthful pins each tool's hints: clients auto-approve
// by them, so a changing tool must never claim to be read-only.
func TestToolAnnotationsAreTruthful(t *testing.T) {
	t.Parallel()
	type hints struct{ readOnly, destructive, idempotent bool }
	want := map[string]hints{
		"add_message":       {false, false, false},
		"list_messages":     {true, false, true},
		"get_message":       {true, false, true},
		"mailbox_status":    {true, false, true},
		"list_concepts":     {true, false, true},
		"wait_for_mail":     {true, false, true},
		"mark_read":         {false, false, true},
		"mark_unread":       {false, false, true},
		"archive_message":   {false, false, true},
		"unarchive_message": {false, false, true},
		"delete_message":    {false, true, true},
		"retract_message":   {false, true, true},
	}
	for _, tl := range listTools(t) {
		w, ok := want[tl.Name]
		if !ok {
			t.Errorf("%s: no expected hints", tl.Name)
			continue
		}
		a := tl.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: annotations incomplete: %+v", tl.Name, a)
			continue
		}
		got := hints{a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint}
		if got != w {
			t.Errorf("%s: hints %+v, want %+v", tl.Name, got, w)
		}
		if *a.OpenWorldHint {
			t.Errorf("%s: openWorldHint true; the mailbox is a closed world", tl.Name)
		}
	}
}
