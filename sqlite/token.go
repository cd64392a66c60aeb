package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/mailroom/mailroom"
)

const tokenColumns = `t.digest, i.id, i.name, i.kind, t.created_at, t.last_used_at`

func scanToken(sc interface{ Scan(...any) error }) (mailroom.TokenInfo, error) {
	var (
		t       mailroom.TokenInfo
		digest  []byte
		created string
		used    sql.NullString
	)
	if err := sc.Scan(&digest, &t.Identity.ID, &t.Identity.Name, &t.Identity.Kind, &created, &used); err != nil {
		return t, err
	}
	t.ID = mailroom.TokenID(digest)
	t.CreatedAt, t.LastUsedAt = parseTS(created), parseNullTS(used)
	return t, nil
}

// Tokens lists every token, oldest first.
func (s *Store) Tokens(ctx context.Context) ([]mailroom.TokenInfo, error) {
	out := []mailroom.TokenInfo{}
	err := s.read(ctx, func(tx *ptx) error {
		var err error
		out, err = tokensWhere(ctx, tx, `1`)
		return err
	})
	return out, err
}

func tokensWhere(ctx context.Context, tx *ptx, cond string, args ...any) ([]mailroom.TokenInfo, error) {
	rows, err := tx.Tx.QueryContext(ctx, `SELECT `+tokenColumns+` FROM token t JOIN identity i ON i.id = t.identity_id
		WHERE `+cond+` ORDER BY t.created_at, t.digest`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []mailroom.TokenInfo{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeTokens deletes the tokens sel picks.
func (s *Store) RevokeTokens(ctx context.Context, sel mailroom.TokenSelector) ([]mailroom.TokenInfo, error) {
	var out []mailroom.TokenInfo
	err := s.write(ctx, func(tx *ptx) error {
		tx.touchNone() // tokens are no inbox
		var (
			cond string
			args []any
		)
		if sel.Prefix != "" {
			// The digest is the key: a prefix is a key range.
			lo, hi := sel.DigestRange()
			cond, args = `digest >= ?`, []any{lo}
			if hi != nil {
				cond, args = cond+` AND digest < ?`, append(args, hi)
			}
		} else {
			id, err := identityByName(ctx, tx, sel.Name)
			if err != nil || id.Kind != sel.Kind {
				if err == nil || mailroom.ErrorCode(err) == mailroom.ENOTFOUND {
					return mailroom.Errorf(mailroom.ENOTFOUND, "unknown identity %s", mailroom.Identity{Name: sel.Name, Kind: sel.Kind}.Address())
				}
				return err
			}
			cond, args = `identity_id = ?`, []any{id.ID}
		}
		var err error
		if out, err = tokensWhere(ctx, tx, cond, args...); err != nil {
			return err
		}
		if err := sel.CheckRevoke(len(out)); err != nil {
			return err
		}
		_, err = tx.Tx.ExecContext(ctx, `DELETE FROM token WHERE `+cond, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TouchToken records a token's use at most once per interval.
func (s *Store) TouchToken(ctx context.Context, digest []byte, at time.Time) error {
	return s.write(ctx, func(tx *ptx) error {
		tx.touchNone()
		_, err := tx.ExecContext(ctx, `UPDATE token SET last_used_at = ?1 WHERE digest = ?2 AND (last_used_at IS NULL OR last_used_at <= ?3)`,
			ts(at), digest, ts(at.Add(-mailroom.TokenTouchInterval)))
		return err
	})
}
