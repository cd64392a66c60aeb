package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/mailroom/mailroom/bench"
	"github.com/mailroom/mailroom/client"
	"github.com/spf13/cobra"
)

func (m *Main) benchCmd() *cobra.Command {
	var o bench.Options
	var url, phases string
	c := &cobra.Command{
		Use:   "bench [--url URL] [--token TOKEN]... [--sessions N] [--ops N] [--pid PID] [--phases LIST]",
		Short: "Drive a running server over streamable HTTP and report throughput, latency and server CPU",
		Long: `Connect --sessions MCP sessions to a running server and run the phases
(` + strings.Join(bench.Phases, ", ") + `),
--ops operations each (drain is one call). Reports ops/s, p50/p95/p99 and,
with --pid, the server's CPU per operation and resident memory from /proc.
Without --token the server must run in loopback development mode (--agent).`,
		Example: "  mailroom bench seed --db /tmp/b.db --messages 1000000 --agents 20\n" +
			"  mailroom serve --db /tmp/b.db --http 127.0.0.1:8787 --agent agent-0 &\n" +
			"  mailroom bench --url http://127.0.0.1:8787 --pid $! --ops 1000",
		Args: cobra.NoArgs,
		RunE: m.action(func(ctx context.Context, _ []string) error {
			endpoint, err := client.Endpoint(url)
			if err != nil {
				return err
			}
			o.URL = endpoint
			if phases != "" {
				o.Phases = strings.Split(phases, ",")
			}
			rs, err := bench.Run(ctx, o)
			bench.Report(m.stdout, rs)
			return err
		}),
	}
	f := c.Flags()
	f.StringVar(&url, "url", "http://127.0.0.1:8787", "the server (http://host:port, /mcp added)")
	f.StringSliceVar(&o.Tokens, "token", nil, "bearer token; repeat to give sessions different identities")
	f.IntVar(&o.Sessions, "sessions", 8, "sessions for send-concurrent")
	f.IntVar(&o.Ops, "ops", 500, "operations per phase")
	f.IntVar(&o.PID, "pid", 0, "the server's process id, for CPU per op and RSS")
	f.StringVar(&phases, "phases", "", "comma-separated phases (default all)")
	f.StringVar(&o.To, "to", "@me", "address the sends go to")
	f.IntVar(&o.Body, "body", 100, "send body size in bytes")

	var so bench.SeedOptions
	var cpuProfile string
	seed := &cobra.Command{
		Use:   "seed --messages N --agents M",
		Short: "Fill the database (--db) with a realistic dataset through the bulk path",
		Long: `Register agents agent-0 .. agent-(M-1) (agent-0 holds role:reviewer and gets
most mail) and store N messages through the store's bulk path: varied
subjects and bodies, reply threads, direct, broadcast and role mail. Every
body holds the word "` + bench.Common + `", one in a hundred "` + bench.Rare + `".`,
		Args: cobra.NoArgs,
		RunE: m.action(func(ctx context.Context, _ []string) error {
			if err := m.openFor(ctx, true); err != nil {
				return err
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			bulk, ok := m.store.(bench.BulkStore)
			if !ok {
				return fmt.Errorf("bench seed needs a store with a bulk send path (SQLite or PostgreSQL)")
			}
			so.Progress = m.stderr
			return cliError(bench.Seed(ctx, bulk, so))
		}),
	}
	seed.Flags().IntVar(&so.Messages, "messages", 10000, "how many messages")
	seed.Flags().IntVar(&so.Agents, "agents", 10, "how many agents")
	seed.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of the seeding to this file")
	c.AddCommand(seed)
	return c
}

// startCPUProfile starts writing a CPU profile to path; stop ends it.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
