package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// EnsureAgent returns the agent name, registering it on first use.
func (s *Store) EnsureAgent(ctx context.Context, name string) (mailroom.Identity, error) {
	return s.AddIdentity(ctx, name, mailroom.KindAgent)
}

// AddIdentity registers name with kind, idempotently.
func (s *Store) AddIdentity(ctx context.Context, name string, kind mailroom.Kind) (mailroom.Identity, error) {
	if err := mailroom.ValidateName(name); err != nil {
		return mailroom.Identity{}, err
	}
	var id mailroom.Identity
	err := s.write(ctx, func(tx pgx.Tx) error {
		// Two statements: a concurrent insert of the same name makes this
		// one wait and do nothing; the select then sees the winner's row.
		if _, err := tx.Exec(ctx, `INSERT INTO identity (name, kind, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`, name, kind, s.now()); err != nil {
			return err
		}
		var err error
		id, err = identityByName(ctx, tx, name)
		if err != nil {
			return err
		}
		if id.Kind != kind {
			return mailroom.Errorf(mailroom.ECONFLICT, "%s is already taken by %s; one name cannot be both an agent and a human", name, id.Address())
		}
		return nil
	})
	return id, err
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func identityByName(ctx context.Context, q querier, name string) (mailroom.Identity, error) {
	id := mailroom.Identity{Name: name}
	err := q.QueryRow(ctx, `SELECT id, kind FROM identity WHERE name = $1`, name).Scan(&id.ID, &id.Kind)
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
	return s.write(ctx, func(tx pgx.Tx) error {
		id, err := identityByName(ctx, tx, name)
		if err != nil {
			return err
		}
		if _, err := ensureRole(ctx, tx, role); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `INSERT INTO role_grant (identity_id, role) VALUES ($1, $2) ON CONFLICT DO NOTHING`, id.ID, role); err != nil {
			return err
		}
		return s.notify(ctx, tx, mailroom.Change{Identities: []int64{id.ID}})
	})
}

// ensureRole creates the role queue if needed and returns its mailbox.
func ensureRole(ctx context.Context, tx pgx.Tx, role string) (int64, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO role (name) VALUES ($1) ON CONFLICT DO NOTHING`, role); err != nil {
		return 0, err
	}
	var mb int64
	err := tx.QueryRow(ctx, `SELECT mailbox_id FROM role WHERE name = $1`, role).Scan(&mb)
	return mb, err
}

// AddToken stores a token digest for an identity.
func (s *Store) AddToken(ctx context.Context, identityID int64, digest []byte) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO token (digest, identity_id, created_at) VALUES ($1, $2, $3)`, digest, identityID, s.now())
	return err
}

// IdentityByToken finds a token's identity by digest.
func (s *Store) IdentityByToken(ctx context.Context, digest []byte) (mailroom.Identity, error) {
	var id mailroom.Identity
	err := s.pool.QueryRow(ctx, `SELECT i.id, i.name, i.kind FROM token t JOIN identity i ON i.id = t.identity_id WHERE t.digest = $1`, digest).Scan(&id.ID, &id.Name, &id.Kind)
	if isNoRows(err) {
		return mailroom.Identity{}, mailroom.Errorf(mailroom.ENOTFOUND, "unknown token")
	}
	return id, err
}

// roleSet is the role mailboxes a caller reads: explicit grants plus the
// implicit next-session roles that exist as queues. own is the mailbox of
// the caller's own next-session-of-<self> queue (0 if none): the one role
// whose messages reach their own sender.
type roleSet struct {
	ids   []int64
	own   int64
	names map[int64]string // mailbox -> role name
}

// change is the change a write to the caller's delivery in mailbox makes:
// the caller's inbox, and for a role queue every holder's.
func (rs roleSet) change(me mailroom.Identity, mailboxes ...int64) mailroom.Change {
	c := mailroom.Change{Identities: []int64{me.ID}}
	for _, mb := range mailboxes {
		if name, ok := rs.names[mb]; ok && !slices.Contains(c.Roles, name) {
			c.Roles = append(c.Roles, name)
		}
	}
	return c
}

// rolesOf reads the caller's roles on every call: another instance may have
// granted one since.
func rolesOf(ctx context.Context, q querier, me mailroom.Identity) (roleSet, error) {
	implicit := me.ImplicitRoles()
	rows, err := q.Query(ctx, `SELECT mailbox_id, name FROM role WHERE name = ANY($2)
		UNION SELECT r.mailbox_id, r.name FROM role_grant g JOIN role r ON r.name = g.role WHERE g.identity_id = $1`, me.ID, implicit)
	if err != nil {
		return roleSet{}, err
	}
	defer rows.Close()
	rs := roleSet{ids: []int64{}, names: map[int64]string{}}
	own := "next-session-of-" + me.Name
	for rows.Next() {
		var mb int64
		var name string
		if err := rows.Scan(&mb, &name); err != nil {
			return roleSet{}, err
		}
		rs.ids = append(rs.ids, mb)
		rs.names[mb] = name
		if me.Kind == mailroom.KindAgent && name == own {
			rs.own = mb
		}
	}
	return rs, rows.Err()
}

// Identities lists every identity with its explicit role grants.
func (s *Store) Identities(ctx context.Context) ([]mailroom.IdentityInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT i.id, i.name, i.kind, i.created_at, g.role
		FROM identity i LEFT JOIN role_grant g ON g.identity_id = i.id ORDER BY i.name, g.role`)
	if err != nil {
		return nil, err
	}
	var out []mailroom.IdentityInfo
	var info mailroom.IdentityInfo
	var role *string
	_, err = pgx.ForEachRow(rows, []any{&info.ID, &info.Name, &info.Kind, &info.CreatedAt, &role}, func() error {
		if n := len(out); n > 0 && out[n-1].ID == info.ID {
			out[n-1].Roles = append(out[n-1].Roles, *role)
			return nil
		}
		next := info
		next.CreatedAt = next.CreatedAt.UTC()
		next.Roles = nil
		if role != nil {
			next.Roles = []string{*role}
		}
		out = append(out, next)
		return nil
	})
	return out, err
}

// Roles lists every known role with its holders.
func (s *Store) Roles(ctx context.Context) ([]mailroom.RoleInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.name, i.name, i.kind
		FROM role r LEFT JOIN role_grant g ON g.role = r.name LEFT JOIN identity i ON i.id = g.identity_id
		ORDER BY r.name, i.name`)
	if err != nil {
		return nil, err
	}
	var out []mailroom.RoleInfo
	var role string
	var name, kind *string
	_, err = pgx.ForEachRow(rows, []any{&role, &name, &kind}, func() error {
		if n := len(out); n == 0 || out[n-1].Name != role {
			out = append(out, mailroom.RoleInfo{Name: role})
		}
		if name != nil {
			h := mailroom.Identity{Name: *name, Kind: mailroom.Kind(*kind)}
			out[len(out)-1].Holders = append(out[len(out)-1].Holders, h.Address())
		}
		return nil
	})
	return out, err
}

// RevokeRole takes role away from the identity name.
func (s *Store) RevokeRole(ctx context.Context, name, role string) error {
	if err := mailroom.ValidateRole(role); err != nil {
		return err
	}
	return s.write(ctx, func(tx pgx.Tx) error {
		id, err := identityByName(ctx, tx, name)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM role_grant WHERE identity_id = $1 AND role = $2`, id.ID, role)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return mailroom.Errorf(mailroom.ENOTFOUND, "%s does not hold role:%s", id.Address(), role)
		}
		return s.notify(ctx, tx, mailroom.Change{Identities: []int64{id.ID}})
	})
}
