package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/hook"
	"github.com/mailroom/mailroom/wake"
	"github.com/spf13/cobra"
)

func (m *Main) watchCmd() *cobra.Command {
	var agent string
	var opts wake.WatchOptions
	c := &cobra.Command{
		Use:   "watch [--agent NAME] [--once] [--json]",
		Short: "Print a line for each new message as it arrives",
		Long: `Print one line per new unread message in the agent's inbox as it arrives
(id, from, priority, subject; one JSON object per line with --json), whichever
process sent it. --once exits after the first. Ctrl-C exits 0.`,
		Example: "  mailroom watch --agent alice\n  mailroom watch --agent alice --once --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("agent") {
				agent = m.getenv("MAILROOM_AGENT")
			}
			if agent == "" {
				return errors.New("watch needs --agent NAME (or MAILROOM_AGENT)")
			}
			return m.action(func(ctx context.Context, _ []string) error { return m.watch(ctx, agent, opts) })(cmd, args)
		},
	}
	c.Flags().StringVar(&agent, "agent", "", "the agent whose inbox to watch (env MAILROOM_AGENT)")
	c.Flags().BoolVar(&opts.Once, "once", false, "exit after the first message")
	c.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per line")
	return c
}

func (m *Main) watch(ctx context.Context, agent string, opts wake.WatchOptions) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	id, err := m.store.EnsureAgent(ctx, agent)
	if err != nil {
		return cliError(err)
	}
	w := wake.New(m.store, wake.Options{Logger: m.log})
	ready := func() {
		// On stderr, so stdout stays one line per message for scripts.
		fmt.Fprintf(m.stderr, "mailroom: watching the inbox of %s\n", id.Address())
		if m.WatchReady != nil {
			m.WatchReady()
		}
	}
	return cliError(w.Watch(mailroom.WithCaller(ctx, id), m.stdout, opts, ready))
}

// hookDeadline bounds a hook's whole run: Claude Code waits on it.
const hookDeadline = 900 * time.Millisecond

func (m *Main) hookCmd() *cobra.Command {
	var agent string
	claude := &cobra.Command{
		Use:   "claude-code [--agent NAME]",
		Short: "Claude Code command hook: remind the agent of unread mail",
		Long: `A command hook for Claude Code's SessionStart, UserPromptSubmit and Stop
events. Reads the hook's JSON on stdin. When there is unread mail this
session has not been told about, it prints additionalContext (SessionStart,
UserPromptSubmit) or a Stop block with the reason (never when
stop_hook_active is true); otherwise nothing. It always exits 0 within a
second; on any error it prints nothing on stdout and one line on stderr.`,
		Example: `  # in .claude/settings.json, for each of SessionStart, UserPromptSubmit, Stop:
  {"hooks": [{"type": "command", "command": "mailroom hook claude-code --agent alice"}]}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("agent") {
				agent = m.getenv("MAILROOM_AGENT")
			}
			return m.action(func(ctx context.Context, _ []string) error {
				m.claudeHook(ctx, agent)
				return nil // a hook must never fail its harness
			})(cmd, args)
		},
	}
	claude.Flags().StringVar(&agent, "agent", "", "the agent identity (env MAILROOM_AGENT)")
	return group("hook", "Harness hooks that remind an agent of its mail", claude)
}

// claudeHook runs the hook within hookDeadline: the answer goes to stdout
// only when complete, any failure becomes one stderr line.
func (m *Main) claudeHook(ctx context.Context, agent string) {
	ctx, cancel := context.WithTimeout(ctx, hookDeadline)
	defer cancel()
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := m.claudeHookRun(ctx, agent)
		done <- result{out, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		r.err = fmt.Errorf("gave up after %v", hookDeadline)
	}
	if r.err != nil {
		fmt.Fprintf(m.stderr, "mailroom hook claude-code: %s\n", strings.ReplaceAll(r.err.Error(), "\n", " "))
		return
	}
	if len(r.out) > 0 {
		fmt.Fprintf(m.stdout, "%s\n", r.out)
	}
}

func (m *Main) claudeHookRun(ctx context.Context, agent string) ([]byte, error) {
	if agent == "" {
		return nil, errors.New("no agent identity: pass --agent NAME or set MAILROOM_AGENT")
	}
	var stdin io.Reader = m.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	in, err := hook.ParseInput(stdin)
	if err != nil {
		return nil, err
	}
	// Quiet: no log lines on stderr. The deadline bounds a lock held by
	// another process.
	s, err := openStore(ctx, m.db, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", displayDB(m.db), err)
	}
	m.store = s
	id, err := s.EnsureAgent(ctx, agent)
	if err != nil {
		return nil, errors.New(mailroom.ErrorMessage(err))
	}
	out, err := hook.ClaudeCode(mailroom.WithCaller(ctx, id), s, in)
	if err != nil && mailroom.ErrorCode(err) != mailroom.EINTERNAL {
		err = errors.New(mailroom.ErrorMessage(err))
	}
	return out, err
}
