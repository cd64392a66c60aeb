package postgres_test

import (
	"context"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/postgres"
	"github.com/mailroom/mailroom/postgres/pgtest"
	"github.com/mailroom/mailroom/storetest"
)

// A database from before migration 0005 gets its counts from the
// migration's backfill: the counter table and its triggers are taken away,
// mail changes meanwhile, and opening the store again recreates them.
func TestCountsMigrationBackfillsExistingMail(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url, postgres.Options{})
	alice, err := s.EnsureAgent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := s.EnsureAgent(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMany(mailroom.WithCaller(ctx, alice), draft(t, "@bob"), 30); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TABLE mailbox_count`,
		`DROP TRIGGER delivery_count_insert ON delivery`, `DROP TRIGGER delivery_count_delete ON delivery`, `DROP TRIGGER delivery_count_update ON delivery`,
		`DROP FUNCTION mailbox_count_insert`, `DROP FUNCTION mailbox_count_delete`, `DROP FUNCTION mailbox_count_update`,
		`DELETE FROM schema_migration WHERE version = 5`,
		// Mail that changed before the upgrade: 10 read, 5 archived.
		`UPDATE delivery SET read_at = delivered_at WHERE message_seq <= 10`,
		`UPDATE delivery SET archived_at = delivered_at WHERE message_seq > 25`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = open(t, url, postgres.Options{})
	st, err := s.Status(mailroom.WithCaller(ctx, bob))
	if err != nil || st.Unread.Total != 15 || st.Archived != 5 || st.Unread.ByPriority.Normal != 15 {
		t.Fatalf("status after the backfill: %+v archived %d %v", st.Unread, st.Archived, err)
	}
	f, _ := mailroom.ListInput{IncludeArchived: true}.Filter()
	if p, err := s.List(mailroom.WithCaller(ctx, bob), f); err != nil || p.TotalCount != 30 {
		t.Fatalf("total after the backfill: %d %v", p.TotalCount, err)
	}
}

// A database from before migration 0008 (deliveries without priority and
// human, the count functions of 0005 and 0007, fillfactor 70) gets both
// columns backfilled from its messages, and the counts stay right through
// the upgrade and the writes after it.
func TestDeliveryCountKeysMigrationBackfills(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url, postgres.Options{})
	alice, err := s.EnsureAgent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	dana, err := s.AddIdentity(ctx, "dana", mailroom.KindHuman)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := s.EnsureAgent(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.GrantRole(ctx, "bob", "ops"); err != nil {
		t.Fatal(err)
	}
	asBob := mailroom.WithCaller(ctx, bob)
	var ids []string
	for i, m := range []struct {
		from mailroom.Identity
		to   string
		p    mailroom.Priority
	}{
		{alice, "@bob", mailroom.PriorityHigh}, {dana, "@bob", mailroom.PriorityLow}, {dana, "*", mailroom.PriorityNormal},
		{alice, "role:ops", mailroom.PriorityHigh}, {dana, "@bob", mailroom.PriorityHigh}, {alice, "@bob", mailroom.PriorityNormal},
	} {
		d := draft(t, m.to)
		d.Priority = m.p
		rc, err := s.Send(mailroom.WithCaller(ctx, m.from), d)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		ids = append(ids, rc.MessageID)
	}
	if _, err := s.Archive(asBob, ids[4]); err != nil {
		t.Fatal(err)
	}
	if r := s.MarkRead(asBob, []string{ids[5]}); r[0].Status != "read" {
		t.Fatalf("mark %+v", r)
	}
	want, err := s.Status(asBob)
	if err != nil {
		t.Fatal(err)
	}
	// Back to schema 7.
	body := func(file, fn string) string {
		b, err := os.ReadFile("migrations/" + file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?s)CREATE (OR REPLACE )?FUNCTION ` + fn + `\(\).*?END \$\$;`).Find(b)
		if m == nil {
			t.Fatalf("%s has no function %s", file, fn)
		}
		return strings.Replace(string(m), "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
	}
	for _, q := range []string{
		body("0005_mailbox_count.sql", "mailbox_count_insert"),
		body("0005_mailbox_count.sql", "mailbox_count_delete"),
		body("0007_count_update_once.sql", "mailbox_count_update"),
		`ALTER TABLE delivery DROP COLUMN priority, DROP COLUMN human, SET (fillfactor = 70)`,
		`DROP TABLE role_hint, role_later, role_unread`, // and 0009's
		`DELETE FROM mailbox_count WHERE recipient IN (SELECT mailbox_id FROM role)`,
		`ALTER TABLE mailbox_count DROP COLUMN seqs`, // and 0010's
		`DROP TABLE read_mark`,                                                                            // and 0012's
		`ALTER TABLE message DROP COLUMN audience`, `CREATE INDEX message_fts ON message USING gin (fts)`, // and 0014's
		`DELETE FROM schema_migration WHERE version >= 8`,
	} {
		if _, err := s.Pool().Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	s.Close()
	s = open(t, url, postgres.Options{})
	var wrong int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM delivery d JOIN message m ON m.seq = d.message_seq JOIN identity i ON i.id = m.sender_id
		WHERE d.priority IS DISTINCT FROM m.priority OR d.human IS DISTINCT FROM (i.kind = 'human')`).Scan(&wrong); err != nil || wrong != 0 {
		t.Fatalf("%d deliveries with keys unlike their message's (%v)", wrong, err)
	}
	if got, err := s.Status(asBob); err != nil || !reflect.DeepEqual(got.Unread, want.Unread) || got.Archived != want.Archived {
		t.Fatalf("status after the upgrade %+v archived %d, before %+v archived %d (%v)", got.Unread, got.Archived, want.Unread, want.Archived, err)
	}
	// Writes after the upgrade, counted by the new triggers and the drain.
	if _, err := s.Unarchive(asBob, ids[4]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(mailroom.WithCaller(ctx, dana), draft(t, "@bob")); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Status(asBob); err != nil || st.Unread.Total != 6 || st.Unread.Human != 4 || st.Unread.ByPriority.High != 3 || st.Archived != 0 {
		t.Fatalf("status before the drain: %+v archived %d %v", st.Unread, st.Archived, err)
	}
	if rc, err := s.MarkAllRead(asBob, "", false); err != nil || rc.MatchedCount != 5 || rc.WithheldRoleCount != 1 {
		t.Fatalf("drain %+v %v", rc, err)
	}
	if st, err := s.Status(asBob); err != nil || st.Unread.Total != 1 || st.Unread.Role != 1 || st.Unread.Human != 0 || st.Unread.ByPriority.High != 1 {
		t.Fatalf("status after the drain: %+v %v", st.Unread, err)
	}
}

// A database from before migration 0009 (role deliveries uncounted, no
// candidate tables) gets its role counts, candidates and unread role
// deliveries from the migration's backfill, exactly what the write paths
// keep: the tables match row for row, every count is unchanged, and writes
// after the upgrade keep them.
func TestRoleCountMigrationBackfills(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url, postgres.Options{})
	ids := map[string]mailroom.Identity{}
	for _, n := range []string{"alice", "bob", "carol"} {
		id, err := s.EnsureAgent(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}
	dana, err := s.AddIdentity(ctx, "dana", mailroom.KindHuman)
	if err != nil {
		t.Fatal(err)
	}
	ids["dana"] = dana
	for _, g := range [][2]string{{"bob", "ops"}, {"bob", "triage"}, {"carol", "triage"}} {
		if err := s.GrantRole(ctx, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
	}
	as := func(who string) context.Context { return mailroom.WithCaller(ctx, ids[who]) }
	var sent []string
	for i, m := range []struct {
		from string
		to   []string
		p    mailroom.Priority
	}{
		{"alice", []string{"role:ops"}, mailroom.PriorityNormal},
		{"alice", []string{"role:ops", "role:triage"}, mailroom.PriorityHigh},
		{"bob", []string{"role:ops"}, mailroom.PriorityLow},
		{"alice", []string{"@bob", "role:ops"}, mailroom.PriorityNormal},
		{"dana", []string{"role:triage", "*"}, mailroom.PriorityHigh},
		{"bob", []string{"role:next-session-of-bob", "role:triage"}, mailroom.PriorityNormal},
		{"carol", []string{"role:triage", "@me"}, mailroom.PriorityNormal},
		{"alice", []string{"role:ops"}, mailroom.PriorityLow},
		{"alice", []string{"role:triage"}, mailroom.PriorityHigh},
	} {
		d := draft(t, m.to[0])
		for _, to := range m.to[1:] {
			a, err := mailroom.ParseAddress(to)
			if err != nil {
				t.Fatal(err)
			}
			d.To = append(d.To, a)
		}
		d.Priority = m.p
		rc, err := s.Send(as(m.from), d)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		sent = append(sent, rc.MessageID)
		if i == 1 || i == 4 { // and through the bulk path
			if err := s.SendMany(as(m.from), d, 2); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r := s.MarkRead(as("carol"), []string{sent[8]}); r[0].Status != "read" {
		t.Fatalf("mark %+v", r)
	}
	if _, err := s.Archive(as("bob"), sent[7]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(as("bob"), sent[0]); err != nil {
		t.Fatal(err)
	}
	type view struct {
		st     mailroom.Status
		totals []int
		inbox  mailroom.InboxState
	}
	views := func() map[string]view {
		out := map[string]view{}
		for who := range ids {
			st, err := s.Status(as(who))
			if err != nil {
				t.Fatal(err)
			}
			st.Watermark = nil
			in, err := s.InboxState(as(who))
			if err != nil {
				t.Fatal(err)
			}
			v := view{st: st, inbox: in}
			for _, in := range []mailroom.ListInput{{}, {UnreadOnly: true}, {Via: "role", IncludeArchived: true}, {ArchivedOnly: true}, {Priority: "high", Box: "all"}} {
				f, _ := in.Filter()
				p, err := s.List(as(who), f)
				if err != nil {
					t.Fatal(err)
				}
				v.totals = append(v.totals, p.TotalCount)
			}
			out[who] = v
		}
		return out
	}
	tables := func() string {
		var b strings.Builder
		for _, q := range []string{
			`SELECT recipient, archived, unread, via, priority, human, n, seqs FROM mailbox_count WHERE n <> 0 ORDER BY 1, 2, 3, 4, 5, 6`,
			`SELECT identity_id, message_seq FROM role_hint ORDER BY 1, 2`,
			`SELECT recipient, message_seq FROM role_later ORDER BY 1, 2`,
			`SELECT recipient, message_seq FROM role_unread ORDER BY 1, 2`,
		} {
			var rows string
			if err := s.Pool().QueryRow(ctx, `SELECT coalesce(string_agg(t::text, ' '), '') FROM (`+q+`) t`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			b.WriteString(q + ":\n  " + rows + "\n")
		}
		return b.String()
	}
	wantViews, wantTables := views(), tables()
	if strings.Contains(wantTables, ":\n  \n") {
		t.Fatalf("too little to backfill:\n%s", wantTables)
	}
	// Back to schema 8.
	body := func(file, fn string) string {
		b, err := os.ReadFile("migrations/" + file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?s)CREATE (OR REPLACE )?FUNCTION ` + fn + `\(\).*?END \$\$;`).Find(b)
		if m == nil {
			t.Fatalf("%s has no function %s", file, fn)
		}
		return string(m)
	}
	for _, q := range []string{
		body("0008_delivery_count_keys.sql", "mailbox_count_insert"),
		body("0008_delivery_count_keys.sql", "mailbox_count_delete"),
		body("0008_delivery_count_keys.sql", "mailbox_count_update"),
		`DROP TABLE role_hint, role_later, role_unread`,
		`DELETE FROM mailbox_count WHERE recipient IN (SELECT mailbox_id FROM role)`,
		`ALTER TABLE mailbox_count DROP COLUMN seqs`, // and 0010's
		`DROP TABLE read_mark`,                                                                            // and 0012's
		`ALTER TABLE message DROP COLUMN audience`, `CREATE INDEX message_fts ON message USING gin (fts)`, // and 0014's
		`DELETE FROM schema_migration WHERE version >= 9`,
	} {
		if _, err := s.Pool().Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	s.Close()
	s = open(t, url, postgres.Options{})
	if got := tables(); got != wantTables {
		t.Fatalf("after the backfill:\n%s\nkept by the writes before:\n%s", got, wantTables)
	}
	if got := views(); !reflect.DeepEqual(got, wantViews) {
		t.Fatalf("counts after the upgrade:\n%+v\nbefore:\n%+v", got, wantViews)
	}
	// Writes after the upgrade: a send to both roles, bob's drain with
	// the role queues, carol's mark unread of a role message.
	if _, err := s.Send(as("alice"), func() mailroom.Draft {
		d := draft(t, "role:ops")
		d.To = append(d.To, mailroom.Address{Kind: mailroom.AddrRole, Name: "triage"})
		return d
	}()); err != nil {
		t.Fatal(err)
	}
	if rc, err := s.MarkAllRead(as("bob"), "", true); err != nil || rc.MatchedCount != wantViews["bob"].st.Unread.Total+1 {
		t.Fatalf("drain %+v %v (bob had %d unread)", rc, err, wantViews["bob"].st.Unread.Total)
	}
	st, err := s.Status(as("bob"))
	if err != nil || st.Unread.Total != 0 || st.OldestUnreadAt != nil {
		t.Fatalf("bob after the drain: %+v oldest %v %v", st.Unread, st.OldestUnreadAt, err)
	}
	if _, err := s.MarkUnread(as("carol"), sent[8]); err != nil {
		t.Fatal(err)
	}
	// Each role count is what a walk of its listing returns.
	walk := func(who string, in mailroom.ListInput) int {
		n := 0
		in.Limit = ptr(2)
		for {
			f, _ := in.Filter()
			p, err := s.List(as(who), f)
			if err != nil {
				t.Fatal(err)
			}
			n += len(p.Messages)
			if p.NextCursor == nil {
				return n
			}
			in.Cursor = p.NextCursor
		}
	}
	if wrong, err := postgres.CountMismatches(ctx, s); err != nil || len(wrong) > 0 {
		t.Fatalf("counts after the upgrade's writes unlike a recount: %v %v", wrong, err)
	}
	throughs := 0
	for _, who := range []string{"bob", "carol"} {
		st, err := s.Status(as(who))
		if err != nil {
			t.Fatal(err)
		}
		if n := walk(who, mailroom.ListInput{Via: "role", UnreadOnly: true}); st.Unread.Role != n || n == 0 {
			t.Errorf("%s: unread.role %d, a walk returns %d", who, st.Unread.Role, n)
		}
		for _, r := range st.Roles {
			if n := walk(who, mailroom.ListInput{Via: "role", UnreadOnly: true, To: r.Role}); r.Unread != n {
				t.Errorf("%s: %s %d, a walk returns %d", who, r.Role, r.Unread, n)
			}
		}
		// A drain without the role queues says how many it left (counted
		// like the status), through a message or not, and leaves them.
		f, _ := mailroom.ListInput{Via: "role", UnreadOnly: true, Limit: ptr(2)}.Filter()
		p, err := s.List(as(who), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Messages) == 2 {
			throughs++
			if rc, err := s.MarkAllRead(as(who), p.Messages[1].MessageID, false); err != nil || rc.WithheldRoleCount != st.Unread.Role-1 {
				t.Errorf("%s: drain through the second newest role message %+v %v, unread.role %d", who, rc, err, st.Unread.Role)
			}
		}
		if rc, err := s.MarkAllRead(as(who), "", false); err != nil || rc.WithheldRoleCount != st.Unread.Role {
			t.Errorf("%s: drain %+v %v, unread.role %d", who, rc, err, st.Unread.Role)
		}
		if after, err := s.Status(as(who)); err != nil || after.Unread.Total != st.Unread.Role || after.Unread.Role != st.Unread.Role {
			t.Errorf("%s: after the drain %+v %v, unread.role before %d", who, after.Unread, err, st.Unread.Role)
		}
	}
	if throughs == 0 {
		t.Error("no holder had two unread role messages to drain through")
	}
}

// InboxState's fingerprint comes from counts: after each of a random mix of
// mailbox changes (sends to people, roles and everyone, marks, drains with
// and without the role queues, mark unread, archive, delete) it equals the
// unread count and seq sum of the inbox branches themselves, for every
// identity, and the counts match a recount.
func TestInboxStateMatchesTheUnreadSet(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.URL(t), postgres.Options{})
	storetest.InboxStateMatchesTheUnreadSet(t, s, func(c context.Context) (int, int64, error) { return postgres.ExactUnread(c, s) })
	if wrong, err := postgres.CountMismatches(ctx, s); err != nil || len(wrong) > 0 {
		t.Fatalf("counts unlike a recount: %v %v", wrong, err)
	}
}
