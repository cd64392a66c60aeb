//go:build race

package mcp_test

// cancelledCalls is how many wait_for_mail calls the leak test cancels.
// Under the race detector a call costs about 8 ms of CPU (SQLite's C, run
// as Go, and the SDK's JSON, all instrumented): 1,000 took 8.3 s of CPU and
// 31 s on the shared machine, 250 about a quarter. A leak is per call (a
// listener, a subscription, goroutines), so 250 find one as surely;
// scripts/test.sh also runs the test without -race, where it cancels 1,000.
const cancelledCalls = 250
