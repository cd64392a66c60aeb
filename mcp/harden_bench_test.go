package mcp_test

import (
	"context"
	"encoding/json"
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
	"github.com/mailroom/mailroom/sqlite/benchstore"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// worstStore is benchstore.Worst at 100,000 messages (built once, cached):
// bob's inbox where every filter at its limit matches everything.
func worstStore(b *testing.B) (*benchstore.Store, mailroom.Identity) {
	st := benchstore.OpenRecipe(b, benchstore.Worst, 100_000)
	bob, err := mailroom.CallerFrom(st.Bob)
	if err != nil {
		b.Fatal(err)
	}
	return st, bob
}

// BenchmarkWorstArgumentsServed calls every read-only tool through MCP (in
// memory) at 100,000 messages with the costliest arguments the limits
// allow, under the default budgets: cpu-ms/op is the process's CPU per call
// (client included), stopped/op the share of calls the CPU budget stopped.
func BenchmarkWorstArgumentsServed(b *testing.B) {
	st, bob := worstStore(b)
	tags := benchstore.WorstTags()
	ctx := context.Background()
	ct, sst := gomcp.NewInMemoryTransports()
	if _, err := mcp.NewServer(st, mcp.Options{Identity: &bob}).MCPServer().Connect(ctx, sst, nil); err != nil {
		b.Fatal(err)
	}
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	q16 := strings.Join(benchstore.WorstWords[:16], " ")
	top, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "list_messages", Arguments: map[string]any{"offset": 100, "limit": 1}}) // under the 100 newest, untagged
	if err != nil || top.IsError {
		b.Fatal(top, err)
	}
	var page struct {
		Messages []struct {
			MessageID string `json:"messageId"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(top.Content[0].(*gomcp.TextContent).Text), &page); err != nil || len(page.Messages) != 1 {
		b.Fatal(text(top), err)
	}
	tagged := page.Messages[0].MessageID
	for _, tc := range []struct {
		name, tool string
		args       map[string]any
	}{
		{"list/first-page", "list_messages", map[string]any{}},
		{"list/limit-200", "list_messages", map[string]any{"limit": 200}},
		{"list/unread", "list_messages", map[string]any{"unreadOnly": true}},
		{"list/deep-cursor", "list_messages", map[string]any{"cursor": mailroom.Cursor(200)}},
		{"list/query-1-term-every-message", "list_messages", map[string]any{"query": benchstore.WorstWords[0]}},
		{"list/query-16-terms-every-message", "list_messages", map[string]any{"query": q16}},
		{"list/query-16-one-letter-prefixes", "list_messages", map[string]any{"query": "a* b* c* d* e* f* g* h* i* j* k* l* m* n* o* p*"}},
		{"list/tags-50-every-message", "list_messages", map[string]any{"taggedConcepts": tags}},
		{"list/tags-50-and-query-16", "list_messages", map[string]any{"taggedConcepts": tags, "query": q16}},
		{"list/offset-99950", "list_messages", map[string]any{"offset": 99_950}},
		{"list/box-all-from-to", "list_messages", map[string]any{"box": "all", "from": "@alice", "to": "@bob"}},
		{"list/related-to-50-concepts", "list_messages", map[string]any{"relatedTo": tagged}},
		{"get/50-concepts", "get_message", map[string]any{"messageId": tagged}},
		{"status", "mailbox_status", map[string]any{}},
		{"concepts/limit-500", "list_concepts", map[string]any{"limit": 500}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			stopped := 0
			cpu := processCPU()
			for b.Loop() {
				res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
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
	s, bob := worstStore(b)
	tags := benchstore.WorstTags()
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
		go cs.CallTool(ctx, &gomcp.CallToolParams{Name: "list_messages", Arguments: map[string]any{"taggedConcepts": tags, "query": strings.Join(benchstore.WorstWords[:16], " ")}})
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

// BenchmarkSessionFlood fills the session cap (1,000) from ten identities,
// each up to its share (100), then makes 1,000 more attempts from one of them
// (429: over its share) and 1,000 from an eleventh identity (503: the server
// is full), reporting the heap held per open session and that the refused
// attempts hold nothing.
func BenchmarkSessionFlood(b *testing.B) {
	for range b.N {
		b.StopTimer()
		ctx := context.Background()
		s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "f.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		var tokens []string
		for i := range 11 {
			id, err := s.EnsureAgent(ctx, fmt.Sprintf("agent-%d", i))
			if err != nil {
				b.Fatal(err)
			}
			tok, digest := mailroom.NewToken()
			if err := s.AddToken(ctx, id.ID, digest); err != nil {
				b.Fatal(err)
			}
			tokens = append(tokens, tok)
		}
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcp.NewServer(s, mcp.Options{}).HTTPHandler())
		ts := httptest.NewServer(mux)
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapInuse
		}
		open := func(tok string, n int) map[int]int {
			codes := map[int]int{}
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
				codes[resp.StatusCode]++
			}
			return codes
		}
		share := mcp.DefaultMaxSessions / 10
		before := heap()
		b.StartTimer()
		for _, tok := range tokens[:10] {
			if c := open(tok, share); c[http.StatusOK] != share {
				b.Fatalf("opening an identity's share: %v", c)
			}
		}
		b.StopTimer()
		atCap := heap()
		over, full := open(tokens[0], 1000), open(tokens[10], 1000)
		after := heap()
		if over[http.StatusTooManyRequests] != 1000 || full[http.StatusServiceUnavailable] != 1000 {
			b.Fatalf("beyond the share: %v; beyond the cap: %v", over, full)
		}
		b.ReportMetric(float64(atCap-before)/float64(10*share)/1024, "KiB/session")
		b.ReportMetric(float64(int64(after)-int64(atCap))/1024/1024, "MiB-growth-over-cap")
		ts.Close()
		s.Close()
	}
}
