// Package mcp serves a mailroom.Store over the Model Context Protocol, on
// stdio and streamable HTTP, with the official go-sdk. It only decodes
// arguments, binds the caller's identity from the transport and encodes
// results; the rules live in package mailroom and the store.
package mcp

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/mailroom/mailroom"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is reported to clients in serverInfo.
const Version = "0.1.0"

// Options configure a Server.
type Options struct {
	// Identity is bound to calls that carry no verified token: the process
	// identity over stdio, and the loopback development identity over HTTP.
	// Nil means such calls have no identity.
	Identity *mailroom.Identity
	// SessionID is the origin session of messages sent on connections that
	// have no MCP session id of their own (stdio). SESSION:<id>.
	SessionID string
	// MaxBody is the body limit in bytes; 0 means mailroom.DefaultMaxBodySize.
	MaxBody int
	// Sent, if set, is called after each message is stored; it wakes the
	// concept worker and must not block.
	Sent func()
	// RevealInternal puts an internal error's cause in the tool result
	// instead of "internal error". Only for a caller who is the operator
	// (the local command line); never for a network listener.
	RevealInternal bool
	Logger         *slog.Logger
}

// handler runs one tool call with checked arguments.
type handler func(context.Context, *gomcp.CallToolRequest, args) (any, error)

// Server is mailroom's MCP server.
type Server struct {
	store mailroom.Store
	opts  Options
	log   *slog.Logger
}

// NewServer returns a Server on store.
func NewServer(store mailroom.Store, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionID == "" {
		opts.SessionID = mailroom.NewSessionID()
	}
	return &Server{store: store, opts: opts, log: opts.Logger}
}

// MCPServer builds the go-sdk server with every tool registered.
func (s *Server) MCPServer() *gomcp.Server {
	srv := gomcp.NewServer(&gomcp.Implementation{Name: "mailroom", Title: "mailroom", Version: Version}, &gomcp.ServerOptions{
		Logger: s.log,
		Instructions: "mailroom is your mailbox: addressed messages between agents and humans, with read state and threads. " +
			"Check list_messages({unreadOnly: true}) at the start of a session, reply with add_message({inReplyTo}), and clear handled mail with mark_read.",
	})
	handlers := map[string]handler{
		"add_message":     s.addMessage,
		"list_messages":   s.listMessages,
		"get_message":     s.getMessage,
		"archive_message": s.archiveMessage,
		"mark_read":       s.markRead,
		"list_concepts":   s.listConcepts,

		"unarchive_message": onMessage(s.store.Unarchive),
		"mark_unread":       onMessage(s.store.MarkUnread),
		"delete_message":    onMessage(s.store.Delete),
		"retract_message":   onMessage(s.store.Retract),
		"mailbox_status":    s.mailboxStatus,
	}
	for _, t := range tools {
		h := handlers[t.name]
		if h == nil {
			panic("mcp: no handler for tool " + t.name)
		}
		declared := t.declared()
		// The title is the tool's own; the hints tell clients which calls
		// are safe to approve without asking.
		ann := &gomcp.ToolAnnotations{ReadOnlyHint: t.readOnly, IdempotentHint: t.idempotent, DestructiveHint: &t.destructive, OpenWorldHint: new(bool)}
		srv.AddTool(&gomcp.Tool{
			Name:         t.name,
			Title:        t.title,
			Description:  t.description,
			InputSchema:  t.input,
			OutputSchema: t.output,
			Annotations:  ann,
		}, func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			return s.call(ctx, req, declared, t.stampsSender, h), nil
		})
	}
	return srv
}

// call binds the caller, checks the arguments' shape and runs h.
func (s *Server) call(ctx context.Context, req *gomcp.CallToolRequest, declared []string, stampsSender bool, h handler) *gomcp.CallToolResult {
	ctx, err := s.bind(ctx, req)
	if err != nil {
		return s.fail(req, err)
	}
	a, err := parseArgs(req.Params.Arguments, declared, stampsSender)
	if err != nil {
		return s.fail(req, err)
	}
	out, err := h(ctx, req, a)
	if err != nil {
		return s.fail(req, err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return s.fail(req, err)
	}
	return &gomcp.CallToolResult{
		Content:           []gomcp.Content{&gomcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}
}

func (s *Server) fail(req *gomcp.CallToolRequest, err error) *gomcp.CallToolResult {
	if mailroom.ErrorCode(err) == mailroom.EINTERNAL {
		s.log.Error("tool failed", "tool", req.Params.Name, "err", err)
	}
	msg := mailroom.ErrorMessage(err)
	if s.opts.RevealInternal && mailroom.ErrorCode(err) == mailroom.EINTERNAL {
		msg = "internal error: " + err.Error()
	}
	return &gomcp.CallToolResult{
		Content: []gomcp.Content{&gomcp.TextContent{Text: msg}},
		IsError: true,
	}
}

// bind puts the caller's identity in ctx: from the verified
// bearer token over HTTP, else from the process (stdio, or loopback
// development mode).
func (s *Server) bind(ctx context.Context, req *gomcp.CallToolRequest) (context.Context, error) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		id, ok := req.Extra.TokenInfo.Extra[identityKey].(mailroom.Identity)
		if !ok {
			return ctx, mailroom.Errorf(mailroom.EUNAUTHORIZED, "the bearer token is bound to no identity")
		}
		return mailroom.WithCaller(ctx, id), nil
	}
	if s.opts.Identity == nil {
		_, err := mailroom.CallerFrom(ctx)
		return ctx, err
	}
	return mailroom.WithCaller(ctx, *s.opts.Identity), nil
}

// sessionOf returns the origin session for messages sent on req's connection.
func (s *Server) sessionOf(req *gomcp.CallToolRequest) string {
	if req != nil && req.Session != nil {
		if id := req.Session.ID(); id != "" {
			if sid, err := mailroom.CanonicalSession("", id); err == nil {
				return sid
			}
		}
	}
	return s.opts.SessionID
}
