package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// bin is the mailroom binary the package's tests run.
var bin string

// TestMain provides bin. Without the race detector it is this test binary
// itself, reached through a link named mailroom: started by that name it
// runs main, as the built program would (package main is all of it), and
// no second binary is linked. With the race detector it is a separate
// build without it, since every SQLite statement of an instrumented
// process runs about tenfold slower and the tests start hundreds of them.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "mailroom" {
		main()
		os.Exit(0)
	}
	if os.Getenv(loadClientVar) != "" { // a load client process (multi_test.go) needs no binary
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "mailroom-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "mailroom")
	if err := provideBinary(bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// provideBinary puts the mailroom program at path (see TestMain).
func provideBinary(path string) error {
	if !raceDetector {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		return os.Symlink(self, path)
	}
	if out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// lockedBuffer collects a subprocess's stderr for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// environ is a clean environment for the binary: no MAILROOM_* from the
// developer's shell, and a private data directory, plus extra.
func environ(t testing.TB, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "MAILROOM_") || strings.HasPrefix(kv, "XDG_DATA_HOME=") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	home := t.TempDir()
	env = append(env, "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"))
	return append(env, extra...)
}

// mailroom runs the binary to completion.
func runCLI(t *testing.T, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Stdin = strings.NewReader("")
	err = cmd.Run()
	return o.String(), e.String(), err
}

func mustRunCLI(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, errOut, err := runCLI(t, env, args...)
	if err != nil {
		t.Fatalf("mailroom %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// session is an MCP client session with one server.
type session struct {
	t      *testing.T
	cs     *gomcp.ClientSession
	name   string
	stderr *lockedBuffer
}

// stdio spawns `mailroom serve` with args as an MCP stdio server.
func stdio(t *testing.T, env []string, name string, args ...string) *session {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = env
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "cmd-test-" + name, Version: "v0"}, nil).
		Connect(context.Background(), &gomcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to mailroom serve %v: %v\nstderr: %s", args, err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return &session{t: t, cs: cs, name: name, stderr: stderr}
}

func (s *session) call(tool string, args map[string]any) (*gomcp.CallToolResult, error) {
	return s.cs.CallTool(context.Background(), &gomcp.CallToolParams{Name: tool, Arguments: args})
}

// ok calls tool, requires success and decodes the structured content.
func (s *session) ok(tool string, args map[string]any, out any) {
	s.t.Helper()
	res, err := s.call(tool, args)
	if err != nil {
		s.t.Fatalf("%s %s: %v\nserver stderr: %s", s.name, tool, err, s.stderr)
	}
	if res.IsError {
		s.t.Fatalf("%s %s(%v): isError: %s", s.name, tool, args, resultText(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		s.t.Fatalf("%s: decode %s: %v", tool, b, err)
	}
}

func resultText(res *gomcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*gomcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type sendReceipt struct {
	MessageID      string `json:"messageId"`
	RecipientCount int    `json:"recipientCount"`
	Status         string `json:"status"`
	Durable        bool   `json:"durable"`
}

type row struct {
	MessageID string     `json:"messageId"`
	From      string     `json:"from"`
	To        []string   `json:"to"`
	ReadAt    *time.Time `json:"readAt"`
}

type page struct {
	Messages   []row `json:"messages"`
	TotalCount int   `json:"totalCount"`
}

func (s *session) send(to, subject string) sendReceipt {
	s.t.Helper()
	var r sendReceipt
	s.ok("add_message", map[string]any{"to": to, "subject": subject, "body": "body of " + subject}, &r)
	return r
}

func (s *session) list(args map[string]any) page {
	s.t.Helper()
	var p page
	if args == nil {
		args = map[string]any{}
	}
	s.ok("list_messages", args, &p)
	return p
}

func (p page) find(id string) (row, bool) {
	for _, r := range p.Messages {
		if r.MessageID == id {
			return r, true
		}
	}
	return row{}, false
}

func TestStdioServeSendsAndLists(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := testDB(t)
	mustRunCLI(t, env, "identity", "add", "bob", "--db", db)
	alice := stdio(t, env, "alice", "--db", db, "--agent", "alice")

	r := alice.send("@bob", "over stdio")
	if r.Status != "sent" || r.RecipientCount != 1 || !r.Durable {
		t.Errorf("receipt %+v", r)
	}
	if row, ok := alice.list(map[string]any{"box": "outbox"}).find(r.MessageID); !ok || row.From != "@alice" {
		t.Errorf("alice's outbox row %+v (found %v)", row, ok)
	}
	self := alice.send("@me", "note to self")
	if row, ok := alice.list(nil).find(self.MessageID); !ok || row.From != "@alice" || row.ReadAt != nil {
		t.Errorf("alice's inbox row %+v (found %v)", row, ok)
	}
	if strings.Contains(alice.stderr.String(), r.MessageID) {
		t.Logf("stderr: %s", alice.stderr)
	}
}

func TestStdioInMemoryStoreIsNotDurable(t *testing.T) {
	t.Parallel()
	env := environ(t)
	alice := stdio(t, env, "alice", "--db", ":memory:", "--agent", "alice")
	if r := alice.send("@me", "ephemeral"); r.Durable {
		t.Errorf("durable = true on --db :memory:")
	}
}

func TestMailroomAgentEnvNamesTheStdioIdentity(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	bob := stdio(t, environ(t, "MAILROOM_AGENT=bob", "MAILROOM_DB="+db), "bob")
	r := bob.send("@me", "who am i")
	if row, ok := bob.list(nil).find(r.MessageID); !ok || row.From != "@bob" {
		t.Errorf("row %+v (found %v), want from @bob", row, ok)
	}
	t.Run("the --agent flag wins over MAILROOM_AGENT", func(t *testing.T) {
		carol := stdio(t, environ(t, "MAILROOM_AGENT=bob"), "carol", "--db", db, "--agent", "carol")
		carol.t = t
		r := carol.send("@bob", "from carol")
		if row, ok := bob.list(nil).find(r.MessageID); !ok || row.From != "@carol" {
			t.Errorf("row %+v (found %v), want from @carol", row, ok)
		}
	})
}

func TestStdioAgentNamingAHumanIsRefused(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := testDB(t)
	mustRunCLI(t, env, "identity", "add", "carol", "--human", "--db", db)
	cases := []struct {
		name string
		env  []string
		args []string
	}{
		{"--agent", env, []string{"serve", "--db", db, "--agent", "carol"}},
		{"MAILROOM_AGENT", environ(t, "MAILROOM_AGENT=carol"), []string{"serve", "--db", db}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := runCLI(t, tc.env, tc.args...)
			if err == nil {
				t.Fatalf("serve as a human's name started")
			}
			if !strings.Contains(stderr, "human:carol") {
				t.Errorf("stderr does not say carol is a human: %s", stderr)
			}
		})
	}
}

var servingRE = regexp.MustCompile(`serving MCP at (http://\S+/mcp)`)

// serveHTTP starts `mailroom serve --http` and returns its endpoint, parsed
// from the line it prints once listening.
func serveHTTP(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case url, ok := <-found:
		if !ok {
			t.Fatalf("mailroom serve %v exited without serving\nstderr: %s", args, stderr)
		}
		return url
	case <-time.After(30 * time.Second):
		t.Fatalf("mailroom serve %v printed no address\nstderr: %s", args, stderr)
	}
	return ""
}

type bearer struct {
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func httpSession(t *testing.T, endpoint, token, name string) (*session, error) {
	t.Helper()
	hc := &http.Client{}
	if token != "" {
		hc.Transport = bearer{token}
	}
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "cmd-test-" + name, Version: "v0"}, nil).
		Connect(context.Background(), &gomcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cs.Close() })
	return &session{t: t, cs: cs, name: name, stderr: &lockedBuffer{}}, nil
}

func statusOf(t *testing.T, endpoint, authorization string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestTokenCreateWorksOverHTTP(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	// MAILROOM_AGENT never applies to HTTP: with it set and no --agent,
	// a request without a token is still refused.
	env := environ(t, "MAILROOM_AGENT=alice")
	out := mustRunCLI(t, env, "token", "create", "--agent", "alice", "--db", db)
	token := lastLine(out)
	if !strings.HasPrefix(token, "mr_") || len(token) < 25 {
		t.Fatalf("token create printed %q as its last line", token)
	}
	bobToken := lastLine(mustRunCLI(t, env, "token", "create", "--agent", "bob", "--db", db))
	danaToken := lastLine(mustRunCLI(t, env, "token", "create", "--human", "dana", "--db", db))
	if token == bobToken || bobToken == danaToken {
		t.Fatalf("tokens repeat")
	}
	if raw, err := os.ReadFile(db); err == nil && bytes.Contains(raw, []byte(token)) {
		t.Errorf("the database file holds the token in clear")
	}

	endpoint := serveHTTP(t, env, "--http", "127.0.0.1:0", "--db", db)
	host, _, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimSuffix(endpoint, "/mcp"), "http://"))
	if err != nil || host != "127.0.0.1" {
		t.Errorf("endpoint %s is not on loopback", endpoint)
	}

	alice, err := httpSession(t, endpoint, token, "alice")
	if err != nil {
		t.Fatalf("connect with alice's token: %v", err)
	}
	bob, err := httpSession(t, endpoint, bobToken, "bob")
	if err != nil {
		t.Fatalf("connect with bob's token: %v", err)
	}
	dana, err := httpSession(t, endpoint, danaToken, "dana")
	if err != nil {
		t.Fatalf("connect with dana's token: %v", err)
	}
	r := alice.send("@bob", "over http")
	if row, ok := bob.list(nil).find(r.MessageID); !ok || row.From != "@alice" {
		t.Errorf("bob's row %+v (found %v), want from @alice", row, ok)
	}
	d := dana.send("@bob", "from a human")
	if row, ok := bob.list(nil).find(d.MessageID); !ok || row.From != "human:dana" {
		t.Errorf("bob's row %+v (found %v), want from human:dana", row, ok)
	}

	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a bad token", "Bearer mr_bogus", http.StatusUnauthorized},
		{"a good token", "Bearer " + token, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusOf(t, endpoint, tc.auth); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}
}

func TestHTTPDevelopmentModeFromTheCommandLine(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := testDB(t)
	mustRunCLI(t, env, "identity", "add", "bob", "--db", db)
	endpoint := serveHTTP(t, env, "--http", "127.0.0.1:0", "--db", db, "--agent", "dev")
	dev, err := httpSession(t, endpoint, "", "dev")
	if err != nil {
		t.Fatalf("token-less connect in dev mode: %v", err)
	}
	r := dev.send("@me", "dev")
	if row, ok := dev.list(nil).find(r.MessageID); !ok || row.From != "@dev" {
		t.Errorf("row %+v (found %v), want from @dev", row, ok)
	}
	if got := statusOf(t, endpoint, "Bearer mr_bogus"); got != http.StatusUnauthorized {
		t.Errorf("bad token in dev mode: status %d, want 401", got)
	}
}

func TestServeRefusesDevModeOnANonLoopbackAddress(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := testDB(t)
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:0"} {
		t.Run(addr, func(t *testing.T) {
			out, stderr, err := runCLI(t, env, "serve", "--http", addr, "--agent", "x", "--db", db)
			if err == nil {
				t.Fatalf("serve --http %s --agent x started", addr)
			}
			if strings.Contains(out, "serving MCP") {
				t.Errorf("it listened before refusing: %s", out)
			}
			if !strings.Contains(stderr, "loopback") {
				t.Errorf("stderr does not explain the refusal: %s", stderr)
			}
		})
	}
}

func TestTwoProcessesShareOneDatabase(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := testDB(t)
	mustRunCLI(t, env, "identity", "add", "alice", "--db", db)
	mustRunCLI(t, env, "identity", "add", "bob", "--db", db)
	alice := stdio(t, env, "alice", "--db", db, "--agent", "alice")
	bob := stdio(t, env, "bob", "--db", db, "--agent", "bob")

	// A write in one process is visible in the other's next call.
	first := alice.send("@bob", "hello from the other process")
	row, ok := bob.list(nil).find(first.MessageID)
	if !ok || row.From != "@alice" {
		t.Fatalf("bob's process does not see alice's write: %+v (found %v)", row, ok)
	}
	var rr struct {
		Status string `json:"status"`
	}
	bob.ok("mark_read", map[string]any{"messageId": first.MessageID}, &rr)
	if p := bob.list(map[string]any{"unreadOnly": true}); p.TotalCount != 0 {
		t.Errorf("bob's unread after mark_read: %d", p.TotalCount)
	}

	// Concurrent writers in both processes: none may see SQLITE_BUSY.
	const perProcess = 150
	var wg sync.WaitGroup
	errs := make(chan string, 2*perProcess)
	for i := range 2 * perProcess {
		from, to := alice, "@bob"
		if i%2 == 1 {
			from, to = bob, "@alice"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := from.call("add_message", map[string]any{"to": to, "subject": fmt.Sprintf("concurrent %d", i), "body": "b"})
			switch {
			case err != nil:
				errs <- fmt.Sprintf("%s #%d: %v", from.name, i, err)
			case res.IsError:
				errs <- fmt.Sprintf("%s #%d: %s", from.name, i, resultText(res))
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for e := range errs {
		if n < 10 {
			t.Error(e)
		}
		n++
	}
	if n > 0 {
		t.Fatalf("%d of %d concurrent sends failed\nalice stderr: %s\nbob stderr: %s", n, 2*perProcess, alice.stderr, bob.stderr)
	}
	if got := bob.list(map[string]any{"limit": 1}).TotalCount; got != perProcess+1 {
		t.Errorf("bob's inbox holds %d, want %d", got, perProcess+1)
	}
	if got := alice.list(map[string]any{"limit": 1}).TotalCount; got != perProcess {
		t.Errorf("alice's inbox holds %d, want %d", got, perProcess)
	}
	// Each process sees the other's writes without a restart.
	if got := alice.list(map[string]any{"box": "outbox", "limit": 1}).TotalCount; got != perProcess+1 {
		t.Errorf("alice's outbox holds %d, want %d", got, perProcess+1)
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := testDB(t)
	cases := []struct {
		name    string
		args    []string
		wantOut string // substring of stdout
		wantErr string // substring of stderr; "" means success
	}{
		{"identity add", []string{"identity", "add", "alice"}, "identity @alice", ""},
		{"identity add is idempotent", []string{"identity", "add", "alice"}, "identity @alice", ""},
		{"identity add --human", []string{"identity", "add", "dana", "--human"}, "identity human:dana", ""},
		{"one name cannot be both kinds", []string{"identity", "add", "dana"}, "", "dana"},
		{"identity add refuses a bad name", []string{"identity", "add", "Bad Name"}, "", "invalid identity name"},
		{"role grant", []string{"role", "grant", "alice", "reviewer"}, "granted role:reviewer to alice", ""},
		{"role grant to an unknown identity", []string{"role", "grant", "nobody", "reviewer"}, "", "nobody"},
		{"token create needs an identity", []string{"token", "create"}, "", "--agent"},
		{"token create refuses a human's name as an agent", []string{"token", "create", "--agent", "dana"}, "", "dana"},
		{"an unknown command", []string{"frobnicate"}, "", "unknown command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runCLI(t, env, append(tc.args, "--db", db)...)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("%v\nstderr: %s", err, stderr)
				}
			} else {
				if err == nil {
					t.Fatalf("succeeded; want an error mentioning %q\nstdout: %s", tc.wantErr, out)
				}
				if !strings.Contains(stderr, tc.wantErr) {
					t.Errorf("stderr %q does not mention %q", stderr, tc.wantErr)
				}
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("stdout %q does not contain %q", out, tc.wantOut)
			}
		})
	}
	t.Run("the default database is under XDG_DATA_HOME", func(t *testing.T) {
		env := environ(t)
		mustRunCLI(t, env, "identity", "add", "alice")
		var xdg string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "XDG_DATA_HOME="); ok {
				xdg = v
			}
		}
		if _, err := os.Stat(filepath.Join(xdg, "mailroom", "mailroom.db")); err != nil {
			t.Errorf("default database: %v", err)
		}
	})
}

// TestMainInProcess runs the program in-process, as the binary does, with the
// Ready callback reporting the HTTP address.
func TestMainInProcess(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	getenv := func(k string) string {
		if k == "MAILROOM_DB" {
			return db
		}
		return ""
	}
	var out bytes.Buffer
	tok := NewMain(&out, io.Discard, getenv)
	if err := tok.ParseFlags([]string{"token", "create", "--agent", "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := tok.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	tok.Close()
	token := lastLine(out.String())

	var stdout lockedBuffer
	m := NewMain(&stdout, io.Discard, getenv)
	if err := m.ParseFlags([]string{"serve", "--http", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	ready := make(chan net.Addr, 1)
	m.Ready = func(a net.Addr) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		m.Close()
	})
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("Run ended early: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("not ready")
	}
	endpoint := "http://" + addr.String() + "/mcp"
	if !strings.Contains(stdout.String(), "serving MCP at "+endpoint) {
		t.Errorf("stdout %q lacks the endpoint %s", stdout.String(), endpoint)
	}
	alice, err := httpSession(t, endpoint, token, "alice")
	if err != nil {
		t.Fatal(err)
	}
	r := alice.send("@me", "in process")
	if row, ok := alice.list(nil).find(r.MessageID); !ok || row.From != "@alice" {
		t.Errorf("row %+v (found %v)", row, ok)
	}
}

func TestStdioWithoutAnIdentityAnswersAClearError(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	anon := stdio(t, environ(t), "anonymous", "--db", db)
	res, err := anon.call("list_messages", nil)
	if err != nil {
		t.Fatal(err)
	}
	if msg := resultText(res); !res.IsError || !strings.Contains(msg, "no identity is bound") || !strings.Contains(msg, "MAILROOM_AGENT") {
		t.Errorf("isError %v: %q", res.IsError, msg)
	}
}

func TestMaxBodyFlag(t *testing.T) {
	t.Parallel()
	alice := stdio(t, environ(t), "alice", "--db", ":memory:", "--agent", "alice", "--max-body", "10")
	res, err := alice.call("add_message", map[string]any{"to": "@me", "subject": "s", "body": "eleven byte"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resultText(res), "body is 11 bytes; the limit is 10"; !res.IsError || got != want {
		t.Errorf("isError %v: %q, want %q", res.IsError, got, want)
	}
	var r sendReceipt
	alice.ok("add_message", map[string]any{"to": "@me", "subject": "s", "body": "ten bytes!"}, &r)
}

func TestStateOutlivesTheProcessAndGrantsApplyAtOnce(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := testDB(t)
	alice := stdio(t, env, "alice", "--db", db, "--agent", "alice")
	bob := stdio(t, env, "bob", "--db", db, "--agent", "bob")

	// A role granted by another process applies to bob's next call.
	mustRunCLI(t, env, "role", "grant", "bob", "reviewer", "--db", db)
	r := alice.send("role:reviewer", "for the reviewer")
	if _, ok := bob.list(nil).find(r.MessageID); !ok {
		t.Fatalf("bob's running process does not see the role granted by another process")
	}
	d := alice.send("@bob", "direct")
	var rr struct {
		Status string `json:"status"`
	}
	bob.ok("mark_read", map[string]any{"messageId": d.MessageID}, &rr)
	bob.cs.Close()

	// A new process for bob finds the read state as it was committed.
	bob2 := stdio(t, env, "bob", "--db", db, "--agent", "bob")
	p := bob2.list(nil)
	if row, ok := p.find(d.MessageID); !ok || row.ReadAt == nil {
		t.Errorf("after a restart the read message is %+v (found %v)", row, ok)
	}
	if row, ok := p.find(r.MessageID); !ok || row.ReadAt != nil {
		t.Errorf("after a restart the role message is %+v (found %v)", row, ok)
	}
}

// An --http address without a host binds loopback, as SPEC section 1 says.
func TestServeWithoutAHostBindsLoopback(t *testing.T) {
	t.Parallel()
	env := environ(t)
	db := testDB(t)
	endpoint := serveHTTP(t, env, "--http", ":0", "--agent", "x", "--db", db)
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Fatalf("served at %s, want loopback", endpoint)
	}
}
