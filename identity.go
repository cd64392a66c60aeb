package mailroom

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"time"
)

// Kind is the kind of an identity.
type Kind string

// Identity kinds.
const (
	KindAgent Kind = "agent"
	KindHuman Kind = "human"
)

// Identity is an AgentIdentity node: an agent or a human that sends and
// receives mail.
type Identity struct {
	ID   int64
	Name string
	Kind Kind
}

// Address returns the identity as it is shown: @name or human:login.
func (i Identity) Address() string {
	if i.Kind == KindHuman {
		return "human:" + i.Name
	}
	return "@" + i.Name
}

// ImplicitRoles returns the roles an identity holds without a grant: every
// agent holds next-session and next-session-of-<itself>.
func (i Identity) ImplicitRoles() []string {
	if i.Kind != KindAgent {
		return nil
	}
	return []string{"next-session", "next-session-of-" + i.Name}
}

// IdentityInfo is an identity as an operator lists it.
type IdentityInfo struct {
	Identity
	CreatedAt time.Time
	Roles     []string // explicit grants, sorted; implicit roles are not listed
}

// RoleInfo is a role queue as an operator lists it.
type RoleInfo struct {
	Name    string
	Holders []string // addresses of the identities granted it, sorted
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidateName reports whether name is a valid identity name.
func ValidateName(name string) error {
	if name == "me" {
		return Errorf(EINVALID, "invalid identity name \"me\": @me always means the caller")
	}
	if !nameRE.MatchString(name) {
		return Errorf(EINVALID, "invalid identity name %q: use lowercase [a-z0-9][a-z0-9._-]{0,63}", name)
	}
	return nil
}

var roleRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)

// ValidateRole reports whether role is a valid role name.
func ValidateRole(role string) error {
	if !roleRE.MatchString(role) {
		return Errorf(EINVALID, "invalid role name %q: use lowercase [a-z0-9][a-z0-9._-]{0,127}", role)
	}
	return nil
}

// NewToken returns a fresh random bearer token (256 bits) and its digest.
func NewToken() (token string, digest []byte) {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics instead)
	token = "mr_" + base64.RawURLEncoding.EncodeToString(b)
	return token, TokenDigest(token)
}

// TokenDigest is what the store keeps of a token: its SHA-256 digest. Tokens
// are high-entropy, so a fast hash is enough and keeps lookups to one
// indexed read.
func TokenDigest(token string) []byte {
	d := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return d[:]
}

type callerKey struct{}

// WithCaller returns a context that carries the caller's identity. Only
// transports call it: identity never comes from tool arguments.
func WithCaller(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, callerKey{}, id)
}

// CallerFrom returns the identity bound to ctx, or an EUNAUTHORIZED error.
func CallerFrom(ctx context.Context) (Identity, error) {
	id, ok := ctx.Value(callerKey{}).(Identity)
	if !ok || id.ID == 0 {
		return Identity{}, Errorf(EUNAUTHORIZED, "no identity is bound to this connection: start `mailroom serve` with --agent NAME (or MAILROOM_AGENT), or send an Authorization: Bearer token over HTTP")
	}
	return id, nil
}
