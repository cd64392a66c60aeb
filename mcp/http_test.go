package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/mcp"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// serveHTTP serves e's store at /mcp on a real loopback listener.
func serveHTTP(t *testing.T, e *env, opts mcp.Options) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewServer(e.store, opts).HTTPHandler())
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// token issues a bearer token for the identity name, as `mailroom token
// create` does.
func (e *env) token(name string) string {
	e.t.Helper()
	id, ok := e.ids[name]
	if !ok {
		id = e.agent(name)
	}
	tok, digest := mailroom.NewToken()
	if err := e.store.AddToken(e.ctx, id.ID, digest); err != nil {
		e.t.Fatalf("AddToken: %v", err)
	}
	return tok
}

// httpConnect opens an MCP session over streamable HTTP; token "" sends no
// Authorization header.
func httpConnect(t *testing.T, endpoint, token, name string) (*client, error) {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearer{token: token, base: http.DefaultTransport}
	}
	tr := &gomcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "http-" + name, Version: "v0"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cs.Close() })
	return &client{t: t, session: &session{cs: cs, name: name}}, nil
}

func mustHTTPConnect(t *testing.T, endpoint, token, name string) *client {
	t.Helper()
	c, err := httpConnect(t, endpoint, token, name)
	if err != nil {
		t.Fatalf("connect as %s: %v", name, err)
	}
	return c
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// post sends one raw JSON-RPC body as a streamable HTTP client would.
func post(t *testing.T, endpoint, body string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, b
}

// rpcResult finds the JSON-RPC response in a body that is JSON or an SSE
// stream.
func rpcResult(t *testing.T, resp *http.Response, body []byte) json.RawMessage {
	t.Helper()
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				msgs = append(msgs, []byte(strings.TrimSpace(data)))
			}
		}
	} else {
		msgs = append(msgs, body)
	}
	for _, m := range msgs {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(m, &r) == nil && len(r.ID) > 0 {
			if len(r.Error) > 0 {
				t.Fatalf("JSON-RPC error: %s", r.Error)
			}
			return r.Result
		}
	}
	t.Fatalf("no JSON-RPC response in %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	return nil
}

func TestHTTPIdentityComesFromTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	endpoint := serveHTTP(t, e, mcp.Options{})
	alice := mustHTTPConnect(t, endpoint, e.token("alice"), "alice")
	bob := mustHTTPConnect(t, endpoint, e.token("bob"), "bob")

	r := alice.send(map[string]any{"to": "@bob", "subject": "over http", "body": "b"})
	row, ok := bob.inbox().find(r.MessageID)
	if !ok || row.From != "@alice" {
		t.Fatalf("bob's row: %+v (found %v), want from @alice", row, ok)
	}
	if m := bob.get(r.MessageID); !strings.HasPrefix(m.OriginSessionID, "SESSION:") {
		t.Errorf("originSessionId = %q", m.OriginSessionID)
	}
	alice.failWith("add_message", map[string]any{"to": "@bob", "subject": "s", "body": "b", "from": "@bob"},
		"Identity-override spoof rejected: 'from' is stamped by the server")
	bob.markRead(r.MessageID)
	alice.failWith("mark_read", map[string]any{"messageId": r.MessageID}, "Not a recipient: "+r.MessageID)

	t.Run("a human's token acts as the human", func(t *testing.T) {
		e.human("dana")
		dana := mustHTTPConnect(t, endpoint, e.token("dana"), "dana")
		id := dana.sendTo("@bob", "from a human")
		if row, _ := bob.on(t).inbox().find(id); row.From != "human:dana" {
			t.Errorf("from = %q, want human:dana", row.From)
		}
	})
}

func TestHTTPRefusesMissingAndBadTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good := e.token("alice")
	endpoint := serveHTTP(t, e, mcp.Options{})
	cases := []struct {
		name   string
		header map[string]string
	}{
		{"no Authorization header", nil},
		{"an unknown token", map[string]string{"Authorization": "Bearer mr_not-a-real-token"}},
		{"an empty bearer token", map[string]string{"Authorization": "Bearer "}},
		{"another scheme", map[string]string{"Authorization": "Basic " + good}},
		{"a token with one character changed", map[string]string{"Authorization": "Bearer " + good[:len(good)-1] + flip(good[len(good)-1])}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, endpoint, initializeBody, tc.header)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status %d, want 401: %s", resp.StatusCode, body)
			}
		})
	}
	t.Run("the go-sdk client cannot connect without a token", func(t *testing.T) {
		if _, err := httpConnect(t, endpoint, "", "anonymous"); err == nil {
			t.Errorf("connected without a token")
		}
		if _, err := httpConnect(t, endpoint, "mr_bogus", "bogus"); err == nil {
			t.Errorf("connected with a bad token")
		}
	})
	t.Run("the good token is accepted", func(t *testing.T) {
		resp, body := post(t, endpoint, initializeBody, map[string]string{"Authorization": "Bearer " + good})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d: %s", resp.StatusCode, body)
		}
	})
}

func flip(b byte) string {
	if b == 'A' {
		return "B"
	}
	return "A"
}

func TestHTTPSessionCannotBeReplayedWithAnotherToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	endpoint := serveHTTP(t, e, mcp.Options{})
	alice, bob := e.token("alice"), e.token("bob")
	resp, body := post(t, endpoint, initializeBody, map[string]string{"Authorization": "Bearer " + alice})
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, body)
	}
	hdr := map[string]string{"Authorization": "Bearer " + bob, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	post(t, endpoint, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Authorization": "Bearer " + alice, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
	resp, body = post(t, endpoint, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_messages","arguments":{}}}`, hdr)
	t.Logf("bob's token on alice's session: %d %s", resp.StatusCode, bytes.TrimSpace(body))
	if resp.StatusCode < 400 {
		t.Errorf("bob's token on alice's session: status %d: %s", resp.StatusCode, body)
	}
}

func TestHTTPDevelopmentMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dev := e.agent("dev")
	endpoint := serveHTTP(t, e, mcp.Options{Identity: &dev})
	bob := mustHTTPConnect(t, endpoint, e.token("bob"), "bob")

	t.Run("a request without a token acts as the dev identity", func(t *testing.T) {
		anon := mustHTTPConnect(t, endpoint, "", "dev")
		id := anon.sendTo("@bob", "from dev mode")
		if row, _ := bob.on(t).inbox().find(id); row.From != "@dev" {
			t.Errorf("from = %q, want @dev", row.From)
		}
	})
	t.Run("a bad token is still 401", func(t *testing.T) {
		resp, body := post(t, endpoint, initializeBody, map[string]string{"Authorization": "Bearer mr_bogus"})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status %d, want 401: %s", resp.StatusCode, body)
		}
		if _, err := httpConnect(t, endpoint, "mr_bogus", "bogus"); err == nil {
			t.Errorf("connected with a bad token in dev mode")
		}
	})
	t.Run("a good token still names its own identity", func(t *testing.T) {
		alice := mustHTTPConnect(t, endpoint, e.token("alice"), "alice")
		id := alice.sendTo("@bob", "from alice in dev mode")
		if row, _ := bob.on(t).inbox().find(id); row.From != "@alice" {
			t.Errorf("from = %q, want @alice", row.From)
		}
	})
}

func TestHTTPRawJSONRPCStringifiedDiscriminator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	endpoint := serveHTTP(t, e, mcp.Options{})
	auth := "Bearer " + e.token("alice")

	resp, body := post(t, endpoint, initializeBody, map[string]string{"Authorization": auth})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(rpcResult(t, resp, body), &init); err != nil || init.ProtocolVersion == "" {
		t.Fatalf("initialize result: %v %+v", err, init)
	}
	hdr := map[string]string{"Authorization": auth, "Mcp-Session-Id": sid, "MCP-Protocol-Version": init.ProtocolVersion}
	resp, body = post(t, endpoint, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("notifications/initialized: %d %s", resp.StatusCode, body)
	}
	// The arguments go over the wire exactly as a harness that stringifies
	// declared arrays would send them.
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mark_read","arguments":{"messageId":"[\"MESSAGE:bogus\"]"}}}`
	resp, body = post(t, endpoint, call, hdr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/call: %d %s", resp.StatusCode, body)
	}
	var res struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			Results []markResult `json:"results"`
		} `json:"structuredContent"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(rpcResult(t, resp, body), &res); err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("isError: %+v", res.Content)
	}
	r := res.StructuredContent.Results
	if len(r) != 1 || r[0].MessageID != "MESSAGE:bogus" || r[0].Status != "error" || r[0].Error != "Message not found: MESSAGE:bogus" {
		t.Errorf("results = %+v", r)
	}
}

func TestCheckDevAddr(t *testing.T) {
	t.Parallel()
	cases := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:0", true},
		{"127.0.0.1:8787", true},
		{"[::1]:0", true},
		{"localhost:0", true},
		{"127.1.2.3:9", true},
		{"0.0.0.0:8787", false},
		{"192.168.1.1:1", false},
		{"[::]:8787", false},
		{":8787", false},
		{"example.com:80", false},
		{"no-port", false},
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			err := mcp.CheckDevAddr(tc.addr)
			if (err == nil) != tc.ok {
				t.Errorf("CheckDevAddr(%q) = %v, want ok %v", tc.addr, err, tc.ok)
			}
		})
	}
}
