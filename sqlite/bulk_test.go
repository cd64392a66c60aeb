package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
)

// TestSendManyStoresWhatSendStores compares stores row by row: one
// written by Send n times per draft, one by SendMany, one by a single
// SendBatch of every draft in transactions of 4 messages (so drafts share
// and span transactions) into a BulkLoad store, for drafts that use every
// edge (agents, a human, a role, broadcast, @me, sessions, tickets,
// concepts, a reply) from two senders. Only the generated ids and times
// may differ.
func TestSendManyStoresWhatSendStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type world struct {
		s     *Store
		alice context.Context
	}
	const (
		single = iota
		many
		batch
	)
	build := func(mode int) world {
		s, err := Open(ctx, filepath.Join(t.TempDir(), "m.db"), Options{BulkLoad: mode == batch})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.bulkChunk = 4
		alice, _ := s.EnsureAgent(ctx, "alice")
		bob, _ := s.EnsureAgent(ctx, "bob")
		s.EnsureAgent(ctx, "carol")
		if _, err := s.AddIdentity(ctx, "dana", mailroom.KindHuman); err != nil {
			t.Fatal(err)
		}
		if err := s.GrantRole(ctx, "carol", "reviewer"); err != nil {
			t.Fatal(err)
		}
		w := world{s: s, alice: mailroom.WithCaller(ctx, alice)}
		parent, err := s.Send(mailroom.WithCaller(ctx, bob), mkDraft(t, mailroom.SendInput{To: []string{"@alice"}, Subject: "parent", Body: "the parent"}))
		if err != nil {
			t.Fatal(err)
		}
		drafts := []mailroom.Draft{
			mkDraft(t, mailroom.SendInput{
				To:      []string{"@bob", "@me", "human:dana", "role:reviewer", "*", "role:next-session-of-alice", "@alice"},
				Subject: "everything", Body: "zeppelin hangar",
				RelatedSessions: []string{"SESSION:one", "SESSION:two"}, RelatedTickets: []string{"#1", "o/r#2"},
				Priority: "high", TaggedConcepts: []string{"wal", "checkpoint"},
			}),
			mkDraft(t, mailroom.SendInput{To: []string{"@bob"}, Subject: "a reply", Body: "replying", InReplyTo: parent.MessageID}),
			mkDraft(t, mailroom.SendInput{To: []string{"*"}, Subject: "all hands", Body: "broadcast body"}),
		}
		// Bob's draft is between alice's: a batch changes senders midway.
		drafts = append(drafts[:2], append([]mailroom.Draft{mkDraft(t, mailroom.SendInput{To: []string{"@alice", "role:reviewer"}, Subject: "from bob", Body: "bob writes"})}, drafts[2:]...)...)
		from := []mailroom.Identity{alice, alice, bob, alice}
		var sends []mailroom.BulkSend
		for i, d := range drafts {
			switch mode {
			case single:
				for range 3 {
					if _, err := s.Send(mailroom.WithCaller(ctx, from[i]), d); err != nil {
						t.Fatal(err)
					}
				}
			case many:
				if err := s.SendMany(mailroom.WithCaller(ctx, from[i]), d, 3); err != nil {
					t.Fatal(err)
				}
			case batch:
				sends = append(sends, mailroom.BulkSend{From: from[i], Draft: d, Copies: 3})
			}
		}
		if mode == batch {
			if err := s.SendBatch(ctx, sends); err != nil {
				t.Fatal(err)
			}
			if sends[0].Copies != 3 {
				t.Errorf("SendBatch changed its argument: %+v", sends[0])
			}
		}
		return w
	}
	want := dumpStore(t, build(single).s)
	if len(want) == 0 {
		t.Fatal("empty dump")
	}
	for name, mode := range map[string]int{"SendMany": many, "SendBatch": batch} {
		got := dumpStore(t, build(mode).s)
		for table, rows := range want {
			if !slices.Equal(rows, got[table]) {
				t.Errorf("table %s differs:\nSend:\n%s\n%s:\n%s", table, strings.Join(rows, "\n"), name, strings.Join(got[table], "\n"))
			}
		}
		for table := range got {
			if _, ok := want[table]; !ok {
				t.Errorf("table %s only written by %s", table, name)
			}
		}
	}
}

func TestSendManyRejectsWhatSendRejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, Memory, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	alice, _ := s.EnsureAgent(ctx, "alice")
	me := mailroom.WithCaller(ctx, alice)
	d := mkDraft(t, mailroom.SendInput{To: []string{"@nobody"}, Subject: "s", Body: "b"})
	if err := s.SendMany(me, d, 5); err == nil || !strings.Contains(err.Error(), "Unknown recipient: @nobody") {
		t.Fatalf("SendMany to an unknown agent: %v", err)
	}
	d.To = nil
	d.OriginSessionID = ""
	if err := s.SendMany(me, d, 5); mailroom.ErrorCode(err) != mailroom.EINVALID {
		t.Fatalf("SendMany without a session: %v", err)
	}
	var n int
	s.db.QueryRow(`SELECT count(*) FROM message`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d messages stored by failed calls", n)
	}
}

func mkDraft(t *testing.T, in mailroom.SendInput) mailroom.Draft {
	t.Helper()
	d, err := in.Draft(0)
	if err != nil {
		t.Fatal(err)
	}
	if d.OriginSessionID == "" {
		d.OriginSessionID = "SESSION:test"
	}
	return d
}

var (
	generatedID = regexp.MustCompile(`(MESSAGE|THREAD):[0-9a-f-]{36}`)
	timestamp   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z`)
)

// dumpStore returns every row of every table, generated ids replaced by
// their order of first use (messages by seq) and times by T, sorted.
// The full-text index is compared through queries: its segments depend on
// how many transactions wrote it, not on what it holds.
func dumpStore(t *testing.T, s *Store) map[string][]string {
	t.Helper()
	names := map[string]string{}
	rename := func(v string) string {
		v = generatedID.ReplaceAllStringFunc(v, func(id string) string {
			if n, ok := names[id]; ok {
				return n
			}
			kind, _, _ := strings.Cut(id, ":")
			names[id] = fmt.Sprintf("%s#%d", kind, len(names))
			return names[id]
		})
		return timestamp.ReplaceAllString(v, "T")
	}
	// Name ids in commit order first, so both stores number them alike.
	rows, err := s.db.Query(`SELECT id || ' ' || thread_id FROM message ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v string
		rows.Scan(&v)
		rename(v)
	}
	rows.Close()
	// change_log holds one row per transaction (bulk sends batch them) and
	// names its writing instance: it is not message state.
	var tables []string
	rows, err = s.db.Query(`SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%'
		AND name NOT IN ('schema_migration', 'change_log', 'message_fts', 'message_fts_data', 'message_fts_idx', 'message_fts_config') ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string][]string{}
	dump := func(name, q string) {
		rows, err := s.db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				fmt.Fprintf(&b, "%s=%v ", cols[i], v)
			}
			out[name] = append(out[name], rename(b.String()))
		}
		slices.Sort(out[name])
	}
	for _, n := range tables {
		dump(n, `SELECT * FROM "`+n+`"`)
	}
	// Times are blanked above; a send stamps one time on all its rows.
	dump("times", `SELECT
		(SELECT count(*) FROM delivery d JOIN message m ON m.seq = d.message_seq WHERE d.delivered_at <> m.created_at),
		(SELECT count(*) FROM concept_job j JOIN message m ON m.seq = j.message_seq WHERE j.run_after <> m.created_at),
		(SELECT count(*) FROM thread h JOIN message m ON m.thread_id = h.id AND m.in_reply_to IS NULL WHERE h.created_at <> m.created_at),
		(SELECT count(*) FROM message a JOIN message b ON b.seq = a.seq + 1 WHERE b.created_at < a.created_at)`)
	if r := out["times"]; len(r) != 1 || strings.Count(r[0], "=0 ") != 4 {
		t.Errorf("times differ within a send: %v", r)
	}
	for _, word := range []string{"zeppelin", "replying", "broadcast", "everything", "parent"} {
		dump("fts:"+word, `SELECT m.id FROM message_fts f JOIN message m ON m.seq = -f.rowid WHERE message_fts MATCH '`+word+`'`)
	}
	return out
}

// TestBulkLoadCloseLeavesOneSyncedFile: a BulkLoad store commits without
// syncing; Close moves the WAL into the database file (and syncs it), so
// the closed store is the file alone and opens with everything in it.
func TestBulkLoadCloseLeavesOneSyncedFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bulk.db")
	s, err := Open(ctx, path, Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := s.EnsureAgent(ctx, "alice")
	s.EnsureAgent(ctx, "bob")
	var sync int
	if err := s.db.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil || sync != 0 {
		t.Fatalf("synchronous during a bulk load = %d, %v; want 0 (OFF)", sync, err)
	}
	if err := s.SendMany(mailroom.WithCaller(ctx, alice), mkDraft(t, mailroom.SendInput{To: []string{"@bob"}, Subject: "s", Body: "b"}), 50); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no WAL before Close (%v): the test shows nothing", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("Close left a WAL of %d bytes", fi.Size())
	}
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM message`).Scan(&n); err != nil || n != 50 {
		t.Fatalf("%d messages after reopening (%v), want 50", n, err)
	}
}

// TestSendSeqRepliesToWhatItJustSent: an entry's Sent learns its message
// id before the next entry is asked for, so a reply to it can share its
// transaction (4 messages a transaction here: the root, 2 replies, then 1
// more in the next one) and joins its thread.
func TestSendSeqRepliesToWhatItJustSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, Memory, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.bulkChunk = 4
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	var root string
	sends := func(yield func(mailroom.BulkSend) bool) {
		b := mailroom.BulkSend{From: alice, Draft: mkDraft(t, mailroom.SendInput{To: []string{"@bob"}, Subject: "root", Body: "b"}), Copies: 1,
			Sent: func(id string) { root = id }}
		if !yield(b) {
			return
		}
		yield(mailroom.BulkSend{From: bob, Draft: mkDraft(t, mailroom.SendInput{To: []string{"@alice"}, Subject: "re", Body: "b", InReplyTo: root}), Copies: 3})
	}
	if err := s.SendSeq(ctx, sends); err != nil {
		t.Fatal(err)
	}
	var n, joined int
	if err := s.db.QueryRow(`SELECT count(*), sum(r.thread_id = p.thread_id) FROM message r JOIN message p ON p.seq = r.in_reply_to WHERE p.id = ?`, root).Scan(&n, &joined); err != nil {
		t.Fatal(err)
	}
	if n != 3 || joined != 3 {
		t.Fatalf("%d replies to the root, %d in its thread; want 3 and 3", n, joined)
	}
}

// TestSendManyIndexesInOneSegment: a bulk send indexes its messages in one
// statement, newest first (the index's keys are -seq, migration 0015), so
// FTS5 writes them as one segment; in seq order it would flush at every
// message and leave a segment per message for sends to merge. And a
// search finds them newest first.
func TestSendManyIndexesInOneSegment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "m.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	if err := s.SendMany(mailroom.WithCaller(ctx, alice), mkDraft(t, mailroom.SendInput{To: []string{"@bob"}, Subject: "s", Body: "kestrel"}), 40); err != nil {
		t.Fatal(err)
	}
	var segments int
	if err := s.db.QueryRow(`SELECT count(DISTINCT id >> 37) FROM message_fts_data WHERE id > 10`).Scan(&segments); err != nil || segments != 1 {
		t.Fatalf("%d full-text segments after one bulk send (%v), want 1", segments, err)
	}
	limit := 100
	f, err := mailroom.ListInput{Query: "kestrel", Limit: &limit}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.List(mailroom.WithCaller(ctx, bob), f)
	if err != nil || len(p.Messages) != 40 {
		t.Fatalf("search: %d rows, %v; want 40", len(p.Messages), err)
	}
	want := strs1(t, s, `SELECT id FROM message ORDER BY seq DESC`)
	for i, r := range p.Messages {
		if r.MessageID != want[i] {
			t.Fatalf("search row %d is %s, want %s (newest first)", i, r.MessageID, want[i])
		}
	}
}

func strs1(t *testing.T, s *Store, q string) []string {
	t.Helper()
	out, err := strs(context.Background(), s, q)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
