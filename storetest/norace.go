//go:build !race

package storetest

// raceDetector: see race.go.
const raceDetector = false
