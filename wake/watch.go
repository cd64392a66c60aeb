package wake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/mailroom/mailroom"
)

// WatchOptions configure Watch.
type WatchOptions struct {
	Once bool // return after the first message
	JSON bool // one JSON object per line instead of text
}

// watchLine is one message as `mailroom watch --json` prints it.
type watchLine struct {
	ID       string            `json:"id"`
	From     string            `json:"from"`
	Priority mailroom.Priority `json:"priority"`
	Subject  string            `json:"subject"`
	SentAt   string            `json:"sentAt"`
}

// Watch prints one line per unread message that reaches the inbox of the
// caller bound to ctx after Watch starts, as it arrives, until ctx ends
// (nil) or, with Once, after the first. ready, if not nil, is called once
// Watch is listening.
func (w *Watcher) Watch(ctx context.Context, out io.Writer, opts WatchOptions, ready func()) error {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return err
	}
	st, err := w.store.InboxState(ctx)
	if err != nil {
		return err
	}
	since := ""
	if st.Watermark != nil {
		since = *st.Watermark
	}
	l, err := w.Listen(ctx, me)
	if err != nil {
		return err
	}
	defer l.Close()
	if ready != nil {
		ready()
	}
	for {
		m, err := w.store.NewMail(ctx, since, true, mailroom.MaxNewMail)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, r := range m.Messages {
			if err := printLine(out, r, opts.JSON); err != nil {
				return err
			}
			since = r.MessageID
			if opts.Once {
				return nil
			}
		}
		if len(m.Messages) == mailroom.MaxNewMail {
			continue // more waiting
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.C():
		}
	}
}

func printLine(out io.Writer, r mailroom.Row, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(watchLine{ID: r.MessageID, From: r.From, Priority: r.Priority, Subject: r.Subject, SentAt: r.SentAt.Format("2006-01-02T15:04:05.000Z07:00")})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	// The subject is quoted: it is text from someone else, shown on a
	// terminal.
	_, err := fmt.Fprintf(out, "%s\t%s\t%s\t%s\n", r.MessageID, r.From, r.Priority, strconv.Quote(r.Subject))
	return err
}
