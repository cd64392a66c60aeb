//go:build race

package mcp

// raceScale multiplies the CPU budget under the race detector, which makes
// SQLite's (transpiled C) code about ten times as costly.
const raceScale = 10
