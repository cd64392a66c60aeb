package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/modelcontextprotocol/go-sdk/auth"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"
)

// identityKey is where a verified token's identity travels in TokenInfo.
const identityKey = "mailroom.identity"

// HTTP defaults (SPEC section 12).
const (
	DefaultMaxRequestBody = 4 << 20 // bytes
	DefaultMaxSessions    = 1000
	DefaultSessionIdle    = 30 * time.Minute
	DefaultIdleTimeout    = 60 * time.Second // keep-alive connections
	DefaultBodyTimeout    = 30 * time.Second // reading one request body
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultStreamRecheck  = 10 * time.Second
)

// HTTPOptions configure the streamable HTTP transport. Zero fields take the
// defaults above.
type HTTPOptions struct {
	// AllowOrigins are the browser origins (scheme://host[:port]) allowed
	// besides the server's own; a request with any other Origin gets 403.
	AllowOrigins []string
	// Rate is each identity's allowance in requests per second (burst the
	// same, at least 1); 0 means unlimited.
	Rate float64
	// MaxSessions caps open MCP sessions; a new one beyond it gets 503.
	MaxSessions int
	// MaxSessionsPerIdentity is the share of MaxSessions one identity may
	// hold, so that one caller opening sessions in a loop cannot lock the
	// others out; a new one beyond it gets 429. 0 means a tenth of
	// MaxSessions (at least 1).
	MaxSessionsPerIdentity int
	// SessionIdle closes an MCP session that has had no request for this long.
	SessionIdle time.Duration
	// MaxRequestBody bounds a request body; a larger one gets 413.
	MaxRequestBody int64
	// IdleTimeout closes keep-alive connections idle this long;
	// HeaderTimeout and BodyTimeout bound reading a request's header and
	// body. Used by ListenAndServe.
	IdleTimeout, HeaderTimeout, BodyTimeout time.Duration
	// StreamRecheck is how often a long-lived event stream (GET) checks
	// that its token is still valid, so a revoked token also ends the
	// streams it opened; 0 means DefaultStreamRecheck.
	StreamRecheck time.Duration
	// Now is the rate limiter's and last-use clock; nil means time.Now.
	Now func() time.Time
}

func (o HTTPOptions) withDefaults() HTTPOptions {
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerIdentity <= 0 {
		o.MaxSessionsPerIdentity = max(1, o.MaxSessions/10)
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	if o.MaxRequestBody <= 0 {
		o.MaxRequestBody = DefaultMaxRequestBody
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = DefaultHeaderTimeout
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.StreamRecheck <= 0 {
		o.StreamRecheck = DefaultStreamRecheck
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// refHeader carries, from the HTTP layer to the tool handler, the key of
// the request whose context ends when the client disconnects. The go-sdk
// detaches handlers from the POST that carried them (stateful sessions), so
// without it a call would run on after its client left. A client's own
// value is always replaced.
const refHeader = "Mailroom-Request-Ref"

type verifiedKey struct{}

// httpFront is the guard in front of the go-sdk handler: origin, bearer
// token, rate, body size and session cap, in that order.
type httpFront struct {
	s       *Server
	opts    HTTPOptions
	servers *serverSet
	sdk     http.Handler
	allowed map[string]bool

	mu       sync.Mutex
	limiters map[string]*rate.Limiter // by identity address
	pending  map[int64]int            // sessions being created, by identity id
	touched  map[string]time.Time     // token digest -> when this process last wrote its last use
	streams  streamGuard
}

// HTTPHandler serves MCP over streamable HTTP at any path it is mounted on.
// Requests need a bearer token issued by `mailroom token create`; in loopback
// development mode (s was built with an Identity) a request without an
// Authorization header is bound to that identity, while a bad token is still
// refused with 401.
func (s *Server) HTTPHandler() http.Handler {
	f := s.front()
	return f
}

func (s *Server) front() *httpFront {
	o := s.opts.HTTP.withDefaults()
	servers := &serverSet{s: s, servers: map[int64]*gomcp.Server{}}
	sdk := gomcp.NewStreamableHTTPHandler(servers.get, &gomcp.StreamableHTTPOptions{
		Logger:              s.log,
		SessionTimeout:      o.SessionIdle,
		MaxRequestBodyBytes: o.MaxRequestBody,
	})
	// The identity was verified by the front; this only hands it to the
	// go-sdk, which ties each session to its UserID so that a session id
	// cannot be replayed with another identity's token.
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		id, ok := r.Context().Value(verifiedKey{}).(mailroom.Identity)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: id.Address(), Extra: map[string]any{identityKey: id}}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sdk)
	f := &httpFront{s: s, opts: o, servers: servers, allowed: map[string]bool{}, limiters: map[string]*rate.Limiter{}, pending: map[int64]int{}, touched: map[string]time.Time{}}
	f.streams.f = f
	for _, origin := range o.AllowOrigins {
		f.allowed[normOrigin(origin)] = true
	}
	f.sdk = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			sdk.ServeHTTP(w, r) // development mode, checked by the front
			return
		}
		authed.ServeHTTP(w, r)
	})
	return f
}

func (f *httpFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && !f.originAllowed(r, origin) {
		http.Error(w, fmt.Sprintf("Forbidden: origin %q is not allowed (start the server with --allow-origin %s to allow it)", origin, origin), http.StatusForbidden)
		return
	}
	id, ok := f.authenticate(w, r)
	if !ok {
		return
	}
	if !f.allow(w, id) {
		return
	}
	if !f.readBody(w, r) {
		return
	}
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
		if !f.reserveSession(w, id) {
			return
		}
		defer f.releaseSession(id)
	}
	if r.Method == http.MethodGet && r.Header.Get("Authorization") != "" {
		ctx, stop := f.whileTokenValid(r.Context(), mailroom.TokenDigest(bearerToken(r)))
		defer stop()
		r = r.WithContext(ctx)
	}
	ref := strconv.FormatUint(f.s.nextRef.Add(1), 36)
	f.s.requests.Store(ref, r.Context())
	defer f.s.requests.Delete(ref)
	r.Header.Set(refHeader, ref)
	f.sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, id)))
}

// originAllowed accepts the server's own origin and the configured ones.
func (f *httpFront) originAllowed(r *http.Request, origin string) bool {
	o := normOrigin(origin)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return o == strings.ToLower(scheme+"://"+r.Host) || f.allowed[o]
}

func normOrigin(o string) string {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return strings.ToLower(strings.TrimRight(strings.TrimSpace(o), "/"))
	}
	host := u.Host
	if (u.Scheme == "http" && strings.HasSuffix(host, ":80")) || (u.Scheme == "https" && strings.HasSuffix(host, ":443")) {
		host = host[:strings.LastIndexByte(host, ':')]
	}
	return strings.ToLower(u.Scheme + "://" + host)
}

// authenticate finds the caller: the bearer token's identity (one indexed
// lookup per request, so a revoked token stops working at once, open
// sessions included), else the development identity. It answers 401 with a
// WWW-Authenticate challenge itself.
func (f *httpFront) authenticate(w http.ResponseWriter, r *http.Request) (mailroom.Identity, bool) {
	h := r.Header.Get("Authorization")
	if h == "" && f.s.opts.Identity != nil {
		return *f.s.opts.Identity, true
	}
	token := bearerToken(r)
	if token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mailroom"`)
		http.Error(w, "Unauthorized: send Authorization: Bearer TOKEN (mailroom token create --agent NAME)", http.StatusUnauthorized)
		return mailroom.Identity{}, false
	}
	digest := mailroom.TokenDigest(token)
	id, err := f.s.store.IdentityByToken(r.Context(), digest)
	switch {
	case mailroom.ErrorCode(err) == mailroom.ENOTFOUND:
		w.Header().Set("WWW-Authenticate", `Bearer realm="mailroom", error="invalid_token"`)
		http.Error(w, "Unauthorized: the bearer token is unknown or revoked", http.StatusUnauthorized)
		return mailroom.Identity{}, false
	case err != nil:
		f.s.log.Error("token lookup", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return mailroom.Identity{}, false
	}
	f.touch(r.Context(), digest)
	return id, true
}

// touch records a token's use for `mailroom token list`: at most once per
// TokenTouchInterval per token from this process (the store skips the write
// too when another process did it lately), so a request costs no write.
func (f *httpFront) touch(ctx context.Context, digest []byte) {
	now := f.opts.Now()
	f.mu.Lock()
	last, ok := f.touched[string(digest)]
	due := !ok || now.Sub(last) >= mailroom.TokenTouchInterval
	if due {
		if len(f.touched) >= 10_000 {
			clear(f.touched) // bounded; the worst case is one extra write per token
		}
		f.touched[string(digest)] = now
	}
	f.mu.Unlock()
	if !due {
		return
	}
	if err := f.s.store.TouchToken(ctx, digest, now); err != nil {
		f.s.log.Warn("recording token use", "err", err)
	}
}

// bearerToken is the request's bearer token, or "".
func bearerToken(r *http.Request) string {
	scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// whileTokenValid returns ctx, also ended once the token is revoked: every
// POST is checked anyway, but an event stream is one long request.
func (f *httpFront) whileTokenValid(ctx context.Context, digest []byte) (context.Context, func()) {
	return f.streams.add(ctx, string(digest))
}

// streamGuard ends the event streams of revoked tokens: one goroutine and
// one ticker for all of a front's streams, and one lookup per distinct
// token each StreamRecheck, however many streams the token holds open (a
// goroutine, a ticker and a lookup per stream cost 1,000 streams 100
// wake-ups and lookups a second). It runs while any stream is open.
type streamGuard struct {
	f       *httpFront
	mu      sync.Mutex
	byToken map[string]map[*guardedStream]struct{} // by token digest
	running bool
}

type guardedStream struct{ cancel context.CancelFunc }

func (g *streamGuard) add(ctx context.Context, digest string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	st := &guardedStream{cancel: cancel}
	g.mu.Lock()
	if g.byToken == nil {
		g.byToken = map[string]map[*guardedStream]struct{}{}
	}
	set := g.byToken[digest]
	if set == nil {
		set = map[*guardedStream]struct{}{}
		g.byToken[digest] = set
	}
	set[st] = struct{}{}
	if !g.running {
		g.running = true
		go g.run()
	}
	g.mu.Unlock()
	return ctx, func() {
		cancel()
		g.mu.Lock()
		defer g.mu.Unlock()
		if set := g.byToken[digest]; set != nil {
			delete(set, st)
			if len(set) == 0 {
				delete(g.byToken, digest)
			}
		}
	}
}

func (g *streamGuard) run() {
	every := g.f.opts.StreamRecheck
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		g.mu.Lock()
		if len(g.byToken) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		digests := make([]string, 0, len(g.byToken))
		for d := range g.byToken {
			digests = append(digests, d)
		}
		g.mu.Unlock()
		for _, d := range digests {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			_, err := g.f.s.store.IdentityByToken(ctx, []byte(d))
			cancel()
			if mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
				continue
			}
			g.mu.Lock()
			n := len(g.byToken[d])
			for st := range g.byToken[d] {
				st.cancel()
			}
			delete(g.byToken, d)
			g.mu.Unlock()
			g.f.s.log.Info("closing event streams: their token was revoked", "streams", n)
		}
	}
}

// allow applies the per-identity rate, answering 429 with Retry-After.
func (f *httpFront) allow(w http.ResponseWriter, id mailroom.Identity) bool {
	if f.opts.Rate <= 0 {
		return true
	}
	now := f.opts.Now()
	f.mu.Lock()
	lim := f.limiters[id.Address()]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(f.opts.Rate), max(1, int(math.Ceil(f.opts.Rate))))
		f.limiters[id.Address()] = lim
	}
	f.mu.Unlock()
	res := lim.ReserveN(now, 1)
	delay := res.DelayFrom(now)
	if delay == 0 {
		return true
	}
	res.CancelAt(now)
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(delay.Seconds()))))
	http.Error(w, fmt.Sprintf("Too Many Requests: %s is limited to %g requests per second", id.Address(), f.opts.Rate), http.StatusTooManyRequests)
	return false
}

// readBody reads the whole body within the size limit and the body
// timeout, answering 413 for one too large. Reading it here, not in the
// handler, also lets net/http notice a client that disconnects while its
// call runs.
func (f *httpFront) readBody(w http.ResponseWriter, r *http.Request) bool {
	if r.ContentLength > f.opts.MaxRequestBody {
		tooLarge(w, f.opts.MaxRequestBody)
		return false
	}
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(f.opts.BodyTimeout)) // best effort: not every writer supports it
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, f.opts.MaxRequestBody))
	rc.SetReadDeadline(time.Time{})
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		tooLarge(w, f.opts.MaxRequestBody)
		return false
	case err != nil:
		http.Error(w, "Bad Request: reading the body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

func tooLarge(w http.ResponseWriter, limit int64) {
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("Request Entity Too Large: the limit is %d bytes", limit), http.StatusRequestEntityTooLarge)
}

// reserveSession admits a request that may open a session while id holds
// fewer than its share (MaxSessionsPerIdentity) and fewer than MaxSessions
// are open or being opened in all.
func (f *httpFront) reserveSession(w http.ResponseWriter, id mailroom.Identity) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	mine, open := f.servers.sessions(id.ID)
	pending := 0
	for _, n := range f.pending {
		pending += n
	}
	switch {
	case mine+f.pending[id.ID] >= f.opts.MaxSessionsPerIdentity:
		w.Header().Set("Retry-After", "60")
		http.Error(w, fmt.Sprintf("Too Many Requests: %s holds %d MCP sessions, the most one identity may; close one (DELETE with its Mcp-Session-Id) or wait for idle ones to expire", id.Address(), f.opts.MaxSessionsPerIdentity), http.StatusTooManyRequests)
		return false
	case open+pending >= f.opts.MaxSessions:
		w.Header().Set("Retry-After", "60")
		http.Error(w, fmt.Sprintf("Service Unavailable: %d MCP sessions are open, the limit; close one (DELETE with its Mcp-Session-Id) or wait for idle ones to expire", f.opts.MaxSessions), http.StatusServiceUnavailable)
		return false
	}
	f.pending[id.ID]++
	return true
}

func (f *httpFront) releaseSession(id mailroom.Identity) {
	f.mu.Lock()
	if f.pending[id.ID]--; f.pending[id.ID] <= 0 {
		delete(f.pending, id.ID)
	}
	f.mu.Unlock()
}

// CheckDevAddr refuses loopback development mode on a non-loopback address.
func CheckDevAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad --http address %q: %w", addr, err)
	}
	if !isLoopback(host) {
		return errors.New("--agent with --http binds token-less requests to that agent, so it is allowed only on a loopback address (127.0.0.1, ::1 or localhost), not " + addr)
	}
	return nil
}

// CheckLoopback refuses a listener address (of flag) that is not loopback.
func CheckLoopback(flag, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad %s address %q: %w", flag, addr, err)
	}
	if !isLoopback(host) {
		return fmt.Errorf("%s must be a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT), not %s", flag, addr)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewHTTPServer returns the http.Server that ListenAndServe runs: handler
// with the connection timeouts of s's HTTP options.
func (s *Server) NewHTTPServer(handler http.Handler) *http.Server {
	o := s.opts.HTTP.withDefaults()
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: o.HeaderTimeout,
		// No ReadTimeout or WriteTimeout: they would cut event streams and
		// long calls; the front bounds reading each body instead.
		IdleTimeout:    o.IdleTimeout,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// ListenAndServe serves s over HTTP at addr with the endpoint /mcp until ctx
// ends. ready, if not nil, receives the bound address once listening.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.HTTPHandler())
	if s.opts.Handler != nil {
		mux.Handle("/", s.opts.Handler)
	}
	srv := s.NewHTTPServer(mux)
	if ready != nil {
		ready(ln.Addr())
	}
	go func() {
		<-ctx.Done()
		// Let calls in flight finish; streams still open after that are cut.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// serverSet holds the go-sdk servers of an HTTP handler: one per identity
// (made on its first session), because the go-sdk's ResourceUpdated reaches
// every subscribed session of a server, and mailbox://inbox is a different
// inbox for each identity. Tool calls still bind the identity per request.
type serverSet struct {
	s       *Server
	mu      sync.Mutex
	servers map[int64]*gomcp.Server
}

// get is the go-sdk's getServer: the server of the request's identity, as
// the front verified it.
func (ss *serverSet) get(r *http.Request) *gomcp.Server {
	var key int64
	if id, ok := r.Context().Value(verifiedKey{}).(mailroom.Identity); ok {
		key = id.ID
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	srv := ss.servers[key]
	if srv == nil {
		srv = ss.s.MCPServer()
		ss.servers[key] = srv
	}
	return srv
}

// sessions counts the open sessions of identity id's server, and of every
// server.
func (ss *serverSet) sessions(id int64) (mine, all int) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for key, srv := range ss.servers {
		for range srv.Sessions() {
			all++
			if key == id {
				mine++
			}
		}
	}
	return mine, all
}
