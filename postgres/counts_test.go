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
		`DELETE FROM schema_migration WHERE version = 8`,
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
