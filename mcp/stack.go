package mcp

// stackReserve is how much stack a tool call's goroutine takes up front:
// about what a store call needs (modernc.org/sqlite is C translated to Go,
// with deep frames).
const stackReserve = 64 << 10

// growStack makes the calling goroutine's stack at least stackReserve deep
// in one step. Why: the go-sdk runs every call on a fresh goroutine, whose
// stack (a few KB) then doubles again and again inside SQLite, each time
// copying and re-pointing every frame of a deep stack (runtime.copystack:
// 4-5% of a send's CPU). Grown here, while the stack is shallow, the copy
// is of a few frames.
//
//go:noinline
func growStack(i int) byte {
	var frame [stackReserve]byte
	frame[i%stackReserve] = 1
	return frame[(i+1)%stackReserve]
}
