package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/concepts"
)

// stubExtractor is a fallback that records that it was asked.
type stubExtractor struct {
	mu    sync.Mutex
	calls int
}

var stubConcepts = []mailroom.Concept{{ID: "CONCEPT:from-fallback", Name: "from fallback"}}

func (s *stubExtractor) Extract(ctx context.Context, doc concepts.Document) ([]mailroom.Concept, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return stubConcepts, nil
}

func (s *stubExtractor) Name() string { return "stub" }

func (s *stubExtractor) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// syncBuffer is a log sink safe for the server and test goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ollamaReply writes Ollama's documented non-streamed chat answer with the
// given content.
func ollamaReply(w http.ResponseWriter, content string) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"model":             "gemma3",
		"created_at":        "2025-03-04T10:00:00.000000Z",
		"message":           map[string]any{"role": "assistant", "content": content},
		"done":              true,
		"done_reason":       "stop",
		"total_duration":    int64(4883583458),
		"load_duration":     int64(1334875),
		"prompt_eval_count": 26,
		"eval_count":        13,
	})
}

func newTestOllama(t *testing.T, url string, timeout time.Duration) (*Extractor, *stubExtractor, *syncBuffer) {
	t.Helper()
	fb := &stubExtractor{}
	logs := &syncBuffer{}
	o, err := New(Options{
		URL:      url,
		Model:    "gemma3:1b",
		Timeout:  timeout,
		Fallback: fb,
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return o, fb, logs
}

var testDoc = concepts.Document{Subject: "Handoff: POL-358 refund retries", Body: "The refund webhook now retries with exponential backoff."}

func TestOllamaRequestAndAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/chat" {
			t.Errorf("request %s %s, want POST /api/chat", r.Method, r.URL.Path)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
		var body map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Fatalf("request body: %v", err)
		}
		var keys []string
		for k := range body {
			keys = append(keys, k)
		}
		if len(body) != 5 {
			t.Errorf("request keys %v, want exactly model, messages, stream, format, options", keys)
		}
		if got := string(body["model"]); got != `"gemma3:1b"` {
			t.Errorf("model %s, want \"gemma3:1b\"", got)
		}
		if got := string(body["stream"]); got != "false" {
			t.Errorf("stream %s, want false", got)
		}
		if got := string(body["options"]); got != `{"temperature":0}` {
			t.Errorf("options %s, want {\"temperature\":0}", got)
		}
		var format struct {
			Type       string `json:"type"`
			Properties struct {
				Concepts struct {
					Type     string `json:"type"`
					MinItems int    `json:"minItems"`
					MaxItems int    `json:"maxItems"`
					Items    struct {
						Type      string `json:"type"`
						MaxLength int    `json:"maxLength"`
					} `json:"items"`
				} `json:"concepts"`
			} `json:"properties"`
			Required             []string `json:"required"`
			AdditionalProperties *bool    `json:"additionalProperties"`
		}
		if err := json.Unmarshal(body["format"], &format); err != nil {
			t.Errorf("format is not a schema object: %v", err)
		}
		c := format.Properties.Concepts
		if format.Type != "object" || c.Type != "array" || c.MinItems != 1 || c.MaxItems != 5 ||
			c.Items.Type != "string" || c.Items.MaxLength != 60 ||
			!reflect.DeepEqual(format.Required, []string{"concepts"}) ||
			format.AdditionalProperties == nil || *format.AdditionalProperties {
			t.Errorf("format schema %s is not the concepts schema", body["format"])
		}
		var msgs []chatMessage
		if err := json.Unmarshal(body["messages"], &msgs); err != nil {
			t.Fatalf("messages: %v", err)
		}
		if len(msgs) != 2 || msgs[0].Role != "system" || msgs[1].Role != "user" {
			t.Fatalf("messages %+v, want a system then a user message", msgs)
		}
		if !strings.Contains(msgs[0].Content, `{"concepts"`) {
			t.Errorf("system prompt does not show the answer form: %q", msgs[0].Content)
		}
		if !strings.Contains(msgs[1].Content, testDoc.Subject) || !strings.Contains(msgs[1].Content, testDoc.Body) {
			t.Errorf("user message %q lacks the subject or body", msgs[1].Content)
		}
		ollamaReply(w, `{"concepts": ["refund webhook", "POL-358", "exponential backoff", "Refund Webhook"]}`)
	}))
	defer srv.Close()
	o, fb, logs := newTestOllama(t, srv.URL, 5*time.Second)
	got, err := o.Extract(context.Background(), testDoc)
	if err != nil {
		t.Fatal(err)
	}
	want := []mailroom.Concept{
		{ID: "CONCEPT:refund-webhook", Name: "refund webhook"},
		{ID: "CONCEPT:pol-358", Name: "POL-358"},
		{ID: "CONCEPT:exponential-backoff", Name: "exponential backoff"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Extract = %v, want %v", got, want)
	}
	if fb.Calls() != 0 || logs.String() != "" {
		t.Errorf("fallback used (%d calls, log %q) on a good answer", fb.Calls(), logs.String())
	}
	if o.Name() != "ollama:gemma3:1b" {
		t.Errorf("Name() = %q", o.Name())
	}
}

func TestOllamaFallback(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"garbage content", func(w http.ResponseWriter, r *http.Request) {
			ollamaReply(w, "Sure! Here are the concepts: refund webhook, backoff")
		}},
		{"extra key", func(w http.ResponseWriter, r *http.Request) {
			ollamaReply(w, `{"concepts": ["refund webhook"], "reason": "because"}`)
		}},
		{"key in other case", func(w http.ResponseWriter, r *http.Request) {
			ollamaReply(w, `{"Concepts": ["refund webhook"]}`)
		}},
		{"empty list", func(w http.ResponseWriter, r *http.Request) {
			ollamaReply(w, `{"concepts": []}`)
		}},
		{"six concepts", func(w http.ResponseWriter, r *http.Request) {
			ollamaReply(w, `{"concepts": ["a1", "b2", "c3", "d4", "e5", "f6"]}`)
		}},
		{"wrong type", func(w http.ResponseWriter, r *http.Request) {
			ollamaReply(w, `{"concepts": "refund webhook"}`)
		}},
		{"overlong concept", func(w http.ResponseWriter, r *http.Request) {
			ollamaReply(w, `{"concepts": ["`+strings.Repeat("x", 61)+`"]}`)
		}},
		{"concept without letters", func(w http.ResponseWriter, r *http.Request) {
			ollamaReply(w, `{"concepts": ["refund", "--"]}`)
		}},
		{"trailing data", func(w http.ResponseWriter, r *http.Request) {
			ollamaReply(w, `{"concepts": ["refund"]} {"concepts": ["more"]}`)
		}},
		{"not Ollama JSON", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "<html>proxy error</html>")
		}},
		{"not done", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"message":{"role":"assistant","content":"{\"concepts\":[\"x1\"]}"},"done":false}`)
		}},
		{"status 500", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":"model runner crashed"}`, http.StatusInternalServerError)
		}},
		{"status 404 model not found", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":"model \"gemma3:1b\" not found, try pulling it first"}`, http.StatusNotFound)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			o, fb, logs := newTestOllama(t, srv.URL, 5*time.Second)
			got, err := o.Extract(context.Background(), testDoc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, stubConcepts) || fb.Calls() != 1 {
				t.Errorf("Extract = %v with %d fallback calls, want the fallback's answer", got, fb.Calls())
			}
			if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "reason=") {
				t.Errorf("fallback not logged with a reason: %q", l)
			}
		})
	}
}

func TestOllamaUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	o, fb, logs := newTestOllama(t, url, 5*time.Second)
	got, err := o.Extract(context.Background(), testDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, stubConcepts) || fb.Calls() != 1 {
		t.Errorf("Extract = %v with %d fallback calls, want the fallback's answer", got, fb.Calls())
	}
	if !strings.Contains(logs.String(), "request") {
		t.Errorf("log %q does not say the request failed", logs.String())
	}
}

func TestOllamaTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices a gone client only once the body is read
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		ollamaReply(w, `{"concepts": ["too late"]}`)
	}))
	defer srv.Close()
	const timeout = 200 * time.Millisecond
	o, fb, logs := newTestOllama(t, srv.URL, timeout)
	start := time.Now()
	got, err := o.Extract(context.Background(), testDoc)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, stubConcepts) || fb.Calls() != 1 {
		t.Errorf("Extract = %v with %d fallback calls, want the fallback's answer", got, fb.Calls())
	}
	if elapsed > timeout+time.Second {
		t.Errorf("Extract took %v with a %v timeout", elapsed, timeout)
	}
	if !strings.Contains(logs.String(), "deadline exceeded") {
		t.Errorf("log %q does not name the timeout", logs.String())
	}
}

func TestOllamaCallerCancelled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices a gone client only once the body is read
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	o, fb, _ := newTestOllama(t, srv.URL, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	_, err := o.Extract(ctx, testDoc)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Extract with a cancelled caller = %v, want context.Canceled", err)
	}
	if fb.Calls() != 0 {
		t.Errorf("fallback called %d times for a cancelled caller", fb.Calls())
	}
}

func TestOllamaDefaults(t *testing.T) {
	o, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Name() != "ollama:"+DefaultModel || o.endpoint != DefaultURL+"/api/chat" ||
		o.timeout != DefaultTimeout || o.fallback.Name() != "embedded" {
		t.Errorf("defaults: %+v", o)
	}
	o, err = New(Options{URL: "http://ollama:11434/"})
	if err != nil || o.endpoint != "http://ollama:11434/api/chat" {
		t.Errorf("trailing slash: endpoint %q, err %v", o.endpoint, err)
	}
	for _, bad := range []string{"localhost:11434", "ftp://x", "http://", "::"} {
		if _, err := New(Options{URL: bad}); mailroom.ErrorCode(err) != mailroom.EINVALID {
			t.Errorf("New(URL %q) error %v, want invalid", bad, err)
		}
	}
}

func TestParseAnswer(t *testing.T) {
	tests := []struct {
		content string
		want    []string // ids; nil means rejected
	}{
		{`{"concepts":["rate limiting"]}`, []string{"CONCEPT:rate-limiting"}},
		{" \n{\"concepts\":[\"A\",\"b\",\"c\",\"d\",\"e\"]}\n", []string{"CONCEPT:a", "CONCEPT:b", "CONCEPT:c", "CONCEPT:d", "CONCEPT:e"}},
		{`{"concepts":["Rate Limiting","rate-limiting"]}`, []string{"CONCEPT:rate-limiting"}},
		{`{"concepts":["` + strings.Repeat("é", 60) + `"]}`, []string{"CONCEPT:" + strings.Repeat("é", 60)}},
		{`{"concepts":["` + strings.Repeat("é", 61) + `"]}`, nil},
		{`{"concepts":[]}`, nil},
		{`{"concepts":null}`, nil},
		{`{"concepts":[null]}`, nil},
		{`{"concepts":[1]}`, nil},
		{`{"concepts":[["a"]]}`, nil},
		{`{"concepts":["a","b","c","d","e","f"]}`, nil},
		{`{"concepts":["ok"],"extra":1}`, nil},
		{`{"CONCEPTS":["ok"]}`, nil},
		{`{}`, nil},
		{`null`, nil},
		{`["ok"]`, nil},
		{`"ok"`, nil},
		{``, nil},
		{`{"concepts":["ok"]`, nil},
		{"```json\n{\"concepts\":[\"ok\"]}\n```", nil},
		{`{"concepts":["ok"]}x`, nil},
		{`{"concepts":["  "]}`, nil},
		{`{"concepts":["!!!"]}`, nil},
	}
	for _, tt := range tests {
		got, err := parseAnswer(tt.content)
		if tt.want == nil {
			if err == nil {
				t.Errorf("parseAnswer(%q) = %v, want an error", tt.content, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseAnswer(%q): %v", tt.content, err)
			continue
		}
		var ids []string
		for _, c := range got {
			ids = append(ids, c.ID)
		}
		if !reflect.DeepEqual(ids, tt.want) {
			t.Errorf("parseAnswer(%q) = %v, want %v", tt.content, ids, tt.want)
		}
	}
}

func TestOllamaSaysWhichExtractorAnswered(t *testing.T) {
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ollamaReply(w, `{"concepts":["refund retries"]}`)
	}))
	defer good.Close()
	o, _, _ := newTestOllama(t, good.URL, time.Second)
	if _, source, err := o.ExtractFrom(context.Background(), testDoc); err != nil || source != "ollama:gemma3:1b" {
		t.Fatalf("model answer: source %q, err %v", source, err)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ollamaReply(w, `not json`)
	}))
	defer bad.Close()
	o, _, _ = newTestOllama(t, bad.URL, time.Second)
	if _, source, err := o.ExtractFrom(context.Background(), testDoc); err != nil || source != "stub" {
		t.Fatalf("fallback answer: source %q, err %v", source, err)
	}
}
