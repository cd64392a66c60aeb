//go:build race

package mcp_test

// raceDetector says the tests run with the race detector (see seedProgram).
const raceDetector = true
