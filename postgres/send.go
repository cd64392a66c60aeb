package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// Send stores a message and all its edges in one transaction.
func (s *Store) Send(ctx context.Context, d mailroom.Draft) (mailroom.SendReceipt, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	if d.OriginSessionID == "" {
		return mailroom.SendReceipt{}, mailroom.Errorf(mailroom.EINVALID, "originSessionId is required")
	}
	var r mailroom.SendReceipt
	err = s.write(ctx, func(tx pgx.Tx) error {
		p, err := plan(ctx, tx, me, d)
		if err != nil {
			return err
		}
		if err := lockSends(ctx, tx); err != nil {
			return err
		}
		if r, err = p.store(ctx, tx, me, d, s.now()); err != nil {
			return err
		}
		return s.notify(ctx, tx, p.change())
	})
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	r.Durable = true
	return r, nil
}

// sendPlan is a draft's addresses resolved, before anything is written.
type sendPlan struct {
	addrs     []string
	direct    []int64
	roles     []string
	broadcast bool
	parentSeq *int64
	threadID  string
}

// plan resolves every address and the reply parent, writing nothing, so a
// refused send leaves the store untouched and the send lock is held only
// for the writes.
func plan(ctx context.Context, tx pgx.Tx, me mailroom.Identity, d mailroom.Draft) (sendPlan, error) {
	var p sendPlan
	for _, a := range d.To {
		switch a.Kind {
		case mailroom.AddrMe:
			p.direct = append(p.direct, me.ID)
			p.addrs = append(p.addrs, me.Address())
		case mailroom.AddrAgent, mailroom.AddrHuman:
			want := mailroom.KindAgent
			if a.Kind == mailroom.AddrHuman {
				want = mailroom.KindHuman
			}
			id, err := identityByName(ctx, tx, a.Name)
			if mailroom.ErrorCode(err) == mailroom.ENOTFOUND {
				return p, mailroom.Errorf(mailroom.EINVALID, "Unknown recipient: %s", a.String())
			} else if err == nil && id.Kind != want {
				return p, mailroom.Errorf(mailroom.EINVALID, "Unknown recipient: %s (%s is %s)", a.String(), a.Name, id.Address())
			} else if err != nil {
				return p, err
			}
			p.direct = append(p.direct, id.ID)
			p.addrs = append(p.addrs, id.Address())
		case mailroom.AddrRole:
			if owner, ok := strings.CutPrefix(a.Name, "next-session-of-"); ok {
				id, err := identityByName(ctx, tx, owner)
				if mailroom.ErrorCode(err) == mailroom.ENOTFOUND || (err == nil && id.Kind != mailroom.KindAgent) {
					return p, mailroom.Errorf(mailroom.EINVALID, "Unknown recipient: %s (no agent named %s)", a.String(), owner)
				} else if err != nil {
					return p, err
				}
			}
			p.roles = append(p.roles, a.Name)
			p.addrs = append(p.addrs, a.String())
		case mailroom.AddrBroadcast:
			var any bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM identity WHERE kind = 'agent' AND id <> $1)`, me.ID).Scan(&any); err != nil {
				return p, err
			}
			if !any {
				return p, mailroom.Errorf(mailroom.EINVALID, "No recipients: the broadcast reaches nobody")
			}
			p.broadcast = true
			p.addrs = append(p.addrs, "*")
		}
	}
	p.addrs = unique(p.addrs) // @me and @<self> resolve alike
	p.roles = unique(p.roles)
	if d.InReplyTo != "" {
		// A reply joins its parent's thread; the parent must be visible.
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return p, err
		}
		parent, err := resolve(ctx, tx, me, roles, d.InReplyTo)
		if err != nil {
			return p, err
		}
		p.parentSeq, p.threadID = &parent.seq, parent.thread
	}
	return p, nil
}

// store writes the planned message; the caller holds the send lock. Keys
// shared between transactions (sessions, roles, tickets, concepts) are
// written in sorted order, so concurrent writers take their locks in one
// order.
func (p sendPlan) store(ctx context.Context, tx pgx.Tx, me mailroom.Identity, d mailroom.Draft, at time.Time) (mailroom.SendReceipt, error) {
	if p.threadID == "" {
		p.threadID = mailroom.NewThreadID()
		if _, err := tx.Exec(ctx, `INSERT INTO thread (id, created_at) VALUES ($1, $2)`, p.threadID, at); err != nil {
			return mailroom.SendReceipt{}, err
		}
	}
	sessions := sortedUnique(append([]string{d.OriginSessionID}, d.RelatedSessions...))
	if _, err := tx.Exec(ctx, `INSERT INTO session (id) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT DO NOTHING`, sessions); err != nil {
		return mailroom.SendReceipt{}, err
	}
	msgID := mailroom.NewMessageID()
	var seq int64
	err := tx.QueryRow(ctx, `INSERT INTO message (id, subject, body, created_at, priority, sender_id, thread_id, origin_session_id, in_reply_to)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING seq`,
		msgID, d.Subject, d.Body, at, string(d.Priority), me.ID, p.threadID, d.OriginSessionID, p.parentSeq).Scan(&seq)
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO message_to (message_seq, position, address)
		SELECT $1, a.pos - 1, a.address FROM unnest($2::text[]) WITH ORDINALITY AS a(address, pos)`, seq, p.addrs); err != nil {
		return mailroom.SendReceipt{}, err
	}
	count := 0
	if len(p.direct) > 0 {
		tag, err := tx.Exec(ctx, `INSERT INTO delivery (recipient, message_seq, via, delivered_at)
			SELECT r, $2, 'direct', $3 FROM unnest($1::bigint[]) AS r ON CONFLICT DO NOTHING`, p.direct, seq, at)
		if err != nil {
			return mailroom.SendReceipt{}, err
		}
		count += int(tag.RowsAffected())
	}
	if p.broadcast {
		// The audience is fixed now: agents that exist at send time.
		tag, err := tx.Exec(ctx, `INSERT INTO delivery (recipient, message_seq, via, delivered_at)
			SELECT id, $1, 'broadcast', $2 FROM identity WHERE kind = 'agent' AND id <> $3
			ON CONFLICT DO NOTHING`, seq, at, me.ID)
		if err != nil {
			return mailroom.SendReceipt{}, err
		}
		count += int(tag.RowsAffected())
	}
	roles := slices.Sorted(slices.Values(p.roles))
	for _, r := range roles {
		mb, err := ensureRole(ctx, tx, r)
		if err != nil {
			return mailroom.SendReceipt{}, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO delivery (recipient, message_seq, via, delivered_at) VALUES ($1, $2, 'role', $3)`, mb, seq, at); err != nil {
			return mailroom.SendReceipt{}, err
		}
		count++
	}
	if len(d.RelatedSessions) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO message_session (message_seq, session_id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, seq, d.RelatedSessions); err != nil {
			return mailroom.SendReceipt{}, err
		}
	}
	if len(d.RelatedTickets) > 0 {
		tickets := sortedUnique(d.RelatedTickets)
		if _, err := tx.Exec(ctx, `INSERT INTO ticket (id) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT DO NOTHING`, tickets); err != nil {
			return mailroom.SendReceipt{}, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO message_ticket (message_seq, ticket_id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, seq, tickets); err != nil {
			return mailroom.SendReceipt{}, err
		}
	}
	if err := tagConcepts(ctx, tx, []tagging{{seq: seq, concepts: d.Concepts, source: "caller"}}); err != nil {
		return mailroom.SendReceipt{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO concept_job (message_seq, run_after) VALUES ($1, $2)`, seq, at); err != nil {
		return mailroom.SendReceipt{}, err
	}
	return mailroom.SendReceipt{
		MessageID:      msgID,
		ThreadID:       p.threadID,
		SentAt:         at,
		Priority:       d.Priority,
		RecipientCount: count,
		Status:         "sent",
	}, nil
}

// tagging is one message's concepts from one source.
type tagging struct {
	seq      int64
	concepts []mailroom.Concept
	source   string
}

// tagConcepts writes the concept nodes of every tagging (in id order, one
// statement) and then each message's edges.
func tagConcepts(ctx context.Context, tx pgx.Tx, ts []tagging) error {
	names := map[string]string{}
	for _, t := range ts {
		for _, c := range t.concepts {
			if _, ok := names[c.ID]; !ok {
				names[c.ID] = c.Name
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range names {
			if !yield(id) {
				return
			}
		}
	})
	nameList := make([]string, len(ids))
	for i, id := range ids {
		nameList[i] = names[id]
	}
	if _, err := tx.Exec(ctx, `INSERT INTO concept (id, name) SELECT * FROM unnest($1::text[], $2::text[]) ORDER BY 1 ON CONFLICT DO NOTHING`, ids, nameList); err != nil {
		return err
	}
	for _, t := range ts {
		if len(t.concepts) == 0 {
			continue
		}
		cids := make([]string, len(t.concepts))
		for i, c := range t.concepts {
			cids[i] = c.ID
		}
		if _, err := tx.Exec(ctx, `INSERT INTO message_concept (message_seq, concept_id, source, rank)
			SELECT $1, c.id, $3, c.pos - 1 FROM unnest($2::text[]) WITH ORDINALITY AS c(id, pos)
			ON CONFLICT DO NOTHING`, t.seq, cids, t.source); err != nil {
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

func sortedUnique(list []string) []string {
	out := slices.Clone(list)
	slices.Sort(out)
	return slices.Compact(out)
}

// SendMany stores n copies of d from the caller, with the same rows and
// edges as n Sends, in transactions of up to sendManyBatch messages with a
// few set-based statements each. It exists to seed large mailboxes for
// benchmarks and load tests; servers never call it.
func (s *Store) SendMany(ctx context.Context, d mailroom.Draft, n int) error {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return err
	}
	for n > 0 {
		k := min(n, sendManyBatch)
		err := s.write(ctx, func(tx pgx.Tx) error {
			p, err := plan(ctx, tx, me, d)
			if err != nil {
				return err
			}
			if err := lockSends(ctx, tx); err != nil {
				return err
			}
			if err := p.storeMany(ctx, tx, me, d, s.now(), k); err != nil {
				return err
			}
			return s.notify(ctx, tx, p.change())
		})
		if err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// sendManyBatch bounds one SendMany transaction.
const sendManyBatch = 10_000

// storeMany writes k copies of the planned message in one statement per
// table; the caller holds the send lock, so seq order is still commit order.
func (p sendPlan) storeMany(ctx context.Context, tx pgx.Tx, me mailroom.Identity, d mailroom.Draft, at time.Time, k int) error {
	ids, threads := make([]string, k), make([]string, k)
	for i := range k {
		ids[i] = mailroom.NewMessageID()
		if threads[i] = p.threadID; p.threadID == "" {
			threads[i] = mailroom.NewThreadID()
		}
	}
	if p.threadID == "" {
		if _, err := tx.Exec(ctx, `INSERT INTO thread (id, created_at) SELECT unnest($1::text[]), $2`, threads, at); err != nil {
			return err
		}
	}
	sessions := sortedUnique(append([]string{d.OriginSessionID}, d.RelatedSessions...))
	if _, err := tx.Exec(ctx, `INSERT INTO session (id) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT DO NOTHING`, sessions); err != nil {
		return err
	}
	tickets := sortedUnique(d.RelatedTickets)
	if _, err := tx.Exec(ctx, `INSERT INTO ticket (id) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT DO NOTHING`, tickets); err != nil {
		return err
	}
	roles := slices.Sorted(slices.Values(p.roles))
	var roleBoxes []int64
	for _, r := range roles {
		mb, err := ensureRole(ctx, tx, r)
		if err != nil {
			return err
		}
		roleBoxes = append(roleBoxes, mb)
	}
	cids := make([]string, len(d.Concepts))
	cnames := make([]string, len(d.Concepts))
	for i, c := range d.Concepts {
		cids[i], cnames[i] = c.ID, c.Name
	}
	if _, err := tx.Exec(ctx, `INSERT INTO concept (id, name) SELECT * FROM unnest($1::text[], $2::text[]) ORDER BY 1 ON CONFLICT DO NOTHING`, cids, cnames); err != nil {
		return err
	}
	direct := slices.Compact(slices.Sorted(slices.Values(p.direct)))
	_, err := tx.Exec(ctx, `WITH m AS (
			INSERT INTO message (id, subject, body, created_at, priority, sender_id, thread_id, origin_session_id, in_reply_to)
			SELECT x.id, $3, $4, $5, $6, $7, x.thread, $8, $9 FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(id, thread, n)
			ORDER BY x.n RETURNING seq),
		t AS (INSERT INTO message_to (message_seq, position, address)
			SELECT m.seq, a.pos - 1, a.address FROM m, unnest($10::text[]) WITH ORDINALITY AS a(address, pos)),
		dd AS (INSERT INTO delivery (recipient, message_seq, via, delivered_at)
			SELECT r, m.seq, 'direct', $5 FROM m, unnest($11::bigint[]) AS r),
		bd AS (INSERT INTO delivery (recipient, message_seq, via, delivered_at)
			SELECT i.id, m.seq, 'broadcast', $5 FROM m, identity i
			WHERE $12 AND i.kind = 'agent' AND i.id <> $7 AND NOT (i.id = ANY($11::bigint[]))),
		rd AS (INSERT INTO delivery (recipient, message_seq, via, delivered_at)
			SELECT r, m.seq, 'role', $5 FROM m, unnest($13::bigint[]) AS r),
		ms AS (INSERT INTO message_session (message_seq, session_id)
			SELECT m.seq, x FROM m, unnest($14::text[]) AS x),
		mt AS (INSERT INTO message_ticket (message_seq, ticket_id)
			SELECT m.seq, x FROM m, unnest($15::text[]) AS x),
		mc AS (INSERT INTO message_concept (message_seq, concept_id, source, rank)
			SELECT m.seq, c.id, 'caller', c.pos - 1 FROM m, unnest($16::text[]) WITH ORDINALITY AS c(id, pos)),
		j AS (INSERT INTO concept_job (message_seq, run_after) SELECT m.seq, $5 FROM m)
		SELECT count(*) FROM m`,
		ids, threads, d.Subject, d.Body, at, string(d.Priority), me.ID, d.OriginSessionID, p.parentSeq,
		p.addrs, direct, p.broadcast, roleBoxes, sortedUnique(d.RelatedSessions), tickets, cids)
	return err
}
