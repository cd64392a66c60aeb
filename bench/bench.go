// Package bench is mailroom's load generator: it drives a running server
// over real streamable HTTP with N MCP sessions (the official go-sdk
// client) and reports throughput, latency percentiles and, given the
// server's pid, its CPU per operation and resident memory from /proc.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Phases in the order they run; drain runs last of the mail phases because
// it reads the whole inbox.
var Phases = []string{"ping", "send", "send-concurrent", "page", "page-unread", "page-cursor", "full-text", "full-text-all", "wait-for-mail", "drain"}

// Options configure a run.
type Options struct {
	URL      string   // the server's MCP endpoint, e.g. http://127.0.0.1:8787/mcp
	Tokens   []string // bearer tokens, one per session round-robin; none in loopback development mode
	Sessions int      // concurrent sessions for send-concurrent (default 8)
	Ops      int      // operations per phase (default 500)
	PID      int      // the server's pid, for CPU and RSS; 0 for none
	Phases   []string // which phases; default all
	To       string   // address the sends go to (default @me)
	Query    string   // a selective full-text word (default zeppelin)
	Common   string   // a word in every message (default status)
	Body     int      // send body size in bytes (default 100)
}

// Result is one phase's figures.
type Result struct {
	Phase         string
	Ops, Errors   int
	Elapsed       time.Duration
	P50, P95, P99 time.Duration
	CPUPerOp      time.Duration // server CPU (user+system) per op; 0 without a pid
	RSS           int64         // server resident memory after the phase, bytes
	Note          string
}

// PerSecond is the phase's throughput.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Run connects the sessions and runs the phases.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Sessions <= 0 {
		o.Sessions = 8
	}
	if o.Ops <= 0 {
		o.Ops = 500
	}
	if len(o.Phases) == 0 {
		o.Phases = Phases
	}
	for _, p := range o.Phases {
		if !slices.Contains(Phases, p) {
			return nil, fmt.Errorf("unknown phase %q (phases: %s)", p, strings.Join(Phases, ", "))
		}
	}
	if o.To == "" {
		o.To = "@me"
	}
	if o.Query == "" {
		o.Query = "zeppelin"
	}
	if o.Common == "" {
		o.Common = "status"
	}
	if o.Body <= 0 {
		o.Body = 100
	}
	tr := &http.Transport{MaxIdleConns: 2 * o.Sessions, MaxIdleConnsPerHost: 2 * o.Sessions, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	sessions := make([]*gomcp.ClientSession, o.Sessions)
	for i := range sessions {
		var rt http.RoundTripper = tr
		if len(o.Tokens) > 0 {
			rt = bearer{token: o.Tokens[i%len(o.Tokens)], next: tr}
		}
		c := gomcp.NewClient(&gomcp.Implementation{Name: "mailroom-bench", Version: "v1"}, nil)
		cs, err := c.Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: o.URL, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}, nil)
		if err != nil {
			return nil, fmt.Errorf("connect session %d to %s: %w", i, o.URL, err)
		}
		defer cs.Close()
		sessions[i] = cs
	}
	r := &runner{o: o, s: sessions, body: strings.Repeat("x", max(0, o.Body-len(o.Common)-1)) + " " + o.Common}
	var out []Result
	for _, p := range Phases {
		if !slices.Contains(o.Phases, p) {
			continue
		}
		res, err := r.phase(ctx, p)
		if err != nil {
			return out, fmt.Errorf("phase %s: %w", p, err)
		}
		out = append(out, res)
	}
	return out, nil
}

type runner struct {
	o    Options
	s    []*gomcp.ClientSession
	body string
}

func call(ctx context.Context, cs *gomcp.ClientSession, tool string, args map[string]any) (map[string]any, error) {
	res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		msg := ""
		if len(res.Content) > 0 {
			if t, ok := res.Content[0].(*gomcp.TextContent); ok {
				msg = t.Text
			}
		}
		return nil, fmt.Errorf("%s: %s", tool, msg)
	}
	m, _ := res.StructuredContent.(map[string]any)
	return m, nil
}

func (r *runner) send(ctx context.Context, cs *gomcp.ClientSession, i int) error {
	_, err := call(ctx, cs, "add_message", map[string]any{"to": r.o.To, "subject": "bench " + strconv.Itoa(i), "body": r.body})
	return err
}

func (r *runner) phase(ctx context.Context, name string) (Result, error) {
	cs := r.s[0]
	n := r.o.Ops
	var op func(i int) error
	workers := 1
	note := ""
	switch name {
	case "ping":
		op = func(int) error { return cs.Ping(ctx, nil) }
	case "send":
		op = func(i int) error { return r.send(ctx, cs, i) }
	case "send-concurrent":
		workers = len(r.s)
	case "page":
		op = func(int) error { _, err := call(ctx, cs, "list_messages", map[string]any{"limit": 50}); return err }
	case "page-unread":
		op = func(int) error {
			_, err := call(ctx, cs, "list_messages", map[string]any{"limit": 50, "unreadOnly": true})
			return err
		}
	case "page-cursor":
		// Walk the inbox by cursor, 50 a page, as deep as Ops pages go.
		var cursor any
		op = func(int) error {
			args := map[string]any{"limit": 50}
			if cursor != nil {
				args["cursor"] = cursor
			}
			p, err := call(ctx, cs, "list_messages", args)
			if err == nil {
				cursor = p["nextCursor"]
			}
			return err
		}
	case "full-text":
		op = func(int) error {
			_, err := call(ctx, cs, "list_messages", map[string]any{"limit": 50, "query": r.o.Query})
			return err
		}
	case "full-text-all":
		op = func(int) error {
			_, err := call(ctx, cs, "list_messages", map[string]any{"limit": 50, "query": r.o.Common})
			return err
		}
	case "wait-for-mail":
		return r.waitForMail(ctx)
	case "drain":
		n = 1
		op = func(int) error {
			rc, err := call(ctx, cs, "mark_read", map[string]any{"all": true})
			if err == nil {
				note = fmt.Sprintf("matched %v, read %v, durable %v", rc["matchedCount"], rc["readCount"], rc["durableCount"])
			}
			return err
		}
	}
	before := sample(r.o.PID)
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	start := time.Now()
	if workers == 1 {
		for i := range n {
			t := time.Now()
			errs[i] = op(i)
			lat[i] = time.Since(t)
		}
	} else {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					t := time.Now()
					errs[i] = r.send(ctx, r.s[w], i)
					lat[i] = time.Since(t)
				}
			}()
		}
		wg.Wait()
		note = fmt.Sprintf("%d sessions", workers)
	}
	elapsed := time.Since(start)
	after := sample(r.o.PID)
	res := summarize(name, lat, elapsed)
	res.Note = note
	for _, err := range errs {
		if err != nil {
			if res.Errors == 0 && errors.Is(err, ctx.Err()) {
				return res, err
			}
			if res.Errors == 0 {
				res.Note = strings.TrimSpace(res.Note + " first error: " + err.Error())
			}
			res.Errors++
		}
	}
	if r.o.PID > 0 && before.ok && after.ok {
		res.CPUPerOp = (after.cpu - before.cpu) / time.Duration(n)
		res.RSS = after.rss
	}
	return res, nil
}

// waitForMail measures how long after a send a waiting wait_for_mail
// returns it; skipped when the server has no such tool.
func (r *runner) waitForMail(ctx context.Context) (Result, error) {
	tools, err := r.s[0].ListTools(ctx, nil)
	if err != nil {
		return Result{}, err
	}
	if !slices.ContainsFunc(tools.Tools, func(t *gomcp.Tool) bool { return t.Name == "wait_for_mail" }) {
		return Result{Phase: "wait-for-mail", Note: "skipped: the server has no wait_for_mail tool"}, nil
	}
	if len(r.s) < 2 {
		return Result{Phase: "wait-for-mail", Note: "skipped: needs 2 sessions"}, nil
	}
	n := min(r.o.Ops, 100)
	lat := make([]time.Duration, 0, n)
	errs := 0
	before := sample(r.o.PID)
	start := time.Now()
	for i := range n {
		woke := make(chan time.Time, 1)
		go func() {
			_, err := call(ctx, r.s[1], "wait_for_mail", map[string]any{"timeoutSeconds": 10})
			if err != nil {
				errs++
			}
			woke <- time.Now()
		}()
		time.Sleep(20 * time.Millisecond) // let the wait begin: it waits for mail newer than its start
		sent := time.Now()
		if err := r.send(ctx, r.s[0], i); err != nil {
			return Result{}, err
		}
		lat = append(lat, (<-woke).Sub(sent))
	}
	res := summarize("wait-for-mail", lat, time.Since(start))
	res.Errors = errs
	res.Note = "send to wake-up latency; includes the send"
	if after := sample(r.o.PID); r.o.PID > 0 && before.ok && after.ok {
		res.CPUPerOp = (after.cpu - before.cpu) / time.Duration(n)
		res.RSS = after.rss
	}
	return res, nil
}

func summarize(name string, lat []time.Duration, elapsed time.Duration) Result {
	s := slices.Clone(lat)
	slices.Sort(s)
	q := func(p float64) time.Duration {
		if len(s) == 0 {
			return 0
		}
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	return Result{Phase: name, Ops: len(s), Elapsed: elapsed, P50: q(0.50), P95: q(0.95), P99: q(0.99)}
}

type procSample struct {
	ok  bool
	cpu time.Duration
	rss int64
}

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 10 * time.Millisecond

// sample reads a process's CPU time (user+system) and resident set.
func sample(pid int) procSample {
	if pid <= 0 {
		return procSample{}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}
	}
	// Fields after the parenthesised command name, which may hold spaces.
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return procSample{}
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	s := procSample{ok: true, cpu: time.Duration(ut+st) * clockTick}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				s.rss = kb * 1024
			}
		}
	}
	return s
}

// Report writes results as a table, with the in-run ratio of the
// sequential send to the MCP ping.
func Report(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tops\terrors\tops/s\tp50\tp95\tp99\tcpu/op\trss\tnote")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }
	var ping, send Result
	for _, r := range rs {
		cpu, rss := "-", "-"
		if r.CPUPerOp > 0 || r.RSS > 0 {
			cpu, rss = ms(r.CPUPerOp), fmt.Sprintf("%.1fMB", float64(r.RSS)/(1<<20))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Phase, r.Ops, r.Errors, r.PerSecond(), ms(r.P50), ms(r.P95), ms(r.P99), cpu, rss, r.Note)
		switch r.Phase {
		case "ping":
			ping = r
		case "send":
			send = r
		}
	}
	tw.Flush()
	if ping.P50 > 0 && send.P50 > 0 {
		fmt.Fprintf(w, "send p50 / ping p50 = %.2f\n", float64(send.P50)/float64(ping.P50))
	}
	for _, r := range rs {
		if r.Phase == "send-concurrent" && send.PerSecond() > 0 {
			fmt.Fprintf(w, "send-concurrent rate / send rate = %.2f\n", r.PerSecond()/send.PerSecond())
		}
	}
}
