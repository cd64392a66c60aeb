package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// serve --pprof serves Go profiles on a loopback listener of its own, and
// refuses any other address; the MCP listener never serves them.
func TestServePprofIsLoopbackOnly(t *testing.T) {
	env := environ(t)
	db := testDB(t)
	out, stderr, err := runCLI(t, env, "serve", "--http", "127.0.0.1:0", "--agent", "x", "--pprof", "0.0.0.0:0", "--db", db)
	if err == nil || strings.Contains(out, "serving MCP") {
		t.Fatalf("serve --pprof 0.0.0.0:0 started (err %v): %s", err, out)
	}
	if !strings.Contains(stderr, "--pprof must be a loopback address") {
		t.Errorf("stderr does not explain the refusal: %s", stderr)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	endpoint := serveHTTP(t, env, "--http", "127.0.0.1:0", "--agent", "x", "--pprof", addr, "--db", db)
	get := func(url string) (int, string) {
		t.Helper()
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("http://" + addr + "/debug/pprof/cmdline"); code != http.StatusOK || !strings.Contains(body, "serve") {
		t.Errorf("profiler: %d %q, want 200 with the command line", code, body)
	}
	base := strings.TrimSuffix(endpoint, "/mcp")
	if code, body := get(base + "/debug/pprof/cmdline"); code == http.StatusOK && strings.Contains(body, "--pprof") {
		t.Errorf("the MCP listener serves profiles: %d %q", code, body)
	}
}
