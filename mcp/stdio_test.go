package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func TestLineFilter(t *testing.T) {
	t.Parallel()
	const limit = 64
	good := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	cases := []struct {
		name     string
		in       string
		pass     []string
		codes    []int
		contains string
	}{
		{"a message passes", good + "\n", []string{good}, nil, ""},
		{"CRLF and spaces are trimmed", "  " + good + " \r\n", []string{good}, nil, ""},
		{"blank lines are skipped", "\n\n \t\n" + good + "\n\n", []string{good}, nil, ""},
		{"a last line without newline", good, []string{good}, nil, ""},
		{"hello", "hello\n" + good + "\n", []string{good}, []int{-32700}, "not valid JSON"},
		{"a truncated object", `{"jsonrpc":"2.0","id":1,"meth` + "\n" + good + "\n", []string{good}, []int{-32700}, "not valid JSON"},
		{"two values on one line", good + " " + good + "\n", nil, []int{-32700}, ""},
		{"a line over the limit", strings.Repeat("x", limit+1) + "\n" + good + "\n", []string{good}, []int{-32700}, "longer than 64 bytes"},
		{"a long line over several buffers", `{"a":"` + strings.Repeat("y", 200<<10) + `"}` + "\n" + good + "\n", []string{good}, []int{-32700}, "longer than"},
		{"a line of exactly the limit passes", padTo(limit) + "\n", []string{padTo(limit)}, nil, ""},
		{"JSON that is not JSON-RPC", `{"hello":"world"}` + "\n", nil, []int{-32600}, "not a JSON-RPC 2.0 message"},
		{"the wrong version", `{"jsonrpc":"1.0","id":1,"method":"ping"}` + "\n", nil, []int{-32600}, ""},
		{"a number", "5\n", nil, []int{-32600}, ""},
		{"a batch", "[" + good + "]\n", nil, []int{-32600}, "batches are not supported"},
		{"an empty batch", "[]\n", nil, []int{-32600}, ""},
		{"NUL bytes", "\x00\x00\n", nil, []int{-32700}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pass, reply bytes.Buffer
			if err := mcp.LineFilter(strings.NewReader(tc.in), &pass, &reply, limit); err != nil {
				t.Fatal(err)
			}
			var passed []string
			for _, l := range strings.Split(strings.TrimSuffix(pass.String(), "\n"), "\n") {
				if l != "" {
					passed = append(passed, l)
				}
			}
			if strings.Join(passed, "|") != strings.Join(tc.pass, "|") {
				t.Errorf("passed %q, want %q", passed, tc.pass)
			}
			var codes []int
			sc := bufio.NewScanner(&reply)
			for sc.Scan() {
				var r rpcReply
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Error == nil || string(r.ID) != "null" {
					t.Fatalf("reply %s: %v", sc.Bytes(), err)
				}
				codes = append(codes, r.Error.Code)
				if !strings.Contains(r.Error.Message, tc.contains) {
					t.Errorf("message %q does not contain %q", r.Error.Message, tc.contains)
				}
			}
			if len(codes) != len(tc.codes) || (len(codes) > 0 && codes[0] != tc.codes[0]) {
				t.Errorf("codes %v, want %v", codes, tc.codes)
			}
		})
	}
}

// padTo is a valid JSON-RPC ping of exactly n bytes.
func padTo(n int) string {
	base := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":""}}`
	return strings.Replace(base, `"p":""`, `"p":"`+strings.Repeat("x", n-len(base))+`"`, 1)
}

// FuzzLineFilter: for any input, the filter never fails or panics, every
// line it passes is one JSON-RPC message on one line, and every other
// non-blank input line gets exactly one JSON-RPC error with a null id.
func FuzzLineFilter(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n",
		"hello\n", `{"jsonrpc":"2.0","id":1,"meth` + "\n", "[]\n", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]` + "\n",
		"\n\r\n", "5\n", `{"jsonrpc":"2.0"}` + "\n", `{"jsonrpc":"2.0","id":null,"result":{}}` + "\n",
		strings.Repeat("z", 100) + "\n{}\n", "\x00\xff\n", `{"jsonrpc":"2.0","id":1,"method":"ping"} x` + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 80
		var pass, reply bytes.Buffer
		if err := mcp.LineFilter(bytes.NewReader(in), &pass, &reply, max); err != nil {
			t.Fatal(err)
		}
		nonBlank := 0
		for _, l := range bytes.Split(in, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 || len(l) > max {
				nonBlank++
			}
		}
		passed := 0
		for _, l := range bytes.Split(pass.Bytes(), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			passed++
			if !json.Valid(l) || l[0] != '{' {
				t.Fatalf("passed %q", l)
			}
			if _, err := jsonrpc.DecodeMessage(l); err != nil {
				t.Fatalf("passed %q: %v", l, err)
			}
		}
		replies := 0
		for _, l := range bytes.Split(reply.Bytes(), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			replies++
			var r rpcReply
			if err := json.Unmarshal(l, &r); err != nil || r.Error == nil || (r.Error.Code != -32700 && r.Error.Code != -32600) {
				t.Fatalf("reply %q", l)
			}
		}
		if passed+replies != nonBlank {
			t.Fatalf("%d lines passed and %d answered, of %d non-blank lines in %q", passed, replies, nonBlank, in)
		}
	})
}

// TestStdioMalformedLinesGetParseErrors serves a real store over
// newline-delimited JSON-RPC: malformed lines get errors, and the same
// session then initializes and calls a tool.
func TestStdioMalformedLinesGetParseErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.agent("alice")
	e.agent("bob")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- mcp.NewServer(e.store, mcp.Options{Identity: &alice}).ServeLines(ctx, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() { cancel(); inW.Close(); <-done })
	out := bufio.NewReaderSize(outR, 1<<20)
	send := func(s string) {
		t.Helper()
		go inW.Write([]byte(s))
	}
	next := func() rpcReply {
		t.Helper()
		lc := make(chan []byte, 1)
		go func() { l, _ := out.ReadBytes('\n'); lc <- l }()
		select {
		case l := <-lc:
			var r rpcReply
			if err := json.Unmarshal(l, &r); err != nil {
				t.Fatalf("reply %q: %v", l, err)
			}
			return r
		case <-time.After(30 * time.Second):
			t.Fatal("no reply")
		}
		return rpcReply{}
	}
	for _, bad := range []struct{ line, name string }{
		{"hello\n", "hello"},
		{`{"jsonrpc":"2.0","id":1,"method":"initia` + "\n", "a truncated object"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", mcp.MaxStdioLine) + `"}}` + "\n", "a line over 16 MiB"},
	} {
		send(bad.line)
		if r := next(); r.Error == nil || r.Error.Code != -32700 || string(r.ID) != "null" {
			t.Fatalf("%s: reply %+v", bad.name, r)
		}
	}
	send(initializeBody + "\n")
	if r := next(); r.Error != nil || string(r.ID) != "1" {
		t.Fatalf("initialize after bad lines: %+v", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + "[1,2]\n")
	if r := next(); r.Error == nil || r.Error.Code != -32600 {
		t.Fatalf("batch: %+v", r)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add_message","arguments":{"to":"@bob","subject":"still serving","body":"b"}}}` + "\n")
	r := next()
	var res struct {
		IsError bool `json:"isError"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.IsError {
		t.Fatalf("tools/call after bad lines: %+v %s", r, r.Result)
	}
}

// TestStdioDisconnectCancelsTheCall: when the client closes stdin while a
// call runs, the call's database work is stopped.
func TestStdioDisconnectCancelsTheCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.agent("alice")
	bs := &blockingStore{Store: e.store, started: make(chan struct{}), ended: make(chan error, 1)}
	inR, inW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- mcp.NewServer(bs, mcp.Options{Identity: &alice, CallBudget: -1}).ServeLines(context.Background(), inR, io.Discard)
	}()
	go inW.Write([]byte(initializeBody + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_messages","arguments":{}}}` + "\n"))
	select {
	case <-bs.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the store")
	}
	inW.Close() // the client goes away
	select {
	case <-bs.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the store's work went on after stdin closed")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}
}

// TestCallBudgetStopsARunawayCall: a call that outlives its budget is
// stopped with a clear error, and the session goes on.
func TestCallBudgetStopsARunawayCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.agent("alice")
	bs := &blockingStore{Store: e.store, started: make(chan struct{}), ended: make(chan error, 1)}
	c := connect(t, bs, mcp.Options{Identity: &alice, CallBudget: 50 * time.Millisecond}, "alice")
	c.failWith("list_messages", map[string]any{}, "list_messages stopped: it ran past its budget of 50ms; narrow the query or filters, or page with cursor")
	if err := <-bs.ended; err != context.DeadlineExceeded {
		t.Errorf("cause %v", err)
	}
	// The session goes on.
	if _, err := c.cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("tools/list after a stopped call: %v", err)
	}
}

// spinStore's List burns CPU until its context ends.
type spinStore struct{ mailroom.Store }

func (s spinStore) List(ctx context.Context, f mailroom.ListFilter) (mailroom.Page, error) {
	x := 0
	for ctx.Err() == nil {
		for i := range 10000 {
			x ^= i * i
		}
	}
	_ = x
	return mailroom.Page{}, ctx.Err()
}

// TestCPUBudget: a read that keeps a core busy is stopped at its CPU
// budget; one that waits (no CPU) is not, and meets the wall-clock budget
// instead.
func TestCPUBudget(t *testing.T) {
	e := newEnv(t)
	alice := e.agent("alice")
	spin := connect(t, spinStore{e.store}, mcp.Options{Identity: &alice, CPUBudget: 20 * time.Millisecond, CallBudget: -1}, "alice")
	spin.failWith("list_messages", map[string]any{}, "list_messages stopped: it needed more than its 20ms of CPU; narrow the query or filters, or page with cursor")
	bs := &blockingStore{Store: e.store, started: make(chan struct{}), ended: make(chan error, 1)}
	wait := connect(t, bs, mcp.Options{Identity: &alice, CPUBudget: time.Millisecond, CallBudget: 300 * time.Millisecond}, "alice")
	wait.failWith("list_messages", map[string]any{}, "list_messages stopped: it ran past its budget of 300ms; narrow the query or filters, or page with cursor")
	// Writes are never cut by either budget.
	wait.sendTo("@me", "a write under a 1 ms CPU budget")
}
