package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
	"github.com/mailroom/mailroom/storetest"
)

// heldFold opens a store whose folder does not run: marks stay until the
// test folds them with FoldStep.
func heldFold(t *testing.T, now func() time.Time) *sqlite.Store {
	// A copy of a migrated empty store, as TestStore's (migrating each
	// file cost more CPU than some of these tests' own work).
	path := filepath.Join(t.TempDir(), "m.db")
	benchstore.Empty(t, path)
	return open(t, path, sqlite.Options{Now: now, NoSync: true, Hooks: &sqlite.Hooks{HoldFold: true}})
}

// The drain edge cases with every mark left in place, so every read after
// a drain meets the mark rather than folded rows.
func TestDrainEdgesWithTheMarkHeld(t *testing.T) {
	t.Parallel()
	storetest.RunDrainEdges(t, func(t *testing.T) mailroom.Store {
		t.Parallel()
		s := heldFold(t, storetest.NewClock().Now)
		t.Cleanup(func() {
			if sqlite.MarkDrains(s)+sqlite.RoleMarkDrains(s) == 0 {
				t.Error("no drain of this case was by a mark")
			}
			if strings.Contains(t.Name(), "/RoleDrain") && sqlite.RoleMarkDrains(s) == 0 {
				t.Error("no role queue of this case was drained by a mark")
			}
			checkNoMismatch(t, s, "at the end")
		})
		return s
	})
}

// The random mix of every operation, with marks held: it reaches the mark
// path, and counts and listings agree with it.
func TestCountsMatchListingsWithTheMarkHeld(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{11} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			s := heldFold(t, storetest.NewClock().Now)
			storetest.CountsMatchListings(t, s, seed)
			if n := sqlite.MarkDrains(s); n < 3 {
				t.Errorf("%d drains by a mark in the mix, want several", n)
			}
			if n := sqlite.MarkDrainsOverNewer(s); n < 3 {
				t.Errorf("%d drains by a mark through a watermark with newer mail in the mix, want several", n)
			}
			t.Logf("%d drains by a mark, %d of them through a watermark with newer mail; %d role marks", sqlite.MarkDrains(s), sqlite.MarkDrainsOverNewer(s), sqlite.RoleMarkDrains(s))
			checkNoMismatch(t, s, "after the mix")
		})
	}
}

// Migration 0012 on a store that had mail: the mark table and the
// triggers that consult it are made, and a drain by a mark keeps counts.
func TestReadMarkMigration(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{NoSync: true})
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	if err := s.SendMany(alice, benchstore.Draft(), 20); err != nil {
		t.Fatal(err)
	}
	s.Close()
	execRaw(t, path, `DROP TABLE read_mark`, `DELETE FROM schema_migration WHERE version = 12`)
	s = open(t, path, sqlite.Options{NoSync: true, Hooks: &sqlite.Hooks{HoldFold: true}})
	alice, bob = agent(t, s, "alice"), agent(t, s, "bob")
	drainsAfterMigration(t, s, alice, bob)
}

// drainsAfterMigration: on a store just migrated to 0012, bob's 20 unread
// drain by a mark, and a delete and a send after it keep the counts.
func drainsAfterMigration(t *testing.T, s *sqlite.Store, alice, bob context.Context) {
	t.Helper()
	rc, err := s.MarkAllRead(bob, "", false)
	if err != nil || rc.ReadCount != 20 || rc.DurableCount != 20 || sqlite.MarkDrains(s) != 1 {
		t.Fatalf("drain after the migration: %+v %v (by mark %d)", rc, err, sqlite.MarkDrains(s))
	}
	f, _ := mailroom.ListInput{Limit: ptr(1)}.Filter()
	p, err := s.List(bob, f)
	if err != nil || len(p.Messages) != 1 {
		t.Fatal(err)
	}
	if _, err := s.Delete(bob, p.Messages[0].MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(alice, benchstore.Draft()); err != nil {
		t.Fatal(err)
	}
	checkNoMismatch(t, s, "after the migration, a drain, a delete and a send")
	if st, _ := s.Status(bob); st.Unread.Total != 1 {
		t.Fatalf("unread %+v", st.Unread)
	}
}

// A drain that would be a mark decides so in its read, and again in its
// write transaction, where it takes its snapshot: here a message is
// archived unread between the two (from the statement hook, while the
// read runs), so the write finds archived unread mail a mark would cover,
// and marks the rest row by row; the archived message stays unread.
func TestDrainByMarkRechecksInItsWrite(t *testing.T) {
	t.Parallel()
	var (
		s        *sqlite.Store
		bob      context.Context
		archived string
		once     sync.Once
	)
	hooks := &sqlite.Hooks{HoldFold: true, Statement: func(q string, args []any) {
		if strings.Contains(q, "FILTER (WHERE archived = 1)") && archived != "" {
			once.Do(func() {
				if _, err := s.Archive(bob, archived); err != nil {
					t.Error(err)
				}
			})
		}
	}}
	s = open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{NoSync: true, Hooks: hooks})
	alice := agent(t, s, "alice")
	bob = agent(t, s, "bob")
	var ids []string
	for range 3 {
		r, err := s.Send(alice, benchstore.Draft())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MessageID)
	}
	archived = ids[0]
	rc, err := s.MarkAllRead(bob, "", false)
	if err != nil || rc.MatchedCount != 2 || rc.ReadCount != 2 || rc.DurableCount != 2 || rc.Status != "read" {
		t.Fatalf("%+v %v", rc, err)
	}
	if n := sqlite.MarkDrains(s); n != 0 {
		t.Fatalf("%d drains by a mark, want the row path", n)
	}
	if m, _ := s.Get(bob, archived); m.ReadAt != nil || m.ArchivedAt == nil {
		t.Fatalf("the message archived mid-drain: readAt %v archivedAt %v", m.ReadAt, m.ArchivedAt)
	}
	for _, id := range ids[1:] {
		if m, _ := s.Get(bob, id); m.ReadAt == nil {
			t.Fatalf("%s left unread", id)
		}
	}
	checkNoMismatch(t, s, "after a drain that fell back in its write")
}

// The fold stepped by the test (storetest.RunFold): a fold changes nothing
// anyone sees, whatever runs between its chunks.
func TestFoldStepped(t *testing.T) {
	t.Parallel()
	storetest.RunFold(t, func(t *testing.T) storetest.HeldFold {
		return foldHooks(heldFold(t, storetest.NewClock().Now))
	})
}

// A write that makes a message unread, racing a purge stopped between its
// decision and its deletes (storetest.RunPurgeRace), with marks held.
func TestPurgeRace(t *testing.T) {
	t.Parallel()
	storetest.RunPurgeRace(t, func(t *testing.T, decided func()) storetest.PausedPurge {
		path := filepath.Join(t.TempDir(), "m.db")
		benchstore.Empty(t, path)
		s := open(t, path, sqlite.Options{Now: storetest.NewClock().Now, NoSync: true, Hooks: &sqlite.Hooks{HoldFold: true, PurgeDecided: decided}})
		return storetest.PausedPurge{Store: s, Waiting: func() bool { return sqlite.WritersWaiting(s) }}
	})
}

// foldHooks is the storetest.HeldFold hook set of s.
func foldHooks(s *sqlite.Store) storetest.HeldFold {
	return storetest.HeldFold{
		Store:    s,
		Step:     func(ctx context.Context) (bool, error) { return sqlite.FoldStep(ctx, s) },
		SetChunk: func(n int) { sqlite.SetFoldChunk(s, n) },
		Marks: func(ctx context.Context) ([]string, error) {
			m, err := sqlite.ReadMarks(ctx, s)
			if err != nil {
				return nil, err
			}
			r, err := sqlite.RoleMarks(ctx, s)
			return append(m, r...), err
		},
		MarkDrains:          func() int { return int(sqlite.MarkDrains(s)) },
		MarkDrainsOverNewer: func() int { return int(sqlite.MarkDrainsOverNewer(s)) },
		RoleMarkDrains:      func() int { return int(sqlite.RoleMarkDrains(s)) },
		Check:               func(t *testing.T, when string) { checkNoMismatch(t, s, when) },
	}

}
