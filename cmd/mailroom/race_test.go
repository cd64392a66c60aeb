//go:build race

package main

// raceDetector says the tests run with the race detector (see TestMain).
const raceDetector = true
