package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestCancelInterruptsARunningStatement verifies what cancellation relies
// on: modernc.org/sqlite interrupts a statement that is running (not just
// one about to start) when its context ends, inside the store's own read
// transaction.
func TestCancelInterruptsARunningStatement(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.read(ctx, func(tx *ptx) error {
			close(started)
			var n int64
			// Counts forever: only an interrupt ends it.
			return tx.Tx.QueryRowContext(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c`).Scan(&n)
		})
	}()
	<-started
	time.Sleep(100 * time.Millisecond) // let the statement get going
	select {
	case err := <-done:
		t.Fatalf("the endless statement ended by itself: %v", err)
	default:
	}
	at := time.Now()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("no error from an interrupted statement")
		}
		t.Logf("interrupted %v after cancel: %v", time.Since(at), err)
	case <-time.After(5 * time.Second):
		t.Fatal("the statement ran on after its context ended")
	}
	// The connection is usable afterwards.
	if err := s.read(context.Background(), func(tx *ptx) error {
		var n int
		return tx.QueryRowContext(context.Background(), `SELECT count(*) FROM message`).Scan(&n)
	}); err != nil {
		t.Errorf("after the interrupt: %v", err)
	}
}
