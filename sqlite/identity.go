package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/mailroom/mailroom"
)

// EnsureAgent returns the agent name, registering it on first use.
func (s *Store) EnsureAgent(ctx context.Context, name string) (mailroom.Identity, error) {
	if err := mailroom.ValidateName(name); err != nil {
		return mailroom.Identity{}, err
	}
	var id mailroom.Identity
	err := s.write(ctx, func(tx *ptx) error {
		var err error
		tx.touchNone() // a new identity's inbox is empty
		id, err = ensureIdentity(ctx, tx, name, mailroom.KindAgent)
		return err
	})
	return id, err
}

// AddIdentity registers name with kind, idempotently.
func (s *Store) AddIdentity(ctx context.Context, name string, kind mailroom.Kind) (mailroom.Identity, error) {
	if err := mailroom.ValidateName(name); err != nil {
		return mailroom.Identity{}, err
	}
	var id mailroom.Identity
	err := s.write(ctx, func(tx *ptx) error {
		var err error
		tx.touchNone()
		id, err = ensureIdentity(ctx, tx, name, kind)
		return err
	})
	return id, err
}

func ensureIdentity(ctx context.Context, tx *ptx, name string, kind mailroom.Kind) (mailroom.Identity, error) {
	// Ids start at 2. SQLite re-plans a prepared statement whenever a bound
	// integer it compares by = moves into or out of {0, 1} (its guess of how
	// often "col = ?" holds peeks at the value), and every listing binds the
	// reader's id: with an identity 1, its calls and everyone else's took
	// turns re-planning each other's statements.
	if _, err := tx.ExecContext(ctx, `INSERT INTO identity (id, name, kind, created_at)
		SELECT max(coalesce(max(id), 0) + 1, 2), ?, ?, ? FROM identity WHERE true ON CONFLICT (name) DO NOTHING`, name, kind, ts(tx.now())); err != nil {
		return mailroom.Identity{}, err
	}
	id, err := identityByName(ctx, tx, name)
	if err != nil {
		return mailroom.Identity{}, err
	}
	if id.Kind != kind {
		return mailroom.Identity{}, mailroom.Errorf(mailroom.ECONFLICT, "%s is already taken by %s; one name cannot be both an agent and a human", name, id.Address())
	}
	return id, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func identityByName(ctx context.Context, q querier, name string) (mailroom.Identity, error) {
	id := mailroom.Identity{Name: name}
	err := q.QueryRowContext(ctx, `SELECT id, kind FROM identity WHERE name = ?`, name).Scan(&id.ID, &id.Kind)
	if isNoRows(err) {
		return mailroom.Identity{}, mailroom.Errorf(mailroom.ENOTFOUND, "Unknown identity: %s", name)
	}
	return id, err
}

// byName is identityByName bound to q, for the domain's resolvers.
func byName(ctx context.Context, q querier) mailroom.IdentityByName {
	return func(name string) (mailroom.Identity, error) { return identityByName(ctx, q, name) }
}

// GrantRole grants role to the identity name.
func (s *Store) GrantRole(ctx context.Context, name, role string) error {
	if err := mailroom.ValidateRole(role); err != nil {
		return err
	}
	return s.write(ctx, func(tx *ptx) error {
		id, err := identityByName(ctx, tx, name)
		if err != nil {
			return err
		}
		tx.touch([]int64{id.ID}, nil) // the role's mail joins its inbox
		if _, err := tx.ExecContext(ctx, `INSERT INTO role (name) VALUES (?) ON CONFLICT DO NOTHING`, role); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO role_grant (identity_id, role) VALUES (?, ?) ON CONFLICT DO NOTHING`, id.ID, role)
		return err
	})
}

// AddToken stores a token digest for an identity.
func (s *Store) AddToken(ctx context.Context, identityID int64, digest []byte) error {
	return s.write(ctx, func(tx *ptx) error {
		tx.touchNone()
		_, err := tx.ExecContext(ctx, `INSERT INTO token (digest, identity_id, created_at) VALUES (?, ?, ?)`, digest, identityID, ts(tx.now()))
		return err
	})
}

// IdentityByToken finds a token's identity by digest.
func (s *Store) IdentityByToken(ctx context.Context, digest []byte) (mailroom.Identity, error) {
	var id mailroom.Identity
	// Every HTTP request asks this: prepared once, not parsed per request.
	err := s.queryRowScan(ctx, `SELECT i.id, i.name, i.kind FROM token t JOIN identity i ON i.id = t.identity_id WHERE t.digest = ?`,
		[]any{digest}, &id.ID, &id.Name, &id.Kind)
	if isNoRows(err) {
		return mailroom.Identity{}, mailroom.Errorf(mailroom.ENOTFOUND, "unknown token")
	}
	return id, err
}

// rolesOf returns every role the caller holds: explicit grants plus the
// implicit next-session roles. Read on every call: another process may have
// granted one since.
func rolesOf(ctx context.Context, tx *ptx, me mailroom.Identity) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT role FROM role_grant WHERE identity_id = ?`, me.ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	roles := me.ImplicitRoles()
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return nil, err
		}
		// An implicit role granted explicitly too is held once: a role
		// listed twice would list its mail twice (perRole).
		if !slices.Contains(roles, r) {
			roles = append(roles, r)
		}
	}
	return roles, rows.Err()
}

// Identities lists every identity by name with its explicit grants.
func (s *Store) Identities(ctx context.Context) ([]mailroom.IdentityInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT i.id, i.name, i.kind, i.created_at, g.role
		FROM identity i LEFT JOIN role_grant g ON g.identity_id = i.id ORDER BY i.name, g.role`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []mailroom.IdentityInfo
	for rows.Next() {
		var info mailroom.IdentityInfo
		var created string
		var role sql.NullString
		if err := rows.Scan(&info.ID, &info.Name, &info.Kind, &created, &role); err != nil {
			return nil, err
		}
		if n := len(out); n > 0 && out[n-1].ID == info.ID {
			out[n-1].Roles = append(out[n-1].Roles, role.String)
			continue
		}
		info.CreatedAt = parseTS(created)
		if role.Valid {
			info.Roles = []string{role.String}
		}
		out = append(out, info)
	}
	return out, rows.Err()
}

// Roles lists every known role with its holders.
func (s *Store) Roles(ctx context.Context) ([]mailroom.RoleInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.name, i.name, i.kind
		FROM role r LEFT JOIN role_grant g ON g.role = r.name LEFT JOIN identity i ON i.id = g.identity_id
		ORDER BY r.name, i.name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []mailroom.RoleInfo
	for rows.Next() {
		var role string
		var name, kind sql.NullString
		if err := rows.Scan(&role, &name, &kind); err != nil {
			return nil, err
		}
		if n := len(out); n == 0 || out[n-1].Name != role {
			out = append(out, mailroom.RoleInfo{Name: role})
		}
		if name.Valid {
			h := mailroom.Identity{Name: name.String, Kind: mailroom.Kind(kind.String)}
			out[len(out)-1].Holders = append(out[len(out)-1].Holders, h.Address())
		}
	}
	return out, rows.Err()
}

// RevokeRole takes role away from the identity name.
func (s *Store) RevokeRole(ctx context.Context, name, role string) error {
	if err := mailroom.ValidateRole(role); err != nil {
		return err
	}
	return s.write(ctx, func(tx *ptx) error {
		id, err := identityByName(ctx, tx, name)
		if err != nil {
			return err
		}
		tx.touch([]int64{id.ID}, nil) // the role's mail leaves its inbox
		res, err := tx.ExecContext(ctx, `DELETE FROM role_grant WHERE identity_id = ? AND role = ?`, id.ID, role)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return mailroom.Errorf(mailroom.ENOTFOUND, "%s does not hold role:%s", id.Address(), role)
		}
		return nil
	})
}

// Ping runs one trivial query on the database.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	return s.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
}
