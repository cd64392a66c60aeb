package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailroom/mailroom/mcp"
)

var update = flag.Bool("update", false, "rewrite testdata/tools_list.golden.json from the server's tools/list")

const goldenPath = "testdata/tools_list.golden.json"

func listTools(t *testing.T) []*gomcp.Tool {
	t.Helper()
	e := newEnv(t)
	c := e.as("alice")
	res, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	return res.Tools
}

// schemaOf returns a tool's schema as plain JSON values.
func schemaOf(t *testing.T, s any) map[string]any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestToolsListGolden(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.as("alice")
	res, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	// Only the tools: the envelope around them belongs to the SDK.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"tools": res.Tools}); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	if *update {
		if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", goldenPath)
		return
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run go test ./mcp -run Golden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("tools/list differs from %s at line %d:\n got  %s\n want %s\n(if the change is intended, run go test ./mcp -run Golden -update and review the diff)", goldenPath, i+1, g, w)
			}
		}
	}
}

func TestMarkReadSchemaIsAPortableUnion(t *testing.T) {
	t.Parallel()
	var markRead *gomcp.Tool
	for _, tl := range listTools(t) {
		if tl.Name == "mark_read" {
			markRead = tl
		}
	}
	if markRead == nil {
		t.Fatal("no mark_read tool")
	}
	in := schemaOf(t, markRead.InputSchema)
	props := in["properties"].(map[string]any)
	mid := props["messageId"].(map[string]any)
	for k := range mid {
		if k != "anyOf" && k != "description" {
			t.Errorf("messageId has %q beside anyOf", k)
		}
	}
	branches, ok := mid["anyOf"].([]any)
	if !ok || len(branches) != 2 {
		t.Fatalf("messageId.anyOf = %v, want exactly two branches", mid["anyOf"])
	}
	str := branches[0].(map[string]any)
	if str["type"] != "string" {
		t.Errorf("first branch type = %v, want string", str["type"])
	}
	for k := range str {
		if !slices.Contains([]string{"type", "description", "minLength"}, k) {
			t.Errorf("string branch has %q", k)
		}
	}
	arr := branches[1].(map[string]any)
	if arr["type"] != "array" {
		t.Errorf("second branch type = %v, want array", arr["type"])
	}
	for k := range arr {
		if !slices.Contains([]string{"type", "items", "description", "minItems"}, k) {
			t.Errorf("array branch has %q", k)
		}
	}
	if items, _ := arr["items"].(map[string]any); items["type"] != "string" || len(items) != 1 {
		t.Errorf("array branch items = %v, want {type: string}", arr["items"])
	}
	want := map[string]string{"all": "boolean", "through": "string", "includeRoles": "boolean"}
	for name, typ := range want {
		if p, _ := props[name].(map[string]any); p["type"] != typ {
			t.Errorf("%s type = %v, want %s", name, p["type"], typ)
		}
	}
	if req, ok := in["required"]; ok && len(req.([]any)) > 0 {
		t.Errorf("mark_read requires %v; messageId and all are alternatives", req)
	}
}

// specArguments are the arguments SPEC section 5 gives each tool.
var specArguments = map[string][]string{
	"add_message":     {"to", "subject", "body", "originSessionId", "relatedSessions", "relatedTickets", "inReplyTo", "priority", "taggedConcepts"},
	"list_messages":   {"box", "unreadOnly", "threadId", "from", "to", "query", "taggedConcepts", "includeArchived", "limit", "offset", "cursor", "archivedOnly", "via", "priority", "of", "relatedTo"},
	"get_message":     {"messageId", "of"},
	"archive_message": {"messageId"},
	"mark_read":       {"messageId", "all", "through", "includeRoles"},
	"list_concepts":   {"limit"}, // SPEC section 6 leaves its shape to us
	// Section 9.
	"unarchive_message": {"messageId"},
	"mark_unread":       {"messageId"},
	"delete_message":    {"messageId"},
	"retract_message":   {"messageId"},
	"mailbox_status":    {},
	"wait_for_mail":     {"since", "timeoutSeconds", "includeRoles"},
}

func TestDeclaredSchemasMatchTheHandlers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.agent("alice")
	// wait_for_mail is called with its shortest timeout: a second of it
	// lasts 10 ms here.
	c := connect(t, e.store, mcp.Options{Identity: &alice, WaitSecond: 10 * time.Millisecond}, "alice")
	e.agent("bob")
	tools := listTools(t)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	if want := sortedCopy(slices.Collect(maps.Keys(specArguments))); !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	for _, tl := range tools {
		t.Run(tl.Name, func(t *testing.T) {
			c := c.on(t)
			in := schemaOf(t, tl.InputSchema)
			if in["type"] != "object" || in["additionalProperties"] != false {
				t.Errorf("input schema: type %v additionalProperties %v; want object, false", in["type"], in["additionalProperties"])
			}
			if out := schemaOf(t, tl.OutputSchema); out["type"] != "object" {
				t.Errorf("output schema type = %v", out["type"])
			}
			noTypeArrays(t, "inputSchema", in)
			noTypeArrays(t, "outputSchema", schemaOf(t, tl.OutputSchema))

			props := in["properties"].(map[string]any)
			var declared []string
			for k := range props {
				declared = append(declared, k)
			}
			if !sameSet(declared, specArguments[tl.Name]) {
				t.Errorf("declared %v, SPEC gives %v", sortedCopy(declared), sortedCopy(specArguments[tl.Name]))
			}
			if req, ok := in["required"].([]any); ok {
				for _, r := range req {
					if _, ok := props[r.(string)]; !ok {
						t.Errorf("required %q is not declared", r)
					}
				}
			}
			// Every declared property is accepted by the handler: whatever
			// else the call lacks, it never answers Unknown argument.
			for _, name := range declared {
				args := map[string]any{name: sample(props[name].(map[string]any))}
				if tl.Name == "wait_for_mail" {
					args["timeoutSeconds"] = 1 // the shortest wait
				}
				res := c.call(tl.Name, args)
				msg := text(res)
				if res.IsError && (strings.HasPrefix(msg, "Unknown argument") || strings.HasPrefix(msg, "Identity-override")) {
					t.Errorf("%s(%s): %s", tl.Name, show(args), msg)
				}
			}
		})
	}
}

// sample returns a value of the schema's (first) type.
func sample(s map[string]any) any {
	if br, ok := s["anyOf"].([]any); ok {
		return sample(br[0].(map[string]any))
	}
	if enum, ok := s["enum"].([]any); ok {
		return enum[0]
	}
	switch s["type"] {
	case "boolean":
		return true
	case "integer", "number":
		return 1
	case "array":
		return []any{sample(s["items"].(map[string]any))}
	case "object":
		return map[string]any{}
	}
	return "x"
}

func noTypeArrays(t *testing.T, where string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if _, isArr := x.([]any); k == "type" && isArr {
				t.Errorf("%s uses a type array %v; write unions as anyOf", where, x)
			}
			noTypeArrays(t, where+"."+k, x)
		}
	case []any:
		for _, x := range v {
			noTypeArrays(t, where, x)
		}
	}
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}
