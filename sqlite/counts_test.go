package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
)

func checkNoMismatch(t *testing.T, s *sqlite.Store, when string) {
	t.Helper()
	bad, err := sqlite.CountMismatches(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("%s: mailbox_count differs from a recount: %v", when, bad)
	}
}

// A drain whose snapshot is every unread delivery takes the counted path
// (counts moved in two statements); one whose snapshot no longer is, at
// write time, must count row by row: here one snapshot message is read
// and a new one arrives between snapshot and write, so the snapshot has as
// many ids as the inbox has unread mail, but not the same ones.
func TestDrainKeepsCountsWhenTheInboxMovesUnderIt(t *testing.T) {
	var (
		s           *sqlite.Store
		alice, bob  context.Context
		once        sync.Once
		first, late string
	)
	hooks := &sqlite.Hooks{AfterSnapshot: func() {
		once.Do(func() {
			if res := s.MarkRead(bob, []string{first}); res[0].Err != nil {
				t.Error(res[0].Err)
			}
			r, err := s.Send(alice, benchstore.Draft())
			if err != nil {
				t.Error(err)
			}
			late = r.MessageID
		})
	}}
	s = open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{Hooks: hooks})
	alice, bob = agent(t, s, "alice"), agent(t, s, "bob")
	for i := range 5 {
		r, err := s.Send(alice, benchstore.Draft())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r.MessageID
		}
	}
	rc, err := s.MarkAllRead(bob, "", false)
	if err != nil || rc.MatchedCount != 5 || rc.ReadCount != 5 {
		t.Fatalf("%+v %v", rc, err)
	}
	checkNoMismatch(t, s, "after a drain that raced a read and a send")
	st, err := s.Status(bob)
	if err != nil || st.Unread.Total != 1 {
		t.Fatalf("unread %+v %v, want only %s", st.Unread, err, late)
	}
	// Now the snapshot is the whole unread set: the counted path.
	if rc, err := s.MarkAllRead(bob, "", false); err != nil || rc.ReadCount != 1 {
		t.Fatalf("%+v %v", rc, err)
	}
	checkNoMismatch(t, s, "after a drain of the whole unread set")
	if st, _ := s.Status(bob); st.Unread.Total != 0 {
		t.Fatalf("unread %+v", st.Unread)
	}
	f, _ := mailroom.ListInput{}.Filter()
	if p, err := s.List(bob, f); err != nil || p.TotalCount != 6 {
		t.Fatalf("inbox total %d %v", p.TotalCount, err)
	}
}

// A database from before migration 0009 gets its counts from the
// migration's backfill: here the counter table and its triggers are taken
// away, mail changes meanwhile, and opening the store again recreates them.
func TestCountsMigrationBackfillsExistingMail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{})
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	if err := s.SendMany(alice, benchstore.Draft(), 30); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TRIGGER delivery_count_insert`, `DROP TRIGGER delivery_count_delete`,
		`DROP TABLE mailbox_count`, `DELETE FROM schema_migration WHERE version = 9`,
		// Mail that changed before the upgrade: 10 read, 5 archived.
		`UPDATE delivery SET read_at = delivered_at WHERE id <= 10`,
		`UPDATE delivery SET archived_at = delivered_at WHERE id > 25`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s = open(t, path, sqlite.Options{})
	checkNoMismatch(t, s, "after the backfill")
	st, err := s.Status(bob)
	if err != nil || st.Unread.Total != 15 || st.Archived != 5 {
		t.Fatalf("status after the backfill: %+v archived %d %v", st.Unread, st.Archived, err)
	}
}
