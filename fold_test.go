package mailroom_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
)

// TestRunFolder: a wake runs step until it has nothing more, an error is
// reported and retried, and the loop ends with its context.
func TestRunFolder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{}, 1)
	results := []error{nil, errors.New("busy"), nil, nil} // more, fail, more, done
	calls, failures := make(chan int, 8), make(chan error, 8)
	n := 0
	step := func(context.Context) (bool, error) {
		err := results[n]
		n++
		calls <- n
		return n < len(results) && err == nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		mailroom.RunFolder(ctx, wake, time.Hour, time.Millisecond, step, func(err error) { failures <- err })
	}()
	wake <- struct{}{}
	for want := 1; want <= len(results); want++ {
		if got := <-calls; got != want {
			t.Fatalf("call %d, want %d", got, want)
		}
	}
	if err := <-failures; err == nil || err.Error() != "busy" {
		t.Fatalf("failure reported: %v", err)
	}
	cancel()
	<-done
	select {
	case n := <-calls:
		t.Fatalf("step called again (%d) after it had nothing more and no wake came", n)
	default:
	}
}
