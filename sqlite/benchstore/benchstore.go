// Package benchstore builds SQLite mailroom stores of a given size for
// benchmarks, through the bulk path (sqlite.Store.SendMany), and caches each
// size in a directory so that a benchmark run builds it once: every caller
// gets its own copy to change.
package benchstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// version names the seeding recipe: change it whenever Seed stores
// something else, so cached stores are built again.
const version = 1

// Store is a seeded store and what benchmarks need to address it.
type Store struct {
	*sqlite.Store
	N                 int             // messages stored
	Alice, Bob, Carol context.Context // callers: alice and carol send, bob reads
	// Thread is a thread of N/100 messages (at most 100), for thread filters.
	Thread string
	// Rare is a word in 1% of the messages, for a selective full-text query;
	// every message contains Common.
	Rare, Common string
}

type meta struct {
	Thread string `json:"thread"`
}

// Draft is the message most of a seeded store holds: a realistic handoff.
func Draft() mailroom.Draft {
	d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: "Handoff: WAL checkpoint tuning",
		Body: "Picked up where the last session stopped. The checkpoint starves readers under load; see POL-358. Next: measure with 8 writers."}.Draft(0)
	if err != nil {
		panic(err)
	}
	d.OriginSessionID = "SESSION:bench"
	return d
}

// Dir is where built stores are kept: $MAILROOM_BENCH_CACHE, else
// mailroom-bench in the system's temporary directory.
func Dir() string {
	if d := os.Getenv("MAILROOM_BENCH_CACHE"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "mailroom-bench")
}

// Recipe is one way of filling a store; built stores are cached per
// recipe name and size.
type Recipe struct {
	// Name keys the cache: give a new one whenever Seed stores something else.
	Name string
	// Seed stores n messages in s (alice and carol are callers) and returns
	// a thread id for thread filters, or "".
	Seed func(alice, carol context.Context, s *sqlite.Store, n int) (thread string, err error)
}

// Handoffs is Open's recipe: Seed.
var Handoffs = Recipe{Name: fmt.Sprintf("v%d", version), Seed: Seed}

// Open returns a private copy of the store of n messages, building and
// caching it first if needed. The copy is removed when tb ends.
//
// Every block of up to 10,000 messages holds, from alice to bob, 89% plain
// handoffs, 1% with a rare word, then 9% from carol, and 1% in one thread
// (a message and replies to it).
func Open(tb testing.TB, n int) *Store {
	tb.Helper()
	return OpenRecipe(tb, Handoffs, n)
}

// OpenRecipe is Open for a store filled by r.
func OpenRecipe(tb testing.TB, r Recipe, n int) *Store {
	tb.Helper()
	cached := filepath.Join(Dir(), fmt.Sprintf("%s-%d.db", r.Name, n))
	if _, err := os.Stat(cached); err != nil {
		if err := build(tb, r, cached, n); err != nil {
			tb.Fatalf("build a %d-message store: %v", n, err)
		}
	}
	var m meta
	b, err := os.ReadFile(cached + ".json")
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "store.db")
	if err := copyFile(cached, path); err != nil {
		tb.Fatal(err)
	}
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	st := &Store{Store: s, N: n, Thread: m.Thread, Rare: "zeppelin", Common: "checkpoint"}
	st.Alice, st.Bob, st.Carol = callers(tb, s)
	return st
}

func callers(tb testing.TB, s *sqlite.Store) (alice, bob, carol context.Context) {
	ctx := context.Background()
	var ids [3]context.Context
	for i, name := range []string{"alice", "bob", "carol"} {
		id, err := s.EnsureAgent(ctx, name)
		if err != nil {
			tb.Fatal(err)
		}
		ids[i] = mailroom.WithCaller(ctx, id)
	}
	return ids[0], ids[1], ids[2]
}

// build seeds a store of n messages at path (through a temporary name, so
// a concurrent or interrupted build never leaves half a store there).
func build(tb testing.TB, r Recipe, path string, n int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	defer os.Remove(tmp)
	s, err := sqlite.Open(context.Background(), tmp, sqlite.Options{})
	if err != nil {
		return err
	}
	alice, _, carol := callers(tb, s)
	start, cpu := time.Now(), cpuTime()
	thread, err := r.Seed(alice, carol, s, n)
	// Close checkpoints the WAL into the file and measures the statistics.
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	m := meta{Thread: thread}
	tb.Logf("benchstore: built %s with %d messages in %v (%v CPU)", r.Name, n, time.Since(start).Round(time.Millisecond), (cpuTime() - cpu).Round(time.Millisecond))
	b, _ := json.Marshal(m)
	if err := os.WriteFile(path+".json", b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Seed stores n messages in s as Open describes, alice and carol sending,
// and returns the id of the last block's thread.
func Seed(alice, carol context.Context, s *sqlite.Store, n int) (thread string, err error) {
	plain := Draft()
	rare := plain
	rare.Body += " The zeppelin hangar lease renews in March."
	for n > 0 {
		k := min(n, 10_000)
		pct := k / 100
		if err := s.SendMany(alice, plain, k-11*pct); err != nil {
			return "", err
		}
		if err := s.SendMany(alice, rare, pct); err != nil {
			return "", err
		}
		if err := s.SendMany(carol, plain, 9*pct); err != nil {
			return "", err
		}
		if pct > 0 {
			r, err := s.Send(alice, plain)
			if err != nil {
				return "", err
			}
			thread = r.ThreadID
			reply := plain
			reply.InReplyTo = r.MessageID
			if err := s.SendMany(alice, reply, pct-1); err != nil {
				return "", err
			}
		}
		n -= k
	}
	return thread, nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// cpuTime is the process's CPU time so far: building competes with other
// work on a shared machine, and this says how much of the wall time was ours.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
