package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// mailFlags say whose mailbox a mail command works on, and where.
type mailFlags struct {
	agent, human, url string
	json              bool
}

func (f *mailFlags) register(fs *pflag.FlagSet, withJSON bool) {
	fs.StringVar(&f.agent, "agent", "", "act as this agent (env MAILROOM_AGENT); registered on first use")
	fs.StringVar(&f.human, "human", "", "act as this human (human:LOGIN)")
	fs.StringVar(&f.url, "url", "", "use the server at URL (env MAILROOM_URL) with the token in MAILROOM_TOKEN,\ninstead of the local database")
	if withJSON {
		fs.BoolVar(&f.json, "json", false, "print the tool's JSON result instead of a table")
	}
}

const mailLong = `

As an agent (--agent NAME or MAILROOM_AGENT) or a human (--human LOGIN) on the
local database (--db), or, with --url URL (or MAILROOM_URL), on a server as
the identity of the bearer token in MAILROOM_TOKEN. Errors print one line on
stderr and exit with status 1.`

// mailbox opens the mailbox the flags name.
func (m *Main) mailbox(ctx context.Context, cmd *cobra.Command, f *mailFlags) (*client.Mailbox, error) {
	url := f.url
	if url == "" {
		url = m.getenv("MAILROOM_URL")
	}
	if url != "" {
		if f.agent != "" || f.human != "" {
			return nil, errors.New("with --url the token in MAILROOM_TOKEN names the identity: drop --agent and --human")
		}
		return client.Remote(ctx, url, m.getenv("MAILROOM_TOKEN"))
	}
	name, kind := f.agent, mailroom.KindAgent
	if name == "" && f.human == "" {
		name = m.getenv("MAILROOM_AGENT")
	}
	switch {
	case f.agent != "" && f.human != "":
		return nil, errors.New("give one of --agent NAME or --human LOGIN, not both")
	case f.human != "":
		name, kind = strings.TrimPrefix(f.human, "human:"), mailroom.KindHuman
	case name == "":
		return nil, fmt.Errorf("%s needs an identity: --agent NAME (or MAILROOM_AGENT), --human LOGIN, or --url with MAILROOM_TOKEN", cmd.CommandPath())
	}
	if err := m.open(ctx); err != nil {
		return nil, err
	}
	var id mailroom.Identity
	var err error
	if kind == mailroom.KindAgent {
		id, err = m.store.EnsureAgent(ctx, strings.TrimPrefix(name, "@"))
	} else {
		id, err = m.store.AddIdentity(ctx, name, kind)
	}
	if err != nil {
		return nil, cliError(err)
	}
	return client.Local(ctx, m.store, id)
}

// withMailbox is the RunE of a mail command: fn runs with the open mailbox.
func (m *Main) withMailbox(f *mailFlags, fn func(ctx context.Context, mb *client.Mailbox, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return m.action(func(ctx context.Context, args []string) error {
			mb, err := m.mailbox(ctx, cmd, f)
			if err != nil {
				return err
			}
			defer mb.Close()
			return fn(ctx, mb, args)
		})(cmd, args)
	}
}

// print writes v as indented JSON with --json, else with table.
func (m *Main) print(f *mailFlags, v any, table func(io.Writer) error) error {
	if !f.json {
		return table(m.stdout)
	}
	enc := json.NewEncoder(m.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (m *Main) inboxCmd() *cobra.Command {
	var f mailFlags
	var q client.InboxQuery
	var limit int
	c := &cobra.Command{
		Use:   "inbox [--unread] [--limit N] [--json]",
		Short: "List your inbox, newest first",
		Long:  "List your inbox, newest first: mail to you, to your roles and broadcasts. Listing marks nothing read." + mailLong,
		Example: `  mailroom inbox --agent alice --unread
  mailroom inbox --human dana --limit 10 --json
  MAILROOM_TOKEN=mr_... mailroom inbox --url http://127.0.0.1:8787`,
		Args: cobra.NoArgs,
	}
	f.register(c.Flags(), true)
	c.Flags().BoolVar(&q.UnreadOnly, "unread", false, "only messages you have not read")
	c.Flags().IntVar(&limit, "limit", mailroom.DefaultLimit, "at most N messages (1 to 200)")
	c.RunE = m.withMailbox(&f, func(ctx context.Context, mb *client.Mailbox, _ []string) error {
		q.Limit = &limit
		p, err := mb.Inbox(ctx, q)
		if err != nil {
			return err
		}
		return m.print(&f, p, func(w io.Writer) error { return client.WriteInbox(w, p) })
	})
	return c
}

func (m *Main) readCmd() *cobra.Command {
	var f mailFlags
	c := &cobra.Command{
		Use:     "read ID [--json]",
		Short:   "Show one message with its body (does not mark it read)",
		Long:    "Show one message: its headers, thread and body. Reading it here does not mark it read; use mark-read." + mailLong,
		Example: "  mailroom read MESSAGE:0194... --agent alice",
		Args:    words("ID"),
	}
	f.register(c.Flags(), true)
	c.RunE = m.withMailbox(&f, func(ctx context.Context, mb *client.Mailbox, args []string) error {
		msg, err := mb.Read(ctx, args[0])
		if err != nil {
			return err
		}
		return m.print(&f, msg, func(w io.Writer) error { return client.WriteMessage(w, msg) })
	})
	return c
}

// maxStdinBody bounds what send reads from stdin or a file; the server's
// own body limit (64 KiB by default) is what the message is held to.
const maxStdinBody = 4 << 20

func (m *Main) sendCmd() *cobra.Command {
	var f mailFlags
	var d client.Draft
	var body, bodyFile string
	c := &cobra.Command{
		Use:   "send --to ADDR [--to ADDR...] --subject S [--body TEXT | --body-file F | stdin] [--priority P] [--reply-to ID]",
		Short: "Send a message as yourself",
		Long: `Send a message to @agent, human:login, role:name, @me or * (every agent). The
body is --body TEXT, or the contents of --body-file F ("-" is stdin), or else
stdin. --reply-to ID threads it as a reply.` + mailLong,
		Example: `  mailroom send --human dana --to @alice --subject "Ship it" --body "Approved."
  git log -1 | mailroom send --agent ci --to role:reviewer --subject "Review this commit"`,
		Args: cobra.NoArgs,
	}
	f.register(c.Flags(), true)
	fl := c.Flags()
	fl.StringArrayVar(&d.To, "to", nil, "recipient address; repeat for more (up to 50)")
	fl.StringVar(&d.Subject, "subject", "", "one line, at most 200 characters")
	fl.StringVar(&body, "body", "", "the message text")
	fl.StringVar(&bodyFile, "body-file", "", `read the message text from file F ("-" for stdin)`)
	fl.StringVar(&d.Priority, "priority", "", "low, normal (default) or high")
	fl.StringVar(&d.ReplyTo, "reply-to", "", "the MESSAGE: id this replies to")
	run := m.withMailbox(&f, func(ctx context.Context, mb *client.Mailbox, _ []string) error {
		r, err := mb.Send(ctx, d)
		if err != nil {
			return err
		}
		return m.print(&f, r, func(w io.Writer) error { return client.WriteSent(w, r) })
	})
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(d.To) == 0 {
			return errors.New("send needs --to ADDR (repeat it for more recipients)")
		}
		if !cmd.Flags().Changed("subject") {
			return errors.New("send needs --subject S")
		}
		if cmd.Flags().Changed("body") && bodyFile != "" {
			return errors.New("give one of --body or --body-file, not both")
		}
		if !cmd.Flags().Changed("body") {
			var err error
			if d.Body, err = m.readBody(bodyFile); err != nil {
				return err
			}
		} else {
			d.Body = body
		}
		return run(cmd, args)
	}
	return c
}

// readBody reads a message body from a file, or from stdin for "" or "-".
func (m *Main) readBody(path string) (string, error) {
	var r io.Reader = m.Stdin
	what := "stdin"
	if path != "" && path != "-" {
		fh, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("--body-file: %w", err)
		}
		defer fh.Close()
		r, what = fh, path
	} else if r == nil {
		return "", nil
	} else if fh, ok := r.(*os.File); ok {
		if st, err := fh.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintln(m.stderr, "mailroom: reading the body from the terminal; end it with Ctrl-D (or use --body)")
		}
	}
	b, err := io.ReadAll(io.LimitReader(r, maxStdinBody+1))
	if err != nil {
		return "", fmt.Errorf("read the body from %s: %w", what, err)
	}
	if len(b) > maxStdinBody {
		return "", fmt.Errorf("the body in %s is over %d bytes", what, maxStdinBody)
	}
	return string(b), nil
}

func (m *Main) markReadCmd() *cobra.Command {
	var f mailFlags
	var all, includeRoles bool
	var through string
	c := &cobra.Command{
		Use:   "mark-read (ID... | --all [--through ID] [--include-roles])",
		Short: "Mark messages read: the ids given, or your whole unread inbox",
		Long: `Mark the messages given read, or with --all every unread message delivered to
you personally (role-queue mail too with --include-roles), as of when the call
starts; --through ID (a watermark from inbox --json) stops at that message.
A read is never undone by marking again. If any id cannot be marked, the
others still are and the command exits with status 1.` + mailLong,
		Example: "  mailroom mark-read MESSAGE:0194... MESSAGE:0195... --agent alice\n  mailroom mark-read --all --human dana",
	}
	f.register(c.Flags(), true)
	c.Flags().BoolVar(&all, "all", false, "mark your whole unread inbox read")
	c.Flags().StringVar(&through, "through", "", "with --all: only messages up to this watermark id")
	c.Flags().BoolVar(&includeRoles, "include-roles", false, "with --all: also mark role-queue mail read")
	run := m.withMailbox(&f, func(ctx context.Context, mb *client.Mailbox, ids []string) error {
		if all {
			r, err := mb.MarkAll(ctx, through, includeRoles)
			if err != nil {
				return err
			}
			if err := m.print(&f, r, func(w io.Writer) error { return client.WriteDrain(w, r) }); err != nil {
				return err
			}
			if r.FailureCount > 0 {
				return fmt.Errorf("%d of %d messages could not be marked read", r.FailureCount, r.MatchedCount)
			}
			return nil
		}
		k, err := mb.MarkRead(ctx, ids)
		if err != nil {
			return err
		}
		if err := m.print(&f, k, func(w io.Writer) error { return client.WriteMarks(w, k) }); err != nil {
			return err
		}
		if n := k.Failed(); n > 0 {
			return fmt.Errorf("%d of %d ids could not be marked read", n, len(k.Results))
		}
		return nil
	})
	c.RunE = func(cmd *cobra.Command, args []string) error {
		switch {
		case all && len(args) > 0:
			return errors.New("mark-read takes ids or --all, not both")
		case !all && len(args) == 0:
			return errors.New("mark-read needs message ids or --all")
		case !all && (through != "" || includeRoles):
			return errors.New("--through and --include-roles apply only with --all")
		}
		return run(cmd, args)
	}
	return c
}

func (m *Main) statusCmd() *cobra.Command {
	var f mailFlags
	c := &cobra.Command{
		Use:   "status [--json]",
		Short: "Show your mailbox's counts: unread (by kind and priority), archived, watermark",
		Long:  "Show your mailbox's counts: unread by kind and priority, the oldest unread, archived, the watermark and your roles." + mailLong,
		Args:  cobra.NoArgs,
	}
	f.register(c.Flags(), true)
	c.RunE = m.withMailbox(&f, func(ctx context.Context, mb *client.Mailbox, _ []string) error {
		s, err := mb.Status(ctx)
		if err != nil {
			return err
		}
		return m.print(&f, s, func(w io.Writer) error { return client.WriteStatus(w, s) })
	})
	return c
}
