package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/mcp"
	"github.com/spf13/cobra"
)

// Main is the program: ParseFlags, then Run, then Close. Tests run it
// in-process exactly as the binary does.
//
// ParseFlags runs cobra over the command line. A command's RunE does not do
// the work: it checks its flags and records what Run will do (see action), so
// parsing stays separate from running, and help, --version and completion
// are printed by ParseFlags, leaving Run nothing to do.
type Main struct {
	stdout, stderr io.Writer
	// Stdin is what `send` reads a body from when it has neither --body nor
	// --body-file. Nil reads nothing.
	Stdin  io.Reader
	getenv func(string) string
	log    *slog.Logger

	db  string // --db, else MAILROOM_DB, else the default path
	run func(context.Context) error

	store mailroom.Store
	// Ready, if set, is called with the HTTP address once listening.
	Ready func(net.Addr)
	// WatchReady, if set, is called once `watch` is listening.
	WatchReady func()
}

// NewMain returns a Main writing to stdout and stderr and reading the
// environment through getenv.
func NewMain(stdout, stderr io.Writer, getenv func(string) string) *Main {
	return &Main{
		stdout: stdout, stderr: stderr, getenv: getenv,
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// commands are mailroom's top-level commands. To add one, write a method
// returning its *cobra.Command (see admin.go for small examples) and list it
// here; its RunE is m.action(...).
func (m *Main) commands() []*cobra.Command {
	return append([]*cobra.Command{
		m.serveCmd(),
		m.tokenCmd(),
		m.identityCmd(),
		m.roleCmd(),
		m.inboxCmd(),
		m.readCmd(),
		m.sendCmd(),
		m.markReadCmd(),
		m.statusCmd(),
		m.purgeCmd(),
		m.benchCmd(),
		m.watchCmd(),
		m.hookCmd(),
	}, m.readGrantCmds()...)
}

func (m *Main) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:     "mailroom",
		Short:   "A typed mailbox for AI agents, served over MCP",
		Long:    "mailroom is a typed, addressed mailbox for AI agents and the humans who work with them, served over MCP.\nAgents send each other messages with a real sender, recipients, read state and threads.",
		Version: mcp.Version,
		Args:    cobra.NoArgs,
		// A bare `mailroom` is a mistake worth exit status 1, not a help page.
		RunE: func(*cobra.Command, []string) error {
			return errors.New("no command given (see mailroom --help)")
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("mailroom {{.Version}}\n")
	root.PersistentFlags().StringVar(&m.db, "db", "", `database file, or postgres://... for PostgreSQL (env MAILROOM_DB; default $XDG_DATA_HOME/mailroom/mailroom.db); ":memory:" is an ephemeral store`)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%s: %w (see %s --help)", cmd.CommandPath(), err, cmd.CommandPath())
	})
	for _, c := range m.commands() {
		root.AddCommand(c)
	}
	root.SetOut(m.stdout)
	root.SetErr(m.stderr)
	return root
}

// ParseFlags parses the command line.
func (m *Main) ParseFlags(argv []string) error {
	root := m.rootCmd()
	root.SetArgs(argv)
	if _, err := root.ExecuteC(); err != nil {
		return err
	}
	if m.db == "" {
		m.db = m.getenv("MAILROOM_DB")
	}
	if m.db == "" {
		m.db = defaultDB(m.getenv)
	}
	return nil
}

// Run runs the parsed command until it ends or ctx is cancelled.
func (m *Main) Run(ctx context.Context) error {
	if m.run == nil {
		return nil // help, --version or completion: printed while parsing
	}
	return m.run(ctx)
}

// Close releases what Run opened.
func (m *Main) Close() error {
	if m.store != nil {
		return m.store.Close()
	}
	return nil
}

// action returns a RunE that records fn as what Run does.
func (m *Main) action(fn func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
	return func(_ *cobra.Command, args []string) error {
		m.run = func(ctx context.Context) error { return fn(ctx, args) }
		return nil
	}
}

// group returns a command that only holds subcommands: run alone or with an
// unknown word, it is an error naming what it holds.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use + " COMMAND",
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q (it has %s; see mailroom help %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "), use)
			}
			return fmt.Errorf("%s needs a command: %s (see mailroom help %s)", cmd.CommandPath(), strings.Join(names, ", "), use)
		},
	}
	c.AddCommand(subs...)
	return c
}

// words returns an Args check for exactly the named positional arguments.
func words(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		if len(args) < len(names) {
			return fmt.Errorf("%s needs %s (see %s --help)", cmd.CommandPath(), strings.Join(names[len(args):], " "), cmd.CommandPath())
		}
		return fmt.Errorf("%s: unexpected %q (see %s --help)", cmd.CommandPath(), strings.Join(args[len(names):], " "), cmd.CommandPath())
	}
}

func defaultDB(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "mailroom", "mailroom.db")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".local", "share", "mailroom", "mailroom.db")
}

func (m *Main) open(ctx context.Context) error {
	return m.openFor(ctx, false)
}

// openFor is open; bulk opens the store to be bulk-loaded (bench seed).
func (m *Main) openFor(ctx context.Context, bulk bool) error {
	s, err := openStoreFor(ctx, m.db, m.log, conceptTerms, bulk)
	if err != nil {
		return fmt.Errorf("open database %s: %w", displayDB(m.db), err)
	}
	m.store = s
	return nil
}

// cliError is err as the operator should read it: an application error's
// message, and the cause of anything else (the CLI's user is the operator,
// so an internal error is not hidden from them).
func cliError(err error) error {
	var e *mailroom.Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("internal error: %w", err)
}

// oneLine folds a multi-line error (cobra's suggestions) into one line.
func oneLine(err error) string {
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}
