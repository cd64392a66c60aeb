package mcp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/mcp"
	"github.com/mailroom/mailroom/sqlite"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

var benchWords = strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa")

// worstStore is bob's inbox of 100,000 messages that each carry all 16
// benchWords and the same 50 concepts: every filter at its limit matches
// everything.
func worstStore(b *testing.B) (*sqlite.Store, mailroom.Identity, []string) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "worst.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	alice, _ := s.EnsureAgent(ctx, "alice")
	bob, _ := s.EnsureAgent(ctx, "bob")
	tags := make([]string, mailroom.MaxConceptFilter)
	for i := range tags {
		tags[i] = fmt.Sprintf("topic %02d", i)
	}
	d, err := mailroom.SendInput{To: []string{"@bob"}, Subject: "worst case", Body: strings.Join(benchWords, " "), TaggedConcepts: tags}.Draft(0)
	if err != nil {
		b.Fatal(err)
	}
	d.OriginSessionID = "SESSION:bench"
	start := time.Now()
	if err := s.SendMany(mailroom.WithCaller(ctx, alice), d, 100_000); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded in %v", time.Since(start))
	return s, bob, tags
}

// BenchmarkWorstArgumentsServed calls list_messages through MCP (in
// memory) at 100,000 messages with the costliest arguments the limits allow,
// under the default budgets: cpu-ms/op is the process's CPU per call,
// stopped/op how many calls the CPU budget stopped.
func BenchmarkWorstArgumentsServed(b *testing.B) {
	s, bob, tags := worstStore(b)
	ctx := context.Background()
	ct, st := gomcp.NewInMemoryTransports()
	if _, err := mcp.NewServer(s, mcp.Options{Identity: &bob}).MCPServer().Connect(ctx, st, nil); err != nil {
		b.Fatal(err)
	}
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	q16 := strings.Join(benchWords, " ")
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"first-page", map[string]any{}},
		{"query-16-terms-every-message", map[string]any{"query": q16}},
		{"query-16-one-letter-prefixes", map[string]any{"query": "a* b* c* d* e* f* g* h* i* j* k* l* m* n* o* p*"}},
		{"tags-50-every-message", map[string]any{"taggedConcepts": tags}},
		{"tags-50-and-query-16", map[string]any{"taggedConcepts": tags, "query": q16}},
		{"offset-99950", map[string]any{"offset": 99_950}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			stopped := 0
			cpu := processCPU()
			for b.Loop() {
				res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "list_messages", Arguments: tc.args})
				if err != nil {
					b.Fatal(err)
				}
				if res.IsError {
					if msg := text(res); !strings.Contains(msg, "of CPU") {
						b.Fatal(msg)
					}
					stopped++
				}
			}
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(stopped)/float64(b.N), "stopped/op")
		})
	}
}

// doneStore records when each List returns.
type doneStore struct {
	mailroom.Store
	started chan struct{}
	done    chan time.Time
}

func (d doneStore) List(ctx context.Context, f mailroom.ListFilter) (mailroom.Page, error) {
	d.started <- struct{}{}
	p, err := d.Store.List(ctx, f)
	d.done <- time.Now()
	return p, err
}

// BenchmarkDisconnectToEndOfDBWork starts the costliest listing over HTTP
// with no budgets, lets it run 100 ms, drops the client's connection and
// reports how long the database work went on after that (ms/disconnect).
func BenchmarkDisconnectToEndOfDBWork(b *testing.B) {
	s, bob, tags := worstStore(b)
	ds := doneStore{Store: s, started: make(chan struct{}, 1), done: make(chan time.Time, 1)}
	tok, digest := mailroom.NewToken()
	if err := s.AddToken(context.Background(), bob.ID, digest); err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewServer(ds, mcp.Options{CallBudget: -1, CPUBudget: -1}).HTTPHandler())
	ts := httptest.NewServer(mux)
	defer ts.Close()
	hc := &http.Client{Transport: bearer{token: tok, base: http.DefaultTransport}}
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(context.Background(),
		&gomcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	var lags []time.Duration
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		go cs.CallTool(ctx, &gomcp.CallToolParams{Name: "list_messages", Arguments: map[string]any{"taggedConcepts": tags, "query": strings.Join(benchWords, " ")}})
		<-ds.started
		time.Sleep(100 * time.Millisecond)
		cancel()
		at := time.Now()
		lags = append(lags, (<-ds.done).Sub(at))
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "median-ms/disconnect")
	b.ReportMetric(float64(lags[len(lags)-1].Microseconds())/1000, "max-ms/disconnect")
}

// BenchmarkSessionFlood opens sessions until the cap (1,000) and then
// 1,000 more attempts, reporting the heap held per open session and that the
// attempts beyond the cap hold nothing.
func BenchmarkSessionFlood(b *testing.B) {
	for range b.N {
		b.StopTimer()
		ctx := context.Background()
		s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "f.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		alice, _ := s.EnsureAgent(ctx, "alice")
		tok, digest := mailroom.NewToken()
		s.AddToken(ctx, alice.ID, digest)
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcp.NewServer(s, mcp.Options{}).HTTPHandler())
		ts := httptest.NewServer(mux)
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapInuse
		}
		open := func(n int) (ok, refused int) {
			for range n {
				req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(initializeBody))
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok++
				} else if resp.StatusCode == http.StatusServiceUnavailable {
					refused++
				}
			}
			return ok, refused
		}
		before := heap()
		b.StartTimer()
		ok, _ := open(mcp.DefaultMaxSessions)
		b.StopTimer()
		atCap := heap()
		_, refused := open(1000)
		after := heap()
		if ok != mcp.DefaultMaxSessions || refused != 1000 {
			b.Fatalf("opened %d, refused %d", ok, refused)
		}
		b.ReportMetric(float64(atCap-before)/float64(ok)/1024, "KiB/session")
		b.ReportMetric(float64(int64(after)-int64(atCap))/1024/1024, "MiB-growth-over-cap")
		ts.Close()
		s.Close()
	}
}
