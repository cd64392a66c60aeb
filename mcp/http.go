package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mailroom/mailroom"
	"github.com/modelcontextprotocol/go-sdk/auth"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// identityKey is where a verified token's identity travels in TokenInfo.
const identityKey = "mailroom.identity"

// HTTPHandler serves MCP over streamable HTTP at any path it is mounted on.
// Requests need a bearer token issued by `mailroom token create`; in loopback
// development mode (s was built with an Identity) a request without an
// Authorization header is bound to that identity, while a bad token is still
// refused with 401.
func (s *Server) HTTPHandler() http.Handler {
	srv := s.MCPServer()
	h := gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return srv }, &gomcp.StreamableHTTPOptions{Logger: s.log})
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		id, err := s.store.IdentityByToken(ctx, mailroom.TokenDigest(token))
		if mailroom.ErrorCode(err) == mailroom.ENOTFOUND {
			return nil, auth.ErrInvalidToken
		} else if err != nil {
			s.log.Error("token lookup", "err", err)
			return nil, fmt.Errorf("token lookup: %w", err)
		}
		// UserID ties an MCP session to its identity, so a session id
		// cannot be replayed with another identity's token.
		return &auth.TokenInfo{UserID: id.Address(), Extra: map[string]any{identityKey: id}}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	if s.opts.Identity == nil {
		return authed
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			h.ServeHTTP(w, r)
			return
		}
		authed.ServeHTTP(w, r)
	})
}

// CheckDevAddr refuses loopback development mode on a non-loopback address.
func CheckDevAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad --http address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return errors.New("--agent with --http binds token-less requests to that agent, so it is allowed only on a loopback address (127.0.0.1, ::1 or localhost), not " + addr)
	}
	return nil
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
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
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

// ServeStdio serves s over stdin/stdout until the client disconnects or ctx
// ends.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.MCPServer().Run(ctx, &gomcp.StdioTransport{})
}
