package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// runIn runs the binary with stdin.
func runIn(t *testing.T, env []string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	return o.String(), e.String(), err
}

func jsonOut(t *testing.T, env []string, out any, args ...string) {
	t.Helper()
	s := mustRunCLI(t, env, append(args, "--json")...)
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("mailroom %v --json printed %q: %v", args, s, err)
	}
}

type cliRow struct {
	MessageID string     `json:"messageId"`
	Subject   string     `json:"subject"`
	From      string     `json:"from"`
	To        []string   `json:"to"`
	Priority  string     `json:"priority"`
	ReadAt    *time.Time `json:"readAt"`
	ThreadID  string     `json:"threadId"`
}

type cliPage struct {
	Messages   []cliRow `json:"messages"`
	TotalCount int      `json:"totalCount"`
	Watermark  *string  `json:"watermark"`
}

func TestMailFromTheShell(t *testing.T) {
	t.Parallel()
	env := environ(t, "MAILROOM_DB="+filepath.Join(t.TempDir(), "m.db"))
	mustRunCLI(t, env, "identity", "add", "dana", "--human")
	mustRunCLI(t, env, "identity", "add", "bob")

	// An agent sends; the body comes from --body, a file, or stdin.
	out := mustRunCLI(t, env, "send", "--agent", "alice", "--to", "human:dana", "--to", "@bob", "--subject", "Build is red", "--body", "see CI\n\x1b]0;owned\x07", "--priority", "high")
	sent := regexp.MustCompile(`^sent (MESSAGE:\S+) to 2 recipients \(thread (THREAD:\S+)\)\n$`).FindStringSubmatch(out)
	if sent == nil {
		t.Fatalf("send printed %q", out)
	}
	first, thread := sent[1], sent[2]
	bodyFile := filepath.Join(t.TempDir(), "body.txt")
	os.WriteFile(bodyFile, []byte("from a file"), 0o600)
	mustRunCLI(t, env, "send", "--agent", "alice", "--to", "human:dana", "--subject", "file", "--body-file", bodyFile)
	if out, stderr, err := runIn(t, env, "piped body", "send", "--agent", "alice", "--to", "human:dana", "--subject", "piped"); err != nil {
		t.Fatalf("send from stdin: %v %s %s", err, out, stderr)
	}

	// The human's inbox as a table, newest first, unread marked.
	table := mustRunCLI(t, env, "inbox", "--human", "dana")
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	if len(lines) != 5 || !regexp.MustCompile(`^ID\s+STATE\s+FROM\s+PRIORITY\s+SENT\s+SUBJECT$`).MatchString(lines[0]) {
		t.Fatalf("inbox table:\n%s", table)
	}
	if !regexp.MustCompile(`^MESSAGE:\S+\s+unread\s+@alice\s+normal\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+piped$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^`+first+`\s+unread\s+@alice\s+high\s+.*Build is red$`).MatchString(lines[3]) ||
		lines[4] != "3 of 3 shown" {
		t.Errorf("inbox rows:\n%s", table)
	}

	var p cliPage
	jsonOut(t, env, &p, "inbox", "--human", "dana", "--limit", "2")
	if len(p.Messages) != 2 || p.TotalCount != 3 || p.Messages[1].Subject != "file" || p.Watermark == nil {
		t.Fatalf("inbox --json: %+v", p)
	}

	// read shows the body with control characters made visible, and does
	// not mark the message read.
	msg := mustRunCLI(t, env, "read", first, "--human", "dana")
	for _, want := range []string{"Message:  " + first, "From:     @alice", "To:       human:dana, @bob", "Subject:  Build is red", "Priority: high", "Thread:   " + thread, "Read:     unread", "\n\nsee CI\n\\x1b]0;owned\\x07\n"} {
		if !strings.Contains(msg, want) {
			t.Errorf("read output lacks %q:\n%s", want, msg)
		}
	}
	if strings.ContainsRune(msg, 0x1b) {
		t.Errorf("read wrote a raw escape character to the terminal")
	}
	var full struct {
		cliRow
		Body string `json:"body"`
	}
	jsonOut(t, env, &full, "read", first, "--human", "dana")
	if full.Body != "see CI\n\x1b]0;owned\x07" || full.ReadAt != nil {
		t.Errorf("read --json: %+v", full)
	}

	// A reply joins the thread; the agent finds it in its inbox.
	mustRunCLI(t, env, "send", "--human", "dana", "--to", "@alice", "--subject", "on it", "--body", "looking", "--reply-to", first)
	var ap cliPage
	jsonOut(t, env, &ap, "inbox", "--agent", "alice", "--unread")
	if len(ap.Messages) != 1 || ap.Messages[0].From != "human:dana" || ap.Messages[0].ThreadID != thread {
		t.Errorf("alice's unread after dana's reply: %+v", ap)
	}

	// mark-read: one id and a bad one (exit 1, the good one still read).
	out, stderr, err := runCLI(t, env, "mark-read", first, "MESSAGE:nope", "--human", "dana")
	wantFailure(t, out, stderr, err, "1 of 2 ids could not be marked read")
	if !regexp.MustCompile(`(?m)^read\s+`+first+` at \d{4}-`).MatchString(out) || !strings.Contains(out, "error  MESSAGE:nope: Message not found: MESSAGE:nope") {
		t.Errorf("mark-read printed:\n%s", out)
	}
	jsonOut(t, env, &p, "inbox", "--human", "dana", "--unread")
	if p.TotalCount != 2 {
		t.Errorf("unread after marking one: %d", p.TotalCount)
	}
	if s := mustRunCLI(t, env, "status", "--human", "dana"); !regexp.MustCompile(`(?m)^Unread:\s+2$`).MatchString(s) {
		t.Errorf("status:\n%s", s)
	}
	if out := mustRunCLI(t, env, "mark-read", "--all", "--human", "dana"); out != "marked 2 of 2 unread read (read)\n" {
		t.Errorf("mark-read --all printed %q", out)
	}
	jsonOut(t, env, &p, "inbox", "--human", "dana", "--unread")
	if p.TotalCount != 0 {
		t.Errorf("unread after --all: %d", p.TotalCount)
	}
	// bob's copy of the first message is his own: still unread.
	jsonOut(t, env, &p, "inbox", "--agent", "bob", "--unread")
	if p.TotalCount != 1 {
		t.Errorf("bob's unread: %d", p.TotalCount)
	}
}

func TestMailCommandErrors(t *testing.T) {
	t.Parallel()
	env := environ(t, "MAILROOM_DB="+filepath.Join(t.TempDir(), "m.db"))
	mustRunCLI(t, env, "identity", "add", "dana", "--human")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"inbox"}, "mailroom inbox needs an identity: --agent NAME (or MAILROOM_AGENT), --human LOGIN, or --url"},
		{[]string{"inbox", "--agent", "a", "--human", "dana"}, "not both"},
		{[]string{"inbox", "--agent", "dana"}, "dana is already taken by human:dana"},
		{[]string{"inbox", "--agent", "a", "--limit", "0"}, "limit must be between 1 and 200 (got 0)"},
		{[]string{"inbox", "--agent", "a", "--limit", "x"}, `invalid argument "x" for "--limit"`},
		{[]string{"read", "--agent", "a"}, "mailroom read needs ID"},
		{[]string{"read", "MESSAGE:01a230e1-39d1-7207-b792-1261d283c947", "--agent", "a"}, "Message not found: MESSAGE:01a230e1-39d1-7207-b792-1261d283c947"},
		{[]string{"send", "--agent", "a", "--subject", "s", "--body", "b"}, "send needs --to ADDR"},
		{[]string{"send", "--agent", "a", "--to", "@a"}, "send needs --subject S"},
		{[]string{"send", "--agent", "a", "--to", "@nobody", "--subject", "s", "--body", "b"}, "Unknown recipient: @nobody"},
		{[]string{"send", "--agent", "a", "--to", "@a", "--subject", "s", "--body", "b", "--priority", "urgent"}, `priority must be one of low, normal, high (got "urgent")`},
		{[]string{"send", "--agent", "a", "--to", "@a", "--subject", "s", "--body", "b", "--body-file", "f"}, "give one of --body or --body-file, not both"},
		{[]string{"send", "--agent", "a", "--to", "@a", "--subject", "s", "--body-file", "/nonexistent/f"}, "--body-file: open /nonexistent/f"},
		{[]string{"mark-read", "--agent", "a"}, "mark-read needs message ids or --all"},
		{[]string{"mark-read", "MESSAGE:x", "--all", "--agent", "a"}, "mark-read takes ids or --all, not both"},
		{[]string{"mark-read", "MESSAGE:x", "--through", "MESSAGE:y", "--agent", "a"}, "--through and --include-roles apply only with --all"},
		{[]string{"inbox", "--url", "ftp://x"}, `--url "ftp://x": want http://host:port`},
		{[]string{"inbox", "--url", "http://127.0.0.1:1"}, "--url needs a bearer token in MAILROOM_TOKEN"},
		{[]string{"status", "--url", "http://127.0.0.1:1", "--agent", "a"}, "drop --agent and --human"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, stderr, err := runCLI(t, env, tc.args...)
			wantFailure(t, out, stderr, err, tc.want)
		})
	}
	t.Run("an internal error shows its cause", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "m.db")
		mustRunCLI(t, env, "identity", "add", "a", "--db", db)
		// A trigger makes every send fail inside SQLite, as a broken disk would.
		raw, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`CREATE TRIGGER boom BEFORE INSERT ON message BEGIN SELECT RAISE(ABORT, 'disk on fire'); END`); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		out, stderr, err := runCLI(t, env, "send", "--agent", "a", "--to", "@a", "--subject", "s", "--body", "b", "--db", db)
		wantFailure(t, out, stderr, err, "internal error: ")
		if !strings.Contains(stderr, "disk on fire") {
			t.Errorf("the cause is hidden: %q", stderr)
		}
	})
}

func TestMailOverURL(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	env := environ(t, "MAILROOM_DB="+db)
	dana := lastLine(mustRunCLI(t, env, "token", "create", "--human", "dana"))
	alice := lastLine(mustRunCLI(t, env, "token", "create", "--agent", "alice"))
	endpoint := serveHTTP(t, env, "--http", "127.0.0.1:0")
	base := strings.TrimSuffix(endpoint, "/mcp")
	asDana := append(env[:len(env):len(env)], "MAILROOM_TOKEN="+dana)
	asAlice := append(env[:len(env):len(env)], "MAILROOM_TOKEN="+alice, "MAILROOM_URL="+endpoint)

	out := mustRunCLI(t, asAlice, "send", "--to", "human:dana", "--subject", "over the wire", "--body", "hello")
	id := regexp.MustCompile(`MESSAGE:\S+`).FindString(out)
	var p cliPage
	jsonOut(t, asDana, &p, "inbox", "--url", base, "--unread")
	if len(p.Messages) != 1 || p.Messages[0].MessageID != id || p.Messages[0].From != "@alice" {
		t.Fatalf("dana's inbox over --url: %+v", p)
	}
	if msg := mustRunCLI(t, asDana, "read", id, "--url", base); !strings.Contains(msg, "\n\nhello\n") {
		t.Errorf("read over --url:\n%s", msg)
	}
	mustRunCLI(t, asDana, "mark-read", id, "--url", base)
	if s := mustRunCLI(t, asDana, "status", "--url", base); !regexp.MustCompile(`(?m)^Unread:\s+0$`).MatchString(s) {
		t.Errorf("status over --url:\n%s", s)
	}
	// The same mailbox, read locally.
	jsonOut(t, env, &p, "inbox", "--human", "dana")
	if len(p.Messages) != 1 || p.Messages[0].ReadAt == nil {
		t.Errorf("locally after marking over --url: %+v", p)
	}
	bad := append(env[:len(env):len(env)], "MAILROOM_TOKEN=mr_bogus")
	out, stderr, err := runCLI(t, bad, "inbox", "--url", base)
	wantFailure(t, out, stderr, err, "refused the token in MAILROOM_TOKEN (401 Unauthorized)")
}
