//go:build !linux

package mcp

import (
	"context"
	"time"
)

// cpuBound is the wall-clock stand-in where no thread CPU clock is read:
// the budget then counts waiting as well as work.
func cpuBound(ctx context.Context, limit time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithTimeoutCause(ctx, limit, errCPUBudget)
	return ctx, func() { cancel() }
}
