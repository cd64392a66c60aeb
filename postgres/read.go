package postgres

import (
	"context"
	"math"
	"slices"
	"strings"
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
		m.Row, err = scanRow(tx.QueryRow(ctx, `SELECT `+rowColumnsOf("$2")+`, m.body, (SELECT p.id FROM message p WHERE p.seq = m.in_reply_to), m.origin_session_id
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
		if err := lockMailboxes(ctx, tx, me.ID, roles.ids); err != nil {
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

// markSQL is the single write of a read: a read keeps its first readAt
// (and reader), which for a delivery a read mark covers are the mark's.
const markSQL = `UPDATE delivery SET read_at = coalesce((SELECT k.at FROM read_mark k WHERE k.recipient = $3 AND $4 <= k.through_seq), $1),
		read_by = coalesce((SELECT k.read_by FROM read_mark k WHERE k.recipient = $3 AND $4 <= k.through_seq), $2)
	WHERE recipient = $3 AND message_seq = $4 AND read_at IS NULL`

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
		if err := lockMailboxes(ctx, tx, me.ID, roles.ids); err != nil {
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

// MarkAllRead drains the caller's unread snapshot in one statement, whose
// snapshot is the drain's: under read committed a statement sees what was
// committed when it started, so mail sent since stays unread, and the same
// statement marks exactly what it saw (the personal deliveries, and the
// role queues' with includeRoles; otherwise it only counts those). No list
// of ids travels to the client and back. After the commit a read counts
// what storage holds.
func (s *Store) MarkAllRead(ctx context.Context, through string, includeRoles bool) (mailroom.DrainReceipt, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.DrainReceipt{}, err
	}
	var marked drained
	var byMark *readMark      // the drain's mark, when it wrote one
	var queueMarks []readMark // the role queues' marks it wrote
	var queueCounts []int     // and what each read
	var personal int          // read by byMark
	rc := mailroom.DrainReceipt{Failures: []mailroom.Failure{}}
	err = s.write(ctx, func(tx pgx.Tx) error {
		marked, byMark, personal, queueMarks, queueCounts = drained{}, nil, 0, nil, nil
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
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
		// No other write to the caller's personal read state beside the
		// drain, and no purge (mark.go); then at most one mark under it
		// (a caller has one), which the drain folds or marks above.
		// With it, a hint: the caller's unread count (from before the
		// lock), so that a drain with nothing personal to read skips the
		// mark's statement (it would find nothing; the rows' says so too).
		var unread int64
		if err := tx.QueryRow(ctx, `SELECT pg_advisory_xact_lock_shared(`+storeLockKey+`), pg_advisory_xact_lock(`+mailboxLockKey+`),
			(SELECT coalesce(sum(n), 0)::bigint FROM mailbox_count WHERE recipient = $1 AND unread AND NOT archived)`, me.ID).Scan(nil, nil, &unread); err != nil {
			return err
		}
		// A mark with more than a chunk left to fold stays for the
		// folder: the drain then marks its own mail, above the mark, by
		// rows (drainSQL leaves out what the mark covers), and pays for
		// what it reads, not for the earlier drain's fold.
		left, err := s.markLeft(ctx, tx, me.ID)
		if err != nil {
			return err
		}
		if !left {
			if err := foldNow(ctx, tx, me.ID, 0); err != nil {
				return err
			}
		}
		var queued int // read by role queues' marks
		if includeRoles && len(roles.ids) > 0 {
			// The same for the role queues, whose read state every
			// holder writes (lockMailboxes): no other holder's write
			// beside the drain, and each queue's earlier mark folded,
			// or, with more than a chunk left, left to the folder (the
			// queue is then marked above it by rows, not by a mark).
			if err := lockMarks(ctx, tx, slices.Sorted(slices.Values(roles.ids)), true); err != nil {
				return err
			}
			marked := map[int64]bool{}
			for _, r := range roles.ids {
				left, err := s.markLeft(ctx, tx, r)
				if err != nil {
					return err
				}
				if left {
					marked[r] = true
				} else if err := foldNow(ctx, tx, r, 0); err != nil {
					return err
				}
			}
			if s.hooks.AfterSnapshot == nil {
				// The drain is several statements, each its own snapshot:
				// all stop at the newest message committed now (seqs
				// commit in order), so mail sent since stays unread.
				var top int64
				if err := tx.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM message`).Scan(&top); err != nil {
					return err
				}
				if limit < 0 || limit > top {
					limit = top
				}
				for _, r := range roles.ids {
					if marked[r] {
						continue
					}
					k := readMark{recipient: r, at: rc.SnapshotAt, by: &me.ID}
					var n int64
					err := tx.QueryRow(ctx, roleDrainByMarkSQL, pgx.QueryExecModeExec, me.ID, roles.ids, roles.own, r, rc.SnapshotAt, limit).Scan(&n, &k.through)
					if isNoRows(err) {
						continue
					} else if err != nil {
						return err
					}
					queueMarks, queueCounts = append(queueMarks, k), append(queueCounts, int(n))
					queued += int(n)
				}
				if len(queueMarks) > 0 && s.hooks.AfterMark != nil {
					s.hooks.AfterMark()
				}
			}
		}
		// The personal part by a mark when no test hook wants the row
		// path (with includeRoles, through the drain's end: the role
		// queues and anything personal above the mark are left to the
		// row statement).
		if !left && unread > 0 && s.hooks.AfterSnapshot == nil {
			upTo := limit
			if upTo < 0 {
				upTo = math.MaxInt64
			}
			var n, withheld int64
			k := readMark{recipient: me.ID, at: rc.SnapshotAt}
			err := tx.QueryRow(ctx, drainByMarkSQL, pgx.QueryExecModeExec, me.ID, roles.ids, roles.own, limit, rc.SnapshotAt, upTo).Scan(&n, &k.through, &withheld)
			if err == nil && includeRoles && len(roles.ids) > 0 {
				byMark, personal, marked.total = &k, int(n), int(n)
			} else if err == nil {
				byMark, personal, marked.total, rc.WithheldRoleCount = &k, int(n), int(n), int(withheld)
				if s.hooks.AfterMark != nil {
					s.hooks.AfterMark()
				}
				return s.notify(ctx, tx, roles.change(me))
			} else if !isNoRows(err) {
				return err
			}
		}
		// The drain counts what it marks itself (drainSQL); the update
		// trigger stands aside for that one statement.
		if _, err := tx.Exec(ctx, `SELECT set_config('mailroom.writer_counts', 'on', true)`); err != nil {
			return err
		}
		queues := 0
		if includeRoles {
			queues = len(roles.ids)
		}
		rows, err := tx.Query(ctx, drainSQLFor(queues), me.ID, roles.ids, roles.own, limit, rc.SnapshotAt, includeRoles)
		if err != nil {
			return err
		}
		var r, n, lo, hi *int64
		_, err = pgx.ForEachRow(rows, []any{&r, &n, &lo, &hi}, func() error {
			if r == nil {
				rc.WithheldRoleCount = int(*n)
				return nil
			}
			marked.recipients = append(marked.recipients, *r)
			marked.counts = append(marked.counts, *n)
			marked.lo, marked.hi = append(marked.lo, *lo), append(marked.hi, *hi)
			marked.total += int(*n)
			return nil
		})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('mailroom.writer_counts', 'off', true)`); err != nil {
			return err
		}
		if marked.total == 0 && queued == 0 {
			return nil
		}
		if s.hooks.AfterSnapshot != nil {
			s.hooks.AfterSnapshot()
		}
		c := roles.change(me)
		if includeRoles {
			touched := slices.Clone(marked.recipients)
			for _, k := range queueMarks {
				touched = append(touched, k.recipient)
			}
			c = roles.change(me, touched...)
		}
		marked.total += queued
		return s.notify(ctx, tx, c)
	})
	if err != nil {
		return mailroom.DrainReceipt{}, err
	}
	rc.MatchedCount, rc.ReadCount = marked.total, marked.total
	if byMark != nil {
		s.markDrains.Add(1)
		rc.DurableCount, err = s.markedCount(ctx, *byMark, personal)
		s.wakeFolder() // after the read-back, which a fold would slow
		if err != nil {
			return mailroom.DrainReceipt{}, err
		}
	}
	if marked.total > personal {
		for i, k := range queueMarks {
			n, err := s.markedCount(ctx, k, queueCounts[i])
			if err != nil {
				return mailroom.DrainReceipt{}, err
			}
			rc.DurableCount += n
		}
		if len(queueMarks) > 0 {
			s.queueMarkDrains.Add(int64(len(queueMarks)))
			s.wakeFolder()
		}
		// Evidence, not intent: count what storage holds now. The drain's
		// rows are those of each mailbox, within its range of seqs, that
		// this reader marked at this instant (a read keeps its first
		// readAt); at most what the drain marked there, should another
		// mark by the same reader carry the same instant.
		var rowsDurable int
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(least(g.n, (SELECT count(*) FROM delivery d
				WHERE d.recipient = g.r AND d.message_seq BETWEEN g.lo AND g.hi AND d.read_by = $5 AND d.read_at = $6))), 0)
			FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[]) AS g (r, n, lo, hi)`,
			marked.recipients, marked.counts, marked.lo, marked.hi, me.ID, rc.SnapshotAt).Scan(&rowsDurable); err != nil {
			return mailroom.DrainReceipt{}, err
		}
		rc.DurableCount += rowsDurable
	}
	rc.Settle(true)
	return rc, nil
}

// markLeft reports whether rcpt's mark has more than a fold chunk left
// to fold: a drain then leaves it to the folder.
func (s *Store) markLeft(ctx context.Context, tx pgx.Tx, rcpt int64) (bool, error) {
	var left bool
	err := tx.QueryRow(ctx, `SELECT count(*) > $2 FROM (SELECT 1 FROM read_mark k JOIN delivery d ON d.recipient = k.recipient
		AND d.message_seq > k.folded AND d.message_seq <= k.through_seq WHERE k.recipient = $1 LIMIT $2 + 1) c`, rcpt, s.foldChunk).Scan(&left)
	return left, err
}

// drained is what a drain marked, by mailbox: the count and the lowest and
// highest seq.
type drained struct {
	recipients, counts, lo, hi []int64
	total                      int
}

// drainSQLFor marks the caller's unread, unarchived personal deliveries ($4:
// at or before that seq when >= 0) read at $5 and, when $6, the role
// queues' (the role branch of inboxBranches, one branch per queue, of the
// first queues queues: so each starts above its queue's mark); it returns one row per
// mailbox marked (recipient, count, lowest and highest seq) and a row
// with a NULL recipient counting the role deliveries left alone (from the
// role queues' counters, as mailbox_status counts them, less those after
// the drain's seq: mail since the caller's listing, each probed, so that
// a generic plan cannot make it a hash join with every message). Both
// updates and the count are parts of one statement: one snapshot. It
// moves every delivery it marked (a personal one in the caller's counts, a
// role one in its queue's) from the unread, unarchived counts to the read
// ones (count and seq sum) and takes the role ones out of role_unread (its WHERE is their
// state before: on the updated row itself, so that a row another holder
// changed while the drain waited for it is checked again), so the caller
// sets mailroom.writer_counts.
func drainSQLFor(queues int) string {
	w := `SELECT NULL::bigint AS seq, NULL::bigint AS rcpt WHERE false`
	if queues > 0 {
		b := make([]string, queues)
		for i := range b {
			b[i] = roleBranchOf(inboxBranches(drainUnread, "")[1], i)
		}
		w = strings.Join(b, " UNION ALL ")
	}
	return callerArgs + `,
	p AS (UPDATE delivery d SET read_at = $5, read_by = $1
		WHERE d.recipient = $1` + personalUnread(drainUnread) + `
		RETURNING d.recipient, d.message_seq, d.via, d.priority, d.human),
	r AS (UPDATE delivery d SET read_at = $5, read_by = $1
		FROM (` + w + `) w
		WHERE $6 AND d.recipient = w.rcpt AND d.message_seq = w.seq AND d.read_at IS NULL AND d.archived_at IS NULL
		RETURNING d.recipient, d.message_seq, d.via, d.priority, d.human),
	k AS (SELECT $1::bigint AS recipient, via, priority, human, count(*) AS n, sum(message_seq)::bigint AS seqs FROM p GROUP BY 2, 3, 4
		UNION ALL SELECT recipient, via, priority, human, count(*), sum(message_seq)::bigint FROM r GROUP BY 1, 2, 3, 4),
	c AS (INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n, seqs)
		SELECT k.recipient, false, s.unread, k.via, k.priority, k.human, CASE WHEN s.unread THEN -k.n ELSE k.n END, CASE WHEN s.unread THEN -k.seqs ELSE k.seqs END
		FROM k CROSS JOIN (VALUES (true), (false)) AS s (unread) ORDER BY 1, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n, seqs = c.seqs + excluded.seqs),
	ru AS (DELETE FROM role_unread x USING r WHERE x.recipient = r.recipient AND x.message_seq = r.message_seq)
	SELECT u.recipient, count(*), min(u.message_seq), max(u.message_seq)
		FROM (SELECT recipient, message_seq FROM p UNION ALL SELECT recipient, message_seq FROM r) u GROUP BY u.recipient
	UNION ALL SELECT NULL, ` + withheldRoles + `, NULL, NULL WHERE NOT $6`
}

// withheldRoles counts the role deliveries a drain without includeRoles
// leaves alone ($4: its watermark's seq, or < 0).
var withheldRoles = `(SELECT coalesce(sum(n), 0)::bigint FROM mailbox_count WHERE recipient = ANY($2) AND unread AND NOT archived)
		- (SELECT count(*) FROM (` + roleHidden + ` AND d.read_at IS NULL AND d.archived_at IS NULL) h)
		- (SELECT count(*) FROM delivery d CROSS JOIN LATERAL (SELECT m.sender_id FROM message m WHERE m.seq = d.message_seq OFFSET 0) m
			WHERE d.recipient = ANY($2) AND ` + unreadD + ` AND d.archived_at IS NULL AND $4::bigint >= 0 AND d.message_seq > $4::bigint
			AND ` + roleVisibleProbes + `)`

// drainUnread is what a drain marks, on a delivery d.
const drainUnread = ` AND d.read_at IS NULL AND d.archived_at IS NULL AND ($4::bigint < 0 OR d.message_seq <= $4::bigint)`
