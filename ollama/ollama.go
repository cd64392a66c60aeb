// Package ollama is a concept extractor (concepts.Extractor) backed by a
// model served by Ollama's HTTP chat API; it adapts that outside service,
// as package concepts adapts none.
package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/concepts"
)

// Defaults of Options.
const (
	// DefaultURL is where a local Ollama listens.
	DefaultURL = "http://localhost:11434"
	// DefaultModel is Ollama's "gemma3" tag, the 4B instruction-tuned
	// Gemma 3: small enough for a laptop CPU, good at short structured
	// answers.
	DefaultModel = "gemma3"
	// DefaultTimeout bounds one extraction, model load included.
	DefaultTimeout = 20 * time.Second
)

const (
	maxAnswerBytes  = 1 << 20  // an answer larger than this is garbage
	maxPromptBody   = 16 << 10 // body bytes sent to the model; the start says what a message is about
	maxOllamaRunes  = 60       // maxLength of a concept in the answer schema
	maxOllamaAnswer = 5        // maxItems of the answer schema
)

// Options configure an Ollama extractor. Zero fields take defaults.
type Options struct {
	URL     string        // Ollama's base URL; DefaultURL if empty
	Model   string        // model tag; DefaultModel if empty
	Timeout time.Duration // per extraction; DefaultTimeout if zero
	// Fallback answers when the model cannot: unreachable, too slow, a
	// non-200 status, or an answer outside the schema. Nil means an
	// Embedded extractor without Stats.
	Fallback   concepts.Extractor
	Logger     *slog.Logger // where fallbacks are reported; slog.Default if nil
	HTTPClient *http.Client // http.DefaultClient if nil
}

// Extractor extracts concepts with a model served by Ollama's chat API.
type Extractor struct {
	endpoint string // {URL}/api/chat
	model    string
	timeout  time.Duration
	fallback concepts.Extractor
	logger   *slog.Logger
	client   *http.Client
}

// New returns an Ollama extractor. It fails only on a malformed URL; it
// does not contact the server, which may come up later.
func New(opts Options) (*Extractor, error) {
	raw := opts.URL
	if raw == "" {
		raw = DefaultURL
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, mailroom.Errorf(mailroom.EINVALID, "ollama url %q: want http://host:port or https://host:port", raw)
	}
	o := &Extractor{
		endpoint: strings.TrimRight(u.String(), "/") + "/api/chat",
		model:    opts.Model,
		timeout:  opts.Timeout,
		fallback: opts.Fallback,
		logger:   opts.Logger,
		client:   opts.HTTPClient,
	}
	if o.model == "" {
		o.model = DefaultModel
	}
	if o.timeout <= 0 {
		o.timeout = DefaultTimeout
	}
	if o.fallback == nil {
		o.fallback = concepts.NewEmbedded(nil)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	if o.client == nil {
		o.client = http.DefaultClient
	}
	return o, nil
}

// Name implements concepts.Extractor.
func (o *Extractor) Name() string { return "ollama:" + o.model }

// Extract implements concepts.Extractor. When the model fails it logs why and returns
// the fallback's concepts; it returns an error only when ctx itself is done
// or the fallback fails.
func (o *Extractor) Extract(ctx context.Context, doc concepts.Document) ([]mailroom.Concept, error) {
	cs, _, err := o.ExtractFrom(ctx, doc)
	return cs, err
}

// ExtractFrom implements Sourced: it says whether the model or the fallback
// answered, so tags record where they came from.
func (o *Extractor) ExtractFrom(ctx context.Context, doc concepts.Document) ([]mailroom.Concept, string, error) {
	got, err := o.ask(ctx, doc)
	if err == nil {
		return got, o.Name(), nil
	}
	if ctx.Err() != nil {
		// The caller gave up (shutdown): not the model's failure.
		return nil, "", ctx.Err()
	}
	o.logger.LogAttrs(ctx, slog.LevelWarn, "concepts: ollama extraction failed; using fallback",
		slog.String("model", o.model), slog.String("fallback", o.fallback.Name()), slog.String("reason", err.Error()))
	cs, err := o.fallback.Extract(ctx, doc)
	return cs, o.fallback.Name(), err
}

// chatRequest is the body of POST /api/chat.
type chatRequest struct {
	Model    string          `json:"model"`
	Messages []chatMessage   `json:"messages"`
	Stream   bool            `json:"stream"`
	Format   json.RawMessage `json:"format"`
	Options  chatOptions     `json:"options"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatOptions struct {
	Temperature float64 `json:"temperature"`
}

// chatResponse is the part of Ollama's non-streamed answer we read.
type chatResponse struct {
	Message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	Done  bool   `json:"done"`
	Error string `json:"error"`
}

// answerSchema is the JSON schema Ollama constrains the answer to.
var answerSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"concepts":{"type":"array","items":{"type":"string","minLength":1,"maxLength":%d},"minItems":1,"maxItems":%d}},"required":["concepts"],"additionalProperties":false}`,
	maxOllamaRunes, maxOllamaAnswer))

// systemPrompt tells the model exactly what to answer.
const systemPrompt = `You tag messages exchanged between software engineering agents with the concepts they are about.
Answer with JSON only, exactly of the form {"concepts": ["...", "..."]}: no other keys, no prose, no markdown.
Rules:
- 1 to 5 concepts, most important first.
- Each concept is a short noun phrase of 1 to 4 words, at most 60 characters, such as "rate limiting", "SQLite migration", "POL-358" or "flaky test".
- Prefer the message's own terms; keep identifiers (ticket ids, function, file and package names) exactly as written.
- No greetings, no status words (handoff, review, update, question), no sentences.`

// ask puts doc to the model and parses its answer.
func (o *Extractor) ask(ctx context.Context, doc concepts.Document) ([]mailroom.Concept, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	body := truncate(doc.Body, maxPromptBody)
	req := chatRequest{
		Model: o.model,
		Messages: []chatMessage{
			{Role: "system", Content: systemPrompt},
			{Role: "user", Content: "Subject: " + doc.Subject + "\n\n" + body},
		},
		Stream:  false,
		Format:  answerSchema,
		Options: chatOptions{Temperature: 0},
	}
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, o.endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := o.client.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s: %s", resp.Status, snippet(data))
	}
	if len(data) > maxAnswerBytes {
		return nil, errors.New("answer larger than 1 MiB")
	}
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return nil, fmt.Errorf("answer is not Ollama's JSON: %w: %s", err, snippet(data))
	}
	if cr.Error != "" {
		return nil, fmt.Errorf("ollama error: %s", cr.Error)
	}
	if !cr.Done {
		return nil, errors.New("answer not done")
	}
	return parseAnswer(cr.Message.Content)
}

// parseAnswer parses the model's content against answerSchema, rejecting
// anything else: other keys (matched exactly, unlike encoding/json's
// case-insensitive fields), wrong types, trailing data, an empty or overlong
// list, overlong strings, and strings with no letters or digits.
func parseAnswer(content string) ([]mailroom.Concept, error) {
	dec := json.NewDecoder(strings.NewReader(content))
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil || top == nil {
		return nil, fmt.Errorf("content is not a JSON object: %s", snippet([]byte(content)))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("content has data after the JSON object")
	}
	raw, ok := top["concepts"]
	if !ok || len(top) != 1 {
		return nil, fmt.Errorf(`content must have exactly the key "concepts": %s`, snippet([]byte(content)))
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf(`"concepts" is not a list of strings: %w`, err)
	}
	if len(list) < 1 || len(list) > maxOllamaAnswer {
		return nil, fmt.Errorf("content has %d concepts, want 1 to %d", len(list), maxOllamaAnswer)
	}
	out := make([]mailroom.Concept, 0, len(list))
	seen := map[string]bool{}
	for _, s := range list {
		if utf8.RuneCountInString(s) > maxOllamaRunes {
			return nil, fmt.Errorf("concept %q is longer than %d characters", snippet([]byte(s)), maxOllamaRunes)
		}
		c, err := mailroom.CanonicalConcept(s)
		if err != nil {
			return nil, fmt.Errorf("concept %q: %w", s, err)
		}
		if !seen[c.ID] {
			seen[c.ID] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// snippet shortens data for a log line.
func snippet(data []byte) string {
	const limit = 200
	s := strings.ToValidUTF8(string(data), "?")
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// truncate cuts s to at most n bytes without splitting a character: the
// start of a message says what it is about.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
