package postgres_test

import (
	"context"
	"testing"

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
