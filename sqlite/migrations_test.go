package sqlite_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestMigrationVersionsAreUnique: migrate keys a migration by the number
// before its name's first "_", so two branches that each add the next one
// must not land with the same number (the second would fail to record, or
// be skipped on a store that has the first), nor leave a gap.
func TestMigrationVersionsAreUnique(t *testing.T) {
	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			t.Fatalf("migration %s: no version number before its first _", e.Name())
		}
		if other, ok := seen[v]; ok {
			t.Fatalf("migrations %s and %s share version %d", other, e.Name(), v)
		}
		seen[v] = e.Name()
	}
	for v := 1; v <= len(seen); v++ {
		if _, ok := seen[v]; !ok {
			t.Fatalf("migration version %d is missing (%d migrations)", v, len(seen))
		}
	}
}
