package mcp

import (
	"context"

	"github.com/mailroom/mailroom"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

func (s *Server) addMessage(ctx context.Context, req *gomcp.CallToolRequest, a args) (any, error) {
	var in mailroom.SendInput
	var err error
	for _, name := range []string{"to", "subject", "body"} {
		if err := a.required(name); err != nil {
			return nil, err
		}
	}
	if in.To, err = a.strOrList("to"); err != nil {
		return nil, err
	}
	if in.Subject, err = a.str("subject"); err != nil {
		return nil, err
	}
	if in.Body, err = a.str("body"); err != nil {
		return nil, err
	}
	if in.OriginSessionID, err = a.str("originSessionId"); err != nil {
		return nil, err
	}
	if in.RelatedSessions, err = a.strList("relatedSessions"); err != nil {
		return nil, err
	}
	if in.RelatedTickets, err = a.strList("relatedTickets"); err != nil {
		return nil, err
	}
	if in.InReplyTo, err = a.str("inReplyTo"); err != nil {
		return nil, err
	}
	if in.Priority, err = a.str("priority"); err != nil {
		return nil, err
	}
	if in.TaggedConcepts, err = a.strList("taggedConcepts"); err != nil {
		return nil, err
	}
	d, err := in.Draft(s.opts.MaxBody)
	if err != nil {
		return nil, err
	}
	if d.OriginSessionID == "" {
		d.OriginSessionID = s.sessionOf(req)
	}
	r, err := s.store.Send(ctx, d)
	if err == nil && s.opts.Sent != nil {
		s.opts.Sent()
	}
	if err == nil && s.opts.Observer != nil {
		s.opts.Observer.Delivered(r.RecipientCount)
	}
	return r, err
}

func (s *Server) listMessages(ctx context.Context, req *gomcp.CallToolRequest, a args) (any, error) {
	var in mailroom.ListInput
	var err error
	if in.Box, err = a.str("box"); err != nil {
		return nil, err
	}
	if in.UnreadOnly, err = a.boolean("unreadOnly"); err != nil {
		return nil, err
	}
	if in.ThreadID, err = a.str("threadId"); err != nil {
		return nil, err
	}
	if in.From, err = a.str("from"); err != nil {
		return nil, err
	}
	if in.To, err = a.str("to"); err != nil {
		return nil, err
	}
	if in.Query, err = a.str("query"); err != nil {
		return nil, err
	}
	if in.TaggedConcepts, err = a.strList("taggedConcepts"); err != nil {
		return nil, err
	}
	if in.IncludeArchived, err = a.boolean("includeArchived"); err != nil {
		return nil, err
	}
	if in.Limit, err = a.integer("limit"); err != nil {
		return nil, err
	}
	if in.Offset, err = a.integer("offset"); err != nil {
		return nil, err
	}
	if in.ArchivedOnly, err = a.boolean("archivedOnly"); err != nil {
		return nil, err
	}
	if in.Via, err = a.str("via"); err != nil {
		return nil, err
	}
	if in.Priority, err = a.str("priority"); err != nil {
		return nil, err
	}
	if in.Of, err = a.str("of"); err != nil {
		return nil, err
	}
	if in.RelatedTo, err = a.str("relatedTo"); err != nil {
		return nil, err
	}
	if in.Cursor, err = a.optStr("cursor"); err != nil {
		return nil, err
	}
	f, err := in.FilterWith(s.opts.Limits)
	if err != nil {
		return nil, err
	}
	return s.store.List(ctx, f)
}

func messageID(a args) (string, error) {
	if err := a.required("messageId"); err != nil {
		return "", err
	}
	id, err := a.str("messageId")
	if err != nil {
		return "", err
	}
	return id, mailroom.ValidateMessageID("messageId", id)
}

func (s *Server) getMessage(ctx context.Context, req *gomcp.CallToolRequest, a args) (any, error) {
	id, err := messageID(a)
	if err != nil {
		return nil, err
	}
	of, err := a.str("of")
	if err != nil || of == "" {
		if err != nil {
			return nil, err
		}
		return s.store.Get(ctx, id)
	}
	owner, kind, err := mailroom.ParseOwner(of)
	if err != nil {
		return nil, err
	}
	return s.store.GetOf(ctx, owner, kind, id)
}

// onMessage adapts a store call on one message id to a handler.
func onMessage[R any](call func(context.Context, string) (R, error)) handler {
	return func(ctx context.Context, req *gomcp.CallToolRequest, a args) (any, error) {
		id, err := messageID(a)
		if err != nil {
			return nil, err
		}
		return call(ctx, id)
	}
}

func (s *Server) mailboxStatus(ctx context.Context, req *gomcp.CallToolRequest, a args) (any, error) {
	return s.store.Status(ctx)
}

func (s *Server) archiveMessage(ctx context.Context, req *gomcp.CallToolRequest, a args) (any, error) {
	id, err := messageID(a)
	if err != nil {
		return nil, err
	}
	return s.store.Archive(ctx, id)
}

type manyReceipt struct {
	Results []mailroom.MarkResult `json:"results"`
	Durable bool                  `json:"durable"`
}

func (s *Server) markRead(ctx context.Context, req *gomcp.CallToolRequest, a args) (any, error) {
	var in mailroom.MarkReadInput
	var err error
	in.MessageID = a["messageId"]
	if in.All, err = a.boolean("all"); err != nil {
		return nil, err
	}
	if in.Through, err = a.optStr("through"); err != nil {
		return nil, err
	}
	if in.IncludeRoles, err = a.optBool("includeRoles"); err != nil {
		return nil, err
	}
	r, err := in.Request()
	if err != nil {
		return nil, err
	}
	switch r.Mode {
	case mailroom.MarkAll:
		d, err := s.store.MarkAllRead(ctx, r.Through, r.IncludeRoles)
		if err == nil && s.opts.Observer != nil {
			s.opts.Observer.Drained(d.ReadCount)
		}
		return d, err
	case mailroom.MarkMany:
		return manyReceipt{Results: s.store.MarkRead(ctx, r.IDs), Durable: s.store.Durable()}, nil
	}
	res := s.store.MarkRead(ctx, r.IDs)[0]
	if res.Err != nil {
		return nil, res.Err
	}
	return mailroom.ReadReceipt{MessageID: res.MessageID, ReadAt: *res.ReadAt, Status: "read", Durable: s.store.Durable()}, nil
}

type conceptList struct {
	Concepts []mailroom.ConceptCount `json:"concepts"`
	Counted  int                     `json:"messagesCounted"`
	Complete bool                    `json:"complete"`
}

func (s *Server) listConcepts(ctx context.Context, req *gomcp.CallToolRequest, a args) (any, error) {
	limit, err := a.integer("limit")
	if err != nil {
		return nil, err
	}
	n, err := mailroom.ConceptLimit(limit)
	if err != nil {
		return nil, err
	}
	cs, err := s.store.Concepts(ctx, n, mailroom.ConceptScan)
	return conceptList{Concepts: cs.Concepts, Counted: cs.Counted, Complete: cs.Complete}, err
}
