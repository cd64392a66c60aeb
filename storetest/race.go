//go:build race

package storetest

// raceDetector says the suite runs under the race detector (see smaller).
const raceDetector = true
