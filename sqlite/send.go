package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/mailroom/mailroom"
)

// Send stores a message and all its edges in one transaction.
func (s *Store) Send(ctx context.Context, d mailroom.Draft) (mailroom.SendReceipt, error) {
	me, err := mailroom.Sender(ctx, d)
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	var r mailroom.SendReceipt
	err = s.writeGrouped(ctx, func(ctx context.Context, tx *ptx) error {
		var err error
		r, err = send(ctx, tx, me, d)
		return err
	})
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	s.wakeMerger() // the send wrote a segment of the full-text index
	r.Durable = s.durable
	return r, nil
}

type personal struct {
	id  int64
	via string
}

// sendPlan is a draft resolved against the store within the write
// transaction: everything a send writes except its own ids and times.
// Send and SendMany both write from one, so they store the same rows.
type sendPlan struct {
	addrs     []string
	direct    []personal
	roles     []string
	broadcast bool
	parentSeq sql.NullInt64
	thread    string // the parent's thread for a reply; "" starts a new one
}

func send(ctx context.Context, tx *ptx, me mailroom.Identity, d mailroom.Draft) (mailroom.SendReceipt, error) {
	p, err := planSend(ctx, tx, me, d)
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	return sendPlanned(ctx, tx, me, d, p)
}

// planSend resolves every address and the reply parent before anything is
// written.
func planSend(ctx context.Context, tx *ptx, me mailroom.Identity, d mailroom.Draft) (sendPlan, error) {
	var (
		addrs     []string
		direct    []personal
		roles     []string
		broadcast bool
	)
	for _, a := range d.To {
		switch a.Kind {
		case mailroom.AddrMe:
			direct = append(direct, personal{me.ID, "direct"})
			addrs = append(addrs, me.Address())
		case mailroom.AddrAgent, mailroom.AddrHuman:
			want := mailroom.KindAgent
			if a.Kind == mailroom.AddrHuman {
				want = mailroom.KindHuman
			}
			id, err := identityByName(ctx, tx, a.Name)
			if mailroom.ErrorCode(err) == mailroom.ENOTFOUND {
				return sendPlan{}, mailroom.Errorf(mailroom.EINVALID, "Unknown recipient: %s", a.String())
			} else if err == nil && id.Kind != want {
				return sendPlan{}, mailroom.Errorf(mailroom.EINVALID, "Unknown recipient: %s (%s is %s)", a.String(), a.Name, id.Address())
			} else if err != nil {
				return sendPlan{}, err
			}
			direct = append(direct, personal{id.ID, "direct"})
			addrs = append(addrs, id.Address())
		case mailroom.AddrRole:
			if owner, ok := strings.CutPrefix(a.Name, "next-session-of-"); ok {
				id, err := identityByName(ctx, tx, owner)
				if mailroom.ErrorCode(err) == mailroom.ENOTFOUND || (err == nil && id.Kind != mailroom.KindAgent) {
					return sendPlan{}, mailroom.Errorf(mailroom.EINVALID, "Unknown recipient: %s (no agent named %s)", a.String(), owner)
				} else if err != nil {
					return sendPlan{}, err
				}
			}
			roles = append(roles, a.Name)
			addrs = append(addrs, a.String())
		case mailroom.AddrBroadcast:
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM identity WHERE kind = 'agent' AND id <> ?`, me.ID).Scan(&n); err != nil {
				return sendPlan{}, err
			}
			if n == 0 {
				return sendPlan{}, mailroom.Errorf(mailroom.EINVALID, "No recipients: the broadcast reaches nobody")
			}
			broadcast = true
			addrs = append(addrs, "*")
		}
	}

	p := sendPlan{addrs: unique(addrs), direct: direct, roles: roles, broadcast: broadcast} // @me and @<self> resolve alike
	// A reply joins its parent's thread; the parent must be visible.
	if d.InReplyTo != "" {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return sendPlan{}, err
		}
		parent, err := resolve(ctx, tx, me, jsonStrings(roles), d.InReplyTo)
		if err != nil {
			return sendPlan{}, err
		}
		p.parentSeq = sql.NullInt64{Int64: parent.seq, Valid: true}
		p.thread = parent.thread
	}
	return p, nil
}

// sendPlanned writes one message of a resolved draft.
func sendPlanned(ctx context.Context, tx *ptx, me mailroom.Identity, d mailroom.Draft, p sendPlan) (mailroom.SendReceipt, error) {
	addrs, direct, roles, broadcast, parentSeq := p.addrs, p.direct, p.roles, p.broadcast, p.parentSeq
	at := tx.now()
	threadID := p.thread
	if threadID == "" {
		threadID = mailroom.NewThreadID()
		if _, err := tx.ExecContext(ctx, `INSERT INTO thread (id, created_at) VALUES (?, ?)`, threadID, ts(at)); err != nil {
			return mailroom.SendReceipt{}, err
		}
	}
	for _, sid := range append([]string{d.OriginSessionID}, d.RelatedSessions...) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO session (id) VALUES (?) ON CONFLICT DO NOTHING`, sid); err != nil {
			return mailroom.SendReceipt{}, err
		}
	}

	msgID := mailroom.NewMessageID()
	var seq int64
	err := tx.QueryRowContext(ctx, `INSERT INTO message (id, subject, body, created_at, priority, sender_id, thread_id, origin_session_id, in_reply_to)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
		msgID, d.Subject, d.Body, ts(at), d.Priority, me.ID, threadID, d.OriginSessionID, parentSeq).Scan(&seq)
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	aud := p.audience(me.ID)
	if _, err := tx.ExecContext(ctx, `INSERT INTO message_audience (message_seq, tokens) VALUES (?, ?)`, seq, aud); err != nil {
		return mailroom.SendReceipt{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO message_fts (rowid, subject, body, audience) VALUES (?, ?, ?, ?)`, ftsRowid(seq), d.Subject, d.Body, aud); err != nil {
		return mailroom.SendReceipt{}, err
	}
	for i, a := range addrs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO message_to (message_seq, position, address) VALUES (?, ?, ?)`, seq, i, a); err != nil {
			return mailroom.SendReceipt{}, err
		}
	}

	count := 0
	ids := make([]int64, 0, len(direct))
	for _, p := range direct {
		ids = append(ids, p.id)
	}
	tx.touch(ids, roles)
	if broadcast {
		tx.touchAll()
	}
	for _, p := range direct {
		res, err := tx.ExecContext(ctx, `INSERT INTO delivery (message_seq, recipient_id, via, delivered_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, seq, p.id, p.via, ts(at))
		if err != nil {
			return mailroom.SendReceipt{}, err
		}
		n, _ := res.RowsAffected()
		count += int(n)
	}
	if broadcast {
		// The audience is fixed now: agents that exist at send time.
		res, err := tx.ExecContext(ctx, `INSERT INTO delivery (message_seq, recipient_id, via, delivered_at)
			SELECT ?, id, 'broadcast', ? FROM identity WHERE kind = 'agent' AND id <> ? ORDER BY id
			ON CONFLICT DO NOTHING`, seq, ts(at), me.ID)
		if err != nil {
			return mailroom.SendReceipt{}, err
		}
		n, _ := res.RowsAffected()
		count += int(n)
	}
	for _, r := range roles {
		if _, err := tx.ExecContext(ctx, `INSERT INTO role (name) VALUES (?) ON CONFLICT DO NOTHING`, r); err != nil {
			return mailroom.SendReceipt{}, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO delivery (message_seq, role, via, delivered_at) VALUES (?, ?, 'role', ?)`, seq, r, ts(at)); err != nil {
			return mailroom.SendReceipt{}, err
		}
		count++
	}
	for _, sid := range d.RelatedSessions {
		if _, err := tx.ExecContext(ctx, `INSERT INTO message_session (message_seq, session_id) VALUES (?, ?)`, seq, sid); err != nil {
			return mailroom.SendReceipt{}, err
		}
	}
	for _, t := range d.RelatedTickets {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ticket (id) VALUES (?) ON CONFLICT DO NOTHING`, t); err != nil {
			return mailroom.SendReceipt{}, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO message_ticket (message_seq, ticket_id) VALUES (?, ?)`, seq, t); err != nil {
			return mailroom.SendReceipt{}, err
		}
	}
	if err := tagConcepts(ctx, tx, seq, d.Concepts, "caller"); err != nil {
		return mailroom.SendReceipt{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO concept_job (message_seq, run_after) VALUES (?, ?)`, seq, ts(at)); err != nil {
		return mailroom.SendReceipt{}, err
	}
	return mailroom.SendReceipt{
		MessageID:      msgID,
		ThreadID:       threadID,
		SentAt:         at,
		Priority:       d.Priority,
		RecipientCount: count,
		Status:         "sent",
	}, nil
}

func tagConcepts(ctx context.Context, tx *ptx, seq int64, cs []mailroom.Concept, source string) error {
	for i, c := range cs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO concept (id, name) VALUES (?, ?) ON CONFLICT DO NOTHING`, c.ID, c.Name); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO message_concept (message_seq, concept_id, source, rank) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, seq, c.ID, source, i); err != nil {
			return err
		}
	}
	return nil
}

// unique returns list without repeats, in first-seen order.
func unique(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := list[:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
