package concepts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/mailroom/mailroom"
)

// Queue is the part of a store the worker needs.
type Queue interface {
	ClaimConceptJobs(ctx context.Context, worker string, lease time.Duration, max int) ([]mailroom.ConceptJob, error)
	CompleteConceptJobs(ctx context.Context, results []mailroom.ConceptResult) (lost []mailroom.ConceptJob, err error)
	RetryConceptJob(ctx context.Context, job mailroom.ConceptJob, reason string, after time.Duration) error
}

// WorkerOptions configure a Worker. Zero fields take defaults.
type WorkerOptions struct {
	// Name identifies this worker's leases; host-pid-time if empty.
	Name string
	// Lease is how long a claimed job is this worker's; it must outlast one
	// extraction (the Ollama timeout plus the fallback). Default 2 minutes.
	Lease time.Duration
	// Poll is how often an idle worker looks for jobs other processes
	// queued. Default 250 ms; Notify wakes it at once for this process's.
	Poll time.Duration
	// MaxBackoff caps the retry delay after failures. Default 10 minutes.
	MaxBackoff time.Duration
	// Batch is how many jobs one claim takes and one commit completes, so
	// the worker takes the write lock twice per batch rather than twice per
	// message. Default 32.
	Batch int
	// Settle is how long a woken worker lets a burst of sends gather into
	// one batch before it claims. Default 25 ms; it keeps the worker's
	// commits from interleaving with every send.
	Settle time.Duration
	// Now is the worker's clock for its leases; the wall clock when nil.
	// Tests share one with the store instead of sleeping.
	Now    func() time.Time
	Logger *slog.Logger
}

// Worker works the concept extraction queue off the send path: a send only
// queues a job; the worker extracts and tags in the background, and any
// number of workers in any number of processes may share one queue.
type Worker struct {
	q    Queue
	x    Extractor
	opts WorkerOptions
	wake chan struct{}
}

// NewWorker returns a worker that runs x over q's jobs.
func NewWorker(q Queue, x Extractor, opts WorkerOptions) *Worker {
	if opts.Name == "" {
		host, _ := os.Hostname()
		opts.Name = fmt.Sprintf("%s-%d-%d", host, os.Getpid(), time.Now().UnixNano())
	}
	if opts.Lease <= 0 {
		opts.Lease = 2 * time.Minute
	}
	if opts.Poll <= 0 {
		opts.Poll = 250 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Minute
	}
	if opts.Batch <= 0 {
		opts.Batch = 32
	}
	if opts.Settle <= 0 {
		opts.Settle = 25 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Worker{q: q, x: x, opts: opts, wake: make(chan struct{}, 1)}
}

// Notify tells the worker a job was queued. It never blocks.
func (w *Worker) Notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run works the queue until ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		worked, err := w.Step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			w.opts.Logger.Error("concept worker", "err", err)
		}
		if worked {
			continue
		}
		timer.Reset(w.opts.Poll)
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
			timer.Reset(w.opts.Settle)
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
		case <-timer.C:
		}
	}
}

// Step claims and processes one batch of jobs. worked is false when none
// was due.
func (w *Worker) Step(ctx context.Context) (worked bool, err error) {
	claimed := w.opts.Now()
	jobs, err := w.q.ClaimConceptJobs(ctx, w.opts.Name, w.opts.Lease, w.opts.Batch)
	if err != nil || len(jobs) == 0 {
		return false, err
	}
	// Whatever happens below, finished work is stored and unfinished jobs
	// are handed back at once, even while shutting down.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	results := make([]mailroom.ConceptResult, 0, len(jobs))
	handBack := func(rest []mailroom.ConceptJob, reason string) {
		for _, j := range rest {
			w.q.RetryConceptJob(sctx, j, reason, 0)
		}
	}
	for i, job := range jobs {
		// The batch shares one lease: hand the rest back before it can
		// run out, so no other worker takes a job this one still holds.
		if w.opts.Now().Sub(claimed) > w.opts.Lease/2 {
			handBack(jobs[i:], "lease half spent")
			break
		}
		doc := Document{Subject: job.Subject, Body: job.Body}
		cs, source, xerr := w.extract(ctx, doc)
		if xerr == nil {
			results = append(results, mailroom.ConceptResult{Job: job, Concepts: cs, Source: source, Terms: Terms(doc)})
			continue
		}
		if ctx.Err() != nil {
			handBack(jobs[i:], "worker stopped")
			break
		}
		delay := w.backoff(job.Attempts)
		w.opts.Logger.Warn("concept extraction failed; will retry", "message", job.MessageID, "attempt", job.Attempts, "retryIn", delay, "err", xerr)
		if err := w.q.RetryConceptJob(sctx, job, xerr.Error(), delay); err != nil && mailroom.ErrorCode(err) != mailroom.ECONFLICT {
			handBack(jobs[i+1:], "worker error")
			return true, errors.Join(err, w.complete(sctx, results))
		}
	}
	return true, w.complete(sctx, results)
}

// extract runs the extractor and names the one that answered.
func (w *Worker) extract(ctx context.Context, doc Document) ([]mailroom.Concept, string, error) {
	if s, ok := w.x.(Sourced); ok {
		return s.ExtractFrom(ctx, doc)
	}
	cs, err := w.x.Extract(ctx, doc)
	return cs, w.x.Name(), err
}

// completeChunk bounds one completion transaction, so a send that arrives
// meanwhile waits for a few messages' tags, not a whole batch's.
const completeChunk = 8

func (w *Worker) complete(ctx context.Context, results []mailroom.ConceptResult) error {
	for len(results) > 0 {
		n := min(len(results), completeChunk)
		lost, err := w.q.CompleteConceptJobs(ctx, results[:n])
		for _, job := range lost {
			// Our lease ran out and another worker owns the job now.
			w.opts.Logger.Warn("concept job lease lost", "message", job.MessageID)
		}
		if err != nil {
			return err
		}
		results = results[n:]
	}
	return nil
}

func (w *Worker) backoff(attempt int) time.Duration {
	d := time.Second << min(attempt, 20)
	return min(d, w.opts.MaxBackoff)
}
