package sqlite

import (
	"context"
	"strings"

	"github.com/mailroom/mailroom"
)

// unreadCond limits inbox branches to unread, unarchived deliveries.
const unreadCond = ` AND d.read_at IS NULL AND d.archived_at IS NULL`

// InboxState counts the caller's unread inbox and sums its seqs: with the
// watermark that is a fingerprint of the unread set, read from the partial
// unread index without touching messages.
func (s *Store) InboxState(ctx context.Context) (mailroom.InboxState, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.InboxState{}, err
	}
	var st mailroom.InboxState
	var sum int64
	err = s.read(ctx, func(tx *ptx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		st.Roles = roles
		rj := jsonStrings(roles)
		b := inboxBranches(unreadCond, "")
		if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(seq), 0) FROM (`+b[0]+` UNION ALL `+b[1]+`)`, me.ID, rj).Scan(&st.UnreadCount, &sum); err != nil {
			return err
		}
		st.Watermark, err = watermark(ctx, tx, me.ID, rj)
		return err
	})
	if err != nil {
		return mailroom.InboxState{}, err
	}
	st.Fingerprint = mailroom.InboxFingerprint(st.UnreadCount, sum, st.Watermark)
	return st, nil
}

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
