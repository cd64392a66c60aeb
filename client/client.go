// Package client is a mailbox as one identity sees it, driven through
// mailroom's MCP tools: on a local store over an in-memory transport, or on
// a server over streamable HTTP with a bearer token. Both go through the
// same tool calls, so the command line behaves exactly as an MCP client
// would, wherever the mailbox is.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/mcp"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// caller is what a Mailbox needs of an MCP session.
type caller interface {
	CallTool(ctx context.Context, p *gomcp.CallToolParams) (*gomcp.CallToolResult, error)
	Close() error
}

// Mailbox is one identity's mailbox.
type Mailbox struct {
	cs    caller
	close []func() error
}

var impl = &gomcp.Implementation{Name: "mailroom-cli", Version: mcp.Version}

// Local opens the mailbox of id on store, through an in-process MCP server.
// Internal errors carry their cause: the local caller is the operator.
func Local(ctx context.Context, store mailroom.Store, id mailroom.Identity) (*Mailbox, error) {
	srv := mcp.NewServer(store, mcp.Options{Identity: &id, RevealInternal: true, Logger: slog.New(slog.DiscardHandler)})
	ct, st := gomcp.NewInMemoryTransports()
	ss, err := srv.MCPServer().Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	cs, err := gomcp.NewClient(impl, nil).Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		return nil, err
	}
	return &Mailbox{cs: cs, close: []func() error{ss.Close}}, nil
}

// Remote opens the mailbox of token's identity on the server at rawURL
// (http://host:port, with or without the /mcp endpoint path).
func Remote(ctx context.Context, rawURL, token string) (*Mailbox, error) {
	endpoint, err := Endpoint(rawURL)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(token) == "" {
		return nil, errors.New("--url needs a bearer token in MAILROOM_TOKEN (mailroom token create --agent NAME or --human LOGIN prints one)")
	}
	hc := &http.Client{Transport: bearer{token: strings.TrimSpace(token), next: http.DefaultTransport}}
	cs, err := gomcp.NewClient(impl, nil).Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		if strings.Contains(err.Error(), "401") || strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			return nil, fmt.Errorf("%s refused the token in MAILROOM_TOKEN (401 Unauthorized)", endpoint)
		}
		return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	return &Mailbox{cs: cs}, nil
}

// Endpoint returns the MCP endpoint of a server URL: /mcp is added when
// the URL has no path.
func Endpoint(rawURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url %q: want http://host:port or https://host:port", rawURL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/mcp"
	}
	return u.String(), nil
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Close ends the session.
func (m *Mailbox) Close() error {
	err := m.cs.Close()
	for _, c := range m.close {
		c()
	}
	return err
}

// ToolError is a tool's isError answer: the server's one-line message.
type ToolError struct {
	Tool, Message string
}

func (e *ToolError) Error() string { return e.Message }

// errUnknownTool marks a server that does not offer a tool.
var errUnknownTool = errors.New("unknown tool")

// Call calls tool with args and decodes its structured result into out.
func (m *Mailbox) Call(ctx context.Context, tool string, args map[string]any, out any) error {
	res, err := m.cs.CallTool(ctx, &gomcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if strings.Contains(err.Error(), "unknown tool") {
			return fmt.Errorf("%s: %w", tool, errUnknownTool)
		}
		return fmt.Errorf("%s: %w", tool, err)
	}
	if res.IsError {
		var msg string
		for _, c := range res.Content {
			if t, ok := c.(*gomcp.TextContent); ok {
				msg = t.Text
				break
			}
		}
		return &ToolError{Tool: tool, Message: msg}
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: decode result: %w", tool, err)
	}
	return nil
}

// InboxQuery selects an inbox listing.
type InboxQuery struct {
	UnreadOnly bool
	Limit      *int // nil: the server's default
	ThreadID   string
}

// Inbox lists the inbox, newest first.
func (m *Mailbox) Inbox(ctx context.Context, q InboxQuery) (mailroom.Page, error) {
	args := map[string]any{}
	if q.UnreadOnly {
		args["unreadOnly"] = true
	}
	if q.Limit != nil {
		args["limit"] = *q.Limit
	}
	if q.ThreadID != "" {
		args["threadId"] = q.ThreadID
	}
	var p mailroom.Page
	return p, m.Call(ctx, "list_messages", args, &p)
}

// Read returns one message; it does not mark it read.
func (m *Mailbox) Read(ctx context.Context, id string) (mailroom.Message, error) {
	var msg mailroom.Message
	return msg, m.Call(ctx, "get_message", map[string]any{"messageId": id}, &msg)
}

// Draft is a message to send.
type Draft struct {
	To       []string
	Subject  string
	Body     string
	Priority string // "" for normal
	ReplyTo  string // MESSAGE: id, or ""
}

// Send sends d as the mailbox's identity.
func (m *Mailbox) Send(ctx context.Context, d Draft) (mailroom.SendReceipt, error) {
	args := map[string]any{"to": d.To, "subject": d.Subject, "body": d.Body}
	if d.Priority != "" {
		args["priority"] = d.Priority
	}
	if d.ReplyTo != "" {
		args["inReplyTo"] = d.ReplyTo
	}
	var r mailroom.SendReceipt
	return r, m.Call(ctx, "add_message", args, &r)
}

// Marks is the result of marking a list of ids read.
type Marks struct {
	Results []mailroom.MarkResult `json:"results"`
	Durable bool                  `json:"durable"`
}

// Failed counts the ids that could not be marked.
func (k Marks) Failed() int {
	n := 0
	for _, r := range k.Results {
		if r.Status != "read" {
			n++
		}
	}
	return n
}

// MarkRead marks each id read, one result per id in order.
func (m *Mailbox) MarkRead(ctx context.Context, ids []string) (Marks, error) {
	var k Marks
	return k, m.Call(ctx, "mark_read", map[string]any{"messageId": ids}, &k)
}

// MarkAll drains the unread inbox (personal deliveries; role queues too
// with includeRoles), optionally only through a watermark.
func (m *Mailbox) MarkAll(ctx context.Context, through string, includeRoles bool) (mailroom.DrainReceipt, error) {
	args := map[string]any{"all": true}
	if through != "" {
		args["through"] = through
	}
	if includeRoles {
		args["includeRoles"] = true
	}
	var r mailroom.DrainReceipt
	return r, m.Call(ctx, "mark_read", args, &r)
}

// Archive archives one message for the mailbox's identity.
func (m *Mailbox) Archive(ctx context.Context, id string) (mailroom.ArchiveReceipt, error) {
	var r mailroom.ArchiveReceipt
	return r, m.Call(ctx, "archive_message", map[string]any{"messageId": id}, &r)
}
