package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/mailroom/mailroom"
)

// bulkChunk is how many messages SendMany commits per transaction: large
// enough that commits cost nothing per message, small enough that the WAL
// and the statements' arguments stay a few megabytes.
const bulkChunk = 10_000

// maxBulkVars bounds the parameters of one multi-row INSERT (SQLite allows
// 32,766).
const maxBulkVars = 30_000

// SendMany stores n copies of d from the caller: the same rows, edges and
// concept jobs as n calls of Send, committed every 10,000 messages. It exists
// to seed large mailboxes for benchmarks and load tests; servers never call
// it. The draft is resolved once per transaction and each table gets
// multi-row INSERTs, so a million messages take about a minute.
func (s *Store) SendMany(ctx context.Context, d mailroom.Draft, n int) error {
	me, err := mailroom.Sender(ctx, d)
	if err != nil {
		return err
	}
	for n > 0 {
		k := min(n, bulkChunk)
		err := s.write(ctx, func(tx *ptx) error {
			p, err := planSend(ctx, tx, me, d)
			if err != nil {
				return err
			}
			tx.touchPlan(p)
			return sendBulk(ctx, tx, me, d, p, k)
		})
		if err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// sendBulk writes k messages of one resolved draft: the rows sendPlanned
// writes k times, in the same order per table, so the store assigns the
// same keys (message seq, delivery id) as k single sends would.
func sendBulk(ctx context.Context, tx *ptx, me mailroom.Identity, d mailroom.Draft, p sendPlan, k int) error {
	// The upserted nodes are the same for every copy: write them once.
	for _, sid := range append([]string{d.OriginSessionID}, d.RelatedSessions...) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO session (id) VALUES (?) ON CONFLICT DO NOTHING`, sid); err != nil {
			return err
		}
	}
	for _, r := range p.roles {
		if _, err := tx.ExecContext(ctx, `INSERT INTO role (name) VALUES (?) ON CONFLICT DO NOTHING`, r); err != nil {
			return err
		}
	}
	for _, t := range d.RelatedTickets {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ticket (id) VALUES (?) ON CONFLICT DO NOTHING`, t); err != nil {
			return err
		}
	}
	for _, c := range d.Concepts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO concept (id, name) VALUES (?, ?) ON CONFLICT DO NOTHING`, c.ID, c.Name); err != nil {
			return err
		}
	}

	// One message's deliveries, in Send's order: direct, broadcast, roles.
	// A new message has no deliveries yet, so Send's ON CONFLICT DO NOTHING
	// only drops a recipient repeated within the message: drop it here.
	type recipient struct {
		id   int64
		role string
		via  string
	}
	var recips []recipient
	seen := map[int64]bool{}
	for _, r := range p.direct {
		if !seen[r.id] {
			seen[r.id] = true
			recips = append(recips, recipient{id: r.id, via: r.via})
		}
	}
	if p.broadcast {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM identity WHERE kind = 'agent' AND id <> ? ORDER BY id`, me.ID)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			if !seen[id] {
				seen[id] = true
				recips = append(recips, recipient{id: id, via: "broadcast"})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	for _, r := range p.roles {
		recips = append(recips, recipient{role: r, via: "role"})
	}

	var first int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) + 1 FROM message`).Scan(&first); err != nil {
		return err
	}
	var threads, messages, tos, deliveries, sessions, tickets, concepts, jobs []any
	for i := range k {
		seq := first + int64(i)
		at := ts(tx.now())
		threadID := p.thread
		if threadID == "" {
			threadID = mailroom.NewThreadID()
			threads = append(threads, threadID, at)
		}
		messages = append(messages, seq, mailroom.NewMessageID(), d.Subject, d.Body, at, d.Priority, me.ID, threadID, d.OriginSessionID, p.parentSeq)
		for j, a := range p.addrs {
			tos = append(tos, seq, j, a)
		}
		for _, r := range recips {
			var rid, role any
			if r.role != "" {
				role = r.role
			} else {
				rid = r.id
			}
			deliveries = append(deliveries, seq, rid, role, r.via, at)
		}
		for _, sid := range d.RelatedSessions {
			sessions = append(sessions, seq, sid)
		}
		for _, t := range d.RelatedTickets {
			tickets = append(tickets, seq, t)
		}
		for j, c := range d.Concepts {
			concepts = append(concepts, seq, c.ID, "caller", j)
		}
		jobs = append(jobs, seq, at)
	}
	last := first + int64(k) - 1
	steps := []struct {
		head string
		cols int
		args []any
		tail string
	}{
		{`INSERT INTO thread (id, created_at) VALUES `, 2, threads, ``},
		{`INSERT INTO message (seq, id, subject, body, created_at, priority, sender_id, thread_id, origin_session_id, in_reply_to) VALUES `, 10, messages, ``},
		{`INSERT INTO message_to (message_seq, position, address) VALUES `, 3, tos, ``},
		{`INSERT INTO delivery (message_seq, recipient_id, role, via, delivered_at) VALUES `, 5, deliveries, ``},
		{`INSERT INTO message_session (message_seq, session_id) VALUES `, 2, sessions, ``},
		{`INSERT INTO message_ticket (message_seq, ticket_id) VALUES `, 2, tickets, ``},
		{`INSERT INTO message_concept (message_seq, concept_id, source, rank) VALUES `, 4, concepts, ` ON CONFLICT DO NOTHING`},
		{`INSERT INTO concept_job (message_seq, run_after) VALUES `, 2, jobs, ``},
	}
	prepared := map[string]*sql.Stmt{}
	defer func() {
		for _, st := range prepared {
			st.Close()
		}
	}()
	for i, st := range steps {
		if err := insertRows(ctx, tx, prepared, st.head, st.cols, st.args, st.tail); err != nil {
			return err
		}
		if i == 1 {
			// The full-text rows index what was just stored, as Send's do.
			if _, err := tx.Tx.ExecContext(ctx, `INSERT INTO message_fts (rowid, subject, body)
				SELECT seq, subject, body FROM message WHERE seq BETWEEN ? AND ? ORDER BY seq`, first, last); err != nil {
				return err
			}
		}
	}
	return nil
}

// insertRows runs head VALUES (...), (...) tail over args, cols values a
// row, as few statements as the parameter limit allows, each shape prepared
// once per transaction (in prepared) rather than in the statement cache.
func insertRows(ctx context.Context, tx *ptx, prepared map[string]*sql.Stmt, head string, cols int, args []any, tail string) error {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	per := maxBulkVars / cols
	for len(args) > 0 {
		n := min(len(args)/cols, per)
		var q strings.Builder
		q.WriteString(head)
		for i := range n {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(row)
		}
		q.WriteString(tail)
		st, ok := prepared[q.String()]
		if !ok {
			var err error
			if st, err = tx.Tx.PrepareContext(ctx, q.String()); err != nil {
				return err
			}
			prepared[q.String()] = st
		}
		if _, err := st.ExecContext(ctx, args[:n*cols]...); err != nil {
			return err
		}
		args = args[n*cols:]
	}
	return nil
}
