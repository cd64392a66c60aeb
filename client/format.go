package client

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/mailroom/mailroom"
)

// Terminal output. Subjects and bodies are written by others, so every
// control character they hold (escape sequences above all) is shown as a
// visible \x.. escape instead of reaching the terminal.

// Safe returns s with control characters (except newline and tab when
// multiline) replaced by visible escapes.
func Safe(s string, multiline bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case multiline && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case r == '\u2028' || r == '\u2029' || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069'):
			fmt.Fprintf(&b, "\\u%04x", r) // line separators and bidi overrides
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

const timeLayout = "2006-01-02 15:04:05"

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(timeLayout)
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// WriteInbox writes a page as a table, newest first.
func WriteInbox(w io.Writer, p mailroom.Page) error {
	if len(p.Messages) == 0 {
		_, err := fmt.Fprintln(w, "no messages")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tFROM\tPRIORITY\tSENT\tSUBJECT")
	for _, r := range p.Messages {
		state := "unread"
		if r.ReadAt != nil {
			state = "read"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.MessageID, state, r.From, r.Priority, r.SentAt.UTC().Format(timeLayout), truncate(Safe(r.Subject, false), 72))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	more := ""
	if p.NextOffset != nil {
		more = " (use --limit for more)"
	}
	_, err := fmt.Fprintf(w, "%d of %d shown%s\n", len(p.Messages), p.TotalCount, more)
	return err
}

// WriteMessage writes one message: headers, a blank line, the body.
func WriteMessage(w io.Writer, m mailroom.Message) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Message", m.MessageID)
	row("From", m.From)
	row("To", strings.Join(m.To, ", "))
	row("Subject", Safe(m.Subject, false))
	row("Sent", m.SentAt.UTC().Format(timeLayout))
	row("Priority", string(m.Priority))
	row("Thread", m.ThreadID)
	if m.InReplyTo != nil {
		row("In reply to", *m.InReplyTo)
	}
	read := "unread"
	if m.ReadAt != nil {
		read = when(m.ReadAt)
	}
	if m.ReadBy != nil {
		read += " by " + *m.ReadBy
	}
	row("Read", read)
	if m.ArchivedAt != nil {
		row("Archived", when(m.ArchivedAt))
	}
	if len(m.RelatedTickets) > 0 {
		row("Tickets", strings.Join(m.RelatedTickets, ", "))
	}
	if len(m.TaggedConcepts) > 0 {
		var names []string
		for _, c := range m.TaggedConcepts {
			names = append(names, Safe(c.Name, false))
		}
		row("Concepts", strings.Join(names, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	body := Safe(m.Body, true)
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	_, err := fmt.Fprintf(w, "\n%s", body)
	return err
}

// WriteSent writes a send receipt.
func WriteSent(w io.Writer, r mailroom.SendReceipt) error {
	s := "s"
	if r.RecipientCount == 1 {
		s = ""
	}
	_, err := fmt.Fprintf(w, "sent %s to %d recipient%s (thread %s)\n", r.MessageID, r.RecipientCount, s, r.ThreadID)
	return err
}

// WriteMarks writes one line per id of a list mark_read.
func WriteMarks(w io.Writer, k Marks) error {
	for _, r := range k.Results {
		var err error
		if r.Status == "read" {
			_, err = fmt.Fprintf(w, "read   %s at %s\n", r.MessageID, when(r.ReadAt))
		} else {
			_, err = fmt.Fprintf(w, "error  %s: %s\n", r.MessageID, r.Error)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// WriteDrain writes a mark-all receipt.
func WriteDrain(w io.Writer, r mailroom.DrainReceipt) error {
	fmt.Fprintf(w, "marked %d of %d unread read (%s)\n", r.ReadCount, r.MatchedCount, r.Status)
	if r.WithheldRoleCount > 0 {
		fmt.Fprintf(w, "left %d role-queue message(s) unread for their role (--include-roles marks them too)\n", r.WithheldRoleCount)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "error  %s: %s\n", f.MessageID, f.Error)
	}
	if r.Note != "" {
		fmt.Fprintln(w, r.Note)
	}
	return nil
}

// WriteStatus writes the mailbox's counts.
func WriteStatus(w io.Writer, s mailroom.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	row("Identity", s.Identity)
	u := s.Unread
	row("Unread", u.Total)
	row("  direct", u.Direct)
	row("  broadcast", u.Broadcast)
	row("  role", u.Role)
	row("  from humans", u.Human)
	row("  by priority", fmt.Sprintf("high %d, normal %d, low %d", u.ByPriority.High, u.ByPriority.Normal, u.ByPriority.Low))
	row("Oldest unread", when(s.OldestUnreadAt))
	row("Archived", s.Archived)
	wm := "-"
	if s.Watermark != nil {
		wm = *s.Watermark
	}
	row("Watermark", wm)
	for _, r := range s.Roles {
		row("Role "+r.Role, fmt.Sprintf("%d unread", r.Unread))
	}
	return tw.Flush()
}
