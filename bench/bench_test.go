package bench_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/bench"
	"github.com/mailroom/mailroom/mcp"
	"github.com/mailroom/mailroom/sqlite"
)

// The load generator against a real streamable HTTP server seeded through
// bench.Seed: every phase runs its operations without errors, the drain
// reads what the seed and the sends delivered, and /proc sampling of this
// process yields CPU and RSS figures.
func TestRunAgainstASeededServer(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "b.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := bench.Seed(ctx, s, bench.SeedOptions{Messages: 400, Agents: 3}); err != nil {
		t.Fatal(err)
	}
	me, err := s.EnsureAgent(ctx, "agent-0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.List(mailroom.WithCaller(ctx, me), mailroom.ListFilter{Box: mailroom.BoxInbox, Limit: 1})
	if err != nil || p.TotalCount < 150 {
		t.Fatalf("agent-0's inbox after seeding 400: %d %v", p.TotalCount, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewServer(s, mcp.Options{Identity: &me}).HTTPHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	rs, err := bench.Run(ctx, bench.Options{URL: srv.URL + "/mcp", Sessions: 2, Ops: 8, PID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bench.Result{}
	for _, r := range rs {
		got[r.Phase] = r
		if r.Errors != 0 {
			t.Errorf("%s: %d errors (%s)", r.Phase, r.Errors, r.Note)
		}
	}
	for _, name := range bench.Phases {
		r, ok := got[name]
		if !ok {
			t.Errorf("phase %s did not run", name)
			continue
		}
		if name == "wait-for-mail" && r.Ops == 0 {
			continue // skipped with a note when the server has no wait_for_mail
		}
		if r.Ops == 0 || r.P50 <= 0 || r.P99 < r.P50 || r.RSS == 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if d := got["drain"]; !strings.Contains(d.Note, "matched") || strings.Contains(d.Note, "matched 0,") {
		t.Errorf("drain: %q", d.Note)
	}
	var out bytes.Buffer
	bench.Report(&out, rs)
	if !strings.Contains(out.String(), "send p50 / ping p50 = ") {
		t.Errorf("report:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
}
