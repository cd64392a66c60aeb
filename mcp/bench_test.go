package mcp_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/mcp"
	"github.com/mailroom/mailroom/sqlite"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkDrainEndToEnd is one mark_read({all: true}) call from an MCP
// client over the in-memory transport, with 100,000 unread messages stored:
// argument checks, snapshot, marking, commit, read-back and the receipt.
func BenchmarkDrainEndToEnd(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "b.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		alice, _ := s.EnsureAgent(ctx, "alice")
		bob, _ := s.EnsureAgent(ctx, "bob")
		d, _ := mailroom.SendInput{To: []string{"@bob"}, Subject: "s", Body: "b"}.Draft(0)
		d.OriginSessionID = "SESSION:bench"
		if err := s.SendMany(mailroom.WithCaller(ctx, alice), d, n); err != nil {
			b.Fatal(err)
		}
		ct, st := gomcp.NewInMemoryTransports()
		if _, err := mcp.NewServer(s, mcp.Options{Identity: &bob}).MCPServer().Connect(ctx, st, nil); err != nil {
			b.Fatal(err)
		}
		cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "mark_read", Arguments: map[string]any{"all": true}})
		b.StopTimer()
		if err != nil || res.IsError {
			b.Fatalf("%v %v", err, res)
		}
		rc := res.StructuredContent.(map[string]any)
		if rc["status"] != "read" || rc["durableCount"] != float64(n) {
			b.Fatalf("receipt %v", rc)
		}
		cs.Close()
		s.Close()
		b.StartTimer()
	}
}
