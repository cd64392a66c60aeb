package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// cpuTicks reads a process's user+system CPU time from /proc/PID/stat, in
// clock ticks (USER_HZ, 100 per second on Linux).
func cpuTicks(b *testing.B, pid int) int64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

// BenchmarkIdleWaiters is the CPU a `mailroom serve` process (stdio, the
// binary as built, concept worker on) uses over 10 s while it holds 1,000
// wait_for_mail calls and nothing arrives, as a share of one core; with
// waiters=0 the same server holds none.
func BenchmarkIdleWaiters(b *testing.B) {
	for _, waiters := range []int{0, 1000} {
		b.Run(fmt.Sprintf("waiters=%d", waiters), func(b *testing.B) { benchIdle(b, waiters) })
	}
}

func benchIdle(b *testing.B, waiters int) {
	const window = 10 * time.Second
	for range b.N {
		env := environ(b)
		db := filepath.Join(b.TempDir(), "m.db")
		cmd := exec.Command(bin, "serve", "--db", db, "--agent", "bob")
		cmd.Env = env
		ctx, cancel := context.WithCancel(context.Background())
		cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "bench", Version: "v0"}, nil).
			Connect(ctx, &gomcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs.CallTool(ctx, &gomcp.CallToolParams{Name: "wait_for_mail", Arguments: map[string]any{"timeoutSeconds": 60}})
			}()
		}
		// Let every call reach its wait (the server cannot be asked over
		// MCP how many wait): until a half second passes with at most one
		// tick of CPU, then measure the window.
		pid := cmd.Process.Pid
		for last, i := cpuTicks(b, pid), 0; i < 120; i++ {
			time.Sleep(500 * time.Millisecond)
			now := cpuTicks(b, pid)
			if now-last <= 1 {
				break
			}
			last = now
		}
		t0 := cpuTicks(b, pid)
		time.Sleep(window)
		used := time.Duration(cpuTicks(b, pid)-t0) * 10 * time.Millisecond
		b.ReportMetric(100*used.Seconds()/window.Seconds(), "%core")
		b.ReportMetric(float64(used.Milliseconds()), "cpu-ms/10s")
		cancel()
		wg.Wait()
		cs.Close()
	}
}
