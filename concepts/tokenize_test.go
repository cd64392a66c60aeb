package concepts

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mailroom/mailroom"
)

func TestTokenize(t *testing.T) {
	type tk struct {
		text, key string
		kind      tokenKind
	}
	tests := []struct {
		in   string
		want []tk
	}{
		{"POL-358 refund webhooks", []tk{{"POL-358", "pol-358", kindIdent}, {"refund", "refund", kindWord}, {"webhooks", "webhook", kindWord}}},
		{"see billing/webhooks_test.go.", []tk{{"see", "", kindStop}, {"billing/webhooks_test.go", "billing/webhooks_test.go", kindIdent}}},
		{"max_connections and MaxOpenConns", []tk{{"max_connections", "max_connections", kindIdent}, {"and", "", kindStop}, {"MaxOpenConns", "maxopenconns", kindIdent}}},
		{"grpc.NewClient() replaces grpc.Dial", []tk{{"grpc.NewClient", "grpc.newclient", kindIdent}, {"replaces", "", kindStop}, {"grpc.Dial", "grpc.dial", kindIdent}}},
		{"the JWKS cache", []tk{{"the", "", kindStop}, {"JWKS", "jwks", kindWord}, {"cache", "cach", kindWord}}},
		{"multi-stage builds", []tk{{"multi-stage", "multi stage", kindWord}, {"builds", "build", kindWord}}},
		{"the server’s UUIDv7 ids", []tk{{"the", "", kindStop}, {"server", "server", kindWord}, {"UUIDv7", "uuidv7", kindIdent}, {"ids", "id", kindWord}}},
		{"@alice #482 14:05 1.14 https://x.io/a", []tk{{"@alice", "", kindStop}, {"#482", "", kindStop}, {"14:05", "", kindStop}, {"1.14", "", kindStop}, {"https://x.io/a", "", kindStop}}},
		{"Thanks! Please don't merge; it's silently failing", []tk{{"Thanks", "", kindStop}, {"Please", "", kindStop}, {"don't", "", kindStop}, {"merge", "merg", kindWord}, {"it", "", kindStop}, {"silently", "", kindStop}, {"failing", "", kindStop}}},
	}
	for _, tt := range tests {
		var got []tk
		for _, tok := range tokenize(tt.in) {
			got = append(got, tk{tok.text, tok.key, tok.kind})
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("tokenize(%q)\n got %v\nwant %v", tt.in, got, tt.want)
		}
	}
}

func TestTokenizeBreaks(t *testing.T) {
	toks := tokenize("Summary: disk full, docker prune (ran twice)\nnext line")
	var brk []string
	for _, tok := range toks {
		if tok.brk {
			brk = append(brk, tok.text)
		}
	}
	want := []string{"Summary", "disk", "docker", "ran", "next"}
	if !slices.Equal(brk, want) {
		t.Errorf("phrase breaks before %q, want %q", brk, want)
	}
}

func TestTerms(t *testing.T) {
	got := Terms(Document{Subject: "Rate limits", Body: "The rate limit lives in the store; see store/limit.go."})
	want := []string{"limit", "rate", "rate limit", "store", "store/limit.go"}
	if !slices.Equal(got, want) {
		t.Errorf("Terms = %q, want %q", got, want)
	}
	if got := Terms(Document{}); len(got) != 0 {
		t.Errorf("Terms of an empty document = %q", got)
	}
}

func TestEmbeddedExamples(t *testing.T) {
	e := NewEmbedded(nil)
	tests := []struct {
		doc  Document
		want []string // names expected among the concepts
	}{
		{Document{Subject: "Handoff: POL-358 refund webhook retries", Body: "The refund webhook handler retries with exponential backoff. Thanks!"},
			[]string{"POL-358", "exponential backoff"}},
		{Document{Subject: "Question", Body: "Should the Postgres connection pool be smaller? The connection pool holds 200 connections."},
			[]string{"connection pool"}},
		{Document{Body: "hi, thanks, please note"}, nil},
		{Document{}, nil},
	}
	for _, tt := range tests {
		got, err := e.Extract(context.Background(), tt.doc)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range got {
			names = append(names, c.Name)
		}
		for _, w := range tt.want {
			if !slices.Contains(names, w) {
				t.Errorf("Extract(%+v) = %q, want %q among them", tt.doc, names, w)
			}
		}
		if tt.want == nil && len(got) != 0 {
			t.Errorf("Extract(%+v) = %q, want none", tt.doc, names)
		}
	}
}

func TestEmbeddedDisplayName(t *testing.T) {
	// The most common surface form away from sentence starts names the concept.
	doc := Document{Body: "Consumer lag is high. The consumer lag grows; consumer lag on Kafka. Kafka partitions."}
	got, err := NewEmbedded(nil).Extract(context.Background(), doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0] != (mailroom.Concept{ID: "CONCEPT:consumer-lag", Name: "consumer lag"}) {
		t.Errorf("Extract = %v, want consumer lag first", got)
	}
}

type failingStats struct{}

var errStats = errors.New("stats unavailable")

func (failingStats) DocFreq(context.Context, []string) (map[string]int, int, error) {
	return nil, 0, errStats
}

func TestEmbeddedErrors(t *testing.T) {
	doc := Document{Subject: "rate limits"}
	if _, err := NewEmbedded(failingStats{}).Extract(context.Background(), doc); !errors.Is(err, errStats) {
		t.Errorf("Extract with failing stats: %v, want %v", err, errStats)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewEmbedded(nil).Extract(ctx, doc); !errors.Is(err, context.Canceled) {
		t.Errorf("Extract with a cancelled context: %v", err)
	}
}

func TestEmbeddedLongBody(t *testing.T) {
	body := strings.Repeat("é rate limiting ", 10000) // well past maxBodyBytes, cut mid-rune
	got, err := NewEmbedded(nil).Extract(context.Background(), Document{Body: body})
	if err != nil || len(got) == 0 {
		t.Fatalf("Extract(long body) = %v, %v", got, err)
	}
}

func TestMemStatsConcurrent(t *testing.T) {
	s := &MemStats{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				s.Add(Document{Subject: "rate limit", Body: fmt.Sprintf("token bucket %d-%d", i, j)})
				if _, _, err := s.DocFreq(context.Background(), []string{"rate limit"}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	df, total, err := s.DocFreq(context.Background(), []string{"rate limit", "token bucket", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	if total != 160 || df["rate limit"] != 160 || df["token bucket"] != 160 || df["absent"] != 0 {
		t.Errorf("DocFreq = %v, %d", df, total)
	}
}

// benchBody is a realistic message body of about 1 KB.
const benchBody = `Picking up POL-358 from the previous session. The refund webhook handler in
billing/webhooks.go now retries on 5xx responses from Stripe with exponential backoff, capped at
five attempts, and the retry loop selects on ctx.Done() so a cancelled request stops at once.
Still open: the idempotency key is derived from the event id, but Stripe sends duplicate events
with the same id after a retry, so we dedupe in the refund_events table keyed by event id. The
migration for that table is 0009 and it has a down migration this time. Tests in
billing/webhooks_test.go pass except TestRefundRetryJitter, which is flaky on CI because it
relies on wall-clock sleeps; it should use the fake clock from the scheduler package. I also
noticed the webhook signature check reads the whole body before verifying the length, which
lets a client send a very large payload; capping the body at 64 KiB with http.MaxBytesReader
would fix it. Please don't merge until the flaky test uses the fake clock. Thanks!`

func BenchmarkEmbeddedExtract(b *testing.B) {
	stats := &MemStats{}
	for _, m := range loadLabelled(b) {
		stats.Add(Document{Subject: m.Subject, Body: m.Body})
	}
	e := NewEmbedded(stats)
	doc := Document{Subject: "Handoff: POL-358 refund webhook retries", Body: benchBody}
	b.SetBytes(int64(len(doc.Subject) + len(doc.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Extract(context.Background(), doc); err != nil {
			b.Fatal(err)
		}
	}
}
