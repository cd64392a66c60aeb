package pgtest

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ServerCPU returns the CPU time (user and system) the benchmark cluster's
// server processes have used, when MAILROOM_BENCH_PG_PID names its
// postmaster (the first line of DATADIR/postmaster.pid) and its backends
// are its children; else -1. The server's CPU per operation is steadier
// than wall time on a shared machine.
func ServerCPU() time.Duration {
	pid := os.Getenv("MAILROOM_BENCH_PG_PID")
	if pid == "" {
		return -1
	}
	var ticks int64
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// After "(comm)": state ppid ... utime(14) stime(15), 1-based from pid.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if len(f) > 13 && (f[1] == pid || d.Name() == pid) {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + s
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// ReportServerCPU reports the server CPU per operation of n operations
// since start (a ServerCPU reading); nothing when start is -1.
func ReportServerCPU(b *testing.B, start time.Duration, n int) {
	if start < 0 {
		return
	}
	b.ReportMetric(float64((ServerCPU()-start).Microseconds())/1000/float64(n), "server-cpu-ms/op")
}
