//go:build !race

package sqlite_test

const raceDetector = false
