package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStdioServerSurvivesMalformedLines drives the real binary over its
// stdin: `hello`, a truncated object and a line over 16 MiB each get a
// JSON-RPC -32700 error, and the process then serves a tool call.
func TestStdioServerSurvivesMalformedLines(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(bin, "serve", "--db", ":memory:", "--agent", "alice")
	cmd.Env = environ(t)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	next := func(what string) map[string]any {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: the server exited\nstderr: %s", what, stderr)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%s: %q", what, l)
			}
			return m
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no reply", what)
		}
		return nil
	}
	write := func(s string) { go io.WriteString(stdin, s) }
	for _, bad := range []string{"hello\n", `{"jsonrpc":"2.0","id":1,"method":"initi` + "\n", strings.Repeat("x", 16<<20+1) + "\n"} {
		write(bad)
		m := next("a malformed line")
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32700) || m["id"] != nil {
			t.Fatalf("reply %v", m)
		}
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}` + "\n")
	if m := next("initialize"); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_messages","arguments":{}}}` + "\n")
	m := next("tools/call")
	res, _ := m["result"].(map[string]any)
	if res == nil || res["isError"] == true {
		t.Fatalf("tools/call: %v", m)
	}
	if c, _ := res["content"].([]any); len(c) != 2 {
		t.Errorf("list_messages content blocks: %v", c)
	}
}

func TestHTTPFlags(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := filepath.Join(t.TempDir(), "m.db")
	token := lastLine(mustRunCLI(t, env, "token", "create", "--agent", "alice", "--db", db))
	endpoint := serveHTTP(t, env, "--http", "127.0.0.1:0", "--db", db, "--allow-origin", "https://inbox.example.com", "--rate", "1")
	ask := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := ask("https://evil.example"); r.StatusCode != http.StatusForbidden {
		t.Errorf("foreign origin: %d", r.StatusCode)
	}
	if r := ask("https://inbox.example.com"); r.StatusCode != http.StatusOK {
		t.Errorf("--allow-origin origin: %d", r.StatusCode)
	}
	// --rate 1: the second request within a second is refused (the
	// forbidden one above was refused before it counted).
	if r := ask(""); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("second request: %d Retry-After %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
	if r := statusOf(t, endpoint, "Bearer mr_bogus"); r != http.StatusUnauthorized {
		t.Errorf("bad token: %d", r)
	}
}

func TestLimitFlags(t *testing.T) {
	t.Parallel()
	alice := stdio(t, environ(t), "alice", "--db", ":memory:", "--agent", "alice", "--max-query-terms", "2", "--max-query", "20")
	for args, want := range map[string]string{
		"a b c":                 "query has 3 terms; the limit is 2",
		strings.Repeat("x", 21): "query is 21 characters; the limit is 20",
	} {
		res, err := alice.call("list_messages", map[string]any{"query": args})
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(res); !res.IsError || got != want {
			t.Errorf("query %q: %q, want %q", args, got, want)
		}
	}
	for _, bad := range [][]string{{"--max-query-terms", "0"}, {"--rate", "-1"}, {"--call-budget", "0s"}, {"--cpu-budget", "0s"},
		{"--max-sessions", "0"}, {"--max-sessions-per-identity", "1001"}, {"--max-sessions-per-identity", "-1"}} {
		_, stderr, err := runCLI(t, environ(t), append([]string{"serve", "--db", ":memory:"}, bad...)...)
		if err == nil || !strings.Contains(stderr, bad[0]) {
			t.Errorf("%v: err %v, stderr %q", bad, err, stderr)
		}
	}
}

func TestSessionFlags(t *testing.T) {
	env := environ(t)
	db := filepath.Join(t.TempDir(), "m.db")
	tokens := map[string]string{}
	for _, name := range []string{"alice", "bob", "carol"} {
		tokens[name] = lastLine(mustRunCLI(t, env, "token", "create", "--agent", name, "--db", db))
	}
	endpoint := serveHTTP(t, env, "--http", "127.0.0.1:0", "--db", db, "--max-sessions", "2", "--max-sessions-per-identity", "1")
	open := func(name string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tokens[name])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, c := range []struct {
		name string
		want int
	}{{"alice", http.StatusOK}, {"alice", http.StatusTooManyRequests}, {"bob", http.StatusOK}, {"carol", http.StatusServiceUnavailable}} {
		if r := open(c.name); r.StatusCode != c.want || (c.want != http.StatusOK && r.Header.Get("Retry-After") == "") {
			t.Errorf("%s: %d Retry-After %q, want %d", c.name, r.StatusCode, r.Header.Get("Retry-After"), c.want)
		}
	}
}
