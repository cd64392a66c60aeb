package client

import (
	"context"

	"github.com/mailroom/mailroom"
)

// Status returns the mailbox's counts (the mailbox_status tool).
func (m *Mailbox) Status(ctx context.Context) (mailroom.Status, error) {
	var s mailroom.Status
	return s, m.Call(ctx, "mailbox_status", map[string]any{}, &s)
}
