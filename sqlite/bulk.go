package sqlite

import (
	"context"
	"iter"
	"slices"
	"strings"

	"github.com/mailroom/mailroom"
)

// defaultBulkChunk is how many messages SendMany and SendBatch commit per
// transaction: large enough that commits cost nothing per message, small
// enough that the WAL and the statements' arguments stay a few megabytes.
const defaultBulkChunk = 10_000

// bulkShapes are the row counts of the multi-row INSERTs the bulk path
// runs: a table's rows go in as many statements of the first size as fit,
// then of the next. Few fixed shapes stay prepared on each connection
// across transactions (parsing a statement of thousands of rows cost more
// than running it when every call prepared its own).
var bulkShapes = [...]int{128, 16, 1}

// SendMany stores n copies of d from the caller: the same rows, edges and
// concept jobs as n calls of Send, committed every 10,000 messages. It exists
// to seed large mailboxes for benchmarks and load tests; servers never call
// it. The draft is resolved once per transaction and each table gets
// multi-row INSERTs.
func (s *Store) SendMany(ctx context.Context, d mailroom.Draft, n int) error {
	me, err := mailroom.Sender(ctx, d)
	if err != nil {
		return err
	}
	return s.SendBatch(ctx, []mailroom.BulkSend{{From: me, Draft: d, Copies: n}})
}

// SendBatch stores the entries in order, each as SendMany would, but many
// entries share a transaction (SendSeq).
func (s *Store) SendBatch(ctx context.Context, sends []mailroom.BulkSend) error {
	for _, b := range sends {
		if _, err := mailroom.Sender(mailroom.WithCaller(ctx, b.From), b.Draft); err != nil {
			return err
		}
	}
	return s.SendSeq(ctx, slices.Values(sends))
}

// SendSeq stores the entries of sends in order, each as SendMany would,
// in transactions of up to 10,000 messages shared by as many entries as
// fit (an entry may span two): a seed of many small drafts commits, and
// indexes its full text, a hundred times per million messages instead of
// once per draft. The next entry is asked for once the previous one is
// written, and an entry's Sent is then told its first message id (before
// the commit), so a later entry may reply to it. The write lock is held
// throughout: sends must not call the store. An error stops it; what
// earlier transactions stored stays.
func (s *Store) SendSeq(ctx context.Context, sends iter.Seq[mailroom.BulkSend]) error {
	next, stop := iter.Pull(sends)
	defer stop()
	var carry *mailroom.BulkSend // the rest of an entry split between transactions
	for more := true; more; {
		err := s.write(ctx, func(tx *ptx) error {
			tx.touchNone() // until something is written
			var first, last int64
			for total := 0; total < s.bulkChunk; {
				var b mailroom.BulkSend
				if carry != nil {
					b, carry = *carry, nil
				} else {
					var ok bool
					if b, ok = next(); !ok {
						more = false
						break
					}
					if _, err := mailroom.Sender(mailroom.WithCaller(ctx, b.From), b.Draft); err != nil {
						return err
					}
				}
				if b.Copies <= 0 {
					continue
				}
				k := min(b.Copies, s.bulkChunk-total)
				if k < b.Copies {
					rest := b
					rest.Copies, rest.Sent = b.Copies-k, nil
					carry = &rest
				}
				p, err := planSend(ctx, tx, b.From, b.Draft)
				if err != nil {
					return err
				}
				tx.touchPlan(p)
				seq, err := sendBulk(ctx, tx, b.From, b.Draft, p, k)
				if err != nil {
					return err
				}
				if first == 0 {
					first = seq
				}
				last, total = seq+int64(k)-1, total+k
				if b.Sent != nil {
					var id string
					if err := tx.QueryRowContext(ctx, `SELECT id FROM message WHERE seq = ?`, seq).Scan(&id); err != nil {
						return err
					}
					b.Sent(id)
				}
			}
			if first == 0 {
				return nil
			}
			return indexBulk(ctx, tx, first, last)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// indexBulk adds messages first..last to the full-text index, as Send
// does each one, in one statement: FTS5 writes a segment per statement
// (it flushes at each statement's savepoint), and every segment is merged
// later. Newest first: the index's keys are -seq (ftsRowid), and FTS5
// flushes at every key below the last one it wrote.
func indexBulk(ctx context.Context, tx *ptx, first, last int64) error {
	_, err := tx.Tx.ExecContext(ctx, `INSERT INTO message_fts (rowid, subject, body, audience)
		SELECT fts_rowid, subject, body, audience FROM message_text WHERE seq BETWEEN ? AND ? ORDER BY seq DESC`, first, last)
	return err
}

// sendBulk writes k messages of one resolved draft: the rows sendPlanned
// writes k times, in the same order per table, so the store assigns the
// same keys (message seq, delivery id) as k single sends would.
// It returns the first message's seq; the caller indexes the full text
// (indexBulk).
func sendBulk(ctx context.Context, tx *ptx, me mailroom.Identity, d mailroom.Draft, p sendPlan, k int) (int64, error) {
	// The upserted nodes are the same for every copy: write them once.
	for _, sid := range append([]string{d.OriginSessionID}, d.RelatedSessions...) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO session (id) VALUES (?) ON CONFLICT DO NOTHING`, sid); err != nil {
			return 0, err
		}
	}
	for _, r := range p.roles {
		if _, err := tx.ExecContext(ctx, `INSERT INTO role (name) VALUES (?) ON CONFLICT DO NOTHING`, r); err != nil {
			return 0, err
		}
	}
	for _, t := range d.RelatedTickets {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ticket (id) VALUES (?) ON CONFLICT DO NOTHING`, t); err != nil {
			return 0, err
		}
	}
	for _, c := range d.Concepts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO concept (id, name) VALUES (?, ?) ON CONFLICT DO NOTHING`, c.ID, c.Name); err != nil {
			return 0, err
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
			return 0, err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return 0, err
			}
			if !seen[id] {
				seen[id] = true
				recips = append(recips, recipient{id: id, via: "broadcast"})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
	}
	for _, r := range p.roles {
		recips = append(recips, recipient{role: r, via: "role"})
	}

	var first int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) + 1 FROM message`).Scan(&first); err != nil {
		return 0, err
	}
	aud := p.audience(me.ID)
	var threads, messages, audiences, tos, deliveries, sessions, tickets, concepts, jobs []any
	for i := range k {
		seq := first + int64(i)
		at := ts(tx.now())
		threadID := p.thread
		if threadID == "" {
			threadID = mailroom.NewThreadID()
			threads = append(threads, threadID, at)
		}
		messages = append(messages, seq, mailroom.NewMessageID(), d.Subject, d.Body, at, d.Priority, me.ID, threadID, d.OriginSessionID, p.parentSeq)
		audiences = append(audiences, seq, aud)
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
	steps := []struct {
		head string
		cols int
		args []any
		tail string
	}{
		{`INSERT INTO thread (id, created_at) VALUES `, 2, threads, ``},
		{`INSERT INTO message (seq, id, subject, body, created_at, priority, sender_id, thread_id, origin_session_id, in_reply_to) VALUES `, 10, messages, ``},
		{`INSERT INTO message_audience (message_seq, tokens) VALUES `, 2, audiences, ``},
		{`INSERT INTO message_to (message_seq, position, address) VALUES `, 3, tos, ``},
		{`INSERT INTO delivery (message_seq, recipient_id, role, via, delivered_at) VALUES `, 5, deliveries, ``},
		{`INSERT INTO message_session (message_seq, session_id) VALUES `, 2, sessions, ``},
		{`INSERT INTO message_ticket (message_seq, ticket_id) VALUES `, 2, tickets, ``},
		{`INSERT INTO message_concept (message_seq, concept_id, source, rank) VALUES `, 4, concepts, ` ON CONFLICT DO NOTHING`},
		{`INSERT INTO concept_job (message_seq, run_after) VALUES `, 2, jobs, ``},
	}
	for _, st := range steps {
		if err := insertRows(ctx, tx, st.head, st.cols, st.args, st.tail); err != nil {
			return 0, err
		}
	}
	return first, nil
}

// insertRows runs head VALUES (...), (...) tail over args, cols values a
// row, in statements of the bulkShapes sizes (kept prepared, stmtConn).
func insertRows(ctx context.Context, tx *ptx, head string, cols int, args []any, tail string) error {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	for _, n := range bulkShapes {
		if len(args) < n*cols {
			continue
		}
		q := head + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ") + tail
		for ; len(args) >= n*cols; args = args[n*cols:] {
			if _, err := tx.ExecContext(ctx, q, args[:n*cols]...); err != nil {
				return err
			}
		}
	}
	return nil
}
