package mailroom

import (
	"context"
	"encoding/hex"
	"strings"
	"time"
)

// TokenInfo describes a stored bearer token without its secret: the store
// keeps only the digest, and ID is derived from that.
type TokenInfo struct {
	ID         string // TokenID of the digest: safe to show and to revoke by
	Identity   Identity
	CreatedAt  time.Time
	LastUsedAt *time.Time // nil until first used over HTTP
}

// TokenIDLen is how many hex digits of a token's digest name it.
const TokenIDLen = 12

// MinTokenPrefix is the shortest prefix `token revoke` accepts.
const MinTokenPrefix = 4

// TokenID is a token's display id: the first hex digits of its SHA-256
// digest. It reveals nothing of the token (the digest is one-way, and a
// 256-bit token cannot be searched for), it exists for tokens created
// before ids did, and the holder of a token can compute it.
func TokenID(digest []byte) string {
	return hex.EncodeToString(digest)[:TokenIDLen]
}

// TokenTouchInterval is how often a token's last use is written at most:
// often enough for an operator deciding what to revoke, rare enough that
// authentication stays one read per request.
const TokenTouchInterval = time.Minute

// TokenSelector picks the tokens `token revoke` removes: every token of one
// identity, or the one token whose id starts with Prefix.
type TokenSelector struct {
	Name   string // identity name, with Kind
	Kind   Kind
	Prefix string // lowercase hex, at least MinTokenPrefix digits
}

// ParseTokenPrefix validates a revoke argument: a token id prefix, or a
// whole token (whose id is then computed), so an operator holding a leaked
// token can revoke exactly it.
func ParseTokenPrefix(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "mr_") && len(s) > 20 {
		return TokenID(TokenDigest(s)), nil
	}
	p := strings.ToLower(s)
	if len(p) < MinTokenPrefix || len(p) > 64 {
		return "", Errorf(EINVALID, "token id prefix %q: give %d to %d hex digits of an id from `mailroom token list` (or the whole token)", s, MinTokenPrefix, 64)
	}
	if _, err := hex.DecodeString(p + strings.Repeat("0", len(p)%2)); err != nil {
		return "", Errorf(EINVALID, "token id prefix %q is not hexadecimal: give an id from `mailroom token list` (or the whole token)", s)
	}
	return p, nil
}

// TokenStore is the token side of a store, for operators: it needs no
// caller.
type TokenStore interface {
	// Tokens lists every token, oldest first, without secrets.
	Tokens(ctx context.Context) ([]TokenInfo, error)
	// RevokeTokens deletes the tokens sel picks and returns them; they stop
	// authenticating at once. An identity without tokens, or a prefix that
	// matches none, is ENOTFOUND; a prefix matching several is ECONFLICT and
	// revokes nothing.
	RevokeTokens(ctx context.Context, sel TokenSelector) ([]TokenInfo, error)
	// TouchToken records that the token was used at at, unless its recorded
	// last use is less than TokenTouchInterval before at. It is one
	// conditional write; callers also skip it when they touched the token
	// themselves within the interval, so most requests write nothing.
	TouchToken(ctx context.Context, digest []byte, at time.Time) error
}

// DigestRange returns the digest range [lo, hi) that sel's Prefix names;
// hi is nil when the range runs to the end. Digests are the stores' keys, so
// revoking by prefix is one key-range scan in every backend.
func (sel TokenSelector) DigestRange() (lo, hi []byte) {
	p := sel.Prefix
	lo, _ = hex.DecodeString(p + strings.Repeat("0", len(p)%2))
	b, _ := hex.DecodeString(p + strings.Repeat("f", len(p)%2))
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return lo, b[:i+1]
		}
	}
	return lo, nil
}

// CheckRevoke is the rule RevokeTokens applies once it has found the tokens
// sel picks: none is ENOTFOUND, and several for one prefix is ECONFLICT (the
// store then revokes nothing).
func (sel TokenSelector) CheckRevoke(found int) error {
	who := Identity{Name: sel.Name, Kind: sel.Kind}.Address()
	switch {
	case found == 0 && sel.Prefix != "":
		return Errorf(ENOTFOUND, "no token has an id starting %s (see mailroom token list)", sel.Prefix)
	case found == 0:
		return Errorf(ENOTFOUND, "%s has no tokens", who)
	case found > 1 && sel.Prefix != "":
		return Errorf(ECONFLICT, "%d tokens have ids starting %s; give more digits (nothing was revoked)", found, sel.Prefix)
	}
	return nil
}
