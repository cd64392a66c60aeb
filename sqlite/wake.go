package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mailroom/mailroom"
)

// unreadCond limits inbox branches to unread, unarchived deliveries.
const unreadCond = ` AND d.read_at IS NULL AND d.archived_at IS NULL`

// InboxState counts the caller's unread inbox and sums its seqs: with the
// watermark that is a fingerprint of the unread set. Both are sums over
// count rows (migration 0011), the role part with the caller's candidates
// counted again as for list totals, so a wake round's check costs the same
// for an inbox of a million unread. One statement (its own snapshot),
// since a wake round asks it for every touched inbox: a read transaction
// and three statements cost twice as much.
func (s *Store) InboxState(ctx context.Context) (mailroom.InboxState, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.InboxState{}, err
	}
	st := mailroom.InboxState{Roles: me.ImplicitRoles()}
	var sum int64
	var wm sql.NullString
	var grants string
	args := []any{me.ID, jsonStrings(st.Roles)}
	if s.hooks.Statement != nil {
		s.hooks.Statement(inboxStateSQL, args)
	}
	if err := s.queryRowScan(ctx, inboxStateSQL, args, &st.UnreadCount, &sum, &wm, &grants); err != nil {
		return mailroom.InboxState{}, err
	}
	var granted []string
	if err := json.Unmarshal([]byte(grants), &granted); err != nil {
		return mailroom.InboxState{}, err
	}
	// Sorted, each once (an implicit role may be granted explicitly too).
	st.Roles = append(st.Roles, granted...)
	slices.Sort(st.Roles)
	st.Roles = slices.Compact(st.Roles)
	if wm.Valid {
		st.Watermark = &wm.String
	}
	st.Fingerprint = mailroom.InboxFingerprint(st.UnreadCount, sum, st.Watermark)
	return st, nil
}

// inboxStateSQL is InboxState's statement: ?1 the caller, ?2 its implicit
// roles (JSON); the roles it holds are those and its grants. The newest
// role message is asked for each held role on its own (one role's
// deliveries come in seq order from the role index, so each stops at the
// first match; with all roles in one IN list SQLite would read and sort
// every delivery of them, as perRole says for listings).
var inboxStateSQL = func() string {
	const all = `SELECT value FROM json_each(?2)`
	held := func(q string) string { return strings.ReplaceAll(q, all, `SELECT value FROM held`) }
	w := inboxBranches("", "")
	const cols = `SELECT d.message_seq AS seq, d.id AS did`
	personal := strings.Replace(w[0], cols, `SELECT max(d.message_seq)`, 1)
	// The branch's own rule (the oldest delivery among held roles shows a
	// message) keeps its IN list; only the role being asked is fixed.
	role := strings.Replace(w[1], `d.role IN (`+all+`)`, `d.role = h.value`, 1)
	role = held(role)
	role = strings.Replace(role, cols, `SELECT d.message_seq`, 1) + ` ORDER BY d.message_seq DESC LIMIT 1`
	unsure := held(fromCandidates(inboxBranches(unreadCond, "")[1], roleUnsure))
	return `WITH held(value) AS (SELECT value FROM json_each(?2) UNION ALL SELECT role FROM role_grant WHERE identity_id = ?1),
		k(n, s) AS (
			SELECT n, seqs FROM mailbox_count WHERE recipient_id = ?1 AND archived = 0 AND unread = 1
			UNION ALL SELECT n, seqs FROM role_count WHERE role IN (SELECT value FROM held) AND archived = 0 AND unread = 1
			UNION ALL SELECT -1, -d.message_seq ` + held(candidateFrom(roleCandidates)) + ` WHERE 1` + roleUnread(unreadCond) + `
			UNION ALL SELECT 1, seq FROM (` + unsure + `))
		SELECT u.n, u.total,
			(SELECT m.id FROM message m WHERE m.seq = max(coalesce((` + personal + `), 0),
				coalesce((SELECT max((` + role + `)) FROM held h), 0))),
			(SELECT json_group_array(role) FROM role_grant WHERE identity_id = ?1)
		FROM (SELECT coalesce(sum(n), 0) AS n, coalesce(sum(s), 0) AS total FROM k) u`
}()

// NewMail returns unread inbox mail committed after since, oldest first.
func (s *Store) NewMail(ctx context.Context, since string, includeRoles bool, limit int) (mailroom.NewMail, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.NewMail{}, err
	}
	out := mailroom.NewMail{Messages: []mailroom.Row{}}
	err = s.read(ctx, func(tx *ptx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		rj := jsonStrings(roles)
		var after int64
		if since != "" {
			t, err := resolve(ctx, tx, me, rj, since)
			if err != nil {
				return err
			}
			after = t.seq
		}
		b := inboxBranches(unreadCond+` AND d.message_seq > ?3`, "")
		if !includeRoles {
			b = b[:1]
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+rowColumns+` FROM (`+strings.Join(b, " UNION ALL ")+` ORDER BY seq LIMIT ?4) b
			JOIN message m ON m.seq = b.seq LEFT JOIN delivery d ON d.id = b.did ORDER BY b.seq`, me.ID, rj, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanRow(rows)
			if err != nil {
				return err
			}
			out.Messages = append(out.Messages, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		out.Watermark, err = watermark(ctx, tx, me.ID, rj)
		return err
	})
	if err != nil {
		return mailroom.NewMail{}, err
	}
	return out, nil
}

// Announce records what a hook session was told and returns what is new
// to it.
func (s *Store) Announce(ctx context.Context, session string, messageIDs []string) ([]string, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if session == "" {
		return nil, mailroom.Errorf(mailroom.EINVALID, "session must not be empty")
	}
	fresh := []string{}
	err = s.write(ctx, func(tx *ptx) error {
		tx.touchNone() // a hook's memory is no inbox change
		fresh = fresh[:0]
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		rj := jsonStrings(roles)
		at := ts(s.now())
		for _, id := range messageIDs {
			t, err := resolve(ctx, tx, me, rj, id)
			if mailroom.ErrorCode(err) == mailroom.ENOTFOUND {
				continue
			} else if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, `INSERT INTO hook_announcement (identity_id, session, message_seq, announced_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, me.ID, session, t.seq, at)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 1 {
				fresh = append(fresh, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fresh, nil
}
