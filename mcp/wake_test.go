package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/mcp"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// watcher is one identity's MCP session with its server, its resource
// notifications counted.
type watcher struct {
	*client
	srv     *mcp.Server
	updates chan string
}

// watch connects name over an in-memory transport speaking protocol
// version (empty: the go-sdk's newest, which routes subscriptions through
// subscriptions/listen).
func (e *env) watch(name, version string) *watcher {
	e.t.Helper()
	return e.watchWith(name, version, mcp.Options{})
}

// watchWith is watch with server options (Identity is set here).
func (e *env) watchWith(name, version string, opts mcp.Options) *watcher {
	e.t.Helper()
	id, ok := e.ids[name]
	if !ok {
		id = e.agent(name)
	}
	ctx := context.Background()
	opts.Identity = &id
	srv := mcp.NewServer(e.store, opts)
	ct, st := gomcp.NewInMemoryTransports()
	ss, err := srv.MCPServer().Connect(ctx, st, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	w := &watcher{srv: srv, updates: make(chan string, 100)}
	cl := gomcp.NewClient(&gomcp.Implementation{Name: "watch-" + name, Version: "v0"}, &gomcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *gomcp.ResourceUpdatedNotificationRequest) {
			w.updates <- r.Params.URI
		},
	})
	cs, err := cl.Connect(ctx, ct, &gomcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	w.client = &client{t: e.t, session: &session{cs: cs, name: name}}
	return w
}

func (w *watcher) subscribe() {
	w.t.Helper()
	// Under 2026-07-28 the go-sdk client's Subscribe opens a
	// subscriptions/listen stream and returns once it ends: run it aside
	// and wait for the server to hold the subscription.
	go w.cs.Subscribe(context.Background(), &gomcp.SubscribeParams{URI: mcp.InboxURI})
	w.waiters(1)
}

// waiters waits until the server holds n inbox listeners. It polls a
// counter the server exposes; there is no event to wait on.
func (w *watcher) waiters(n int) {
	w.t.Helper()
	// Fails once the count stops moving for 30 s: hundreds of calls under
	// the race detector on a loaded machine take longer than that to all
	// arrive, but each keeps the count moving.
	last, deadline := -1, time.Time{}
	for got := w.srv.Waiters(); got != n; got = w.srv.Waiters() {
		if got != last {
			last, deadline = got, time.Now().Add(30*time.Second)
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("server holds %d listeners, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (w *watcher) update() {
	w.t.Helper()
	select {
	case uri := <-w.updates:
		if uri != mcp.InboxURI {
			w.t.Fatalf("updated %q, want %s", uri, mcp.InboxURI)
		}
	case <-time.After(10 * time.Second):
		w.t.Fatal("no notifications/resources/updated")
	}
}

func (w *watcher) readInbox() (summary struct {
	UnreadCount int     `json:"unreadCount"`
	Watermark   *string `json:"watermark"`
	Newest      []row   `json:"newest"`
}) {
	w.t.Helper()
	res, err := w.cs.ReadResource(context.Background(), &gomcp.ReadResourceParams{URI: mcp.InboxURI})
	if err != nil {
		w.t.Fatal(err)
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" {
		w.t.Fatalf("contents = %+v", res.Contents)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &summary); err != nil {
		w.t.Fatal(err)
	}
	return summary
}

func TestInboxResourceIsListedAndRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.agent("alice")
	bob := e.watch("bob", "")
	if caps := bob.cs.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe {
		t.Fatalf("capabilities.resources = %+v, want subscribe: true", caps.Resources)
	}
	res, err := bob.cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resources) != 1 || res.Resources[0].URI != "mailbox://inbox" {
		t.Fatalf("resources = %+v", res.Resources)
	}
	if s := bob.readInbox(); s.UnreadCount != 0 || s.Watermark != nil || len(s.Newest) != 0 || s.Newest == nil {
		t.Fatalf("empty inbox summary = %+v", s)
	}
	var ids []string
	for range 12 {
		ids = append(ids, e.storeSend("alice", []string{"@bob"}, "hello", "b"))
	}
	bob.markRead(ids[11])
	s := bob.readInbox()
	if s.UnreadCount != 11 || s.Watermark == nil || *s.Watermark != ids[11] || len(s.Newest) != 10 || s.Newest[0].MessageID != ids[11] || s.Newest[0].ReadAt == nil {
		t.Fatalf("summary = unread %d, watermark %v, %d newest (first %+v)", s.UnreadCount, s.Watermark, len(s.Newest), s.Newest[0])
	}
	if _, err := bob.cs.ReadResource(context.Background(), &gomcp.ReadResourceParams{URI: "mailbox://outbox"}); err == nil {
		t.Fatal("reading an unknown resource succeeded")
	}
}

func TestInboxSubscriptionNotifiesAcrossProcesses(t *testing.T) {
	for _, version := range []string{"2025-11-25", ""} {
		name := version
		if name == "" {
			name = "2026-07-28 subscriptions/listen"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.agent("alice")
			e.agent("carol")
			bob := e.watch("bob", version)
			if got := bob.cs.InitializeResult().ProtocolVersion; version == "" && got < "2026-07-28" {
				t.Fatalf("negotiated %s; the listen path needs 2026-07-28", got)
			}
			bob.subscribe()
			// Another process sends to carol, then to bob: bob hears of
			// his own mail only.
			e.seed("alice", []string{"@carol"}, 1)
			e.seed("alice", []string{"@bob"}, 1)
			bob.update()
			if s := bob.readInbox(); s.UnreadCount != 1 {
				t.Fatalf("unread = %d after one message", s.UnreadCount)
			}
			// A burst of 20 sends arrives as far fewer notifications.
			e.seed("alice", []string{"@bob"}, 20)
			bob.update()
			for bob.readInbox().UnreadCount != 21 {
				bob.update()
			}
			if n := len(bob.updates); n > 5 {
				t.Fatalf("%d notifications still queued after a burst of 20: not coalesced", n)
			}
			// A role it holds, and a change of its unread set, notify too.
			e.grant("bob", "triage")
			drainUpdates(bob)
			e.seed("carol", []string{"role:triage"}, 1)
			bob.update()
			drainUpdates(bob)
			bob.drain(map[string]any{"all": true, "includeRoles": true})
			bob.update()
		})
	}
}

func drainUpdates(w *watcher) {
	for {
		select {
		case <-w.updates:
		default:
			return
		}
	}
}

func TestInboxSubscriptionEndsWithTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bob := e.watch("bob", "2025-11-25")
	bob.subscribe()
	if err := bob.cs.Unsubscribe(context.Background(), &gomcp.UnsubscribeParams{URI: mcp.InboxURI}); err != nil {
		t.Fatal(err)
	}
	bob.waiters(0)
	bob.subscribe()
	bob.cs.Close()
	bob.waiters(0)
}

type newMail struct {
	Messages  []row   `json:"messages"`
	Watermark *string `json:"watermark"`
	TimedOut  bool    `json:"timedOut"`
}

func TestWaitForMailReturnsMailFromAnotherProcess(t *testing.T) {
	e := newEnv(t)
	e.agent("alice")
	bob := e.watch("bob", "")
	old := e.storeSend("alice", []string{"@bob"}, "old", "b")
	done := make(chan newMail, 1)
	go func() {
		var m newMail
		bob.ok("wait_for_mail", map[string]any{"timeoutSeconds": 60}, &m)
		done <- m
	}()
	bob.waiters(1)
	ids := e.seed("alice", []string{"@bob"}, 1)
	m := <-done
	if m.TimedOut || len(m.Messages) != 1 || m.Messages[0].MessageID != ids[0] || m.Messages[0].ReadAt != nil || m.Watermark == nil || *m.Watermark != ids[0] {
		t.Fatalf("wait_for_mail = %+v, want only %s (not the older %s), unread", m, ids[0], old)
	}
	if u := bob.unread(); len(u) != 2 {
		t.Fatalf("unread after wait_for_mail = %v: it must never mark read", u)
	}
	bob.waiters(0)
	// since: mail after a given message, at once when it is there; oldest
	// first.
	bob.ok("wait_for_mail", map[string]any{"since": old, "timeoutSeconds": 1}, &m)
	if m.TimedOut || len(m.Messages) != 1 || m.Messages[0].MessageID != ids[0] {
		t.Fatalf("wait_for_mail since the old one = %+v", m)
	}
}

func TestWaitForMailTimesOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.agent("alice")
	// A second of timeoutSeconds lasts 20 ms here (mcp.Options.WaitSecond).
	const second = 20 * time.Millisecond
	bob := e.watchWith("bob", "", mcp.Options{WaitSecond: second})
	id := e.storeSend("alice", []string{"@bob"}, "already here", "b")
	start := time.Now()
	var m newMail
	bob.ok("wait_for_mail", map[string]any{"timeoutSeconds": 3, "includeRoles": false}, &m)
	if !m.TimedOut || len(m.Messages) != 0 || m.Messages == nil || m.Watermark == nil || *m.Watermark != id {
		t.Fatalf("wait_for_mail = %+v, want timedOut with no messages and watermark %s", m, id)
	}
	if d := time.Since(start); d < 3*second {
		t.Fatalf("timed out after %v, before timeoutSeconds (3 x %v)", d, second)
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"timeoutSeconds": 0}, "timeoutSeconds must be between 1 and 60 (got 0)"},
		{map[string]any{"timeoutSeconds": 61}, "timeoutSeconds must be between 1 and 60 (got 61)"},
		{map[string]any{"since": "MESSAGE:nope"}, "Message not found: MESSAGE:nope"},
		{map[string]any{"until": 1}, "Unknown argument 'until'"},
	} {
		bob.failWith("wait_for_mail", tc.args, tc.want)
	}
}

// TestWaitForMailCancelledCallsLeaveNoWaiter counts only the goroutines it
// started itself, directly or through what they started (a pprof label is
// inherited by every goroutine a labelled one creates), so other tests may
// run beside it.
func TestWaitForMailCancelledCallsLeaveNoWaiter(t *testing.T) {
	t.Parallel()
	label := pprof.Labels("test", t.Name())
	pprof.Do(context.Background(), label, func(context.Context) { cancelledCallsLeaveNoWaiter(t) })
}

func cancelledCallsLeaveNoWaiter(t *testing.T) {
	e := newEnv(t)
	bob := e.watch("bob", "")
	// One call first, so that the store's statements are prepared: the
	// thousand then measure waiting, not a thousand first-time parses.
	warm, stop := context.WithCancel(context.Background())
	go func() { bob.waiters(1); stop() }()
	bob.cs.CallTool(warm, &gomcp.CallToolParams{Name: "wait_for_mail", Arguments: map[string]any{"timeoutSeconds": 60}})
	bob.waiters(0)
	mine := func() int { return labelledGoroutines(t, "test", t.Name()) }
	before := mine()
	if before < 5 {
		t.Fatalf("only %d goroutines carry this test's label: the count would see no leak", before)
	}
	const n = cancelledCalls
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bob.cs.CallTool(ctx, &gomcp.CallToolParams{Name: "wait_for_mail", Arguments: map[string]any{"timeoutSeconds": 60}})
		}()
	}
	bob.waiters(n)
	if during := mine(); during < before+n {
		t.Fatalf("%d labelled goroutines with %d calls waiting (%d before): the count misses the calls", during, n, before)
	}
	cancel()
	wg.Wait()
	bob.waiters(0)
	if hub, ok := e.store.(interface{ Changes() *mailroom.ChangeHub }); ok {
		if n := hub.Changes().Len(); n != 0 {
			t.Fatalf("%d store subscriptions left with no waiter", n)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for mine() > before+20 {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d before, %d after %d cancelled calls", before, mine(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// labelledGoroutines counts the goroutines whose pprof labels include
// key=value, from the text goroutine profile (each stack's count line is
// followed by its labels).
func labelledGoroutines(t *testing.T, key, value string) int {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(map[string]string{key: value})
	pair := strings.Trim(string(want), "{}")
	total, count := 0, 0
	for _, line := range strings.Split(b.String(), "\n") {
		if c, _, ok := strings.Cut(line, " @ "); ok {
			count, _ = strconv.Atoi(c)
			continue
		}
		if labels, ok := strings.CutPrefix(line, "# labels: "); ok && strings.Contains(labels, pair) {
			total += count
		}
	}
	return total
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// The go-sdk logs every resource notification it sends; at one per
// subscriber per commit that line is Debug, not Info (an operator's stderr
// at the default level sees none), while its other lines keep their level.
func TestResourceNotificationsLogAtDebug(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	bob := e.watchWith("bob", "2025-11-25", mcp.Options{Logger: logger})
	// Under 2025-11-25 Subscribe returns once the server holds the
	// subscription with its baseline, so the send below is after it.
	if err := bob.cs.Subscribe(context.Background(), &gomcp.SubscribeParams{URI: mcp.InboxURI}); err != nil {
		t.Fatal(err)
	}
	e.as("alice").sendTo("@bob", "hello")
	bob.update()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "resource updated notification sent") {
		if time.Now().After(deadline) {
			t.Fatalf("no notification line logged:\n%s", logs.String())
		}
		time.Sleep(time.Millisecond)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "resource updated notification sent") && !strings.Contains(line, "level=DEBUG") {
			t.Errorf("notification logged above Debug: %s", line)
		}
		if strings.Contains(line, "resource subscribed") && !strings.Contains(line, "level=INFO") {
			t.Errorf("the go-sdk's other lines changed level: %s", line)
		}
	}
	if !strings.Contains(logs.String(), "resource subscribed") {
		t.Fatalf("the go-sdk's subscribe line is missing:\n%s", logs.String())
	}
}
