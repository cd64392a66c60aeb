package mcp

import (
	"context"
	"log/slog"
)

// sdkNotificationMsg is the go-sdk's log message for each
// notifications/resources/updated it sends, at Info.
const sdkNotificationMsg = "resource updated notification sent"

// sdkLogger is the logger the go-sdk gets: log, with the go-sdk's line per
// resource notification demoted to Debug. A server notifying an inbox per
// commit would otherwise write a line to stderr for every one (formatting
// and the write cost about as much as the notification's own JSON); the
// go-sdk's other lines (sessions, subscriptions) pass as they are.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(quietNotifications{log.Handler()})
}

type quietNotifications struct{ slog.Handler }

func (h quietNotifications) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && r.Message == sdkNotificationMsg {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietNotifications) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quietNotifications{h.Handler.WithAttrs(attrs)}
}

func (h quietNotifications) WithGroup(name string) slog.Handler {
	return quietNotifications{h.Handler.WithGroup(name)}
}
