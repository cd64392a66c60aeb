package mcp

import (
	"context"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cpuBound returns ctx, also cancelled with errCPUBudget once the calling
// goroutine has used limit of CPU time. The store's statements run on the
// calling goroutine (database/sql and modernc.org/sqlite execute a step in
// the caller), so the goroutine is locked to its OS thread for the call and
// that thread's CPU clock is the call's cost, whatever the machine's load.
// A watchdog reads the clock every few milliseconds; cancelling the context
// interrupts the running statement. stop must be called, on the same
// goroutine, when the call ends.
func cpuBound(ctx context.Context, limit time.Duration) (_ context.Context, stop func()) {
	runtime.LockOSThread()
	// The thread's CPU clock id, as glibc's pthread_getcpuclockid makes it:
	// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED).
	clock := int32(^uint32(syscall.Gettid())<<3) | 6
	start, ok := threadCPU(clock)
	if !ok {
		runtime.UnlockOSThread()
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(cpuCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if now, ok := threadCPU(clock); ok && now-start > limit {
					cancel(errCPUBudget)
					return
				}
			}
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
		runtime.UnlockOSThread()
	}
}

func threadCPU(clock int32) (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
