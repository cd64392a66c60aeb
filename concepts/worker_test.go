package concepts_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/concepts"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/storetest"
)

type workerEnv struct {
	s          *sqlite.Store
	clock      *storetest.Clock
	alice, bob context.Context
}

func newWorkerEnv(t *testing.T) workerEnv {
	t.Helper()
	ctx := context.Background()
	clock := storetest.NewClock()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "w.db"), sqlite.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, _ := s.EnsureAgent(ctx, "alice")
	b, _ := s.EnsureAgent(ctx, "bob")
	return workerEnv{s: s, clock: clock, alice: mailroom.WithCaller(ctx, a), bob: mailroom.WithCaller(ctx, b)}
}

func (e workerEnv) send(t *testing.T, subject, body string) string {
	t.Helper()
	d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: subject, Body: body}.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	d.OriginSessionID = "SESSION:t"
	r, err := e.s.Send(e.alice, d)
	if err != nil {
		t.Fatal(err)
	}
	return r.MessageID
}

func (e workerEnv) concepts(t *testing.T, id string) []mailroom.Concept {
	t.Helper()
	m, err := e.s.Get(e.bob, id)
	if err != nil {
		t.Fatal(err)
	}
	return m.TaggedConcepts
}

func (e workerEnv) jobsLeft(t *testing.T) int {
	t.Helper()
	n, err := e.s.PendingConceptJobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// counting wraps an extractor and counts calls per subject.
type counting struct {
	concepts.Extractor
	mu    sync.Mutex
	calls map[string]int
	fail  atomic.Int32     // fail this many calls first
	delay time.Duration    // how long each call takes, like a model would,
	clock *storetest.Clock // on this clock
}

func (c *counting) extracted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// runUntilDone runs workers with opts over e's queue until all n messages
// were extracted and no job is left, then stops them and requires that
// each message was extracted exactly once.
func runUntilDone(t *testing.T, e workerEnv, x *counting, n, workers int, opts concepts.WorkerOptions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range workers {
		o := opts
		o.Name = fmt.Sprint("w", i)
		o.Now = e.clock.Now
		w := concepts.NewWorker(e.s, x, o)
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(ctx) }()
	}
	deadline := time.Now().Add(20 * time.Second)
	for x.extracted() < n || e.jobsLeft(t) > 0 {
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			t.Fatalf("%d of %d extracted, %d jobs left", x.extracted(), n, e.jobsLeft(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	for subject, c := range x.calls {
		if c != 1 {
			t.Errorf("%s extracted %d times", subject, c)
		}
	}
}

func (c *counting) Extract(ctx context.Context, doc concepts.Document) ([]mailroom.Concept, error) {
	c.mu.Lock()
	c.calls[doc.Subject]++
	c.mu.Unlock()
	if c.fail.Add(-1) >= 0 {
		return nil, errors.New("model unreachable")
	}
	if c.clock != nil {
		c.clock.Advance(c.delay) // a model's time, without the wait
	}
	return c.Extractor.Extract(ctx, doc)
}

func TestWorkerTagsQueuedMessages(t *testing.T) {
	e := newWorkerEnv(t)
	id := e.send(t, "WAL checkpoint starvation", "The WAL checkpoint starves readers when eight writers hold the lock. Checkpoint tuning next.")
	w := concepts.NewWorker(e.s, concepts.NewEmbedded(e.s), concepts.WorkerOptions{Poll: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	start := time.Now()
	for len(e.concepts(t, id)) == 0 {
		if time.Since(start) > 10*time.Second {
			t.Fatal("no concepts after 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("concepts after %v: %v", time.Since(start), e.concepts(t, id))
	found := false
	for _, c := range e.concepts(t, id) {
		found = found || strings.Contains(c.ID, "checkpoint")
	}
	if !found {
		t.Fatalf("expected the WAL checkpoint among %v", e.concepts(t, id))
	}
	df, total, err := e.s.DocFreq(context.Background(), concepts.Terms(concepts.Document{Subject: "WAL checkpoint starvation"}))
	if err != nil || total != 1 || len(df) == 0 {
		t.Fatalf("document frequencies not recorded: %v %d %v", df, total, err)
	}
}

func TestWorkerRetriesFailures(t *testing.T) {
	e := newWorkerEnv(t)
	id := e.send(t, "Billing webhook retries", "Stripe webhook retries double-charge customers; idempotency keys fix it.")
	x := &counting{Extractor: concepts.NewEmbedded(nil), calls: map[string]int{}}
	x.fail.Store(2)
	w := concepts.NewWorker(e.s, x, concepts.WorkerOptions{MaxBackoff: time.Minute})
	ctx := context.Background()
	for i := 0; len(e.concepts(t, id)) == 0; i++ {
		if i > 5 {
			t.Fatal("never completed")
		}
		if _, err := w.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if worked, err := w.Step(ctx); worked || err != nil {
			t.Fatalf("a failed job was retried before its backoff: %v %v", worked, err)
		}
		e.clock.Advance(time.Minute)
	}
	if n := x.calls["Billing webhook retries"]; n != 3 {
		t.Fatalf("extracted %d times, want 2 failures and 1 success", n)
	}
}

// A worker that dies holding a job: after its lease runs out, another worker
// (as after a restart) takes the job and finishes it.
func TestWorkerResumesAfterCrash(t *testing.T) {
	e := newWorkerEnv(t)
	id := e.send(t, "Flaky integration test", "The payments integration test flakes on CI because of a shared port.")
	ctx := context.Background()
	jobs, err := e.s.ClaimConceptJobs(ctx, "crashed-worker", 500*time.Millisecond, 1)
	if err != nil || len(jobs) != 1 || jobs[0].MessageID != id {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	job := jobs[0]
	// The crashed worker never completes. A new process starts a worker.
	w := concepts.NewWorker(e.s, concepts.NewEmbedded(e.s), concepts.WorkerOptions{})
	if worked, err := w.Step(ctx); worked || err != nil {
		t.Fatalf("took a leased job: %v %v", worked, err)
	}
	e.clock.Advance(550 * time.Millisecond)
	if worked, err := w.Step(ctx); !worked || err != nil {
		t.Fatalf("did not resume the abandoned job: %v %v", worked, err)
	}
	if len(e.concepts(t, id)) == 0 {
		t.Fatal("no concepts after resuming")
	}
	lost, err := e.s.CompleteConceptJobs(ctx, []mailroom.ConceptResult{{Job: job, Concepts: []mailroom.Concept{{ID: "CONCEPT:late", Name: "late"}}, Source: "x"}})
	if err != nil || len(lost) != 1 {
		t.Fatalf("the crashed worker's late completion was accepted: %v %v", lost, err)
	}
}

// Many workers on one queue: every job is extracted exactly once.
func TestWorkersShareQueueOnce(t *testing.T) {
	e := newWorkerEnv(t)
	const n = 60
	for i := range n {
		e.send(t, "subject "+string(rune('a'+i%26))+string(rune('a'+i/26)), "Release checklist for the gateway rollout.")
	}
	x := &counting{Extractor: concepts.NewEmbedded(nil), calls: map[string]int{}}
	runUntilDone(t, e, x, n, 4, concepts.WorkerOptions{Poll: 5 * time.Millisecond})
}
