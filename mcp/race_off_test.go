//go:build !race

package mcp_test

// cancelledCalls is how many wait_for_mail calls the leak test cancels.
const cancelledCalls = 1000
