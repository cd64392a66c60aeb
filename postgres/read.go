package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// target is a message as one caller reaches it: its seq and the mailbox of
// the caller's delivery (0 when the caller only sent it).
type target struct {
	seq       int64
	sender    int64
	thread    string
	recipient int64
}

// resolve is the single-id authorisation path shared by every tool: it finds
// the caller's own delivery of messageID (personal first, else a role they
// hold) and answers NotFound for anything the caller may not see.
func resolve(ctx context.Context, q querier, me mailroom.Identity, roles roleSet, messageID string) (target, error) {
	var t target
	if err := mailroom.ValidateMessageID("messageId", messageID); err != nil {
		return t, err
	}
	var deleted bool
	err := q.QueryRow(ctx, `SELECT m.seq, m.sender_id, m.thread_id,
			coalesce((SELECT d.recipient FROM delivery d WHERE d.recipient = $2 AND d.message_seq = m.seq),
				(SELECT d.recipient FROM delivery d WHERE d.recipient = ANY($3) AND d.message_seq = m.seq
					AND (m.sender_id <> $2 OR d.recipient = $4) ORDER BY d.recipient LIMIT 1),
				0),
			EXISTS (SELECT 1 FROM message_deleted x WHERE x.identity_id = $2 AND x.message_seq = m.seq)
		FROM message m WHERE m.id = $1`, messageID, me.ID, roles.ids, roles.own).Scan(&t.seq, &t.sender, &t.thread, &t.recipient, &deleted)
	if isNoRows(err) || (err == nil && (deleted || (t.recipient == 0 && t.sender != me.ID))) {
		return target{}, mailroom.NotFound(messageID)
	}
	return t, err
}

// resolveRecipient is resolve for recipient-only operations.
func resolveRecipient(ctx context.Context, q querier, me mailroom.Identity, roles roleSet, messageID string) (target, error) {
	t, err := resolve(ctx, q, me, roles, messageID)
	if err == nil && t.recipient == 0 {
		return target{}, mailroom.NotRecipient(messageID)
	}
	return t, err
}

// Get returns one visible message with its edges.
func (s *Store) Get(ctx context.Context, messageID string) (mailroom.Message, error) {
	return s.GetOf(ctx, "", "", messageID)
}

// GetOf returns one message of owner's inbox to a caller with a read grant
// (or of the caller's own mailbox when owner is "").
func (s *Store) GetOf(ctx context.Context, owner string, ownerKind mailroom.Kind, messageID string) (mailroom.Message, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.Message{}, err
	}
	var m mailroom.Message
	err = s.read(ctx, func(tx pgx.Tx) error {
		me, err := reader(ctx, tx, me, owner, ownerKind)
		if err != nil {
			return err
		}
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		t, err := resolve(ctx, tx, me, roles, messageID)
		if err != nil {
			return err
		}
		if owner != "" && t.recipient == 0 {
			// A grant reads the owner's inbox, not their outbox.
			return mailroom.NotFound(messageID)
		}
		var parent *string
		m = mailroom.Message{}
		m.Row, err = scanRow(tx.QueryRow(ctx, `SELECT `+rowColumns+`, m.body, (SELECT p.id FROM message p WHERE p.seq = m.in_reply_to), m.origin_session_id
			FROM message m LEFT JOIN delivery d ON d.recipient = $2 AND d.message_seq = m.seq WHERE m.seq = $1`, t.seq, t.recipient),
			&m.Body, &parent, &m.OriginSessionID)
		if err != nil {
			return err
		}
		if parent != nil {
			// A parent the caller may not see does not exist for them.
			if _, err := resolve(ctx, tx, me, roles, *parent); err == nil {
				m.InReplyTo = parent
			} else if mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
				return err
			}
		}
		if m.RelatedSessions, err = strings1(ctx, tx, `SELECT session_id FROM message_session WHERE message_seq = $1 ORDER BY session_id`, t.seq); err != nil {
			return err
		}
		if m.RelatedTickets, err = strings1(ctx, tx, `SELECT ticket_id FROM message_ticket WHERE message_seq = $1 ORDER BY ticket_id`, t.seq); err != nil {
			return err
		}
		m.TaggedConcepts, err = conceptsOf(ctx, tx, t.seq)
		return err
	})
	return m, err
}

func strings1(ctx context.Context, q querier, sql string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if out == nil {
		out = []string{}
	}
	return out, err
}

func conceptsOf(ctx context.Context, q querier, seq int64) ([]mailroom.Concept, error) {
	rows, err := q.Query(ctx, `SELECT c.id, c.name FROM message_concept mc JOIN concept c ON c.id = mc.concept_id
		WHERE mc.message_seq = $1 ORDER BY mc.source <> 'caller', mc.rank, mc.concept_id`, seq)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (mailroom.Concept, error) {
		var c mailroom.Concept
		err := r.Scan(&c.ID, &c.Name)
		return c, err
	})
	if out == nil {
		out = []mailroom.Concept{}
	}
	return out, err
}

// Archive archives the caller's delivery of a message.
func (s *Store) Archive(ctx context.Context, messageID string) (mailroom.ArchiveReceipt, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.ArchiveReceipt{}, err
	}
	var at time.Time
	err = s.write(ctx, func(tx pgx.Tx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		t, err := resolveRecipient(ctx, tx, me, roles, messageID)
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `UPDATE delivery SET archived_at = coalesce(archived_at, $1) WHERE recipient = $2 AND message_seq = $3 RETURNING archived_at`,
			s.now(), t.recipient, t.seq).Scan(&at); err != nil {
			return err
		}
		return s.notify(ctx, tx, roles.change(me, t.recipient))
	})
	if err != nil {
		return mailroom.ArchiveReceipt{}, err
	}
	return mailroom.ArchiveReceipt{MessageID: messageID, ArchivedAt: at.UTC(), Status: "archived", Durable: true}, nil
}

// markSQL is the single write of a read: a read keeps its first readAt.
const markSQL = `UPDATE delivery SET read_at = $1, read_by = $2 WHERE recipient = $3 AND message_seq = $4 AND read_at IS NULL`

// MarkRead marks each id read for the caller, one result per id in order.
func (s *Store) MarkRead(ctx context.Context, ids []string) []mailroom.MarkResult {
	results := make([]mailroom.MarkResult, len(ids))
	fail := func(err error) []mailroom.MarkResult {
		for i, id := range ids {
			results[i] = s.markFailure(id, err)
		}
		return results
	}
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return fail(err)
	}
	err = s.write(ctx, func(tx pgx.Tx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		at := s.now()
		var touched []int64
		for i, id := range ids {
			t, err := resolveRecipient(ctx, tx, me, roles, id)
			if err == nil && s.hooks.FailMark != nil {
				err = s.hooks.FailMark(id)
			}
			if err != nil {
				results[i] = s.markFailure(id, err)
				continue
			}
			// A statement error aborts a PostgreSQL transaction, so a
			// storage failure here fails the call (nothing is committed)
			// rather than one id.
			if _, err := tx.Exec(ctx, markSQL, at, me.ID, t.recipient, t.seq); err != nil {
				return err
			}
			var readAt time.Time
			if err := tx.QueryRow(ctx, `SELECT read_at FROM delivery WHERE recipient = $1 AND message_seq = $2`, t.recipient, t.seq).Scan(&readAt); err != nil {
				return err
			}
			readAt = readAt.UTC()
			results[i] = mailroom.MarkResult{MessageID: id, Status: "read", ReadAt: &readAt}
			touched = append(touched, t.recipient)
		}
		if len(touched) == 0 {
			return nil
		}
		return s.notify(ctx, tx, roles.change(me, touched...))
	})
	if err != nil {
		return fail(err)
	}
	return results
}

func (s *Store) markFailure(id string, err error) mailroom.MarkResult {
	if mailroom.ErrorCode(err) == mailroom.EINTERNAL {
		s.log.Error("mark_read", "messageId", id, "err", err)
	}
	return mailroom.MarkResult{MessageID: id, Status: "error", Error: mailroom.ErrorMessage(err), Err: err}
}

// MarkAllRead drains the caller's unread snapshot: one query takes the
// snapshot when the call starts, one set-based UPDATE marks exactly those
// deliveries (never one that arrived since), and a read after the commit
// counts what storage holds.
func (s *Store) MarkAllRead(ctx context.Context, through string, includeRoles bool) (mailroom.DrainReceipt, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.DrainReceipt{}, err
	}
	var rcpts, seqs []int64
	var roles roleSet
	rc := mailroom.DrainReceipt{Failures: []mailroom.Failure{}}
	err = s.read(ctx, func(tx pgx.Tx) error {
		rcpts, seqs = rcpts[:0], seqs[:0]
		var err error
		if roles, err = rolesOf(ctx, tx, me); err != nil {
			return err
		}
		limit := int64(-1)
		if through != "" {
			t, err := resolve(ctx, tx, me, roles, through)
			if err != nil {
				return err
			}
			limit = t.seq
		}
		rc.SnapshotAt = s.now()
		// The snapshot: one query over the caller's inbox branches, role
		// deliveries only when asked; the withheld ones are only counted.
		unread := ` AND d.read_at IS NULL AND d.archived_at IS NULL AND ($4::bigint < 0 OR d.message_seq <= $4::bigint)`
		branches := inboxBranches(unread, "")
		args := []any{pgx.QueryExecModeExec, me.ID, roles.ids, roles.own, limit}
		if !includeRoles {
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM (`+branches[1]+`) w`, args...).Scan(&rc.WithheldRoleCount); err != nil {
				return err
			}
			branches = branches[:1]
		}
		q := callerArgs + `SELECT rcpt, seq FROM (` + branches[0] + `) b`
		if len(branches) > 1 {
			q += ` UNION ALL SELECT rcpt, seq FROM (` + branches[1] + `) r`
		}
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		var r, sq int64
		_, err = pgx.ForEachRow(rows, []any{&r, &sq}, func() error {
			rcpts, seqs = append(rcpts, r), append(seqs, sq)
			return nil
		})
		return err
	})
	if err != nil {
		return mailroom.DrainReceipt{}, err
	}
	rc.MatchedCount = len(seqs)
	if len(seqs) == 0 {
		rc.Settle(true)
		return rc, nil
	}
	if s.hooks.AfterSnapshot != nil {
		s.hooks.AfterSnapshot()
	}
	if s.hooks.FailMark != nil {
		rcpts, seqs, rc.Failures, err = s.injectFailures(ctx, rcpts, seqs)
		if err != nil {
			return mailroom.DrainReceipt{}, err
		}
	}
	// One statement per mailbox in the snapshot (the caller's, and each
	// role queue with includeRoles): a range of the primary key probed with
	// a sorted array, which the planner walks in one index scan.
	groups := byMailbox(rcpts, seqs)
	at := s.now()
	err = s.write(ctx, func(tx pgx.Tx) error {
		for _, g := range groups {
			if _, err := tx.Exec(ctx, `UPDATE delivery SET read_at = $1, read_by = $2
				WHERE recipient = $3 AND message_seq = ANY($4) AND read_at IS NULL`, at, me.ID, g.recipient, g.seqs); err != nil {
				return err
			}
		}
		c := roles.change(me)
		if includeRoles {
			c = roles.change(me, roles.ids...)
		}
		return s.notify(ctx, tx, c)
	})
	if err != nil {
		return mailroom.DrainReceipt{}, err
	}
	rc.ReadCount = len(seqs)
	// Evidence, not intent: count what storage holds now.
	for _, g := range groups {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM delivery WHERE recipient = $1 AND message_seq = ANY($2) AND read_at IS NOT NULL`,
			g.recipient, g.seqs).Scan(&n); err != nil {
			return mailroom.DrainReceipt{}, err
		}
		rc.DurableCount += n
	}
	rc.Settle(true)
	return rc, nil
}

// mailboxKeys is one mailbox's part of a drain snapshot, seqs sorted.
type mailboxKeys struct {
	recipient int64
	seqs      []int64
}

func byMailbox(rcpts, seqs []int64) []mailboxKeys {
	idx := map[int64]int{}
	var out []mailboxKeys
	for i, r := range rcpts {
		j, ok := idx[r]
		if !ok {
			j = len(out)
			idx[r] = j
			out = append(out, mailboxKeys{recipient: r})
		}
		out[j].seqs = append(out[j].seqs, seqs[i])
	}
	for _, g := range out {
		slices.Sort(g.seqs)
	}
	// Mailboxes in one order, so concurrent drains lock rows alike.
	slices.SortFunc(out, func(a, b mailboxKeys) int { return cmp.Compare(a.recipient, b.recipient) })
	return out
}

// injectFailures applies the FailMark test hook to a drain's snapshot: the
// ids it fails are left out of the write and reported.
func (s *Store) injectFailures(ctx context.Context, rcpts, seqs []int64) ([]int64, []int64, []mailroom.Failure, error) {
	var keepR, keepS []int64
	failures := []mailroom.Failure{}
	for i, seq := range seqs {
		id := messageIDOf(ctx, s.pool, seq)
		if err := s.hooks.FailMark(id); err != nil {
			failures = append(failures, mailroom.Failure{MessageID: id, Error: s.markFailure(id, err).Error})
			continue
		}
		keepR, keepS = append(keepR, rcpts[i]), append(keepS, seq)
	}
	return keepR, keepS, failures, nil
}

// messageIDOf returns the id of the message seq. If storage cannot say,
// it names the message by its seq, so a failure row still identifies it.
func messageIDOf(ctx context.Context, q querier, seq int64) string {
	var id string
	if err := q.QueryRow(ctx, `SELECT id FROM message WHERE seq = $1`, seq).Scan(&id); err != nil {
		return fmt.Sprintf("MESSAGE(seq %d, id unreadable: %v)", seq, err)
	}
	return id
}
