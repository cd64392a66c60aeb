package sqlite

import (
	"context"
	"fmt"
	"sync"

	"github.com/mailroom/mailroom"
)

// Group commit. A send's cost is dominated by its commit: with
// synchronous=FULL every commit writes its WAL frames and fsyncs the log
// before the receipt may say durable. Sends that arrive while another write
// holds the lock queue up; whoever takes the lock next commits every queued
// send in one transaction, each in its own savepoint (so one send's error
// is its own and rolls back only its rows), with one change-log row and one
// fsync for all of them. Each sender gets its receipt only after that
// commit. Hand-written because database/sql has no notion of it; measured
// against the plain queue and a one-connection writer pool in
// docs/benchmarks.md (issue 13).

// writeMode selects how this process's writers are serialised; only the
// benchmarks comparing them set anything but the default.
type writeMode int

const (
	writeGroup writeMode = iota // the write queue, with group commit for sends
	writeQueue                  // the write queue, one transaction per write
	writePool                   // no queue: a one-connection *sql.DB for writes
)

// maxGroup bounds how many writes share one transaction; a leader with a
// longer queue commits in several.
const maxGroup = 128

// commitGroup holds the grouped writes waiting for a leader.
type commitGroup struct {
	mu     sync.Mutex
	queued []*groupWrite
}

// groupWrite is one grouped write waiting for its commit.
type groupWrite struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx *ptx) error
	err  error
	done chan struct{} // closed once err is final
}

// writeGrouped is write for a write that may share its transaction with
// other grouped writes (Send). fn gets the context its statements must use:
// its own caller's while it runs alone, one without cancellation when it
// shares the transaction (an interrupted statement would roll back the
// others' writes too; a grouped write is bounded by its arguments, and a
// caller that has gone before its turn is not run). fn must leave nothing
// behind outside the transaction but its result, since a failed group is
// run again one write at a time.
func (s *Store) writeGrouped(ctx context.Context, fn func(ctx context.Context, tx *ptx) error) error {
	if s.mode != writeGroup {
		return s.write(ctx, func(tx *ptx) error { return fn(ctx, tx) })
	}
	w := &groupWrite{ctx: ctx, fn: fn, done: make(chan struct{})}
	s.group.mu.Lock()
	s.group.queued = append(s.group.queued, w)
	s.group.mu.Unlock()
	s.fgWaiting.Add(1)
	select {
	case <-w.done: // a leader committed it
		s.fgWaiting.Add(-1)
		return w.err
	case s.wlock <- struct{}{}:
	}
	s.fgWaiting.Add(-1)
	defer s.unlock()
	for {
		select {
		case <-w.done: // committed by the leader before us
			return w.err
		default:
		}
		s.group.mu.Lock()
		n := min(len(s.group.queued), maxGroup)
		batch := s.group.queued[:n:n]
		s.group.queued = s.group.queued[n:]
		s.group.mu.Unlock()
		s.publish(s.commitBatch(batch))
	}
}

// commitBatch commits batch (the caller holds wlock), sets each write's
// error and closes its done, and returns what the committed writes touched.
func (s *Store) commitBatch(batch []*groupWrite) mailroom.Change {
	var c mailroom.Change
	live := make([]*groupWrite, 0, len(batch))
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.err = fmt.Errorf("begin: %w", err) // as BeginTx says it
			close(w.done)
			continue
		}
		live = append(live, w)
	}
	if len(live) > 1 {
		gc, err := s.inGroupTx(live)
		if err == nil {
			for _, w := range live {
				close(w.done)
			}
			return gc
		}
		// The shared transaction failed as a whole: run each write alone,
		// so that whatever failed fails only its own caller.
		s.log.Debug("group commit failed; retrying its writes one by one", "writes", len(live), "err", err)
	}
	for _, w := range live {
		wc, err := s.inTx(w.ctx, func(tx *ptx) error { return w.fn(w.ctx, tx) })
		w.err = err
		if err == nil {
			c.Merge(wc)
		}
		close(w.done)
	}
	return c
}

// inGroupTx runs live in one immediate transaction, each write in a
// savepoint, and commits. A write whose fn fails is rolled back to its
// savepoint and keeps its error; any other failure fails the transaction.
func (s *Store) inGroupTx(live []*groupWrite) (mailroom.Change, error) {
	s.writing()
	db := s.writer()
	bg := context.WithoutCancel(live[0].ctx)
	tx, err := db.BeginTx(bg, nil)
	if err != nil {
		return mailroom.Change{}, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	ctl := &ptx{Tx: tx, now: s.now} // savepoints, untraced
	var c mailroom.Change
	for _, w := range live {
		w.err = nil
		ctx := context.WithoutCancel(w.ctx)
		if _, err := ctl.ExecContext(ctx, `SAVEPOINT grouped`); err != nil {
			return mailroom.Change{}, err
		}
		t := &ptx{Tx: tx, now: s.now, trace: s.hooks.Statement}
		if err := w.fn(ctx, t); err != nil {
			w.err = err
			if _, err := ctl.ExecContext(ctx, `ROLLBACK TO grouped`); err != nil {
				return mailroom.Change{}, err
			}
		} else {
			c.Merge(t.touched())
		}
		if _, err := ctl.ExecContext(ctx, `RELEASE grouped`); err != nil {
			return mailroom.Change{}, err
		}
	}
	if s.logChanges {
		if err := s.logChange(bg, ctl, c); err != nil {
			return mailroom.Change{}, fmt.Errorf("change log: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return mailroom.Change{}, fmt.Errorf("commit: %w", err)
	}
	return c, nil
}

// setWriteMode switches the store to mode (benchmarks only; before any
// write is in flight).
func (s *Store) setWriteMode(mode writeMode) error {
	s.mode = mode
	if mode != writePool || s.wdb != nil {
		return nil
	}
	if !s.durable {
		return fmt.Errorf("a writer pool needs a database file")
	}
	db, err := openDB(s.dsn)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	s.wdb = db
	return nil
}
