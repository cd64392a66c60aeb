package mcp

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mailroom/mailroom"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// InboxURI is the caller's inbox as an MCP resource.
const InboxURI = "mailbox://inbox"

// inboxNewest is how many rows resources/read shows.
const inboxNewest = 10

// inboxSummary is resources/read of mailbox://inbox.
type inboxSummary struct {
	UnreadCount int            `json:"unreadCount"`
	Watermark   *string        `json:"watermark"`
	Newest      []mailroom.Row `json:"newest"`
}

// bindExtra is bind for any request: the verified token's identity over
// HTTP, else the process identity.
func (s *Server) bindExtra(ctx context.Context, extra *gomcp.RequestExtra) (context.Context, error) {
	return s.bind(ctx, &gomcp.CallToolRequest{Extra: extra})
}

func (s *Server) readInbox(ctx context.Context, req *gomcp.ReadResourceRequest) (*gomcp.ReadResourceResult, error) {
	if req.Params.URI != InboxURI {
		return nil, gomcp.ResourceNotFoundError(req.Params.URI)
	}
	ctx, err := s.bindExtra(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	st, err := s.store.InboxState(ctx)
	if err != nil {
		return nil, s.internal("resources/read", err)
	}
	p, err := s.store.List(ctx, mailroom.ListFilter{Box: mailroom.BoxInbox, Limit: inboxNewest})
	if err != nil {
		return nil, s.internal("resources/read", err)
	}
	b, err := json.Marshal(inboxSummary{UnreadCount: st.UnreadCount, Watermark: p.Watermark, Newest: p.Messages})
	if err != nil {
		return nil, err
	}
	return &gomcp.ReadResourceResult{Contents: []*gomcp.ResourceContents{{URI: InboxURI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// internal logs a storage failure and answers a caller-safe error.
func (s *Server) internal(what string, err error) error {
	if mailroom.ErrorCode(err) == mailroom.EINTERNAL {
		s.log.Error(what, "err", err)
	}
	return &mailroomError{msg: mailroom.ErrorMessage(err)}
}

type mailroomError struct{ msg string }

func (e *mailroomError) Error() string { return e.msg }

// feeds turns inbox changes into notifications/resources/updated for the
// sessions of one go-sdk server that subscribed to mailbox://inbox. One
// listener per identity, however many of its sessions subscribe: the
// go-sdk's ResourceUpdated reaches every subscribed session of the server
// (legacy sessions directly, 2026-07-28 ones on their subscriptions/listen
// stream), and over HTTP each identity has a server of its own.
type feeds struct {
	s   *Server
	srv *gomcp.Server

	mu  sync.Mutex
	ids map[int64]*feed
}

type feed struct {
	sessions map[*gomcp.ServerSession]bool
	stop     context.CancelFunc
}

func (f *feeds) subscribe(ctx context.Context, req *gomcp.SubscribeRequest) error {
	if req.Params.URI != InboxURI {
		return gomcp.ResourceNotFoundError(req.Params.URI)
	}
	ctx, err := f.s.bindExtra(ctx, req.Extra)
	if err != nil {
		return err
	}
	me, _ := mailroom.CallerFrom(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	fd := f.ids[me.ID]
	if fd == nil {
		l, err := f.s.wake.Listen(ctx, me)
		if err != nil {
			return f.s.internal("resources/subscribe", err)
		}
		fctx, cancel := context.WithCancel(context.Background())
		fd = &feed{sessions: map[*gomcp.ServerSession]bool{}, stop: cancel}
		f.ids[me.ID] = fd
		go f.run(fctx, l)
	}
	if ss := req.Session; ss != nil && !fd.sessions[ss] {
		fd.sessions[ss] = true
		// A session that ends without unsubscribing leaves no listener.
		go func() {
			ss.Wait()
			f.drop(me.ID, ss)
		}()
	}
	return nil
}

func (f *feeds) unsubscribe(ctx context.Context, req *gomcp.UnsubscribeRequest) error {
	ctx, err := f.s.bindExtra(ctx, req.Extra)
	if err != nil {
		return err
	}
	me, _ := mailroom.CallerFrom(ctx)
	f.drop(me.ID, req.Session)
	return nil
}

func (f *feeds) drop(id int64, ss *gomcp.ServerSession) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fd := f.ids[id]
	if fd == nil {
		return
	}
	delete(fd.sessions, ss)
	if len(fd.sessions) == 0 {
		fd.stop()
		delete(f.ids, id)
	}
}

func (f *feeds) run(ctx context.Context, l interface {
	C() <-chan struct{}
	Close()
}) {
	defer l.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.C():
			f.srv.ResourceUpdated(ctx, &gomcp.ResourceUpdatedNotificationParams{URI: InboxURI})
		}
	}
}

func (s *Server) waitForMail(ctx context.Context, req *gomcp.CallToolRequest, a args) (any, error) {
	var in mailroom.WaitInput
	var err error
	if in.Since, err = a.str("since"); err != nil {
		return nil, err
	}
	if in.TimeoutSeconds, err = a.integer("timeoutSeconds"); err != nil {
		return nil, err
	}
	if in.IncludeRoles, err = a.optBool("includeRoles"); err != nil {
		return nil, err
	}
	r, err := in.Request()
	if err != nil {
		return nil, err
	}
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return nil, err
	}
	// The call's starting point first, then listen, then look: mail
	// committed before the listener exists is found by the look, and mail
	// committed after it wakes the listener.
	since := r.Since
	if since == "" {
		st, err := s.store.InboxState(ctx)
		if err != nil {
			return nil, err
		}
		if st.Watermark != nil {
			since = *st.Watermark
		}
	}
	l, err := s.wake.Listen(ctx, me)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	second := s.opts.WaitSecond
	if second <= 0 {
		second = time.Second
	}
	timeout := time.NewTimer(time.Duration(r.Timeout) * second)
	defer timeout.Stop()
	for {
		m, err := s.store.NewMail(ctx, since, r.IncludeRoles, mailroom.MaxNewMail)
		if err != nil || len(m.Messages) > 0 {
			return m, err
		}
		select {
		case <-l.C():
		case <-timeout.C:
			m.TimedOut = true
			return m, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
