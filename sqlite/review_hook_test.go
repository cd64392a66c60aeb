package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
	"github.com/mailroom/mailroom/sqlite/benchstore"
)

// A purge of the newest mail frees its seqs for new messages: a hook
// session told of a purged message must still be told of the new one.
func TestReviewHookAnnouncesMailAfterAPurge(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{NoSync: true})
	alice, bob := agent(t, s, "alice"), agent(t, s, "bob")
	old, err := s.Send(alice, benchstore.Draft())
	if err != nil {
		t.Fatal(err)
	}
	if fresh, err := s.Announce(bob, "SESSION:h", []string{old.MessageID}); err != nil || len(fresh) != 1 {
		t.Fatalf("first announce %v %v", fresh, err)
	}
	if _, err := s.Purge(context.Background(), mailroom.PurgeRequest{Before: time.Now().Add(time.Hour), IncludeUnread: true}); err != nil {
		t.Fatal(err)
	}
	late, err := s.Send(alice, benchstore.Draft())
	if err != nil {
		t.Fatal(err)
	}
	if fresh, err := s.Announce(bob, "SESSION:h", []string{late.MessageID}); err != nil || len(fresh) != 1 {
		t.Fatalf("mail sent after a purge is not new to the hook session: %v %v", fresh, err)
	}
}
