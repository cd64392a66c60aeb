package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

func groupEnv(t testing.TB) (*Store, context.Context, mailroom.Draft) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "g.db"), Options{Hooks: &Hooks{HoldMerge: true}}) // the merger's steps would count as transactions
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	alice, err := s.EnsureAgent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureAgent(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: "grouped", Body: "one of many sends committed together"}.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	d.OriginSessionID = "SESSION:group"
	return s, mailroom.WithCaller(ctx, alice), d
}

func (s *Store) queuedWrites() int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.queued)
}

func (s *Store) changeRows(t *testing.T) int {
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM change_log`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestQueuedSendsCommitTogether holds the writer lock while sends queue
// up, then lets them go: they commit in one transaction (one change-log
// row), a send with a bad recipient fails alone, a caller that left before
// its turn is not stored, and every receipt names a stored message.
func TestQueuedSendsCommitTogether(t *testing.T) {
	t.Parallel()
	s, alice, d := groupEnv(t)
	rowsBefore := s.changeRows(t)
	bad := d
	bad.To = []mailroom.Address{{Kind: mailroom.AddrAgent, Name: "nobody"}}
	gone, cancel := context.WithCancel(alice)
	cancel()

	s.lock()
	const n = 6
	type result struct {
		r   mailroom.SendReceipt
		err error
	}
	results := make([]result, n+2)
	var wg sync.WaitGroup
	for i := range n + 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, dr := alice, d
			switch i {
			case n:
				dr = bad
			case n + 1:
				ctx = gone
			}
			r, err := s.Send(ctx, dr)
			results[i] = result{r, err}
		}()
	}
	for s.queuedWrites() < n+2 {
		time.Sleep(time.Millisecond) // waiting for goroutines to queue; no clock to inject
	}
	s.unlock()
	wg.Wait()

	for i, res := range results[:n] {
		if res.err != nil {
			t.Fatalf("send %d: %v", i, res.err)
		}
		if !res.r.Durable || res.r.RecipientCount != 1 {
			t.Errorf("send %d receipt: %+v", i, res.r)
		}
	}
	if err := results[n].err; mailroom.ErrorCode(err) != mailroom.EINVALID {
		t.Errorf("send to @nobody: %v, want EINVALID", err)
	}
	if err := results[n+1].err; err == nil || gone.Err() == nil {
		t.Errorf("send of a caller gone before its turn: %v, want its context's error", err)
	}
	var stored int
	if err := s.db.QueryRow(`SELECT count(*) FROM message`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != n {
		t.Errorf("%d messages stored, want %d", stored, n)
	}
	if got := s.changeRows(t) - rowsBefore; got != 1 {
		t.Errorf("%d transactions for %d queued sends, want 1", got, n)
	}
	ids := map[string]bool{}
	for _, res := range results[:n] {
		ids[res.r.MessageID] = true
	}
	if len(ids) != n {
		t.Errorf("receipts name %d distinct messages, want %d", len(ids), n)
	}
}

// TestGroupFailureRetriesAlone breaks a group's shared transaction (a write
// that fails in a way its savepoint cannot undo) and checks that every
// other write is still committed, one at a time.
func TestGroupFailureRetriesAlone(t *testing.T) {
	t.Parallel()
	s, alice, d := groupEnv(t)
	s.lock()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 {
				// Ends the transaction under the group: ROLLBACK TO fails.
				errs[i] = s.writeGrouped(alice, func(ctx context.Context, tx *ptx) error {
					tx.touchNone()
					if _, err := tx.Tx.ExecContext(ctx, `ROLLBACK`); err != nil {
						return err
					}
					return fmt.Errorf("broke the transaction")
				})
				return
			}
			_, errs[i] = s.Send(alice, d)
		}()
	}
	for s.queuedWrites() < len(errs) {
		time.Sleep(time.Millisecond)
	}
	s.unlock()
	wg.Wait()
	if errs[0] == nil {
		t.Error("the breaking write reported success")
	}
	for i, err := range errs[1:] {
		if err != nil {
			t.Errorf("send %d: %v", i+1, err)
		}
	}
	var stored int
	if err := s.db.QueryRow(`SELECT count(*) FROM message`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != len(errs)-1 {
		t.Errorf("%d messages stored, want %d", stored, len(errs)-1)
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWriters compares the ways this process's writers can be
// serialised, with 1 and 8 concurrent senders: the write queue with group
// commit (the default), the same queue one transaction per send, and a
// one-connection writer pool (database/sql's own queue, no Go lock).
func BenchmarkWriters(b *testing.B) {
	for _, m := range []struct {
		name string
		mode writeMode
	}{{"group", writeGroup}, {"queue", writeQueue}, {"pool", writePool}} {
		for _, senders := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/senders=%d", m.name, senders), func(b *testing.B) {
				s, alice, d := groupEnv(b)
				if err := s.setWriteMode(m.mode); err != nil {
					b.Fatal(err)
				}
				b.SetParallelism(1)
				cpu := processCPU()
				start := time.Now()
				var wg sync.WaitGroup
				per := b.N / senders
				for range senders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range per {
							if _, err := s.Send(alice, d); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				n := per * senders
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "sends/s")
				b.ReportMetric(float64((processCPU()-cpu).Microseconds())/1000/float64(n), "cpu-ms/op")
			})
		}
	}
}
