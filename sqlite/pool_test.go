package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// Concurrent listings keep the pool's connections, and so the statements
// prepared on them: a connection closed for being idle past the pool's
// limit takes its prepared statements with it.
func TestConcurrentListingsKeepTheirConnections(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "m.db"), sqlite.Options{NoSync: true})
	ctx := context.Background()
	alice, err := s.EnsureAgent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	c := mailroom.WithCaller(ctx, alice)
	for range 5 {
		d, err := mailroom.SendInput{To: []string{"@me"}, Subject: "s", Body: "b"}.Draft(0)
		if err != nil {
			t.Fatal(err)
		}
		d.OriginSessionID = "SESSION:test"
		if _, err := s.Send(c, d); err != nil {
			t.Fatal(err)
		}
	}
	f, err := mailroom.ListInput{}.Filter()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 40 {
				if p, err := s.List(c, f); err != nil || len(p.Messages) != 5 {
					t.Errorf("list: %v %d", err, len(p.Messages))
					return
				}
			}
		})
	}
	wg.Wait()
	if st := sqlite.PoolStats(s); st.MaxIdleClosed > 0 {
		t.Fatalf("%d connections were closed for being idle (%d opened in all)", st.MaxIdleClosed, st.OpenConnections)
	}
}
