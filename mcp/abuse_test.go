package mcp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/mcp"
)

// serveFront serves e's store at /mcp through the server's own http.Server
// (NewHTTPServer, with its connection timeouts) on a loopback listener.
func serveFront(t *testing.T, e *env, opts mcp.Options) (endpoint string, srv *mcp.Server) {
	t.Helper()
	srv = mcp.NewServer(e.store, opts)
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler())
	ts := httptest.NewUnstartedServer(mux)
	hs := srv.NewHTTPServer(mux)
	ts.Config.ReadHeaderTimeout, ts.Config.IdleTimeout, ts.Config.MaxHeaderBytes = hs.ReadHeaderTimeout, hs.IdleTimeout, hs.MaxHeaderBytes
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", srv
}

// initialize opens a raw MCP session and returns its id.
func initialize(t *testing.T, endpoint string, header map[string]string) string {
	t.Helper()
	resp, body := post(t, endpoint, initializeBody, header)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, body)
	}
	h := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	for k, v := range header {
		h[k] = v
	}
	post(t, endpoint, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	return sid
}

func TestHTTPUnauthorizedCarriesABearerChallenge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good := e.token("alice")
	endpoint := serveHTTP(t, e, mcp.Options{})
	cases := []struct {
		name, auth, want string
	}{
		{"no token", "", `Bearer realm="mailroom"`},
		{"another scheme", "Basic " + good, `Bearer realm="mailroom"`},
		{"an empty bearer", "Bearer ", `Bearer realm="mailroom"`},
		{"an unknown token", "Bearer mr_not-a-real-token", `Bearer realm="mailroom", error="invalid_token"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.auth != "" {
				h["Authorization"] = tc.auth
			}
			resp, body := post(t, endpoint, initializeBody, h)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Values("WWW-Authenticate"); len(got) != 1 || got[0] != tc.want {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("the server still serves the good token", func(t *testing.T) {
		mustHTTPConnect(t, endpoint, good, "alice").list(nil)
	})
}

func TestHTTPOriginValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.token("alice")
	endpoint := serveHTTP(t, e, mcp.Options{HTTP: mcp.HTTPOptions{AllowOrigins: []string{"https://inbox.example.com", "http://localhost:3000/"}}})
	own := strings.TrimSuffix(endpoint, "/mcp")
	cases := []struct {
		origin string
		status int
	}{
		{"", http.StatusOK},
		{own, http.StatusOK},
		{strings.ToUpper(own[:4]) + own[4:], http.StatusOK},
		{"https://inbox.example.com", http.StatusOK},
		{"https://inbox.example.com:443", http.StatusOK},
		{"http://localhost:3000", http.StatusOK},
		{"https://evil.example", http.StatusForbidden},
		{"http://inbox.example.com", http.StatusForbidden}, // another scheme is another origin
		{"null", http.StatusForbidden},
		{strings.Replace(own, "127.0.0.1", "localhost", 1), http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("Origin %q", tc.origin), func(t *testing.T) {
			h := map[string]string{"Authorization": "Bearer " + tok}
			if tc.origin != "" {
				h["Origin"] = tc.origin
			}
			resp, body := post(t, endpoint, initializeBody, h)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status == http.StatusForbidden && !strings.Contains(string(body), "--allow-origin") {
				t.Errorf("403 body does not say how to allow it: %s", body)
			}
		})
	}
	t.Run("a forbidden origin is refused before the token is even checked", func(t *testing.T) {
		resp, _ := post(t, endpoint, initializeBody, map[string]string{"Origin": "https://evil.example"})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
}

func TestHTTPBodyOver4MiBIs413(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.agent("bob")
	tok := e.token("alice")
	endpoint := serveHTTP(t, e, mcp.Options{})
	auth := map[string]string{"Authorization": "Bearer " + tok}
	sid := initialize(t, endpoint, auth)
	hdr := map[string]string{"Authorization": "Bearer " + tok, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	call := func(body string) string {
		return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add_message","arguments":{"to":"@bob","subject":"big","body":"` + body + `"}}}`
	}
	over := call(strings.Repeat("x", 4<<20))
	resp, body := post(t, endpoint, over, hdr)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "4194304 bytes") {
		t.Fatalf("status %d: %.200s", resp.StatusCode, body)
	}
	t.Run("chunked, without a Content-Length", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, endpoint, io.MultiReader(strings.NewReader(over)))
		req.ContentLength = -1
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
	c := mustHTTPConnect(t, endpoint, tok, "alice")
	if p := c.list(map[string]any{"box": "all"}); p.TotalCount != 0 {
		t.Errorf("a refused body was stored: %d", p.TotalCount)
	}
	// Just under the limit is an ordinary request (refused by the body
	// rule, not the transport).
	resp, body = post(t, endpoint, call(strings.Repeat("x", 4<<20-300)), hdr)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "the limit is 65536") {
		t.Errorf("under 4 MiB: %d %.300s", resp.StatusCode, body)
	}
}

func TestHTTPRateLimitPerIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.token("alice"), e.token("bob")
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	endpoint := serveHTTP(t, e, mcp.Options{HTTP: mcp.HTTPOptions{Rate: 2, Now: clock}})
	ask := func(tok string) *http.Response {
		resp, _ := post(t, endpoint, initializeBody, map[string]string{"Authorization": "Bearer " + tok})
		return resp
	}
	for i := range 2 {
		if r := ask(alice); r.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d", i+1, r.StatusCode)
		}
	}
	r := ask(alice)
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("third request in the same instant: %d Retry-After %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
	if r := ask(bob); r.StatusCode != http.StatusOK {
		t.Errorf("bob is limited by alice's requests: %d", r.StatusCode)
	}
	advance(500 * time.Millisecond) // one token back at 2/s
	if r := ask(alice); r.StatusCode != http.StatusOK {
		t.Errorf("after 0.5 s: %d", r.StatusCode)
	}
	if r := ask(alice); r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second after 0.5 s: %d", r.StatusCode)
	}
	t.Run("a refused request costs no allowance", func(t *testing.T) {
		for range 10 {
			ask(alice)
		}
		advance(500 * time.Millisecond)
		if r := ask(alice); r.StatusCode != http.StatusOK {
			t.Errorf("after the flood and 0.5 s: %d", r.StatusCode)
		}
	})
	t.Run("unauthenticated requests are 401, not counted against anyone", func(t *testing.T) {
		if r := ask("mr_bogus"); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("status %d", r.StatusCode)
		}
	})
}

func TestHTTPSessionCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.token("alice")
	endpoint := serveHTTP(t, e, mcp.Options{HTTP: mcp.HTTPOptions{MaxSessions: 3, MaxSessionsPerIdentity: 2}})
	auth := map[string]string{"Authorization": "Bearer " + tok}
	var sids []string
	for range 2 {
		sids = append(sids, initialize(t, endpoint, auth))
	}
	initialize(t, endpoint, map[string]string{"Authorization": "Bearer " + e.token("bob")})
	// carol holds none, but the server is full.
	resp, body := post(t, endpoint, initializeBody, map[string]string{"Authorization": "Bearer " + e.token("carol")})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "60" ||
		strings.TrimSpace(string(body)) != "Service Unavailable: 3 MCP sessions are open, the limit; close one (DELETE with its Mcp-Session-Id) or wait for idle ones to expire" {
		t.Fatalf("fourth session: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// Open sessions keep working at the cap.
	hdr := map[string]string{"Authorization": "Bearer " + tok, "Mcp-Session-Id": sids[0], "MCP-Protocol-Version": "2025-11-25"}
	if resp, body := post(t, endpoint, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, hdr); resp.StatusCode != http.StatusOK {
		t.Errorf("an open session at the cap: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, endpoint, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	initialize(t, endpoint, auth) // room again
}

// One identity opening sessions in a loop takes at most its share of the
// cap (a tenth by default), so another identity can still open one, and
// nothing but the refused sessions is lost.
func TestHTTPSessionShare(t *testing.T) {
	e := newEnv(t)
	alice, bob, carol := e.token("alice"), e.token("bob"), e.token("carol")
	endpoint := serveHTTP(t, e, mcp.Options{HTTP: mcp.HTTPOptions{MaxSessions: 20}}) // a share of 2
	as := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	var sids []string
	for range 2 {
		sids = append(sids, initialize(t, endpoint, as(alice)))
	}
	for i := range 50 { // the flood
		resp, body := post(t, endpoint, initializeBody, as(alice))
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" || resp.Header.Get("Mcp-Session-Id") != "" ||
			strings.TrimSpace(string(body)) != "Too Many Requests: @alice holds 2 MCP sessions, the most one identity may; close one (DELETE with its Mcp-Session-Id) or wait for idle ones to expire" {
			t.Fatalf("alice's session %d beyond her share: %d %q %s", i+3, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	// bob is not locked out, and alice's open sessions still serve her.
	bobSession := initialize(t, endpoint, as(bob))
	for _, c := range []struct{ tok, sid string }{{alice, sids[0]}, {alice, sids[1]}, {bob, bobSession}} {
		hdr := map[string]string{"Authorization": "Bearer " + c.tok, "Mcp-Session-Id": c.sid, "MCP-Protocol-Version": "2025-11-25"}
		if resp, body := post(t, endpoint, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, hdr); resp.StatusCode != http.StatusOK {
			t.Errorf("an open session after the flood: %d %s", resp.StatusCode, body)
		}
	}
	initialize(t, endpoint, as(carol))
	// Closing one of alice's sessions gives her room for one more.
	req, _ := http.NewRequest(http.MethodDelete, endpoint, nil)
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Mcp-Session-Id", sids[0])
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	initialize(t, endpoint, as(alice))
	if resp, _ := post(t, endpoint, initializeBody, as(alice)); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("alice at her share again: %d", resp.StatusCode)
	}
}

func TestHTTPIdleSessionExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.token("alice")
	// The go-sdk's session timer runs on the wall clock; a short idle
	// time keeps the test quick.
	endpoint := serveHTTP(t, e, mcp.Options{HTTP: mcp.HTTPOptions{SessionIdle: 300 * time.Millisecond, MaxSessions: 1}})
	auth := map[string]string{"Authorization": "Bearer " + tok}
	sid := initialize(t, endpoint, auth)
	hdr := map[string]string{"Authorization": "Bearer " + tok, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// An expired session is gone: a new one fits under the cap of 1
		// (until then, alice is at her share of it: 429).
		resp, body := post(t, endpoint, initializeBody, auth)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("new session: %d %s", resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond) // the go-sdk's timer has no injectable clock
	}
	if resp, _ := post(t, endpoint, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, hdr); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the expired session answered %d, want 404", resp.StatusCode)
	}
}

func TestHTTPIdleKeepAliveConnectionsClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.token("alice")
	endpoint, _ := serveFront(t, e, mcp.Options{HTTP: mcp.HTTPOptions{IdleTimeout: 200 * time.Millisecond}})
	host := strings.TrimSuffix(strings.TrimPrefix(endpoint, "http://"), "/mcp")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", host, tok, len(initializeBody), initializeBody)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF (closed by the server)", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("closed after %v", d)
	}
	if mcp.DefaultIdleTimeout != 60*time.Second {
		t.Errorf("default idle timeout %v, SPEC says 60 s", mcp.DefaultIdleTimeout)
	}
}

// blockingStore is a store whose List waits for its context to end and
// reports when it did: a stand-in for a statement that runs long.
type blockingStore struct {
	mailroom.Store
	started chan struct{}
	ended   chan error
}

func (b *blockingStore) List(ctx context.Context, f mailroom.ListFilter) (mailroom.Page, error) {
	close(b.started)
	<-ctx.Done()
	b.ended <- context.Cause(ctx)
	return mailroom.Page{}, ctx.Err()
}

func TestHTTPClientDisconnectCancelsTheCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.token("alice")
	bs := &blockingStore{Store: e.store, started: make(chan struct{}), ended: make(chan error, 1)}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewServer(bs, mcp.Options{CallBudget: -1}).HTTPHandler())
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	endpoint := ts.URL + "/mcp"
	auth := map[string]string{"Authorization": "Bearer " + tok}
	sid := initialize(t, endpoint, auth)

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_messages","arguments":{}}}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mailroom-Request-Ref", "forged") // a client cannot aim at another request
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	select {
	case <-bs.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the store")
	}
	select {
	case err := <-bs.ended:
		t.Fatalf("the store's context ended before the client left: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel() // the client goes away
	select {
	case cause := <-bs.ended:
		if cause == nil || !strings.Contains(cause.Error(), "disconnected") {
			t.Errorf("cause = %v", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the store's work went on after the client disconnected")
	}
	<-errc
	mustHTTPConnect(t, endpoint, tok, "alice") // still serving
}

func TestHTTPTokenLastUseIsWrittenAtMostOnceAMinute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.token("alice")
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	endpoint := serveHTTP(t, e, mcp.Options{HTTP: mcp.HTTPOptions{Now: clock}})
	lastUse := func() *time.Time {
		t.Helper()
		list, err := e.store.Tokens(e.ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("tokens %v %v", list, err)
		}
		return list[0].LastUsedAt
	}
	if lastUse() != nil {
		t.Fatal("a new token has a last use")
	}
	start := clock()
	for range 5 {
		post(t, endpoint, initializeBody, map[string]string{"Authorization": "Bearer " + tok})
	}
	if got := lastUse(); got == nil || !got.Equal(start) {
		t.Fatalf("last use %v, want %v", got, start)
	}
	advance(40 * time.Second)
	post(t, endpoint, initializeBody, map[string]string{"Authorization": "Bearer " + tok})
	if got := lastUse(); !got.Equal(start) {
		t.Errorf("written again within a minute: %v", got)
	}
	advance(30 * time.Second)
	post(t, endpoint, initializeBody, map[string]string{"Authorization": "Bearer " + tok})
	if got := lastUse(); !got.Equal(start.Add(70 * time.Second)) {
		t.Errorf("after 70 s: %v", got)
	}
}

// A revoked token ends every event stream it opened, and only those: one
// check per token serves all its streams.
func TestHTTPRevokedTokenEndsItsEventStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.token("alice"), e.token("bob")
	endpoint := serveHTTP(t, e, mcp.Options{HTTP: mcp.HTTPOptions{StreamRecheck: 20 * time.Millisecond}})
	stream := func(tok string) <-chan struct{} {
		t.Helper()
		auth := map[string]string{"Authorization": "Bearer " + tok}
		sid := initialize(t, endpoint, auth)
		req, _ := http.NewRequest(http.MethodGet, endpoint, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET stream: %v %v", resp, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		ended := make(chan struct{})
		go func() { io.Copy(io.Discard, resp.Body); close(ended) }()
		return ended
	}
	a1, a2, b := stream(alice), stream(alice), stream(bob)
	select {
	case <-a1:
		t.Fatal("the stream ended before the revoke")
	case <-a2:
		t.Fatal("the second stream ended before the revoke")
	case <-b:
		t.Fatal("bob's stream ended before the revoke")
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := e.store.RevokeTokens(e.ctx, mailroom.TokenSelector{Name: "alice", Kind: mailroom.KindAgent}); err != nil {
		t.Fatal(err)
	}
	for i, ended := range []<-chan struct{}{a1, a2} {
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("the revoked token's event stream %d stayed open", i+1)
		}
	}
	// Five more checks: bob's token is still valid.
	select {
	case <-b:
		t.Fatal("revoking alice's token ended bob's stream")
	case <-time.After(100 * time.Millisecond):
	}
}
