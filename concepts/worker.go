package concepts

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/mailroom/mailroom"
)

// Queue is the part of a store the worker needs.
type Queue interface {
	ClaimConceptJob(ctx context.Context, worker string, lease time.Duration) (mailroom.ConceptJob, bool, error)
	CompleteConceptJob(ctx context.Context, job mailroom.ConceptJob, concepts []mailroom.Concept, source string, terms []string) error
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
	Logger     *slog.Logger
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
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
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
		case <-timer.C:
		}
	}
}

// Step claims and processes one job. worked is false when none was due.
func (w *Worker) Step(ctx context.Context) (worked bool, err error) {
	job, ok, err := w.q.ClaimConceptJob(ctx, w.opts.Name, w.opts.Lease)
	if err != nil || !ok {
		return false, err
	}
	doc := Document{Subject: job.Subject, Body: job.Body}
	cs, xerr := w.x.Extract(ctx, doc)
	if xerr != nil {
		if ctx.Err() != nil {
			// Shutting down: hand the job back now rather than leave it
			// leased until the lease runs out.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			return true, w.q.RetryConceptJob(rctx, job, "worker stopped", 0)
		}
		delay := w.backoff(job.Attempts)
		w.opts.Logger.Warn("concept extraction failed; will retry", "message", job.MessageID, "attempt", job.Attempts, "retryIn", delay, "err", xerr)
		return true, w.q.RetryConceptJob(ctx, job, xerr.Error(), delay)
	}
	err = w.q.CompleteConceptJob(ctx, job, cs, w.x.Name(), Terms(doc))
	if mailroom.ErrorCode(err) == mailroom.ECONFLICT {
		// Our lease ran out and another worker owns the job now.
		w.opts.Logger.Warn("concept job lease lost", "message", job.MessageID)
		return true, nil
	}
	return true, err
}

func (w *Worker) backoff(attempt int) time.Duration {
	d := time.Second << min(attempt, 20)
	return min(d, w.opts.MaxBackoff)
}
