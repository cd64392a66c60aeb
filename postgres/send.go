package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// Send stores a message and all its edges in one transaction, in two round
// trips: one resolves the addresses (plan), one pipelines the send lock,
// any new role queues, every write (one statement) and the change
// notification as a single implicit transaction (a pgx batch without BEGIN
// commits at its end). A reply resolves its parent first, two more.
func (s *Store) Send(ctx context.Context, d mailroom.Draft) (mailroom.SendReceipt, error) {
	me, err := mailroom.Sender(ctx, d)
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	p, err := plan(ctx, s.pool, me, d)
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	at := s.now()
	w := p.writes(me, d, at)
	payload := s.payload(p.change())
	var count int
	err = s.pipeline(ctx, func(b *pgx.Batch) {
		b.Queue(lockSendsSQL)
		if len(p.roles) > 0 {
			b.Queue(`INSERT INTO role (name) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT DO NOTHING`, sortedUnique(p.roles))
		}
		b.Queue(sendSQL, w.args()...).QueryRow(func(r pgx.Row) error { return r.Scan(&count) })
		b.Queue(notifySQL, s.channel, payload)
	})
	if err != nil {
		return mailroom.SendReceipt{}, err
	}
	return mailroom.SendReceipt{
		MessageID:      w.msgID,
		ThreadID:       w.threadID,
		SentAt:         at,
		Priority:       d.Priority,
		RecipientCount: count,
		Status:         "sent",
		Durable:        true,
	}, nil
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
// for the writes. Every name and the broadcast audience are looked up in
// one round trip.
func plan(ctx context.Context, q querier, me mailroom.Identity, d mailroom.Draft) (sendPlan, error) {
	var p sendPlan
	var names []string
	bcast := false
	for _, a := range d.To {
		switch a.Kind {
		case mailroom.AddrAgent, mailroom.AddrHuman:
			names = append(names, a.Name)
		case mailroom.AddrRole:
			if owner, ok := strings.CutPrefix(a.Name, "next-session-of-"); ok {
				names = append(names, owner)
			}
		case mailroom.AddrBroadcast:
			bcast = true
		}
	}
	known := map[string]mailroom.Identity{}
	audience := false
	if len(names) > 0 || bcast {
		rows, err := q.Query(ctx, `SELECT name, id, kind FROM identity WHERE name = ANY($1)
			UNION ALL SELECT NULL, 0, '' WHERE $3 AND EXISTS (SELECT 1 FROM identity WHERE kind = 'agent' AND id <> $2)`,
			names, me.ID, bcast)
		if err != nil {
			return p, err
		}
		for rows.Next() {
			var name *string
			var id mailroom.Identity
			if err := rows.Scan(&name, &id.ID, &id.Kind); err != nil {
				rows.Close()
				return p, err
			}
			if name == nil {
				audience = true
				continue
			}
			id.Name = *name
			known[id.Name] = id
		}
		if err := rows.Err(); err != nil {
			return p, err
		}
	}
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
			id, ok := known[a.Name]
			if !ok {
				return p, mailroom.Errorf(mailroom.EINVALID, "Unknown recipient: %s", a.String())
			} else if id.Kind != want {
				return p, mailroom.Errorf(mailroom.EINVALID, "Unknown recipient: %s (%s is %s)", a.String(), a.Name, id.Address())
			}
			p.direct = append(p.direct, id.ID)
			p.addrs = append(p.addrs, id.Address())
		case mailroom.AddrRole:
			if owner, ok := strings.CutPrefix(a.Name, "next-session-of-"); ok {
				if id, ok := known[owner]; !ok || id.Kind != mailroom.KindAgent {
					return p, mailroom.Errorf(mailroom.EINVALID, "Unknown recipient: %s (no agent named %s)", a.String(), owner)
				}
			}
			p.roles = append(p.roles, a.Name)
			p.addrs = append(p.addrs, a.String())
		case mailroom.AddrBroadcast:
			if !audience {
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
		roles, err := rolesOf(ctx, q, me)
		if err != nil {
			return p, err
		}
		parent, err := resolve(ctx, q, me, roles, d.InReplyTo)
		if err != nil {
			return p, err
		}
		p.parentSeq, p.threadID = &parent.seq, parent.thread
	}
	return p, nil
}

// sendWrites is the parameters of sendSQL for one message.
type sendWrites struct {
	msgID, threadID string
	newThread       bool
	d               mailroom.Draft
	me              int64
	at              time.Time
	p               sendPlan
	sessions        []string // origin and related, sorted
	tickets         []string // sorted
	conceptIDs      []string // sorted, for the concept nodes
	conceptNames    []string
	tagged          []string // the caller's concepts in rank order
}

func (p sendPlan) writes(me mailroom.Identity, d mailroom.Draft, at time.Time) sendWrites {
	w := sendWrites{msgID: mailroom.NewMessageID(), threadID: p.threadID, d: d, me: me.ID, at: at, p: p,
		sessions: sortedUnique(append([]string{d.OriginSessionID}, d.RelatedSessions...)),
		tickets:  sortedUnique(d.RelatedTickets), tagged: []string{}}
	if w.threadID == "" {
		w.threadID, w.newThread = mailroom.NewThreadID(), true
	}
	names := map[string]string{}
	for _, c := range d.Concepts {
		w.tagged = append(w.tagged, c.ID)
		if _, ok := names[c.ID]; !ok {
			names[c.ID] = c.Name
			w.conceptIDs = append(w.conceptIDs, c.ID)
		}
	}
	slices.Sort(w.conceptIDs)
	for _, id := range w.conceptIDs {
		w.conceptNames = append(w.conceptNames, names[id])
	}
	return w
}

func (w sendWrites) args() []any {
	return []any{
		w.msgID, w.d.Subject, w.d.Body, w.at, string(w.d.Priority), w.me, w.threadID, w.d.OriginSessionID, w.p.parentSeq, // $1-$9
		w.newThread, w.sessions, w.p.addrs, // $10-$12
		append([]int64{}, slices.Compact(slices.Sorted(slices.Values(w.p.direct)))...), w.p.broadcast, w.p.roles, // $13-$15 (a nil slice is NULL, and x = ANY(NULL) is not false)
		w.d.RelatedSessions, w.tickets, w.conceptIDs, w.conceptNames, w.tagged, // $16-$20
	}
}

// audienceSQL is a message's audience tokens (migration 0014) from SQL
// for its sender's id, its direct recipients' ids, whether it is
// broadcast and its role queues' mailboxes: -sender, each direct
// recipient, 0 for a broadcast, each role queue. The migration's backfill
// writes the same from the resolved addresses.
func audienceSQL(sender, direct, broadcast, roleBoxes string) string {
	return `ARRAY[-` + sender + `::bigint] || coalesce(` + direct + `::bigint[], '{}') || CASE WHEN ` + broadcast +
		`::boolean THEN '{0}'::bigint[] ELSE '{}' END || coalesce(` + roleBoxes + `, '{}')`
}

// sendSQL writes one message with every edge in one statement and returns
// its recipient count. The caller holds the send lock (an earlier
// statement of the same transaction) and has created its role queues.
// A message with role deliveries also writes their count candidates
// (migration 0009): role_hint rows for its sender and personal recipients,
// role_later rows for every role delivery but the lowest mailbox's.
// Shared keys (sessions, tickets, concepts) are inserted in sorted order,
// so that concurrent writers take their locks in one order. Foreign keys
// are checked at the end of the statement, after every part has run.
var sendSQL = `WITH
	th AS (INSERT INTO thread (id, created_at) SELECT $7, $4 WHERE $10),
	se AS (INSERT INTO session (id) SELECT unnest($11::text[]) ORDER BY 1 ON CONFLICT DO NOTHING),
	tk AS (INSERT INTO ticket (id) SELECT unnest($17::text[]) ORDER BY 1 ON CONFLICT DO NOTHING),
	co AS (INSERT INTO concept (id, name) SELECT * FROM unnest($18::text[], $19::text[]) ORDER BY 1 ON CONFLICT DO NOTHING),
	m AS (INSERT INTO message (id, subject, body, created_at, priority, sender_id, thread_id, origin_session_id, in_reply_to, audience)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, ` + audienceSQL("$6", "$13", "$14", `(SELECT array_agg(mailbox_id) FROM role WHERE name = ANY($15::text[]))`) + `) RETURNING seq),
	mt AS (INSERT INTO message_to (message_seq, position, address)
		SELECT m.seq, a.pos - 1, a.address FROM m, unnest($12::text[]) WITH ORDINALITY AS a(address, pos)),
	d AS (INSERT INTO delivery (recipient, message_seq, via, delivered_at, priority, human)
		SELECT x.r, m.seq, x.via, $4, $5, (SELECT kind = 'human' FROM identity WHERE id = $6) FROM m, (
			SELECT r, 'direct' AS via FROM unnest($13::bigint[]) AS r
			UNION ALL SELECT i.id, 'broadcast' FROM identity i
				WHERE $14 AND i.kind = 'agent' AND i.id <> $6 AND NOT (i.id = ANY($13::bigint[]))
			UNION ALL SELECT mailbox_id, 'role' FROM role WHERE name = ANY($15::text[])) AS x
		RETURNING recipient, message_seq, via),
	rh AS (INSERT INTO role_hint (identity_id, message_seq)
		SELECT x.id, m.seq FROM m, (SELECT $6::bigint AS id UNION SELECT recipient FROM d WHERE via <> 'role') AS x
		WHERE EXISTS (SELECT 1 FROM d WHERE via = 'role')),
	rl AS (INSERT INTO role_later (recipient, message_seq)
		SELECT recipient, message_seq FROM d WHERE via = 'role' AND recipient > (SELECT min(recipient) FROM d WHERE via = 'role')),
	ms AS (INSERT INTO message_session (message_seq, session_id)
		SELECT m.seq, x FROM m, unnest($16::text[]) AS x ON CONFLICT DO NOTHING),
	mk AS (INSERT INTO message_ticket (message_seq, ticket_id) SELECT m.seq, x FROM m, unnest($17::text[]) AS x),
	mc AS (INSERT INTO message_concept (message_seq, concept_id, source, rank)
		SELECT m.seq, c.id, 'caller', c.pos - 1 FROM m, unnest($20::text[]) WITH ORDINALITY AS c(id, pos)
		ON CONFLICT DO NOTHING),
	j AS (INSERT INTO concept_job (message_seq, run_after) SELECT m.seq, $4 FROM m)
	SELECT count(*) FROM d`

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
	me, err := mailroom.Sender(ctx, d)
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
	// Not nil: a nil slice is NULL, and NOT (x = ANY(NULL)) would keep a
	// broadcast with no direct recipient from everyone.
	direct := append([]int64{}, slices.Compact(slices.Sorted(slices.Values(p.direct)))...)
	_, err := tx.Exec(ctx, `WITH m AS (
			INSERT INTO message (id, subject, body, created_at, priority, sender_id, thread_id, origin_session_id, in_reply_to, audience)
			SELECT x.id, $3, $4, $5, $6, $7, x.thread, $8, $9, `+audienceSQL("$7", "$11", "$12", "$13::bigint[]")+`
			FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(id, thread, n)
			ORDER BY x.n RETURNING seq),
		t AS (INSERT INTO message_to (message_seq, position, address)
			SELECT m.seq, a.pos - 1, a.address FROM m, unnest($10::text[]) WITH ORDINALITY AS a(address, pos)),
		h AS (SELECT kind = 'human' AS human FROM identity WHERE id = $7),
		dd AS (INSERT INTO delivery (recipient, message_seq, via, delivered_at, priority, human)
			SELECT r, m.seq, 'direct', $5, $6, h.human FROM m, h, unnest($11::bigint[]) AS r RETURNING recipient, message_seq),
		bd AS (INSERT INTO delivery (recipient, message_seq, via, delivered_at, priority, human)
			SELECT i.id, m.seq, 'broadcast', $5, $6, h.human FROM m, h, identity i
			WHERE $12 AND i.kind = 'agent' AND i.id <> $7 AND NOT (i.id = ANY($11::bigint[])) RETURNING recipient, message_seq),
		rd AS (INSERT INTO delivery (recipient, message_seq, via, delivered_at, priority, human)
			SELECT r, m.seq, 'role', $5, $6, h.human FROM m, h, unnest($13::bigint[]) AS r),
		rh AS (INSERT INTO role_hint (identity_id, message_seq)
			SELECT DISTINCT x.r, x.seq FROM (SELECT $7::bigint AS r, m.seq FROM m UNION ALL SELECT * FROM dd UNION ALL SELECT * FROM bd) AS x
			WHERE cardinality($13::bigint[]) > 0),
		rl AS (INSERT INTO role_later (recipient, message_seq)
			SELECT r, m.seq FROM m, unnest($13::bigint[]) AS r WHERE r > (SELECT min(x) FROM unnest($13::bigint[]) AS x)),
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
