package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/mcp"
	"github.com/mailroom/mailroom/sqlite"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// stampedSend starts the seed process sending n messages from alice to bob
// on db, one every `every`, and returns each message's commit time by id
// once the process is done.
func stampedSend(b *testing.B, db string, n int, every time.Duration) func() map[string]time.Time {
	b.Helper()
	seedBin := seedProgram(b)
	cmd := exec.Command(seedBin, "-db", db, "-from", "alice", "-to", "@bob", "-n", strconv.Itoa(n), "-every", every.String(), "-stamp")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stamps := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			stamps[f[0]] = time.Unix(0, ns)
		}
	}()
	return func() map[string]time.Time {
		<-done
		if err := cmd.Wait(); err != nil {
			b.Fatalf("seed: %v", err)
		}
		return stamps
	}
}

func percentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "median-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

func benchStore(b *testing.B) (*sqlite.Store, mailroom.Identity) {
	b.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "m.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	return s, bob
}

// BenchmarkNotifyLatencyAcrossProcesses: bob subscribes to mailbox://inbox
// (MCP client over the in-memory transport); another process sends 200
// messages 25 ms apart; each latency is from the sender's commit to bob's
// client receiving notifications/resources/updated.
func BenchmarkNotifyLatencyAcrossProcesses(b *testing.B) {
	const n = 200
	for range b.N {
		b.StopTimer()
		s, bob := benchStore(b)
		ctx := context.Background()
		srv := mcp.NewServer(s, mcp.Options{Identity: &bob})
		ct, st := gomcp.NewInMemoryTransports()
		if _, err := srv.MCPServer().Connect(ctx, st, nil); err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		var arrivals []time.Time
		cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "bench", Version: "v0"}, &gomcp.ClientOptions{
			ResourceUpdatedHandler: func(context.Context, *gomcp.ResourceUpdatedNotificationRequest) {
				mu.Lock()
				arrivals = append(arrivals, time.Now())
				mu.Unlock()
			},
		}).Connect(ctx, ct, &gomcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		if err := cs.Subscribe(ctx, &gomcp.SubscribeParams{URI: mcp.InboxURI}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		stamps := stampedSend(b, s.Path(), n, 25*time.Millisecond)()
		// Let the last notification land: at most a poll and a round.
		time.Sleep(200 * time.Millisecond)
		b.StopTimer()
		mu.Lock()
		var commits []time.Time
		for _, t := range stamps {
			commits = append(commits, t)
		}
		slices.SortFunc(commits, func(x, y time.Time) int { return x.Compare(y) })
		var lat []time.Duration
		for _, c := range commits {
			// The first notification after the commit (the stamp is taken
			// just after Send returns, so allow it a millisecond).
			i, _ := slices.BinarySearchFunc(arrivals, c.Add(-time.Millisecond), func(a, t time.Time) int { return a.Compare(t) })
			if i == len(arrivals) {
				b.Fatalf("no notification after the commit at %v (%d notifications for %d commits)", c, len(arrivals), n)
			}
			lat = append(lat, max(arrivals[i].Sub(c), 0))
		}
		b.ReportMetric(float64(len(arrivals))/n, "notifications/send")
		mu.Unlock()
		percentiles(b, lat)
		cs.Close()
	}
}

// BenchmarkWaitForMailWakeAcrossProcesses: bob calls wait_for_mail again
// and again (since: the last message it returned) while another process
// sends 100 messages 40 ms apart; each latency is from the sender's commit
// to the call's result reaching bob's client.
func BenchmarkWaitForMailWakeAcrossProcesses(b *testing.B) {
	const n = 100
	for range b.N {
		b.StopTimer()
		s, bob := benchStore(b)
		ctx := context.Background()
		ct, st := gomcp.NewInMemoryTransports()
		if _, err := mcp.NewServer(s, mcp.Options{Identity: &bob}).MCPServer().Connect(ctx, st, nil); err != nil {
			b.Fatal(err)
		}
		cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		wait := stampedSend(b, s.Path(), n, 40*time.Millisecond)
		returned := map[string]time.Time{}
		since := ""
		for len(returned) < n {
			args := map[string]any{"timeoutSeconds": 10}
			if since != "" {
				args["since"] = since
			}
			res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "wait_for_mail", Arguments: args})
			at := time.Now()
			if err != nil || res.IsError {
				b.Fatalf("wait_for_mail: %v %+v", err, res)
			}
			out := res.StructuredContent.(map[string]any)
			if out["timedOut"] == true {
				b.Fatalf("timed out with %d of %d returned", len(returned), n)
			}
			for _, m := range out["messages"].([]any) {
				id := m.(map[string]any)["messageId"].(string)
				returned[id] = at
				since = id
			}
		}
		stamps := wait()
		b.StopTimer()
		var lat []time.Duration
		for id, at := range returned {
			lat = append(lat, max(at.Sub(stamps[id]), 0))
		}
		percentiles(b, lat)
		cs.Close()
	}
}

// BenchmarkSendWithSubscribers is add_message throughput over streamable
// HTTP from one sender with 100 agents subscribed to mailbox://inbox on the
// same server, against none subscribed. Two targets: round-robin to 100
// other agents (the cost of deciding that a commit touches no subscriber),
// and round-robin to the 100 subscribers (each send then also notifies one,
// whose client receives it). The server is `mailroom serve --http` in a
// process of its own (built from this tree, or $MAILROOM_BENCH_SERVE, so
// that two builds can be compared; $MAILROOM_BENCH_PPROF is passed to
// --pprof), so its CPU per send (from /proc) is what a user's server pays;
// the clients run here and their CPU is reported apart. The machine is
// shared, so the modes are measured interleaved in one run: rounds of 200
// sends alternate between subscribed and unsubscribed, and the medians of
// the per-round ratios are reported.
func BenchmarkSendWithSubscribers(b *testing.B) {
	const agents, rounds, perRound = 100, 6, 200
	for range b.N {
		ctx := context.Background()
		db := filepath.Join(b.TempDir(), "m.db")
		s, err := sqlite.Open(ctx, db, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		tokens := map[string]string{}
		addAgent := func(name string) {
			id, err := s.EnsureAgent(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			tok, digest := mailroom.NewToken()
			if err := s.AddToken(ctx, id.ID, digest); err != nil {
				b.Fatal(err)
			}
			tokens[name] = tok
		}
		var toSubs, toOthers []string
		for i := range agents {
			name, other := fmt.Sprintf("agent-%03d", i), fmt.Sprintf("other-%03d", i)
			addAgent(name)
			addAgent(other)
			toSubs, toOthers = append(toSubs, "@"+name), append(toOthers, "@"+other)
		}
		addAgent("sender")
		s.Close()
		url, pid := serveProcess(b, db)
		connectAs := func(name string) *gomcp.ClientSession {
			hc := &http.Client{Transport: bearer{token: tokens[name], base: http.DefaultTransport}}
			cs, err := gomcp.NewClient(&gomcp.Implementation{Name: name, Version: "v0"}, nil).
				Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
			if err != nil {
				b.Fatal(err)
			}
			return cs
		}
		var subs []*gomcp.ClientSession
		for i := range agents {
			cs := connectAs(fmt.Sprintf("agent-%03d", i))
			defer cs.Close()
			subs = append(subs, cs)
		}
		sender := connectAs("sender")
		defer sender.Close()
		k := 0
		measure := func(to []string) (rate, serverCPU, clientCPU float64) {
			srv0, cpu0, t0 := procCPU(b, pid), processCPU(), time.Now()
			for range perRound {
				res, err := sender.CallTool(ctx, &gomcp.CallToolParams{Name: "add_message", Arguments: map[string]any{"to": to[k%len(to)], "subject": "s", "body": "b"}})
				if err != nil || res.IsError {
					b.Fatalf("add_message: %v %+v", err, res)
				}
				k++
			}
			d := time.Since(t0)
			us := func(d time.Duration) float64 { return float64(d.Microseconds()) / perRound }
			return perRound / d.Seconds(), us(procCPU(b, pid) - srv0), us(processCPU() - cpu0)
		}
		type series struct{ on, off, onCPU, offCPU, onClient, offClient, ratios, cpuRatios []float64 }
		var others, toSub series
		for r := range rounds {
			for _, subscribed := range []bool{r%2 == 0, r%2 != 0} {
				// Subscribe and Unsubscribe return once the server's
				// listener is in place or gone.
				for _, cs := range subs {
					if subscribed {
						err = cs.Subscribe(ctx, &gomcp.SubscribeParams{URI: mcp.InboxURI})
					} else {
						err = cs.Unsubscribe(ctx, &gomcp.UnsubscribeParams{URI: mcp.InboxURI})
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				for _, x := range []struct {
					s  *series
					to []string
				}{{&others, toOthers}, {&toSub, toSubs}} {
					rate, cpu, client := measure(x.to)
					if subscribed {
						x.s.on, x.s.onCPU, x.s.onClient = append(x.s.on, rate), append(x.s.onCPU, cpu), append(x.s.onClient, client)
					} else {
						x.s.off, x.s.offCPU, x.s.offClient = append(x.s.off, rate), append(x.s.offCPU, cpu), append(x.s.offClient, client)
					}
				}
			}
			for _, x := range []*series{&others, &toSub} {
				x.ratios = append(x.ratios, x.on[len(x.on)-1]/x.off[len(x.off)-1])
				x.cpuRatios = append(x.cpuRatios, x.offCPU[len(x.offCPU)-1]/x.onCPU[len(x.onCPU)-1])
			}
		}
		med := func(x []float64) float64 { x = slices.Clone(x); slices.Sort(x); return x[len(x)/2] }
		for name, x := range map[string]*series{"others": &others, "subscribers": &toSub} {
			b.ReportMetric(med(x.off), "sends/s-to-"+name+"-0subs")
			b.ReportMetric(med(x.on), "sends/s-to-"+name+"-100subs")
			b.ReportMetric(med(x.ratios), "ratio-to-"+name)
			b.ReportMetric(med(x.offCPU), "server-us/send-to-"+name+"-0subs")
			b.ReportMetric(med(x.onCPU), "server-us/send-to-"+name+"-100subs")
			// Throughput a CPU-bound server would keep: 0 subscribers' CPU
			// per send over 100's.
			b.ReportMetric(med(x.cpuRatios), "cpu-ratio-to-"+name)
			b.ReportMetric(med(x.offClient), "client-us/send-to-"+name+"-0subs")
			b.ReportMetric(med(x.onClient), "client-us/send-to-"+name+"-100subs")
		}
	}
}

// serveProcess starts `mailroom serve --http` on db in a process of its
// own (see BenchmarkSendWithSubscribers) and returns its MCP URL and pid.
func serveProcess(b *testing.B, db string) (string, int) {
	b.Helper()
	bin := os.Getenv("MAILROOM_BENCH_SERVE")
	if bin == "" {
		bin = filepath.Join(toolDir, "mailroom")
		serveOnce.Do(func() {
			if out, err := exec.Command("go", "build", "-o", bin, "github.com/mailroom/mailroom/cmd/mailroom").CombinedOutput(); err != nil {
				serveErr = fmt.Errorf("build mailroom: %v\n%s", err, out)
			}
		})
		if serveErr != nil {
			b.Fatal(serveErr)
		}
	}
	args := []string{"serve", "--db", db, "--http", "127.0.0.1:0", "--concepts", "off"}
	if p := os.Getenv("MAILROOM_BENCH_PPROF"); p != "" {
		args = append(args, "--pprof", p)
	}
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "mailroom: serving MCP at "); ok {
			go io.Copy(io.Discard, out)
			return strings.Fields(u)[0], cmd.Process.Pid
		}
	}
	b.Fatalf("mailroom serve printed no address (%v)", sc.Err())
	return "", 0
}

var (
	serveOnce sync.Once
	serveErr  error
)

// procCPU is the CPU time (user and system) process pid has used, from
// /proc (in clock ticks of 10 ms, so measure hundreds of milliseconds).
func procCPU(b *testing.B, pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	// After the name: state is field 3, utime and stime fields 14 and 15.
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
