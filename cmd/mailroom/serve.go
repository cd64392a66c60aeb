package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/mailroom/mailroom/concepts"
	"github.com/mailroom/mailroom/mcp"
	"github.com/mailroom/mailroom/ollama"
	"github.com/mailroom/mailroom/ops"
	"github.com/mailroom/mailroom/web"
	"github.com/spf13/cobra"
)

// serveFlags are `mailroom serve`'s flags.
type serveFlags struct {
	agent   string
	agentOK bool // --agent given as a flag (MAILROOM_AGENT never applies to HTTP)
	http    string
	maxBody int

	limits      mailroom.Limits
	callBudget  time.Duration
	cpuBudget   time.Duration
	allowOrigin []string
	rate        float64
	pprof       string
	sessions    int // --max-sessions
	sessionsPer int // --max-sessions-per-identity; 0 is a tenth of sessions

	conceptsMode string
	ollamaURL    string
	conceptModel string
	conceptLease time.Duration
}

func (m *Main) serveCmd() *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve MCP over stdio (what an agent harness spawns) or streamable HTTP (--http)",
		Long: `Serve the mailbox over MCP.

Without --http, serve MCP over stdin/stdout as the agent --agent NAME (or
MAILROOM_AGENT): what an agent harness spawns. With --http ADDR, serve
streamable HTTP at http://ADDR/mcp; each request needs a bearer token from
'mailroom token create'. --agent with --http is loopback development mode:
requests without a token act as that agent.`,
		Example: `  mailroom serve --agent alice
  mailroom serve --http 127.0.0.1:8787
  mailroom serve --http 127.0.0.1:8787 --agent dev    # token-less requests act as @dev`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.agentOK = cmd.Flags().Changed("agent")
			if !f.agentOK {
				f.agent = m.getenv("MAILROOM_AGENT")
			}
			if f.ollamaURL == "" {
				f.ollamaURL = m.getenv("MAILROOM_OLLAMA_URL")
			}
			if f.conceptModel == "" {
				f.conceptModel = m.getenv("MAILROOM_CONCEPT_MODEL")
			}
			switch f.conceptsMode {
			case "embedded", "ollama", "off":
			default:
				return fmt.Errorf("--concepts must be embedded, ollama or off (got %q)", f.conceptsMode)
			}
			switch {
			case f.limits.MaxQueryChars < 1:
				return fmt.Errorf("--max-query must be at least 1 (got %d)", f.limits.MaxQueryChars)
			case f.limits.MaxQueryTerms < 1:
				return fmt.Errorf("--max-query-terms must be at least 1 (got %d)", f.limits.MaxQueryTerms)
			case f.callBudget <= 0:
				return fmt.Errorf("--call-budget must be positive (got %v)", f.callBudget)
			case f.cpuBudget <= 0:
				return fmt.Errorf("--cpu-budget must be positive (got %v)", f.cpuBudget)
			case f.rate < 0:
				return fmt.Errorf("--rate must be 0 (no limit) or more (got %g)", f.rate)
			case f.sessions < 1:
				return fmt.Errorf("--max-sessions must be at least 1 (got %d)", f.sessions)
			case f.sessionsPer < 0 || f.sessionsPer > f.sessions:
				return fmt.Errorf("--max-sessions-per-identity must be between 1 and --max-sessions (%d), or 0 for a tenth of it (got %d)", f.sessions, f.sessionsPer)
			}
			for _, o := range f.allowOrigin {
				if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
					return fmt.Errorf("--allow-origin %q: give an origin, scheme://host[:port]", o)
				}
			}
			return m.action(func(ctx context.Context, _ []string) error { return m.serve(ctx, f) })(cmd, args)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.agent, "agent", "", "stdio: the agent identity of this process (env MAILROOM_AGENT);\n--http: loopback development mode, binding token-less requests to NAME")
	fl.StringVar(&f.http, "http", "", "serve streamable HTTP at ADDR instead of stdio; loopback unless you say otherwise")
	fl.IntVar(&f.maxBody, "max-body", mailroom.DefaultMaxBodySize, "body limit in bytes")
	fl.IntVar(&f.limits.MaxQueryChars, "max-query", mailroom.DefaultMaxQueryChars, "list_messages query limit in characters")
	fl.IntVar(&f.limits.MaxQueryTerms, "max-query-terms", mailroom.DefaultMaxQueryTerms, "list_messages query limit in words")
	fl.DurationVar(&f.callBudget, "call-budget", mcp.DefaultCallBudget, "wall time one read-only tool call (list_messages, get_message, ...) may take\nbefore it is stopped; writes are bounded by their argument limits")
	fl.DurationVar(&f.cpuBudget, "cpu-budget", mcp.DefaultCPUBudget, "CPU time one read-only tool call may use before it is stopped")
	fl.StringSliceVar(&f.allowOrigin, "allow-origin", nil, "HTTP: a browser origin (scheme://host[:port]) allowed besides the server's own;\nrepeat or comma-separate for more. Any other Origin header gets 403")
	fl.Float64Var(&f.rate, "rate", 0, "HTTP: at most N requests per second per identity (429 with Retry-After); 0 is no limit")
	fl.StringVar(&f.pprof, "pprof", "", "serve Go profiles (net/http/pprof) at http://ADDR/debug/pprof/ on a listener of\ntheir own; loopback addresses only; off unless given")
	fl.IntVar(&f.sessions, "max-sessions", mcp.DefaultMaxSessions, "HTTP: at most N open MCP sessions in all (503 with Retry-After beyond)")
	fl.IntVar(&f.sessionsPer, "max-sessions-per-identity", 0, "HTTP: at most N open MCP sessions per identity (429 with Retry-After beyond),\nso one caller cannot take every session; 0 is a tenth of --max-sessions (100)")
	fl.StringVar(&f.conceptsMode, "concepts", "embedded", "concept extractor run by this process: embedded, ollama, or off\n(off leaves queued jobs to other processes sharing the database)")
	fl.StringVar(&f.ollamaURL, "ollama-url", "", "Ollama's URL for --concepts ollama (env MAILROOM_OLLAMA_URL; default http://localhost:11434)")
	fl.StringVar(&f.conceptModel, "concept-model", "", "model for --concepts ollama (env MAILROOM_CONCEPT_MODEL; default gemma3)")
	fl.DurationVar(&f.conceptLease, "concept-lease", 2*time.Minute, "how long a worker owns a claimed job before another process may take it over\n(keep it above the model's timeout)")
	return c
}

func (m *Main) serve(ctx context.Context, f serveFlags) error {
	if strings.HasPrefix(f.http, ":") {
		f.http = "127.0.0.1" + f.http // loopback unless told otherwise
	}
	if f.http != "" && f.agentOK {
		if err := mcp.CheckDevAddr(f.http); err != nil {
			return err
		}
	}
	if f.pprof != "" {
		if err := m.servePprof(ctx, f.pprof); err != nil {
			return err
		}
	}
	if err := m.open(ctx); err != nil {
		return err
	}
	opts := mcp.Options{MaxBody: f.maxBody, Logger: m.log, Limits: f.limits, CallBudget: f.callBudget, CPUBudget: f.cpuBudget,
		HTTP: mcp.HTTPOptions{AllowOrigins: f.allowOrigin, Rate: f.rate, MaxSessions: f.sessions, MaxSessionsPerIdentity: f.sessionsPer}}
	if f.agent != "" && (f.http == "" || f.agentOK) {
		id, err := m.store.EnsureAgent(ctx, f.agent)
		if err != nil {
			return fmt.Errorf("--agent %s: %w", f.agent, cliError(err))
		}
		opts.Identity = &id
	}
	worker, err := m.conceptWorker(f)
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
	if f.http == "" {
		m.log.Info("serving MCP on stdio", "db", displayDB(m.db), "agent", f.agent, "concepts", f.conceptsMode)
		return mcp.NewServer(m.store, opts).ServeStdio(ctx)
	}
	if m.getenv("GOGC") == "" {
		// An HTTP server's garbage is mostly the go-sdk's JSON buffers
		// (about 190 KB a call against a live heap of a few MB), so the
		// default of 100 collects every few dozen calls; 400 cuts the CPU
		// per send by about a quarter for about 12 MB more resident memory
		// (docs/benchmarks.md, issue 13). GOGC in the environment wins.
		debug.SetGCPercent(400)
	}
	metrics := ops.NewMetrics()
	metrics.Tools(mcp.ToolNames())
	opts.Observer = metrics
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", ops.Health(m.store.Ping))
	mux.Handle("GET /metrics", metrics.Handler())
	mux.Handle("/", web.New(m.store, web.Options{MaxBody: f.maxBody, Sent: opts.Sent, Logger: m.log}))
	opts.Handler = mux
	srv := mcp.NewServer(m.store, opts)
	metrics.Gauge("mailroom_open_sessions", "MCP sessions open on this server.", func(context.Context) (float64, error) {
		return float64(srv.OpenSessions()), nil
	})
	metrics.Gauge("mailroom_concept_queue_depth", "Concept extraction jobs not yet completed (shared by every process on the database).", func(ctx context.Context) (float64, error) {
		n, err := m.store.PendingConceptJobs(ctx)
		return float64(n), err
	})
	return srv.ListenAndServe(ctx, f.http, func(addr net.Addr) {
		mode := "bearer tokens required (mailroom token create --agent NAME)"
		if opts.Identity != nil {
			mode = "development mode: requests without a token act as " + opts.Identity.Address()
		}
		base, note := baseURL(f.http, addr)
		fmt.Fprintf(m.stdout, "mailroom: serving MCP at %s/mcp%s\nmailroom: web inbox %s/ (sign in with a token from mailroom token create --human LOGIN)\nmailroom: health %s/healthz, metrics %s/metrics\nmailroom: database %s\nmailroom: %s\n", base, note, base, base, base, displayDB(m.db), mode)
		if m.Ready != nil {
			m.Ready(addr)
		}
	})
}

// baseURL is the URL to print for a listener bound at addr (asked for as
// requested). A wildcard bind (0.0.0.0, ::) listens on every interface but
// is no address to connect to: print loopback, which works on this machine,
// and say the rest.
func baseURL(requested string, addr net.Addr) (string, string) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return "http://" + addr.String(), ""
	}
	host := "127.0.0.1"
	if h, _, err := net.SplitHostPort(requested); err == nil && strings.Contains(h, ":") {
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port)), " (listening on all interfaces: use this machine's name or address from elsewhere)"
}

// conceptWorker builds the background concept worker the flags ask for, or
// nil for --concepts off.
func (m *Main) conceptWorker(f serveFlags) (*concepts.Worker, error) {
	var x concepts.Extractor = concepts.NewEmbedded(m.store)
	switch f.conceptsMode {
	case "off":
		return nil, nil
	case "ollama":
		o, err := ollama.New(ollama.Options{URL: f.ollamaURL, Model: f.conceptModel, Fallback: x, Logger: m.log})
		if err != nil {
			return nil, err
		}
		x = o
	}
	return concepts.NewWorker(m.store, x, concepts.WorkerOptions{Logger: m.log, Lease: f.conceptLease}), nil
}

// servePprof serves the profiler on a loopback listener of its own until
// ctx ends: profiles show timings and symbols, nothing for the network.
func (m *Main) servePprof(ctx context.Context, addr string) error {
	if err := mcp.CheckLoopback("--pprof", addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof: %w", err)
	}
	srv := &http.Server{Handler: ops.Profiler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	go srv.Serve(ln)
	m.log.Info("serving profiles", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return nil
}
