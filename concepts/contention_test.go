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

// A batch shares one lease; when working through it would outlast the
// lease, the rest is handed back rather than taken by another process's
// worker mid-batch, so each message is still extracted once.
func TestSlowBatchesAreExtractedOnce(t *testing.T) {
	e := newWorkerEnv(t)
	const n = 10
	for i := range n {
		e.send(t, fmt.Sprintf("subject-%d", i), "Release checklist for the gateway rollout.")
	}
	x := &counting{Extractor: concepts.NewEmbedded(nil), delay: 100 * time.Millisecond, clock: e.clock, calls: map[string]int{}}
	runUntilDone(t, e, x, n, 2, concepts.WorkerOptions{Lease: time.Second, Poll: 20 * time.Millisecond})
}
