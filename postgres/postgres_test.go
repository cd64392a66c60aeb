package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

func open(t testing.TB, url string, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) mailroom.Store {
		return open(t, pgtest.URL(t), postgres.Options{Now: now})
	})
}

func draft(t testing.TB, to string) mailroom.Draft {
	d, err := mailroom.SendInput{To: []string{to}, Subject: "s", Body: "b"}.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	d.OriginSessionID = "SESSION:pg"
	return d
}

// Instances that start together on an empty database migrate it once.
func TestConcurrentFirstStarts(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(context.Background(), url, postgres.Options{})
			if err != nil {
				errs <- err
				return
			}
			_, err = s.EnsureAgent(context.Background(), "alice")
			s.Close()
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The watermark is judged in commit order: once a listing has returned a
// watermark, no message at or before it can appear later. With a sequence
// taken at insert and concurrent sends this fails: a smaller seq commits
// after a larger one was listed.
func TestWatermarkIsCommitOrder(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url, postgres.Options{MaxConns: 16})
	ctx := context.Background()
	bob, err := s.EnsureAgent(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	asBob := mailroom.WithCaller(ctx, bob)
	const senders, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, senders*each+1)
	for w := range senders {
		me, err := s.EnsureAgent(ctx, fmt.Sprintf("sender%d", w))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := s.Send(mailroom.WithCaller(ctx, me), draft(t, "@bob")); err != nil {
					errs <- err
				}
			}
		}()
	}
	type seen struct {
		watermark string
		total     int
	}
	var observed []seen
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, _ := mailroom.ListInput{}.Filter()
		for {
			p, err := s.List(asBob, f)
			if err != nil {
				errs <- err
				return
			}
			if p.Watermark != nil {
				observed = append(observed, seen{*p.Watermark, p.TotalCount})
			}
			if p.TotalCount == senders*each {
				return
			}
		}
	}()
	wg.Wait()
	<-done
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	lim := 200
	pos := map[string]int{} // newest first
	for off := 0; ; {
		f, _ := mailroom.ListInput{Limit: &lim, Offset: &off}.Filter()
		p, err := s.List(asBob, f)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range p.Messages {
			pos[r.MessageID] = off + i
		}
		if p.NextOffset == nil {
			break
		}
		off = *p.NextOffset
	}
	for _, o := range observed {
		if atOrBefore := len(pos) - pos[o.watermark]; atOrBefore != o.total {
			t.Fatalf("a listing saw %d messages up to watermark %s; %d are at or before it now", o.total, o.watermark, atOrBefore)
		}
	}
	t.Logf("%d listings checked", len(observed))
}

// A send on one instance wakes a subscriber on another, and names the
// recipient.
func TestChangeSignalCrossesInstances(t *testing.T) {
	url := pgtest.URL(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	ctx := context.Background()
	alice, _ := a.EnsureAgent(ctx, "alice")
	bob, _ := a.EnsureAgent(ctx, "bob")
	sub := b.Subscribe()
	defer sub.Close()
	wait := func(what string) mailroom.Change {
		t.Helper()
		select {
		case <-sub.C():
			return sub.Take()
		case <-time.After(10 * time.Second):
			t.Fatalf("no signal on instance B after %s", what)
		}
		return mailroom.Change{}
	}
	if _, err := a.Send(mailroom.WithCaller(ctx, alice), draft(t, "@bob")); err != nil {
		t.Fatal(err)
	}
	if c := wait("a send on A"); c.All || !c.Touches(bob.ID, nil) || c.Touches(alice.ID, nil) {
		t.Fatalf("change %+v, want bob's inbox only", c)
	}
	sub.Close()
	deadline := time.Now().Add(5 * time.Second)
	for b.Changes().Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.Changes().Len(); n != 0 {
		t.Fatalf("%d subscribers left after close", n)
	}
}

// SendMany stores what Send stores.
func TestSendManyStoresWhatSendStores(t *testing.T) {
	s := open(t, pgtest.URL(t), postgres.Options{})
	ctx := context.Background()
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	s.EnsureAgent(ctx, "carol")
	if err := s.GrantRole(ctx, "bob", "ops"); err != nil {
		t.Fatal(err)
	}
	d, err := mailroom.SendInput{To: []string{"@bob", "role:ops", "*"}, Subject: "seeded", Body: "zeppelin hangar",
		RelatedSessions: []string{"s1"}, RelatedTickets: []string{"#7"}, TaggedConcepts: []string{"WAL"}}.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	d.OriginSessionID = "SESSION:o"
	asAlice, asBob := mailroom.WithCaller(ctx, alice), mailroom.WithCaller(ctx, bob)
	r, err := s.Send(asAlice, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMany(asAlice, d, 3); err != nil {
		t.Fatal(err)
	}
	f, _ := mailroom.ListInput{Query: "zeppelin"}.Filter()
	p, err := s.List(asBob, f)
	if err != nil || p.TotalCount != 4 {
		t.Fatalf("bob's inbox: %d %v", p.TotalCount, err)
	}
	show := func(id string) string {
		m, err := s.Get(asBob, id)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(m.Subject, m.Body, m.From, m.To, m.Priority, m.OriginSessionID, m.RelatedSessions, m.RelatedTickets, m.TaggedConcepts)
	}
	want := show(r.MessageID)
	for _, row := range p.Messages {
		if got := show(row.MessageID); got != want {
			t.Fatalf("a SendMany copy:\n%s\nwant, as Send stored it:\n%s", got, want)
		}
	}
	if n, _ := s.PendingConceptJobs(ctx); n != 4 {
		t.Fatalf("%d concept jobs, want 4", n)
	}
	for _, who := range []mailroom.Identity{bob} {
		rc, err := s.MarkAllRead(mailroom.WithCaller(ctx, who), "", true)
		if err != nil || rc.MatchedCount != 4 {
			t.Fatalf("drain: %+v %v", rc, err)
		}
	}
}

// A send is two round trips (addresses, then one pipelined transaction),
// a reply two more (the parent), whatever the draft carries.
func TestSendRoundTrips(t *testing.T) {
	var rt roundTrips
	s := open(t, pgtest.URL(t), postgres.Options{Tracer: &rt})
	ctx := context.Background()
	alice, _ := s.EnsureAgent(ctx, "alice")
	if _, err := s.EnsureAgent(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	actx := mailroom.WithCaller(ctx, alice)
	d, err := mailroom.SendInput{To: []string{"@bob", "role:triage", "*"}, Subject: "s", Body: "b",
		RelatedSessions: []string{"SESSION:x"}, RelatedTickets: []string{"#12", "acme/api#7"},
		TaggedConcepts: []string{"WAL", "checkpoint"}}.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	d.OriginSessionID = "SESSION:pg"
	first, err := s.Send(actx, d) // prepares the statements
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		reply bool
		want  int64
	}{{"send", false, 2}, {"reply", true, 4}} {
		dd := d
		if tc.reply {
			dd.InReplyTo = first.MessageID
		}
		s.Send(actx, dd) // prepares what a reply adds
		rt.n.Store(0)
		if _, err := s.Send(actx, dd); err != nil {
			t.Fatal(err)
		}
		if n := rt.n.Load(); n != tc.want {
			t.Errorf("%s: %d round trips, want %d", tc.name, n, tc.want)
		}
	}
}

// A change whose inbox list is long in bytes (many roles with long names)
// still fits PostgreSQL's 8,000-byte NOTIFY payload: a drain of every role
// queue of an identity holding 70 such roles commits and wakes a listener.
func TestLongChangeFitsNotifyPayload(t *testing.T) {
	s := open(t, pgtest.URL(t), postgres.Options{})
	ctx := context.Background()
	alice, err := s.EnsureAgent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := s.EnsureAgent(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	var to []string
	for i := range 70 {
		role := fmt.Sprintf("%03d-%s", i, strings.Repeat("r", 120))
		if err := s.GrantRole(ctx, "bob", role); err != nil {
			t.Fatal(err)
		}
		if len(to) < 50 {
			to = append(to, "role:"+role)
		}
	}
	d := draft(t, "@bob")
	d.To = nil
	for _, a := range to {
		addr, err := mailroom.ParseAddress(a)
		if err != nil {
			t.Fatal(err)
		}
		d.To = append(d.To, addr)
	}
	if _, err := s.Send(mailroom.WithCaller(ctx, alice), d); err != nil {
		t.Fatalf("send to 50 long role names: %v", err)
	}
	sub := s.Subscribe()
	defer sub.Close()
	rc, err := s.MarkAllRead(mailroom.WithCaller(ctx, bob), "", true)
	if err != nil {
		t.Fatalf("mark all read with 70 long roles: %v", err)
	}
	if rc.ReadCount != 1 || rc.FailureCount != 0 {
		t.Errorf("read %d (%d failures), want the one message", rc.ReadCount, rc.FailureCount)
	}
	select {
	case <-sub.C():
		if c := sub.Take(); !c.Touches(bob.ID, nil) {
			t.Errorf("the drain's change %+v does not name bob", c)
		}
	case <-time.After(10 * time.Second):
		t.Error("no change signal for the drain")
	}
}

// Every pooled connection runs with JIT off (a generic plan of a large
// statement paid hundreds of milliseconds compiling), while the server's
// default is left alone; a URL that sets jit keeps its choice.
func TestPoolConnectionsRunWithoutJIT(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	s := open(t, url, postgres.Options{MaxConns: 4})
	var conns []*pgxpool.Conn
	for range 4 { // every connection the pool opens, not just the first
		c, err := s.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		var jit string
		if err := c.QueryRow(ctx, `SHOW jit`).Scan(&jit); err != nil {
			t.Fatal(err)
		}
		if jit != "off" {
			t.Errorf("pooled connection %d: jit = %q, want off", i, jit)
		}
		c.Release()
	}
	// A connection of its own sees the server's default: the store changed
	// its sessions, not the server.
	raw, err := pgx.Connect(ctx, pgtest.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	var def string
	if err := raw.QueryRow(ctx, `SELECT reset_val FROM pg_settings WHERE name = 'jit'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	t.Logf("server default jit = %s", def)

	on := open(t, url+"&jit=on", postgres.Options{})
	var jit string
	if err := on.Pool().QueryRow(ctx, `SHOW jit`).Scan(&jit); err != nil {
		t.Fatal(err)
	}
	if jit != "on" {
		t.Errorf("URL with jit=on: jit = %q, want on", jit)
	}
}

// A search that walks the message key, or asks the index for ranges of
// seqs, gives what the whole index gives: the store suite's full-text
// cases with every search walking a few seqs and then going on through the
// index, walking the whole store, asking for ranges of a few seqs (once,
// then the index; or down to the first message) or one range of them all.
func TestSearchWalksKeepTheResults(t *testing.T) {
	for _, c := range []struct {
		name  string
		force func(*postgres.Store)
	}{
		{"walk-7", func(s *postgres.Store) { postgres.WalkSearches(s, 7) }},
		{"walk-all", func(s *postgres.Store) { postgres.WalkSearches(s, 1<<40) }},
		{"range-7-once", func(s *postgres.Store) { postgres.RangeSearches(s, 7, 1) }},
		{"range-7-down", func(s *postgres.Store) { postgres.RangeSearches(s, 7, 1<<30) }},
		{"range-all", func(s *postgres.Store) { postgres.RangeSearches(s, 1<<40, 1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			storetest.RunSearch(t, func(t *testing.T) mailroom.Store {
				t.Parallel()
				s := open(t, pgtest.URL(t), postgres.Options{Now: storetest.NewClock().Now})
				c.force(s)
				return s
			})
		})
	}
}

// A database upgraded by a newer mailroom is refused, not misread.
func TestOpenRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url, postgres.Options{})
	if _, err := s.EnsureAgent(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO schema_migration (version, name) VALUES (9999, '9999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(ctx, url, postgres.Options{})
	if mailroom.ErrorCode(err) != mailroom.ECONFLICT || !strings.Contains(err.Error(), "schema version 9999 is newer than this mailroom knows") {
		t.Fatalf("open of a newer database: %v, want a conflict naming its version", err)
	}
	if _, err := s.Pool().Exec(ctx, `DELETE FROM schema_migration WHERE version = 9999`); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, url, postgres.Options{})
	ids, err := s2.Identities(ctx)
	if err != nil || len(ids) != 1 || ids[0].Name != "alice" {
		t.Fatalf("after the refused open: identities %+v, %v; want alice alone", ids, err)
	}
}

// SendMany delivers to whom Send delivers for every kind of address,
// a broadcast without a direct recipient included (its copies once
// reached nobody: x = ANY(NULL) is not false).
func TestSendManyDeliversAsSendDoes(t *testing.T) {
	s := open(t, pgtest.URL(t), postgres.Options{})
	ctx := context.Background()
	alice, _ := s.EnsureAgent(ctx, "alice")
	readers := map[string]mailroom.Identity{}
	for _, n := range []string{"bob", "carol", "dave"} {
		readers[n], _ = s.EnsureAgent(ctx, n)
	}
	if err := s.GrantRole(ctx, "dave", "ops"); err != nil {
		t.Fatal(err)
	}
	for _, to := range [][]string{{"*"}, {"@bob"}, {"role:ops"}, {"*", "role:ops"}, {"@bob", "*"}, {"@carol", "role:ops"}} {
		subject := fmt.Sprint(to)
		d, err := mailroom.SendInput{To: to, Subject: subject, Body: "b"}.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:o"
		if _, err := s.Send(mailroom.WithCaller(ctx, alice), d); err != nil {
			t.Fatal(err)
		}
		if err := s.SendMany(mailroom.WithCaller(ctx, alice), d, 2); err != nil {
			t.Fatal(err)
		}
		for name, who := range readers {
			lim := mailroom.MaxLimit
			f, err := mailroom.ListInput{Limit: &lim}.Filter()
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.List(mailroom.WithCaller(ctx, who), f)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, m := range p.Messages {
				if m.Subject == subject {
					n++
				}
			}
			if n != 0 && n != 3 {
				t.Errorf("to %v: %s sees %d of one Send and two SendMany copies, want 0 or 3", to, name, n)
			}
			if n == 0 && slices.Contains(to, "*") {
				t.Errorf("to %v: %s sees none of the broadcast", to, name)
			}
		}
	}
}
