package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

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

	t.Run("8 clients x 500 mixed operations across both instances", func(t *testing.T) {
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
		var mu sync.Mutex
		sent := map[string]int{}     // successful sends per sender
		received := map[string]int{} // deliveries per recipient
		var wg sync.WaitGroup
		errs := make(chan error, workers*ops)
		for w := range workers {
			me := agents[w%len(agents)]
			s := in.on(t, []string{in.a, in.b}[w%2], me)
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 14))
				var mine []string // ids in this worker's inbox
				for i := range ops {
					var err error
					switch op := rng.IntN(10); {
					case op < 4:
						to := agents[rng.IntN(len(agents))]
						var r sendReceipt
						if err = s.try("add_message", map[string]any{"to": "@" + to, "subject": fmt.Sprintf("%s %d/%d", me, w, i), "body": "mixed load"}, &r); err == nil {
							mu.Lock()
							sent[me]++
							received[to]++
							mu.Unlock()
						}
					case op < 6:
						var p page
						if err = s.try("list_messages", map[string]any{"limit": 20}, &p); err == nil {
							mine = mine[:0]
							for _, r := range p.Messages {
								mine = append(mine, r.MessageID)
							}
						}
					case op < 7 && len(mine) > 0:
						err = s.try("get_message", map[string]any{"messageId": mine[rng.IntN(len(mine))]}, nil)
					case op < 8 && len(mine) > 0:
						err = s.try("mark_read", map[string]any{"messageId": mine[:min(len(mine), 5)]}, nil)
					case op < 9:
						var rc drainReceipt
						if err = s.try("mark_read", map[string]any{"all": true}, &rc); err == nil && rc.Status == "partial" {
							err = fmt.Errorf("%s: partial drain %+v", me, rc)
						}
					default:
						err = s.try("list_concepts", map[string]any{}, nil)
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		n := 0
		for err := range errs {
			if n++; n <= 5 {
				t.Error(err)
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
