package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

const tokenColumns = `t.digest, i.id, i.name, i.kind, t.created_at, t.last_used_at`

// Tokens lists every token, oldest first.
func (s *Store) Tokens(ctx context.Context) ([]mailroom.TokenInfo, error) {
	return tokensWhere(ctx, s.pool, `true`)
}

func tokensWhere(ctx context.Context, q querier, cond string, args ...any) ([]mailroom.TokenInfo, error) {
	rows, err := q.Query(ctx, `SELECT `+tokenColumns+` FROM token t JOIN identity i ON i.id = t.identity_id
		WHERE `+cond+` ORDER BY t.created_at, t.digest`, args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (mailroom.TokenInfo, error) {
		var t mailroom.TokenInfo
		var digest []byte
		var used *time.Time
		err := r.Scan(&digest, &t.Identity.ID, &t.Identity.Name, &t.Identity.Kind, &t.CreatedAt, &used)
		t.ID, t.CreatedAt, t.LastUsedAt = mailroom.TokenID(digest), t.CreatedAt.UTC(), utc(used)
		return t, err
	})
	if out == nil {
		out = []mailroom.TokenInfo{}
	}
	return out, err
}

// RevokeTokens deletes the tokens sel picks.
func (s *Store) RevokeTokens(ctx context.Context, sel mailroom.TokenSelector) ([]mailroom.TokenInfo, error) {
	var out []mailroom.TokenInfo
	err := s.write(ctx, func(tx pgx.Tx) error {
		var (
			cond string
			args []any
		)
		if sel.Prefix != "" {
			// The digest is the key: a prefix is a key range.
			lo, hi := sel.DigestRange()
			cond, args = `digest >= $1`, []any{lo}
			if hi != nil {
				cond, args = cond+` AND digest < $2`, append(args, hi)
			}
		} else {
			id, err := identityByName(ctx, tx, sel.Name)
			if err != nil || id.Kind != sel.Kind {
				if err == nil || mailroom.ErrorCode(err) == mailroom.ENOTFOUND {
					return mailroom.Errorf(mailroom.ENOTFOUND, "unknown identity %s", mailroom.Identity{Name: sel.Name, Kind: sel.Kind}.Address())
				}
				return err
			}
			cond, args = `identity_id = $1`, []any{id.ID}
		}
		var err error
		if out, err = tokensWhere(ctx, tx, cond, args...); err != nil {
			return err
		}
		if err := sel.CheckRevoke(len(out)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM token WHERE `+cond, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TouchToken records a token's use at most once per interval: one
// conditional UPDATE.
func (s *Store) TouchToken(ctx context.Context, digest []byte, at time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE token SET last_used_at = $1 WHERE digest = $2 AND (last_used_at IS NULL OR last_used_at <= $3)`,
		at.UTC(), digest, at.Add(-mailroom.TokenTouchInterval).UTC())
	return err
}
