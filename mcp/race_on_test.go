//go:build race

package mcp_test

// cancelledCalls is how many wait_for_mail calls the leak test cancels. The
// race detector slows each call's SQLite reads about tenfold, so race runs
// cancel fewer; `go test ./mcp -run CancelledCalls` (no -race) runs 1,000.
const cancelledCalls = 250
