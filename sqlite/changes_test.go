package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	_ "modernc.org/sqlite"
)

// TestMain lets the test binary play a second process: with
// MAILROOM_TEST_SEND set to a database path it sends one message from
// alice to bob there and exits.
func TestMain(m *testing.M) {
	if path := os.Getenv("MAILROOM_TEST_SEND"); path != "" {
		if err := sendOnce(path); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func sendOnce(path string) error {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	alice, err := s.EnsureAgent(ctx, "alice")
	if err != nil {
		return err
	}
	if _, err := s.EnsureAgent(ctx, "bob"); err != nil {
		return err
	}
	d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: "from another process", Body: "hi"}.Draft(0)
	if err != nil {
		return err
	}
	d.OriginSessionID = "SESSION:other"
	_, err = s.Send(mailroom.WithCaller(ctx, alice), d)
	return err
}

func waitSignal(t *testing.T, sub *mailroom.Subscription, what string) {
	t.Helper()
	select {
	case <-sub.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("no change signal after %s", what)
	}
}

// watchModes are the change watcher's two ways to learn of a commit: file
// events (the default) and polling (where the file system reports none).
var watchModes = map[string]sqlite.Options{"events": {}, "poll": {NoFileEvents: true}}

func TestChangeSignalCrossesProcesses(t *testing.T) {
	for mode, opts := range watchModes {
		t.Run(mode, func(t *testing.T) { testCrossesProcesses(t, opts) })
	}
}

func testCrossesProcesses(t *testing.T, opts sqlite.Options) {
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, opts)
	sub := s.Subscribe()
	defer sub.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MAILROOM_TEST_SEND="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sender process: %v\n%s", err, out)
	}
	waitSignal(t, sub, "a send by another process")
	bob, err := s.EnsureAgent(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if c := sub.Take(); !c.Touches(bob.ID, nil) {
		t.Fatalf("the change %+v does not name the recipient", c)
	}
}

func TestChangeSignalCrossesStoreInstances(t *testing.T) {
	for mode, opts := range watchModes {
		t.Run(mode, func(t *testing.T) { testCrossesStoreInstances(t, opts) })
	}
}

func testCrossesStoreInstances(t *testing.T, opts sqlite.Options) {
	path := filepath.Join(t.TempDir(), "m.db")
	a := open(t, path, opts)
	b := open(t, path, sqlite.Options{})
	ctx := context.Background()
	alice, err := b.EnsureAgent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	sub := a.Subscribe()
	defer sub.Close()
	d, _ := mailroom.SendInput{To: []string{"@me"}, Subject: "s", Body: "b"}.Draft(0)
	d.OriginSessionID = "SESSION:x"
	// Subscribe returned with the watcher's baseline taken: only b's send
	// may signal.
	if _, err := b.Send(mailroom.WithCaller(ctx, alice), d); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, sub, "a send through another store instance")
	// The change log names whom the commit touched, so a watcher checks
	// only that inbox.
	if c := sub.Take(); c.All || len(c.Identities) != 1 || c.Identities[0] != alice.ID {
		t.Fatalf("change = %+v, want exactly alice (%d)", c, alice.ID)
	}
	// Writes that touch no inbox (a new identity, a token) signal nobody.
	if _, err := b.EnsureAgent(ctx, "zed"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(mailroom.WithCaller(ctx, alice), d); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, sub, "a second send")
	if c := sub.Take(); c.All || len(c.Identities) != 1 {
		t.Fatalf("change = %+v: the identity write should have added nothing", c)
	}
}

// A raw write on another connection, outside the store, still signals: the
// watcher trusts SQLite's data_version, not the store's own bookkeeping.
func TestChangeSignalSeesForeignConnections(t *testing.T) {
	for mode, opts := range watchModes {
		t.Run(mode, func(t *testing.T) { testSeesForeignConnections(t, opts) })
	}
}

func testSeesForeignConnections(t *testing.T, opts sqlite.Options) {
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, opts)
	sub := s.Subscribe()
	defer sub.Close()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`INSERT INTO identity (name, kind, created_at) VALUES ('zed', 'agent', '2026-01-01T00:00:00.000000Z')`); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, sub, "a commit on a foreign connection")
}

// The watcher runs only while someone is subscribed, and Subscribe returns
// once it has its baseline; with no writes, it never signals. Polling, it
// checks every
// interval; on file events it does not check at all while nothing is
// written (but for its once-a-second backstop).
func TestChangeSignalQuietWhileIdle(t *testing.T) {
	for mode, opts := range watchModes {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.db")
			opts.ChangePoll = time.Millisecond
			s := open(t, path, opts)
			sub := s.Subscribe()
			defer sub.Close()
			if !sqlite.Watching(s) {
				t.Fatal("Subscribe returned before the watcher started")
			}
			before := sqlite.WatchChecks(s)
			// 50 poll intervals with nothing committed. A timer here is
			// the thing under test (the watcher's pace), not a wait for an
			// event.
			select {
			case <-sub.C():
				t.Fatal("signalled with nothing committed")
			case <-time.After(50 * time.Millisecond):
			}
			checks := sqlite.WatchChecks(s) - before
			if opts.NoFileEvents && checks < 5 {
				t.Fatalf("polling: %d checks in 50 ms at 1 ms", checks)
			}
			if !opts.NoFileEvents && checks > 1 {
				t.Fatalf("on file events: %d checks in 50 ms with nothing written", checks)
			}
			if n := s.Changes().Len(); n != 1 {
				t.Fatalf("subscribers = %d, want 1", n)
			}
			// Once nobody is subscribed the watcher stops checking.
			sub.Close()
			for i := 0; sqlite.Watching(s); i++ {
				if i == 1000 {
					t.Fatal("the watcher still watches a second after the last subscriber left")
				}
				time.Sleep(time.Millisecond)
			}
			stopped := sqlite.WatchChecks(s)
			time.Sleep(20 * time.Millisecond)
			if n := sqlite.WatchChecks(s) - stopped; n != 0 {
				t.Fatalf("%d checks after the last subscriber left", n)
			}
		})
	}
}

// BenchmarkDataVersionPoll is the query a change check runs (without the
// cost of waking up to run it, which dominates on a loaded machine).
func BenchmarkDataVersionPoll(b *testing.B) {
	path := filepath.Join(b.TempDir(), "m.db")
	open(b, path, sqlite.Options{})
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	var v int64
	for b.Loop() {
		if err := conn.QueryRowContext(context.Background(), `PRAGMA data_version`).Scan(&v); err != nil {
			b.Fatal(err)
		}
	}
}

// A Subscribe that gives up waiting for a slow watcher's baseline must
// still hear of commits made before that baseline: the watcher signals
// everyone once it has it.
func TestLateBaselineSignalsEveryone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	a := open(t, path, sqlite.Options{})
	b := open(t, path, sqlite.Options{})
	ctx := context.Background()
	alice, err := b.EnsureAgent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	release, err := sqlite.HoldWatchConn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	sqlite.SetReadyWait(a, time.Millisecond)
	sub := a.Subscribe() // gives up: the watcher waits for its connection
	defer sub.Close()
	d, _ := mailroom.SendInput{To: []string{"@me"}, Subject: "s", Body: "b"}.Draft(0)
	d.OriginSessionID = "SESSION:x"
	if _, err := b.Send(mailroom.WithCaller(ctx, alice), d); err != nil {
		t.Fatal(err)
	}
	release() // the baseline now includes the send
	waitSignal(t, sub, "a send committed before the watcher's baseline")
	if c := sub.Take(); !c.Touches(alice.ID, nil) {
		t.Fatalf("change = %+v does not cover alice's send", c)
	}
}

// BenchmarkSendWatched is the store's share of what a send costs while its
// change watcher runs (someone subscribed): sends in rounds of 300
// alternating unwatched and watched, on one store waiting for file events
// and one polling (NoFileEvents); process CPU per send, medians of the
// rounds.
func BenchmarkSendWatched(b *testing.B) {
	const rounds, perRound = 6, 300
	for range b.N {
		res := map[string][]float64{}
		for _, mode := range []string{"events", "poll"} {
			s := open(b, filepath.Join(b.TempDir(), "m.db"), sqlite.Options{NoFileEvents: mode == "poll"})
			ctx := context.Background()
			alice, _ := s.EnsureAgent(ctx, "alice")
			if _, err := s.EnsureAgent(ctx, "bob"); err != nil {
				b.Fatal(err)
			}
			actx := mailroom.WithCaller(ctx, alice)
			d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: "s", Body: "b"}.Draft(0)
			d.OriginSessionID = "SESSION:bench"
			for r := range rounds {
				for _, watched := range []bool{r%2 == 0, r%2 != 0} {
					var sub *mailroom.Subscription
					if watched {
						sub = s.Subscribe()
					}
					cpu := cpuTime()
					for range perRound {
						if _, err := s.Send(actx, d); err != nil {
							b.Fatal(err)
						}
					}
					us := float64((cpuTime() - cpu).Microseconds()) / perRound
					name := mode + "-unwatched"
					if watched {
						name = mode + "-watched"
						sub.Close()
					}
					res[name] = append(res[name], us)
				}
			}
		}
		for name, x := range res {
			slices.Sort(x)
			b.ReportMetric(x[len(x)/2], "cpu-us/send-"+name)
		}
	}
}

// While a store writes, its watcher stops waiting for file events (every
// page the store writes would be one, about 15 a send) and checks every
// few milliseconds instead, so another instance's commit is still seen;
// once the store has been quiet a while it waits for file events again.
func TestOwnWritesPauseFileEvents(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	a := open(t, path, sqlite.Options{})
	b := open(t, path, sqlite.Options{})
	ctx := context.Background()
	alice, err := a.EnsureAgent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.EnsureAgent(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	bob, err := b.EnsureAgent(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	draft := func(to string) mailroom.Draft {
		d, _ := mailroom.SendInput{To: []string{to}, Subject: "s", Body: "b"}.Draft(0)
		d.OriginSessionID = "SESSION:x"
		return d
	}
	sub := a.Subscribe()
	defer sub.Close()
	if !sqlite.OnFileEvents(a) {
		t.Fatal("the watcher does not wait for file events after Subscribe")
	}
	// seesBob waits for a change that names bob (a's own sends name carol).
	seesBob := func(what string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case <-sub.C():
				if sub.Take().Touches(bob.ID, nil) {
					return
				}
			case <-deadline:
				t.Fatalf("no change naming bob after %s", what)
			}
		}
	}
	const n = 50
	before := sqlite.FileEvents(a)
	for i := range n {
		if _, err := a.Send(mailroom.WithCaller(ctx, alice), draft("@carol")); err != nil {
			t.Fatal(err)
		}
		if i == n/2 {
			if _, err := b.Send(mailroom.WithCaller(ctx, alice), draft("@bob")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := sqlite.FileEvents(a) - before; got >= n {
		t.Fatalf("%d file events for %d own sends: the watcher kept waking for its own writes", got, n)
	}
	seesBob("another instance's send while this one was writing")
	for i := 0; !sqlite.OnFileEvents(a); i++ {
		if i == 5000 {
			t.Fatal("the watcher did not wait for file events again 5 s after the last write")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Send(mailroom.WithCaller(ctx, alice), draft("@bob")); err != nil {
		t.Fatal(err)
	}
	seesBob("another instance's send once this one was quiet")
}
