package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/concepts"
	"github.com/mailroom/mailroom/mcp"
	"github.com/mailroom/mailroom/sqlite"
)

var errHelp = errors.New("help requested")

const usage = `mailroom: a typed mailbox for AI agents, served over MCP.

Usage:
  mailroom serve [--db PATH] [--agent NAME]              MCP over stdio (what an agent harness spawns)
  mailroom serve --http ADDR [--db PATH] [--agent NAME]  MCP over streamable HTTP at http://ADDR/mcp
  mailroom token create (--agent NAME | --human LOGIN)   register the identity, print a bearer token
  mailroom identity add NAME [--human]                   register an identity (idempotent)
  mailroom role grant NAME ROLE                          grant a role queue to an identity

Flags:
  --db PATH        database file (env MAILROOM_DB; default $XDG_DATA_HOME/mailroom/mailroom.db);
                   ":memory:" is an ephemeral store
  --agent NAME     stdio: the agent identity of this process (env MAILROOM_AGENT);
                   --http: loopback development mode, binding token-less requests to NAME
  --http ADDR      serve streamable HTTP instead of stdio; loopback unless you say otherwise
  --max-body N     body limit in bytes (default 65536)
  --concepts X     concept extractor run by this process: embedded (default), ollama, or off
                   (off leaves queued jobs to other processes sharing the database)
  --ollama-url U   Ollama's URL for --concepts ollama (env MAILROOM_OLLAMA_URL; default http://localhost:11434)
  --concept-model M  model for --concepts ollama (env MAILROOM_CONCEPT_MODEL; default gemma3)
  --concept-lease D  how long a worker owns a claimed job before another process may take it
                   over (default 2m; keep it above the model's timeout)
`

// Main is the program: ParseFlags, then Run, then Close. Tests run it
// in-process exactly as the binary does.
type Main struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	log            *slog.Logger

	cmd     []string // subcommand words and positional arguments
	db      string
	agent   string
	agentOK bool // --agent given as a flag (MAILROOM_AGENT never applies to HTTP)
	human   humanFlag
	http    string
	maxBody int

	conceptsMode string
	ollamaURL    string
	conceptModel string
	conceptLease time.Duration

	store *sqlite.Store
	// Ready, if set, is called with the HTTP address once listening.
	Ready func(net.Addr)
}

// NewMain returns a Main writing to stdout and stderr and reading the
// environment through getenv.
func NewMain(stdout, stderr io.Writer, getenv func(string) string) *Main {
	return &Main{
		stdout: stdout, stderr: stderr, getenv: getenv,
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// ParseFlags parses the command line. Flags may come before or after the
// positional words.
func (m *Main) ParseFlags(argv []string) error {
	fs := flag.NewFlagSet("mailroom", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&m.db, "db", "", "")
	fs.StringVar(&m.agent, "agent", "", "")
	fs.Var(&m.human, "human", "")
	fs.StringVar(&m.http, "http", "", "")
	fs.IntVar(&m.maxBody, "max-body", mailroom.DefaultMaxBodySize, "")
	fs.StringVar(&m.conceptsMode, "concepts", "embedded", "")
	fs.StringVar(&m.ollamaURL, "ollama-url", "", "")
	fs.StringVar(&m.conceptModel, "concept-model", "", "")
	fs.DurationVar(&m.conceptLease, "concept-lease", 2*time.Minute, "")
	for {
		if err := fs.Parse(argv); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(m.stdout, usage)
				return errHelp
			}
			return fmt.Errorf("%v\n\n%s", err, usage)
		}
		argv = fs.Args()
		if len(argv) == 0 {
			break
		}
		m.cmd = append(m.cmd, argv[0])
		argv = argv[1:]
	}
	fs.Visit(func(f *flag.Flag) { m.agentOK = m.agentOK || f.Name == "agent" })
	if m.db == "" {
		m.db = m.getenv("MAILROOM_DB")
	}
	if m.db == "" {
		m.db = defaultDB(m.getenv)
	}
	if !m.agentOK {
		m.agent = m.getenv("MAILROOM_AGENT")
	}
	if m.ollamaURL == "" {
		m.ollamaURL = m.getenv("MAILROOM_OLLAMA_URL")
	}
	if m.conceptModel == "" {
		m.conceptModel = m.getenv("MAILROOM_CONCEPT_MODEL")
	}
	switch m.conceptsMode {
	case "embedded", "ollama", "off":
	default:
		return fmt.Errorf("--concepts must be embedded, ollama or off (got %q)", m.conceptsMode)
	}
	if len(m.cmd) == 0 {
		fmt.Fprint(m.stderr, usage)
		return errors.New("no command given")
	}
	return nil
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

// Run runs the parsed command until it ends or ctx is cancelled.
func (m *Main) Run(ctx context.Context) error {
	cmd := strings.Join(m.cmd, " ")
	switch {
	case cmd == "serve":
		return m.serve(ctx)
	case len(m.cmd) >= 2 && m.cmd[0] == "token" && m.cmd[1] == "create":
		return m.tokenCreate(ctx, m.cmd[2:])
	case len(m.cmd) == 3 && m.cmd[0] == "identity" && m.cmd[1] == "add":
		return m.identityAdd(ctx, m.cmd[2])
	case len(m.cmd) == 4 && m.cmd[0] == "role" && m.cmd[1] == "grant":
		return m.roleGrant(ctx, m.cmd[2], m.cmd[3])
	case cmd == "help":
		fmt.Fprint(m.stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n\n%s", cmd, usage)
}

// Close releases what Run opened.
func (m *Main) Close() error {
	if m.store != nil {
		return m.store.Close()
	}
	return nil
}

func (m *Main) open(ctx context.Context) error {
	s, err := sqlite.Open(ctx, m.db, sqlite.Options{Logger: m.log})
	if err != nil {
		return fmt.Errorf("open database %s: %w", m.db, err)
	}
	m.store = s
	return nil
}

func (m *Main) serve(ctx context.Context) error {
	if strings.HasPrefix(m.http, ":") {
		m.http = "127.0.0.1" + m.http // loopback unless told otherwise
	}
	if m.http != "" && m.agentOK {
		if err := mcp.CheckDevAddr(m.http); err != nil {
			return err
		}
	}
	if err := m.open(ctx); err != nil {
		return err
	}
	opts := mcp.Options{MaxBody: m.maxBody, Logger: m.log}
	if m.agent != "" && (m.http == "" || m.agentOK) {
		id, err := m.store.EnsureAgent(ctx, m.agent)
		if err != nil {
			return fmt.Errorf("--agent %s: %s", m.agent, mailroom.ErrorMessage(err))
		}
		opts.Identity = &id
	}
	worker, err := m.conceptWorker()
	if err != nil {
		return err
	}
	if worker != nil {
		opts.Sent = worker.Notify
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); worker.Run(ctx) }()
		defer func() { cancel(); <-done }()
	}
	srv := mcp.NewServer(m.store, opts)
	if m.http == "" {
		m.log.Info("serving MCP on stdio", "db", m.db, "agent", m.agent, "concepts", m.conceptsMode)
		return srv.ServeStdio(ctx)
	}
	return srv.ListenAndServe(ctx, m.http, func(addr net.Addr) {
		mode := "bearer tokens required (mailroom token create --agent NAME)"
		if opts.Identity != nil {
			mode = "development mode: requests without a token act as " + opts.Identity.Address()
		}
		fmt.Fprintf(m.stdout, "mailroom: serving MCP at http://%s/mcp\nmailroom: database %s\nmailroom: %s\n", addr, m.db, mode)
		if m.Ready != nil {
			m.Ready(addr)
		}
	})
}

// conceptWorker builds the background concept worker the flags ask for, or
// nil for --concepts off.
func (m *Main) conceptWorker() (*concepts.Worker, error) {
	var x concepts.Extractor = concepts.NewEmbedded(m.store)
	switch m.conceptsMode {
	case "off":
		return nil, nil
	case "ollama":
		o, err := concepts.NewOllama(concepts.OllamaOptions{URL: m.ollamaURL, Model: m.conceptModel, Fallback: x, Logger: m.log})
		if err != nil {
			return nil, err
		}
		x = o
	}
	return concepts.NewWorker(m.store, x, concepts.WorkerOptions{Logger: m.log, Lease: m.conceptLease}), nil
}

// tokenCreate handles `token create --agent NAME` and `token create --human
// LOGIN`, where LOGIN may also follow as a word (rest).
func (m *Main) tokenCreate(ctx context.Context, rest []string) error {
	if m.human.set && m.human.login == "" && len(rest) == 1 {
		m.human.login, rest = rest[0], nil
	}
	if len(rest) > 0 {
		return fmt.Errorf("token create: unexpected %q", strings.Join(rest, " "))
	}
	name, kind := m.agent, mailroom.KindAgent
	if !m.agentOK {
		name = ""
	}
	if m.human.set {
		name, kind = m.human.login, mailroom.KindHuman
	}
	if name == "" || (m.agentOK && m.human.set) {
		return errors.New("token create needs exactly one of --agent NAME or --human LOGIN")
	}
	if err := m.open(ctx); err != nil {
		return err
	}
	id, err := m.store.AddIdentity(ctx, name, kind)
	if err != nil {
		return errors.New(mailroom.ErrorMessage(err))
	}
	token, digest := mailroom.NewToken()
	if err := m.store.AddToken(ctx, id.ID, digest); err != nil {
		return err
	}
	fmt.Fprintf(m.stdout, "token for %s (shown once; the database keeps only its SHA-256 digest):\n%s\n", id.Address(), token)
	return nil
}

func (m *Main) identityAdd(ctx context.Context, name string) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	kind := mailroom.KindAgent
	if m.human.set {
		kind = mailroom.KindHuman
	}
	id, err := m.store.AddIdentity(ctx, name, kind)
	if err != nil {
		return errors.New(mailroom.ErrorMessage(err))
	}
	fmt.Fprintf(m.stdout, "identity %s\n", id.Address())
	return nil
}

func (m *Main) roleGrant(ctx context.Context, name, role string) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	if ref, _, err := mailroom.ParseIdentityRef(name); err == nil && ref != "" {
		name = ref // @bob, AGENT:bob and human:dana name bob and dana
	}
	if err := m.store.GrantRole(ctx, name, strings.TrimPrefix(role, "role:")); err != nil {
		return errors.New(mailroom.ErrorMessage(err))
	}
	fmt.Fprintf(m.stdout, "granted role:%s to %s\n", strings.TrimPrefix(role, "role:"), name)
	return nil
}

// humanFlag is --human: a switch for `identity add NAME --human` and a value
// for `token create --human LOGIN` (where LOGIN may also follow as a word).
type humanFlag struct {
	set   bool
	login string
}

func (h *humanFlag) String() string   { return h.login }
func (h *humanFlag) IsBoolFlag() bool { return true }
func (h *humanFlag) Set(s string) error {
	h.set = true
	if s != "true" {
		h.login = s
	}
	return nil
}
