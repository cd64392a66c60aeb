//go:build race

package sqlite_test

// raceDetector: SQLite here is translated C, every memory access of which
// the race detector checks, so a store of planTestSize messages takes
// minutes to build under it.
const raceDetector = true
