package postgres

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// unreadCond limits inbox branches to unread, unarchived deliveries.
const unreadCond = ` AND d.read_at IS NULL AND d.archived_at IS NULL`

// roleNames lists the names of a caller's roles (implicit ones too, which
// have no mailbox until first addressed), for Change.Touches: sorted, each
// once (InboxState.Roles).
func (rs roleSet) roleNames(me mailroom.Identity) []string {
	out := me.ImplicitRoles()
	for _, n := range rs.names {
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// InboxState counts the caller's unread inbox and sums its seqs: with the
// watermark that is a fingerprint of the unread set. Both are sums over
// count rows (mailbox_count keeps each count's seq sum, migration 0010):
// the personal counts plus the role queues' less the candidates the role
// branch leaves out (roleHidden), as list totals and the status count
// them, so a wake round's check costs the caller's own activity, not the
// size of their unread set (96 ms of server CPU for a role queue of
// 100,000 when the set was summed row by row).
func (s *Store) InboxState(ctx context.Context) (mailroom.InboxState, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.InboxState{}, err
	}
	var st mailroom.InboxState
	var sum int64
	err = s.read(ctx, func(tx pgx.Tx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		st.Roles = roles.roleNames(me)
		if err := tx.QueryRow(ctx, inboxStateSQL, me.ID, roles.ids, roles.own).Scan(&st.UnreadCount, &sum); err != nil {
			return err
		}
		st.Watermark, err = watermark(ctx, tx, me, roles)
		return err
	})
	if err != nil {
		return mailroom.InboxState{}, err
	}
	st.Fingerprint = mailroom.InboxFingerprint(st.UnreadCount, sum, st.Watermark)
	return st, nil
}

// inboxStateSQL counts and sums the caller's unread, unarchived inbox
// from the counters ($1 the caller, $2 their role mailboxes, $3 their own
// successor's): the personal mailbox's and the role queues' counts less
// the unread hidden candidates.
var inboxStateSQL = `SELECT c.n - h.n, c.s - h.s
	FROM (SELECT coalesce(sum(n), 0)::bigint AS n, coalesce(sum(seqs), 0)::bigint AS s FROM mailbox_count
		WHERE (recipient = $1 OR recipient = ANY($2)) AND unread AND NOT archived) c,
	(SELECT count(*) AS n, coalesce(sum(h.message_seq), 0)::bigint AS s FROM (` + roleHidden + unreadCond + `) h) h`

// NewMail returns unread inbox mail committed after since, oldest first.
func (s *Store) NewMail(ctx context.Context, since string, includeRoles bool, limit int) (mailroom.NewMail, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.NewMail{}, err
	}
	out := mailroom.NewMail{Messages: []mailroom.Row{}}
	err = s.read(ctx, func(tx pgx.Tx) error {
		out.Messages = out.Messages[:0]
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		var after int64
		if since != "" {
			t, err := resolve(ctx, tx, me, roles, since)
			if err != nil {
				return err
			}
			after = t.seq
		}
		n := 0
		if includeRoles {
			n = len(roles.ids)
		}
		b := inboxWalkBranches(unreadCond+` AND d.message_seq > $4`, "", n, false)
		for i := range b {
			b[i] = `(` + b[i] + ` ORDER BY seq LIMIT $5)`
		}
		q := callerArgs + `SELECT ` + rowColumns + ` FROM (SELECT * FROM (` + strings.Join(b, " UNION ALL ") + `) u ORDER BY seq LIMIT $5) b
			JOIN message m ON m.seq = b.seq LEFT JOIN delivery d ON d.recipient = b.rcpt AND d.message_seq = b.seq ORDER BY b.seq`
		rows, err := tx.Query(ctx, q, exec([]any{me.ID, roles.ids, roles.own, after, limit})...)
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
		out.Watermark, err = watermark(ctx, tx, me, roles)
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
	var fresh []string
	err = s.write(ctx, func(tx pgx.Tx) error {
		fresh = []string{}
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		for _, id := range messageIDs {
			t, err := resolve(ctx, tx, me, roles, id)
			if mailroom.ErrorCode(err) == mailroom.ENOTFOUND {
				continue
			} else if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO hook_announcement (identity_id, session, message_seq, announced_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, me.ID, session, t.seq, s.now())
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				fresh = append(fresh, id)
			}
		}
		return nil // a hook's memory changes no inbox: no notification
	})
	if err != nil {
		return nil, err
	}
	return fresh, nil
}
