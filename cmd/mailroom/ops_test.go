package main

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// metric returns the value of one sample line of a /metrics page, or -1.
func metric(page, sample string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`)
	m := re.FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func TestHealthzAndMetricsOverHTTP(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := filepath.Join(t.TempDir(), "m.db")
	token := lastLine(mustRunCLI(t, env, "token", "create", "--agent", "alice", "--db", db))
	mustRunCLI(t, env, "identity", "add", "bob", "--db", db)
	endpoint := serveHTTP(t, env, "--http", "127.0.0.1:0", "--db", db)
	base := strings.TrimSuffix(endpoint, "/mcp")

	code, body, h := get(t, base+"/healthz")
	if code != 200 || body != "{\"status\":\"ok\"}\n" || h.Get("Content-Type") != "application/json" {
		t.Errorf("/healthz: %d %q %q", code, body, h.Get("Content-Type"))
	}

	_, before, _ := get(t, base+"/metrics")
	if v := metric(before, `mailroom_tool_calls_total{tool="mark_read"}`); v != 0 {
		t.Errorf("mark_read calls before any call: %v", v)
	}
	for _, name := range []string{"mailroom_tool_calls_total", "mailroom_tool_duration_seconds",
		"mailroom_deliveries_total", "mailroom_drains_total", "mailroom_drained_messages_total", "mailroom_concept_queue_depth", "mailroom_open_sessions"} {
		if !strings.Contains(before, "# TYPE "+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if v := metric(before, "mailroom_deliveries_total"); v != 0 {
		t.Errorf("deliveries before any send: %v", v)
	}

	alice, err := httpSession(t, endpoint, token, "alice")
	if err != nil {
		t.Fatal(err)
	}
	alice.send("@bob", "one")
	alice.send("*", "to everyone") // bob only: the sender is excluded
	alice.send("@me", "self")
	if res, err := alice.call("get_message", map[string]any{"messageId": "MESSAGE:nope"}); err != nil || !res.IsError {
		t.Fatalf("get_message of a missing id: %v %v", res, err)
	}
	var drain struct {
		ReadCount int `json:"readCount"`
	}
	alice.ok("mark_read", map[string]any{"all": true}, &drain)

	_, after, _ := get(t, base+"/metrics")
	if !strings.Contains(after, "# TYPE mailroom_tool_errors_total counter") {
		t.Errorf("/metrics lacks mailroom_tool_errors_total after an error")
	}
	for sample, want := range map[string]float64{
		`mailroom_tool_calls_total{tool="add_message"}`:                   3,
		`mailroom_tool_calls_total{tool="get_message"}`:                   1,
		`mailroom_tool_errors_total{code="not_found",tool="get_message"}`: 1,
		`mailroom_tool_duration_seconds_count{tool="add_message"}`:        3,
		`mailroom_deliveries_total`:                                       3,
		`mailroom_drains_total`:                                           1,
		`mailroom_drained_messages_total`:                                 float64(drain.ReadCount),
		`mailroom_open_sessions`:                                          1,
	} {
		if got := metric(after, sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}
	if drain.ReadCount != 1 {
		t.Errorf("drain read %d, want 1 (the note to self)", drain.ReadCount)
	}
	if metric(after, "mailroom_concept_queue_depth") < 0 {
		t.Errorf("no concept queue depth sample")
	}
}

func TestOneLogLinePerToolCall(t *testing.T) {
	t.Parallel()
	env := environ(t)
	alice := stdio(t, env, "alice", "--db", ":memory:", "--agent", "alice")
	alice.ok("add_message", map[string]any{"to": "@me", "subject": "s", "body": "secret body text"}, &sendReceipt{})
	alice.call("get_message", map[string]any{"messageId": "MESSAGE:nope"})
	alice.list(nil)
	alice.cs.Close()
	logs := alice.stderr.String()
	for _, re := range []string{
		`level=INFO msg="tool call" identity=@alice tool=add_message duration=\S+ outcome=ok`,
		`level=INFO msg="tool call" identity=@alice tool=get_message duration=\S+ outcome=error:not_found`,
		`level=INFO msg="tool call" identity=@alice tool=list_messages duration=\S+ outcome=ok`,
	} {
		if n := len(regexp.MustCompile(re).FindAllString(logs, -1)); n != 1 {
			t.Errorf("%d lines match %s in:\n%s", n, re, logs)
		}
	}
	if strings.Contains(logs, "secret body text") {
		t.Errorf("a body reached the log")
	}
}

func TestWildcardBindPrintsAUsableURL(t *testing.T) {
	t.Parallel()
	env := environ(t)
	endpoint := serveHTTP(t, env, "--http", "0.0.0.0:0", "--db", ":memory:")
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Fatalf("printed %s for a wildcard bind", endpoint)
	}
	if code, _, _ := get(t, strings.TrimSuffix(endpoint, "/mcp")+"/healthz"); code != 200 {
		t.Errorf("the printed URL does not answer: %d", code)
	}
}
