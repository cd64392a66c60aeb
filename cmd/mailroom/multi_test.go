package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailroom/mailroom/postgres/pgtest"
)

// instances is two `mailroom serve --http` processes on one PostgreSQL
// database, with a bearer token per agent.
type instances struct {
	t      *testing.T
	a, b   string // the two endpoints
	tokens map[string]string
}

func twoInstances(t *testing.T, agents ...string) *instances {
	t.Helper()
	if !pgtest.UsePostgres() {
		// It needs PostgreSQL whatever the store under test: run it once,
		// in the PostgreSQL stage of scripts/test.sh.
		t.Skipf("runs with %s=postgres", pgtest.BackendVar)
	}
	db := pgtest.URL(t) // skips without MAILROOM_TEST_POSTGRES
	env := environ(t)
	in := &instances{t: t, tokens: map[string]string{}}
	for _, a := range agents {
		in.tokens[a] = lastLine(mustRunCLI(t, env, "token", "create", "--agent", a, "--db", db))
	}
	// Both start at once: migrations must be safe when they race.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); in.a = serveHTTP(t, env, "--http", "127.0.0.1:0", "--db", db) }()
	go func() { defer wg.Done(); in.b = serveHTTP(t, env, "--http", "127.0.0.1:0", "--db", db) }()
	wg.Wait()
	if in.a == "" || in.b == "" {
		t.FailNow()
	}
	return in
}

// on connects agent to instance endpoint, for test t.
func (in *instances) on(t *testing.T, endpoint, agent string) *session {
	t.Helper()
	s, err := httpSession(t, endpoint, in.tokens[agent], agent+"@"+endpoint)
	if err != nil {
		t.Fatalf("connect %s to %s: %v", agent, endpoint, err)
	}
	return s
}

// try calls a tool and returns its structured result or the error a caller
// would see; safe from any goroutine.
func (s *session) try(tool string, args map[string]any, out any) error {
	res, err := s.call(tool, args)
	if err != nil {
		return fmt.Errorf("%s %s: %w", s.name, tool, err)
	}
	if res.IsError {
		return fmt.Errorf("%s %s(%v): %s", s.name, tool, args, resultText(res))
	}
	if out == nil {
		return nil
	}
	b, _ := json.Marshal(res.StructuredContent)
	return json.Unmarshal(b, out)
}

type drainReceipt struct {
	Status       string `json:"status"`
	MatchedCount int    `json:"matchedCount"`
	ReadCount    int    `json:"readCount"`
	DurableCount int    `json:"durableCount"`
	FailureCount int    `json:"failureCount"`
}

func TestTwoInstancesOnePostgres(t *testing.T) {
	t.Parallel()
	in := twoInstances(t, "alice", "bob", "carol")

	t.Run("a send on one is listed on the other at once", func(t *testing.T) {
		aliceA, bobB := in.on(t, in.a, "alice"), in.on(t, in.b, "bob")
		for i := range 20 {
			r := aliceA.send("@bob", fmt.Sprintf("cross %d", i))
			if _, ok := bobB.list(map[string]any{"limit": 5}).find(r.MessageID); !ok {
				t.Fatalf("send %d on instance A is not in bob's inbox on instance B", i)
			}
			bobB.ok("mark_read", map[string]any{"messageId": r.MessageID}, &map[string]any{})
			if row, _ := in.on(t, in.a, "bob").list(map[string]any{"limit": 5}).find(r.MessageID); row.ReadAt == nil {
				t.Fatalf("bob's read on B is not seen on A")
			}
		}
	})

	t.Run("a drain through a watermark leaves later mail unread", func(t *testing.T) {
		aliceA, bobB := in.on(t, in.a, "alice"), in.on(t, in.b, "bob")
		for range 5 {
			aliceA.send("@bob", "before the watermark")
		}
		var p struct {
			Watermark string `json:"watermark"`
		}
		bobB.ok("list_messages", map[string]any{"unreadOnly": true}, &p)
		late := aliceA.send("@bob", "after the watermark")
		var rc drainReceipt
		bobB.ok("mark_read", map[string]any{"all": true, "through": p.Watermark}, &rc)
		if rc.Status != "read" || rc.MatchedCount != 5 || rc.DurableCount != 5 {
			t.Fatalf("receipt %+v, want the 5 before the watermark", rc)
		}
		if row, ok := bobB.list(map[string]any{"unreadOnly": true}).find(late.MessageID); !ok || row.ReadAt != nil {
			t.Fatalf("the message sent after the watermark was drained")
		}
		bobB.ok("mark_read", map[string]any{"all": true}, &drainReceipt{})
	})

	t.Run("a drain on one while the other sends keeps the snapshot rule", func(t *testing.T) {
		bobB := in.on(t, in.b, "bob")
		const senders, each = 3, 30
		stop := make(chan struct{})
		var mu sync.Mutex
		var before, during []string // receipts before the drain started, and the rest
		drainStarted := false
		var wg sync.WaitGroup
		errs := make(chan error, senders*each)
		for w := range senders {
			wg.Add(1)
			s := in.on(t, in.a, []string{"alice", "carol"}[w%2])
			go func() {
				defer wg.Done()
				for i := range each {
					var r sendReceipt
					if err := s.try("add_message", map[string]any{"to": "@bob", "subject": fmt.Sprintf("w%d-%d", w, i), "body": "b"}, &r); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					if drainStarted {
						during = append(during, r.MessageID)
					} else {
						before = append(before, r.MessageID)
					}
					mu.Unlock()
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		for {
			mu.Lock()
			n := len(before)
			if n >= 10 {
				drainStarted = true
			}
			mu.Unlock()
			if n >= 10 {
				break
			}
		}
		var rc drainReceipt
		bobB.ok("mark_read", map[string]any{"all": true}, &rc)
		mu.Lock()
		after := len(during) // sends that completed before the drain returned, or after
		mu.Unlock()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if rc.Status != "read" || rc.ReadCount != rc.MatchedCount || rc.DurableCount != rc.MatchedCount || rc.MatchedCount < len(before) {
			t.Fatalf("receipt %+v with %d sent before the drain", rc, len(before))
		}
		// Everything sent before the call is read; what the drain did not
		// match stays unread, exactly: nothing is half-read or lost.
		unread := bobB.list(map[string]any{"unreadOnly": true, "limit": 200})
		for _, id := range before {
			if _, ok := unread.find(id); ok {
				t.Fatalf("%s was sent before the drain started but is unread", id)
			}
		}
		total := len(before) + len(during)
		if got := rc.MatchedCount + unread.TotalCount; got != total {
			t.Fatalf("matched %d + unread %d = %d, want the %d sent (%d during the drain)", rc.MatchedCount, unread.TotalCount, got, total, after)
		}
		bobB.ok("mark_read", map[string]any{"all": true}, &drainReceipt{})
	})

	t.Run("a subscriber on one hears of a send on the other, and of nobody else's", func(t *testing.T) {
		bobA, bobUpdates := in.watch(t, in.a, "bob")
		_, carolUpdates := in.watch(t, in.a, "carol")
		aliceB := in.on(t, in.b, "alice")
		for i := range 3 {
			// Mail to carol reaches carol's subscription on A; by the time
			// it has, A has taken that commit in, and bob has heard nothing.
			aliceB.send("@carol", fmt.Sprintf("not for bob %d", i))
			next(t, carolUpdates, "carol")
			if n := len(bobUpdates); n != 0 {
				t.Fatalf("bob was notified %d times of mail to carol", n)
			}
			r := aliceB.send("@bob", fmt.Sprintf("for bob %d", i))
			next(t, bobUpdates, "bob")
			if s := readInbox(t, bobA); len(s.Newest) == 0 || s.Newest[0].MessageID != r.MessageID {
				t.Fatalf("after the notification bob's inbox on A shows %+v, want %s first", s.Newest, r.MessageID)
			}
		}
		// A last round to carol: nothing more for bob.
		aliceB.send("@carol", "still not for bob")
		next(t, carolUpdates, "carol")
		if n := len(bobUpdates); n != 0 {
			t.Fatalf("bob was notified %d more times than he got mail", n)
		}
		bobA.ok("mark_read", map[string]any{"all": true}, &drainReceipt{})
		in.on(t, in.a, "carol").ok("mark_read", map[string]any{"all": true}, &drainReceipt{})
	})

	t.Run("wait_for_mail on one returns mail sent on the other", func(t *testing.T) {
		bobA, aliceB := in.on(t, in.a, "bob"), in.on(t, in.b, "alice")
		since := aliceB.send("@bob", "the starting point")
		type waited struct {
			TimedOut bool  `json:"timedOut"`
			Messages []row `json:"messages"`
		}
		got := make(chan waited, 1)
		errc := make(chan error, 1)
		go func() {
			var w waited
			if err := bobA.try("wait_for_mail", map[string]any{"since": since.MessageID, "timeoutSeconds": 30}, &w); err != nil {
				errc <- err
				return
			}
			got <- w
		}()
		// Mail to someone else does not end bob's wait; his own does.
		aliceB.send("@carol", "not for bob")
		r := aliceB.send("@bob", "wake up")
		select {
		case err := <-errc:
			t.Fatal(err)
		case w := <-got:
			if w.TimedOut || len(w.Messages) != 1 || w.Messages[0].MessageID != r.MessageID {
				t.Fatalf("wait_for_mail on A returned %+v, want only %s sent on B", w, r.MessageID)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("wait_for_mail on A never returned the mail sent on B")
		}
		bobA.ok("mark_read", map[string]any{"all": true}, &drainReceipt{})
		in.on(t, in.a, "carol").ok("mark_read", map[string]any{"all": true}, &drainReceipt{})
	})

	t.Run("8 processes x 500 mixed operations across both instances", func(t *testing.T) {
		const workers, ops = 8, 500
		agents := []string{"alice", "bob", "carol"}
		base := map[string][2]int{} // outbox and inbox totals before the load
		for _, who := range agents {
			var out, inbox page
			s := in.on(t, in.a, who)
			s.ok("list_messages", map[string]any{"box": "outbox", "limit": 1}, &out)
			s.ok("list_messages", map[string]any{"includeArchived": true, "limit": 1}, &inbox)
			base[who] = [2]int{out.TotalCount, inbox.TotalCount}
		}
		// Each worker is this test binary run again as a load client
		// (TestLoadClient), an OS process of its own.
		results := make([]loadResult, workers)
		var wg sync.WaitGroup
		for w := range workers {
			job := loadJob{Endpoint: []string{in.a, in.b}[w%2], Me: agents[w%len(agents)], Agents: agents, Worker: w, Ops: ops}
			job.Token = in.tokens[job.Me]
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[w] = runLoadClient(t, job)
			}()
		}
		wg.Wait()
		sent := map[string]int{}     // successful sends per sender
		received := map[string]int{} // deliveries per recipient
		n := 0
		for w, r := range results {
			sent[agents[w%len(agents)]] += r.Sent
			for to, k := range r.Received {
				received[to] += k
			}
			for _, e := range r.Errors {
				if n++; n <= 5 {
					t.Errorf("worker %d: %s", w, e)
				}
			}
			n += r.MoreErrors
			if r.Ops != ops {
				t.Errorf("worker %d ran %d operations, want %d", w, r.Ops, ops)
			}
		}
		if n > 0 {
			t.Fatalf("%d errors reached callers", n)
		}
		// Counts agree on both instances with what the callers were told.
		for _, who := range agents {
			for _, ep := range []string{in.a, in.b} {
				s := in.on(t, ep, who)
				var out, inbox page
				s.ok("list_messages", map[string]any{"box": "outbox", "limit": 1}, &out)
				s.ok("list_messages", map[string]any{"includeArchived": true, "limit": 1}, &inbox)
				if out.TotalCount-base[who][0] != sent[who] || inbox.TotalCount-base[who][1] != received[who] {
					t.Fatalf("%s on %s: outbox %d, inbox %d (from %v before); the callers sent %d and were delivered %d",
						who, ep, out.TotalCount, inbox.TotalCount, base[who], sent[who], received[who])
				}
			}
		}
	})
}

// watch connects agent to endpoint and subscribes to mailbox://inbox
// (protocol 2025-11-25: resources/subscribe answers once the server holds
// the subscription); the channel receives each
// notifications/resources/updated.
func (in *instances) watch(t *testing.T, endpoint, agent string) (*session, chan string) {
	t.Helper()
	updates := make(chan string, 100)
	cl := gomcp.NewClient(&gomcp.Implementation{Name: "cmd-test-watch-" + agent, Version: "v0"}, &gomcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *gomcp.ResourceUpdatedNotificationRequest) {
			updates <- r.Params.URI
		},
	})
	cs, err := cl.Connect(context.Background(), &gomcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{in.tokens[agent]}}, MaxRetries: -1,
	}, &gomcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect %s to %s: %v", agent, endpoint, err)
	}
	t.Cleanup(func() { cs.Close() })
	if err := cs.Subscribe(context.Background(), &gomcp.SubscribeParams{URI: "mailbox://inbox"}); err != nil {
		t.Fatalf("%s subscribes on %s: %v", agent, endpoint, err)
	}
	return &session{t: t, cs: cs, name: agent + "@" + endpoint, stderr: &lockedBuffer{}}, updates
}

// next waits for one inbox notification.
func next(t *testing.T, updates chan string, who string) {
	t.Helper()
	select {
	case uri := <-updates:
		if uri != "mailbox://inbox" {
			t.Fatalf("%s: updated %q, want mailbox://inbox", who, uri)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no notifications/resources/updated", who)
	}
}

func readInbox(t *testing.T, s *session) (summary struct {
	UnreadCount int   `json:"unreadCount"`
	Newest      []row `json:"newest"`
}) {
	t.Helper()
	res, err := s.cs.ReadResource(context.Background(), &gomcp.ReadResourceParams{URI: "mailbox://inbox"})
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("read mailbox://inbox: %v %+v", err, res)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &summary); err != nil {
		t.Fatal(err)
	}
	return summary
}

// loadClientVar, when set, holds a loadJob: TestLoadClient then runs it
// against a server and prints its loadResult. The 8-process test runs this
// test binary again with it; in a normal run TestLoadClient skips.
const loadClientVar = "MAILROOM_TEST_LOAD_CLIENT"

// loadJob is one load client's work: ops mixed calls as Me on Endpoint.
type loadJob struct {
	Endpoint, Token, Me string
	Agents              []string
	Worker, Ops         int
}

// loadResult is what a load client's callers were told.
type loadResult struct {
	Ops        int
	Sent       int            // successful sends
	Received   map[string]int // deliveries per recipient of those sends
	Errors     []string       // the first few errors that reached the caller
	MoreErrors int            // and how many more
}

const loadResultPrefix = "LOAD-RESULT "

// runLoadClient runs job in a child process and returns its result.
func runLoadClient(t *testing.T, job loadJob) loadResult {
	spec, _ := json.Marshal(job)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLoadClient$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), loadClientVar+"="+string(spec))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, loadResultPrefix); ok {
			var r loadResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Errorf("worker %d: %v", job.Worker, err)
			}
			return r
		}
	}
	t.Errorf("worker %d: load client printed no result (%v)\nstdout: %s\nstderr: %s", job.Worker, err, out, stderr.String())
	return loadResult{Ops: -1}
}

// TestLoadClient is the load client process of the 8-process test: mixed
// calls (40% sends to a random agent, 20% pages, 10% each get, mark some
// read, drain, list_concepts) on one session, each error counted as one
// that reached a caller.
func TestLoadClient(t *testing.T) {
	spec := os.Getenv(loadClientVar)
	if spec == "" {
		t.Skip("a child process of the 8-process test")
	}
	var job loadJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		t.Fatal(err)
	}
	r := loadResult{Received: map[string]int{}}
	fail := func(err error) {
		if len(r.Errors) < 5 {
			r.Errors = append(r.Errors, err.Error())
		} else {
			r.MoreErrors++
		}
	}
	s, err := httpSession(t, job.Endpoint, job.Token, job.Me+"@"+job.Endpoint)
	if err != nil {
		fail(err)
	} else {
		rng := rand.New(rand.NewPCG(uint64(job.Worker), 14))
		var mine []string // ids in this worker's inbox
		for i := range job.Ops {
			r.Ops++
			var err error
			switch op := rng.IntN(10); {
			case op < 4:
				to := job.Agents[rng.IntN(len(job.Agents))]
				var rc sendReceipt
				if err = s.try("add_message", map[string]any{"to": "@" + to, "subject": fmt.Sprintf("%s %d/%d", job.Me, job.Worker, i), "body": "mixed load"}, &rc); err == nil {
					r.Sent++
					r.Received[to]++
				}
			case op < 6:
				var p page
				if err = s.try("list_messages", map[string]any{"limit": 20}, &p); err == nil {
					mine = mine[:0]
					for _, m := range p.Messages {
						mine = append(mine, m.MessageID)
					}
				}
			case op < 7 && len(mine) > 0:
				err = s.try("get_message", map[string]any{"messageId": mine[rng.IntN(len(mine))]}, nil)
			case op < 8 && len(mine) > 0:
				err = s.try("mark_read", map[string]any{"messageId": mine[:min(len(mine), 5)]}, nil)
			case op < 9:
				var rc drainReceipt
				if err = s.try("mark_read", map[string]any{"all": true}, &rc); err == nil && rc.Status == "partial" {
					err = fmt.Errorf("%s: partial drain %+v", job.Me, rc)
				}
			default:
				err = s.try("list_concepts", map[string]any{}, nil)
			}
			if err != nil {
				fail(err)
			}
		}
	}
	b, _ := json.Marshal(r)
	fmt.Printf("\n%s%s\n", loadResultPrefix, b)
}
