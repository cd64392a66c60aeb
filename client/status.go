package client

import (
	"context"
	"errors"
	"time"
)

// Status is mailbox_status's result (SPEC section 9).
type Status struct {
	Identity string `json:"identity,omitempty"`
	Unread   struct {
		Total      int            `json:"total"`
		Direct     *int           `json:"direct,omitempty"`
		Broadcast  *int           `json:"broadcast,omitempty"`
		Role       *int           `json:"role,omitempty"`
		Human      *int           `json:"human,omitempty"`
		ByPriority map[string]int `json:"byPriority,omitempty"`
	} `json:"unread"`
	OldestUnreadAt *time.Time  `json:"oldestUnreadAt"`
	Archived       *int        `json:"archived,omitempty"`
	Watermark      *string     `json:"watermark"`
	Roles          []RoleCount `json:"roles,omitempty"`
}

// RoleCount is one role the identity holds and its unread mail.
type RoleCount struct {
	Role   string `json:"role"`
	Unread int    `json:"unread"`
}

// Status returns the mailbox's counts from the mailbox_status tool. A
// server without that tool yet answers with what list_messages tells: the
// unread total and the watermark.
func (m *Mailbox) Status(ctx context.Context) (Status, error) {
	var s Status
	err := m.Call(ctx, "mailbox_status", map[string]any{}, &s)
	if !errors.Is(err, errUnknownTool) {
		return s, err
	}
	one := 1
	p, err := m.Inbox(ctx, InboxQuery{UnreadOnly: true, Limit: &one})
	if err != nil {
		return s, err
	}
	s.Unread.Total, s.Watermark = p.TotalCount, p.Watermark
	return s, nil
}
