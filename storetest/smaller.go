package storetest

import (
	"reflect"

	"github.com/mailroom/mailroom"
)

// smaller says whether the seeded random mixes run a third of their steps
// on s: under the race detector on SQLite, whose engine (translated C) runs
// in this process and is checked access by access, about ten times slower.
// Their point there is the store's goroutines beside the caller's, which
// every step reaches; scripts/test.sh runs the full mixes without -race.
// PostgreSQL does its work in its server, so its mixes keep their size.
func smaller(s mailroom.Store) bool {
	if !raceDetector {
		return false
	}
	t := reflect.TypeOf(s)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == "github.com/mailroom/mailroom/sqlite"
}
