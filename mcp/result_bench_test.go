//go:build unix

package mcp

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/sqlite"
)

// BenchmarkPageResult is one list_messages call for a page of 50 rows over
// a raw stream, in process: the argument checks, the store's page and the
// encoding of its result, with the plain result (plain) and with the go-sdk's
// own encoding of the same result (sdk, as before result.go).
func BenchmarkPageResult(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "m.db"), sqlite.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	for i := range 60 {
		d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: fmt.Sprintf("backfill deploy rollout %d", i), Body: "b"}.Draft(0)
		d.OriginSessionID = "SESSION:bench"
		if _, err := s.Send(mailroom.WithCaller(ctx, alice), d); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		sdk  bool
	}{{"plain", false}, {"sdk", true}} {
		b.Run(c.name, func(b *testing.B) {
			r := openRaw(b, NewServer(s, Options{Identity: &bob, sdkResults: c.sdk}).MCPServer(), "2025-11-25")
			req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_messages","arguments":{"limit":50}}}`
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				if out := r.call(req); len(out) < 10_000 {
					b.Fatalf("short page: %s", out)
				}
			}
			b.ReportMetric(float64((processCPU()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// processCPU is the process's user+system CPU time so far (the client's
// share of a raw call is reading one line).
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
