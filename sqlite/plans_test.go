package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
)

// ftsStatements are the statements FTS5 prepares on the full-text index's
// own tables when it writes (from fts5_index.c and fts5_storage.c, for a
// table named message_fts). They run inside SQLite, so no hook sees them;
// their plans are checked from their text. The segment delete is the one
// that became a full scan once PRAGMA optimize recorded message_fts_data
// with 2 rows.
var ftsStatements = []struct {
	q    string
	args int
}{
	{`DELETE FROM 'main'.'message_fts_data' WHERE id>=? AND id<=?`, 2},
	{`REPLACE INTO 'main'.'message_fts_data'(id, block) VALUES(?,?)`, 2},
	{`INSERT INTO 'main'.'message_fts_idx'(segid,term,pgno) VALUES(?,?,?)`, 3},
	{`DELETE FROM 'main'.'message_fts_idx' WHERE segid=?`, 1},
	{`DELETE FROM 'main'.'message_fts_idx' WHERE (segid, (pgno/2)) = (?1, ?2)`, 2},
	{`SELECT pgno FROM 'main'.'message_fts_idx' WHERE segid=? AND term<=? ORDER BY term DESC LIMIT 1`, 2},
	{`SELECT pgno FROM 'main'.'message_fts_idx' WHERE segid=? AND term>? ORDER BY term ASC LIMIT 1`, 2},
	{`REPLACE INTO 'main'.'message_fts_docsize' VALUES(?,?)`, 2},
	{`SELECT sz FROM 'main'.'message_fts_docsize' WHERE id=?`, 1},
	{`REPLACE INTO 'main'.'message_fts_config' VALUES(?,?)`, 2},
}

// triggerStatements are the statements of the personal delivery count
// triggers (migration 0012's), with NEW and OLD columns as parameters:
// like FTS5's, they run inside SQLite where no hook sees them, and every
// send, delete and purge runs them once per delivery.
var triggerStatements = []struct {
	q    string
	args int
}{
	{`INSERT INTO mailbox_count (recipient_id, archived, unread, via, priority, human, n, seqs)
		SELECT ?1, ?2 IS NOT NULL,
			?3 IS NULL AND ?5 > coalesce((SELECT k.through_seq FROM read_mark k WHERE k.recipient_id = ?1), 0),
			?4, m.priority, s.kind = 'human', 1, ?5
		FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = ?5
		ON CONFLICT DO UPDATE SET n = n + 1, seqs = seqs + excluded.seqs`, 5},
	{`UPDATE mailbox_count SET n = n - 1, seqs = seqs - ?5
		WHERE recipient_id = ?1 AND archived = (?2 IS NOT NULL)
		AND unread = (?3 IS NULL AND ?5 > coalesce((SELECT k.through_seq FROM read_mark k WHERE k.recipient_id = ?1), 0))
		AND via = ?4
		AND (priority, human) = (SELECT m.priority, s.kind = 'human' FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = ?5)`, 5},
}

// TestPlansDoNotDependOnStoreSize: a store opened empty and then grown
// (through the bulk path) plans its hot statements (every statement a send,
// a listing, a read, a mark and a drain run, recorded through
// Hooks.Statement, plus FTS5's own) as a copy of it does after a full
// ANALYZE at its final size, and so does the same store once refreshStats
// has measured it. Plans are compared, not timed.
func TestPlansDoNotDependOnStoreSize(t *testing.T) {
	t.Parallel()
	if raceDetector {
		t.Skip("deterministic and single-threaded, and minutes long under -race: scripts/test.sh runs it without")
	}
	const n = 20_000 // messages; a multiple of 100
	ctx := context.Background()
	dir := t.TempDir()
	var (
		recording atomic.Bool
		mu        sync.Mutex
		order     []string
		seen      = map[string][]any{}
	)
	// The fold held, so that hotPath steps it and its statements are
	// recorded.
	hooks := &sqlite.Hooks{HoldFold: true, Statement: func(q string, args []any) {
		if !recording.Load() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, ok := seen[q]; !ok {
			seen[q] = slices.Clone(args)
			order = append(order, q)
		}
	}}
	// Unsynced: 600 commits, and plans do not depend on fsync.
	grown := open(t, filepath.Join(dir, "grown.db"), sqlite.Options{Hooks: hooks, NoSync: true})
	m := seedMailbox(t, grown, n)
	recording.Store(true)
	hotPath(t, grown, m)
	recording.Store(false)
	if len(order) < 20 {
		t.Fatalf("recorded only %d statements", len(order))
	}

	// The reference: the same data, analyzed in full by SQLite itself.
	ref := filepath.Join(dir, "analyzed.db")
	if err := sqlite.VacuumInto(ctx, grown, ref); err != nil {
		t.Fatal(err)
	}
	// The store's own connection settings: foreign keys change the plan
	// of an insert into a parent table.
	refDSN := "file:" + ref + "?_pragma=foreign_keys(1)"
	db, err := sql.Open("sqlite", refDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`ANALYZE`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, _ = sql.Open("sqlite", refDSN)
	db.SetMaxOpenConns(1)

	compare := func(label string, plan func(q string, args []any) ([]string, error)) {
		t.Helper()
		diffs := 0
		check := func(q string, args []any) {
			got, err := plan(q, args)
			if err != nil {
				t.Fatalf("%s: %s: %v", label, q, err)
			}
			want, err := explain(db, q, args)
			if err != nil {
				t.Fatalf("reference: %s: %v", q, err)
			}
			if !slices.Equal(accessPaths(got), accessPaths(want)) {
				diffs++
				t.Errorf("%s: plan of\n  %s\nis\n  %s\nanalyzed at %d messages it is\n  %s", label, oneLine(q),
					strings.Join(got, "\n  "), n, strings.Join(want, "\n  "))
			}
		}
		for _, q := range order {
			check(q, seen[q])
		}
		for _, st := range ftsStatements {
			check(st.q, make([]any, st.args))
		}
		for _, st := range triggerStatements {
			check(st.q, make([]any, st.args))
		}
		all := len(order) + len(ftsStatements) + len(triggerStatements)
		t.Logf("%s: %d of %d statements planned as at full size", label, all-diffs, all)
	}
	compare("opened empty, grown", func(q string, args []any) ([]string, error) {
		return sqlite.ExplainQueryPlan(ctx, grown, q, args)
	})

	// Past the floor, the store measures its own statistics (at close) and
	// still plans alike, the full-text tables included.
	sqlite.SetStatsFloor(grown, n/2)
	grown.Close()
	measured := open(t, filepath.Join(dir, "grown.db"), sqlite.Options{})

	compare("measured at close", func(q string, args []any) ([]string, error) {
		return sqlite.ExplainQueryPlan(ctx, measured, q, args)
	})
}

// mailbox is a store seeded by seedMailbox.
type mailbox struct {
	agents       []context.Context
	names        []string
	thread       string // a thread of 3 messages
	role, rare   string
	reader, from int // indexes into agents
}

// seedMailbox stores n messages (n a multiple of 100) shaped like a team's
// mailbox rather than a benchmark's: 50 agents sending to 25 of them, a
// few roles, threads, sessions, tickets and 300 concepts, through the bulk
// path in batches of 100 (one thread of 3 and 97 single messages, each
// batch from one sender to one recipient, every fifth also to a role).
func seedMailbox(t *testing.T, s *sqlite.Store, n int) mailbox {
	t.Helper()
	ctx := context.Background()
	m := mailbox{role: "reviewer", rare: "zeppelin", reader: 3, from: 10}
	for i := range 50 {
		name := "a" + strconv.Itoa(i)
		m.agents = append(m.agents, agent(t, s, name))
		m.names = append(m.names, name)
	}
	for _, name := range []string{"reviewer", "oncall", "release"} {
		for _, who := range []string{m.names[3], m.names[17], m.names[29]} {
			if err := s.GrantRole(ctx, who, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range n / 100 {
		// Everyone sends, half of the agents receive: one sender's mail
		// is less than one inbox, so a sender filter starts from the
		// sender's messages.
		from, to := i%50, (i*7+3)%25
		if from == to {
			to = (to + 1) % 25
		}
		in := mailroom.SendInput{
			To:      []string{"@" + m.names[to]},
			Subject: "Handoff " + strconv.Itoa(i), Body: benchstore.Draft().Body + " batch" + strconv.Itoa(i),
			OriginSessionID: "SESSION:s" + strconv.Itoa(i%500),
			TaggedConcepts:  []string{"topic-" + strconv.Itoa(i%300), "topic-" + strconv.Itoa((i*13)%300)},
		}
		if i%5 == 0 {
			in.To = append(in.To, "role:"+[]string{"reviewer", "oncall", "release"}[i%3])
		}
		if i%50 == 0 {
			in.RelatedTickets = []string{"#" + strconv.Itoa(i)}
			in.Body += " " + m.rare
		}
		d, err := in.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Send(m.agents[from], d)
		if err != nil {
			t.Fatal(err)
		}
		if from == m.from {
			m.thread = r.ThreadID
		}
		reply := d
		reply.InReplyTo = r.MessageID
		if err := s.SendMany(m.agents[from], reply, 2); err != nil {
			t.Fatal(err)
		}
		if err := s.SendMany(m.agents[from], d, 97); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// hotPath runs what a server runs most, so Hooks.Statement records it: sends
// of every kind, listings with each filter, a read, mailbox_status, a mark
// and a drain.
func hotPath(t *testing.T, s *sqlite.Store, m mailbox) {
	t.Helper()
	sender, reader := m.agents[m.from], m.agents[m.reader]
	to := "@" + m.names[m.reader]
	d := benchstore.Draft()
	d.To = nil
	var drafts []mailroom.Draft
	for _, in := range []mailroom.SendInput{
		{To: []string{to}, Subject: "s", Body: "b"},
		{To: []string{to, "role:reviewer"}, Subject: "s", Body: "b", RelatedSessions: []string{"SESSION:x"}, RelatedTickets: []string{"#1"}, TaggedConcepts: []string{"wal"}},
		{To: []string{"*"}, Subject: "s", Body: "b"},
	} {
		d, err := in.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:hot"
		drafts = append(drafts, d)
	}
	var first mailroom.SendReceipt
	for i, d := range drafts {
		r, err := s.Send(sender, d)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r
		}
	}
	reply := drafts[0]
	reply.InReplyTo = first.MessageID
	if _, err := s.Send(sender, reply); err != nil {
		t.Fatal(err)
	}
	for _, in := range []mailroom.ListInput{
		{}, {UnreadOnly: true}, {ThreadID: m.thread}, {From: "@" + m.names[m.from]}, {To: "role:reviewer"},
		{Query: m.rare}, {TaggedConcepts: []string{"topic-7"}}, {Box: "outbox"}, {Box: "all"},
		{UnreadOnly: true, Priority: "high"}, {IncludeArchived: true}, {ArchivedOnly: true}, {Via: "role", UnreadOnly: true},
	} {
		f, err := in.Filter()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.List(reader, f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(reader, first.MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Status(reader); err != nil {
		t.Fatal(err)
	}
	if res := s.MarkRead(reader, []string{first.MessageID}); len(res) != 1 || res[0].Status != "read" {
		t.Fatalf("%+v", res)
	}
	if _, err := s.MarkAllRead(reader, "", false); err != nil {
		t.Fatal(err)
	}
	// Reads under the drain's read mark, and its fold.
	for _, in := range []mailroom.ListInput{{}, {UnreadOnly: true}, {ThreadID: m.thread}} {
		f, err := in.Filter()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.List(reader, f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(reader, first.MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Status(reader); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkUnread(reader, first.MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkAllRead(reader, "", false); err != nil {
		t.Fatal(err)
	}
	for {
		more, err := sqlite.FoldStep(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
}

func agent(t testing.TB, s *sqlite.Store, name string) context.Context {
	t.Helper()
	id, err := s.EnsureAgent(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return mailroom.WithCaller(context.Background(), id)
}

func explain(db *sql.DB, q string, args []any) ([]string, error) {
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, err
		}
		plan = append(plan, detail)
	}
	return plan, rows.Err()
}

// accessPaths reduces a plan to how it reads each table (which index,
// which constraints, scan or search, and whether it sorts), sorted: two
// plans that read every table the same way may still join them in another
// order, which is a tie at one size and not a cost that grows.
func accessPaths(plan []string) []string {
	var paths []string
	for _, step := range plan {
		if strings.HasPrefix(step, "SEARCH ") || strings.HasPrefix(step, "SCAN ") && step != "SCAN CONSTANT ROW" ||
			strings.HasPrefix(step, "USE TEMP B-TREE") {
			paths = append(paths, step)
		}
	}
	slices.Sort(paths)
	return paths
}

func oneLine(q string) string { return strings.Join(strings.Fields(q), " ") }

// A listing by sender or by address walks the smaller side: the sender's
// messages, or those to the address, when they are fewer than a mailbox
// holds, else the mailbox. SQLite plans a statement once for every sender
// and address, and walked the mailbox: agent-0's from: @agent-1 at 1M read
// 670k personal deliveries (~1 s), and a sender of a few old messages cost
// a page as much. bob holds role:reviewer and role:ops; dave sent five old
// messages (two to bob, one to reviewer, two to ops), alice hundreds, two
// of them tagged.
func TestListingsBySenderOrAddressWalkTheSmallerSide(t *testing.T) {
	t.Parallel()
	var (
		recording atomic.Bool
		mu        sync.Mutex
		pages     []string // the page statements a listing ran, and their arguments
		pageArgs  [][]any
	)
	hooks := &sqlite.Hooks{Statement: func(q string, args []any) {
		if recording.Load() && strings.Contains(q, "ORDER BY seq DESC LIMIT") && !strings.HasPrefix(q, "SELECT 0 ") { // not the count
			mu.Lock()
			defer mu.Unlock()
			pages, pageArgs = append(pages, q), append(pageArgs, slices.Clone(args))
		}
	}}
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlite.Options{Hooks: hooks, NoSync: true})
	alice, bob, dave := agent(t, s, "alice"), agent(t, s, "bob"), agent(t, s, "dave")
	for _, r := range []string{"reviewer", "ops"} {
		if err := s.GrantRole(context.Background(), "bob", r); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []struct {
		from context.Context
		to   string
		n    int
	}{{dave, "@bob", 2}, {dave, "role:reviewer", 1}, {dave, "role:ops", 2}, {alice, "@bob", 300}, {alice, "role:reviewer", 60}} {
		if err := s.SendMany(m.from, draftTo(t, m.to), m.n); err != nil {
			t.Fatal(err)
		}
	}
	tagged, err := mailroom.SendInput{To: []string{"@bob"}, Subject: "s", Body: "b", TaggedConcepts: []string{"zeppelin"}}.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	tagged.OriginSessionID = "SESSION:test"
	if err := s.SendMany(alice, tagged, 2); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A range of the personal mailbox's index (with a bound on seq): a
	// walk of the mailbox. The filter's walk is a range of the sender's,
	// the address's or the tag's index.
	mailboxWalk := regexp.MustCompile(`INDEX delivery_\w+ \(recipient_id=\?( AND message_seq[<>]\?)?\)$`)
	filterWalk := regexp.MustCompile(`INDEX (message_sender \(sender_id=\?( AND seq[<>]\?)?|(message_to_address \(address|message_concept_concept \(concept_id)=\?( AND message_seq[<>]\?)?)\)$`)
	for _, c := range []struct {
		in      mailroom.ListInput
		total   int
		senders int  // the branches that walk the filter's index, at least; 0: the mailbox is walked
		readAll bool // bob has read everything first
	}{
		{mailroom.ListInput{From: "@dave"}, 5, 2, false}, {mailroom.ListInput{From: "@dave", UnreadOnly: true}, 5, 2, false},
		{mailroom.ListInput{From: "@dave", Via: "direct"}, 2, 1, false}, {mailroom.ListInput{Box: "all", From: "@dave"}, 5, 2, false},
		{mailroom.ListInput{From: "@alice"}, 362, 0, false},
		// Two messages to role:ops: fewer than bob's personal mail and
		// his reviewer queue (the ops queue holds as many).
		{mailroom.ListInput{To: "role:ops"}, 2, 2, false}, {mailroom.ListInput{To: "role:ops", UnreadOnly: true}, 2, 2, false},
		// Two messages with a tag.
		{mailroom.ListInput{TaggedConcepts: []string{"CONCEPT:zeppelin"}}, 2, 2, false},
		// Read all but one new message: the unread range holds one
		// delivery, fewer than dave's six messages.
		{mailroom.ListInput{From: "@dave", UnreadOnly: true}, 1, 0, true},
	} {
		if c.readAll {
			if _, err := s.MarkAllRead(bob, "", true); err != nil {
				t.Fatal(err)
			}
			if err := s.SendMany(dave, draftTo(t, "@bob"), 1); err != nil {
				t.Fatal(err)
			}
		}
		f, err := c.in.Filter()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		pages, pageArgs = nil, nil
		mu.Unlock()
		recording.Store(true)
		p, err := s.List(bob, f)
		recording.Store(false)
		if err != nil {
			t.Fatal(err)
		}
		if p.TotalCount != c.total || len(p.Messages) != min(c.total, 50) {
			t.Errorf("%+v: %d rows, totalCount %d, want %d", c.in, len(p.Messages), p.TotalCount, c.total)
		}
		if len(pages) != 1 {
			t.Fatalf("%+v: %d page statements recorded", c.in, len(pages))
		}
		plan, err := explain(db, pages[0], pageArgs[0])
		if err != nil {
			t.Fatal(err)
		}
		walks, senders := 0, 0
		for _, step := range plan {
			if mailboxWalk.MatchString(step) {
				walks++
			}
			if filterWalk.MatchString(step) {
				senders++
			}
		}
		if c.senders > 0 && (walks > 0 || senders < c.senders) || c.senders == 0 && walks == 0 {
			t.Errorf("%+v: the page walks the personal mailbox %d times and the sender's messages %d times, want the sender's in %d branches (0: the mailbox)\nplan:\n  %s",
				c.in, walks, senders, c.senders, strings.Join(plan, "\n  "))
		}
	}
	// A store written before addresses were made unique (@me beside
	// @<self>) may list one address twice in a message: the walk of the
	// address still yields each message once.
	if err := s.SendMany(dave, draftTo(t, "@bob", "@alice"), 2); err != nil {
		t.Fatal(err)
	}
	// The store's background work (the full-text merger after a send) may
	// hold the write lock: this writer waits for it.
	execRaw(t, path+"?_pragma=busy_timeout(10000)", `INSERT INTO message_to (message_seq, position, address)
		SELECT message_seq, position + 100, address FROM message_to WHERE address = '@alice'`)
	f, err := mailroom.ListInput{To: "@alice"}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.List(bob, f); err != nil || p.TotalCount != 2 || len(p.Messages) != 2 {
		t.Fatalf("to: @alice with the address listed twice: %v, %d rows, totalCount %d", err, len(p.Messages), p.TotalCount)
	}
}

// A role holder's listings by a route only personal mail takes (direct,
// broadcast, or to the reader's own address) count from the personal
// counters alone: the count still counted the role queues and subtracted
// the deliveries hidden from the holder, reading every candidate (all of
// a queue whose mail the holder also gets personally).
func TestPersonalRoutesSkipTheRoleCandidates(t *testing.T) {
	t.Parallel()
	var (
		recording atomic.Bool
		mu        sync.Mutex
		counts    []string
	)
	hooks := &sqlite.Hooks{Statement: func(q string, args []any) {
		if recording.Load() && strings.HasPrefix(q, "SELECT 0 ") {
			mu.Lock()
			defer mu.Unlock()
			counts = append(counts, q)
		}
	}}
	s := open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{Hooks: hooks, NoSync: true})
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	if err := s.GrantRole(context.Background(), "bob", "reviewer"); err != nil {
		t.Fatal(err)
	}
	if err := s.SendMany(alice, draftTo(t, "@bob", "role:reviewer"), 5); err != nil {
		t.Fatal(err)
	}
	for _, in := range []mailroom.ListInput{{Via: "direct"}, {Via: "broadcast"}, {To: "@me"}, {To: "@bob", UnreadOnly: true}} {
		f, err := in.Filter()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		counts = nil
		mu.Unlock()
		recording.Store(true)
		_, err = s.List(bob, f)
		recording.Store(false)
		if err != nil {
			t.Fatal(err)
		}
		if len(counts) != 1 {
			t.Fatalf("%+v: %d counts recorded", in, len(counts))
		}
		if strings.Contains(counts[0], "role_count") {
			t.Errorf("%+v: the count reads the role queues' counters and candidates:\n%s", in, oneLine(counts[0]))
		}
	}
}
