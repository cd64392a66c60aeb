package mailroom_test

import (
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
)

func TestCheckSchema(t *testing.T) {
	for _, c := range []struct{ stored, known int }{{0, 13}, {12, 13}, {13, 13}} {
		if err := mailroom.CheckSchema(c.stored, c.known); err != nil {
			t.Errorf("CheckSchema(%d, %d) = %v, want nil", c.stored, c.known, err)
		}
	}
	err := mailroom.CheckSchema(14, 13)
	if mailroom.ErrorCode(err) != mailroom.ECONFLICT || !strings.Contains(err.Error(), "version 14 is newer than this mailroom knows (13)") {
		t.Fatalf("CheckSchema(14, 13) = %v, want a conflict naming both versions", err)
	}
}

func TestMigrationVersions(t *testing.T) {
	ok := []string{"migrations/0001_graph.sql", "migrations/0002_b.sql", "migrations/0003_c.sql"}
	if v, err := mailroom.MigrationVersions(ok); err != nil || len(v) != 3 || v[2] != 3 {
		t.Fatalf("MigrationVersions(%v) = %v, %v", ok, v, err)
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"migrations/0001_a.sql", "migrations/0002_b.sql", "migrations/0002_c.sql"}, "migrations 0002_b.sql and 0002_c.sql share version 2"},
		{[]string{"migrations/0001_a.sql", "migrations/0003_c.sql"}, "migration 0003_c.sql: version 3 where 2 comes next"},
		{[]string{"migrations/0002_b.sql"}, "migration 0002_b.sql: version 2 where 1 comes next"},
		{[]string{"migrations/0001_a.sql", "migrations/readme.sql"}, "migration readme.sql: no version number before its first _"},
	} {
		_, err := mailroom.MigrationVersions(tc.names)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MigrationVersions(%v) = %v, want %q", tc.names, err, tc.want)
		}
	}
}
