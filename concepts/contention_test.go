package concepts_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/concepts"
)

// Under a steady stream of sends from many goroutines the queue still moves:
// the worker gives sends the write lock first, but not forever.
func TestQueueMovesUnderSustainedSends(t *testing.T) {
	e := newWorkerEnv(t)
	e.send(t, "seed", "seed body about WAL checkpoints")
	d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: "load", Body: "load body"}.Draft(0)
	d.OriginSessionID = "SESSION:t"
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := e.s.Send(e.alice, d); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs, err := e.s.ClaimConceptJobs(ctx, "w", time.Minute, 1)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("the worker could not claim while sends kept coming: %v %v", jobs, err)
	}
}

// slow is an extractor that takes d per message and counts calls.
type slow struct {
	concepts.Extractor
	d     time.Duration
	mu    sync.Mutex
	calls map[string]int
}

func (s *slow) Extract(ctx context.Context, doc concepts.Document) ([]mailroom.Concept, error) {
	s.mu.Lock()
	s.calls[doc.Subject]++
	s.mu.Unlock()
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Extractor.Extract(ctx, doc)
}

// A batch shares one lease; when working through it would outlast the
// lease, the rest is handed back rather than taken by another process's
// worker mid-batch, so each message is still extracted once.
func TestSlowBatchesAreExtractedOnce(t *testing.T) {
	e := newWorkerEnv(t)
	const n = 10
	for i := range n {
		e.send(t, fmt.Sprintf("subject-%d", i), "Release checklist for the gateway rollout.")
	}
	x := &slow{Extractor: concepts.NewEmbedded(nil), d: 100 * time.Millisecond, calls: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 2 {
		w := concepts.NewWorker(e.s, x, concepts.WorkerOptions{Name: fmt.Sprint("w", i), Lease: time.Second, Poll: 20 * time.Millisecond})
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(ctx) }()
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		left, _ := e.s.ClaimConceptJobs(context.Background(), "probe", time.Nanosecond, n)
		x.mu.Lock()
		got := len(x.calls)
		x.mu.Unlock()
		if len(left) == 0 && got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs left, %d extracted", len(left), got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	for s, c := range x.calls {
		if c != 1 {
			t.Errorf("%s extracted %d times", s, c)
		}
	}
}
