package postgres

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailroom/mailroom"
)

// Unarchive clears the caller's archivedAt.
func (s *Store) Unarchive(ctx context.Context, messageID string) (mailroom.UnarchiveReceipt, error) {
	err := s.recipientWrite(ctx, messageID, false, `UPDATE delivery SET archived_at = NULL WHERE recipient = $1 AND message_seq = $2`)
	if err != nil {
		return mailroom.UnarchiveReceipt{}, err
	}
	return mailroom.UnarchiveReceipt{MessageID: messageID, Status: "unarchived", Durable: true}, nil
}

// MarkUnread clears the caller's readAt (a role message's shared state).
func (s *Store) MarkUnread(ctx context.Context, messageID string) (mailroom.UnreadReceipt, error) {
	err := s.recipientWrite(ctx, messageID, true, `UPDATE delivery SET read_at = NULL, read_by = NULL WHERE recipient = $1 AND message_seq = $2`)
	if err != nil {
		return mailroom.UnreadReceipt{}, err
	}
	return mailroom.UnreadReceipt{MessageID: messageID, Status: "unread", Durable: true}, nil
}

// recipientWrite runs update (parameters: the delivery's recipient and
// message seq) on the caller's own delivery of messageID; with unread, the
// mark of the delivery's mailbox (the caller's, or a role queue's) is
// folded first when it covers that delivery (a mark covers every unread
// delivery below it).
func (s *Store) recipientWrite(ctx context.Context, messageID string, unread bool, update string) error {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return err
	}
	return s.write(ctx, func(tx pgx.Tx) error {
		// The store's mark lock shared (a purge takes it exclusive), then
		// the mailbox's (lockMailbox), before the id is resolved: a write
		// that makes a message unread again lands before a purge decides
		// what to remove, or after it removed the message and then finds
		// none, never between (an unread message is never purged).
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+storeLockKey+`), pg_advisory_xact_lock_shared(`+mailboxLockKey+`)`, me.ID); err != nil {
			return err
		}
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		t, err := resolveRecipient(ctx, tx, me, roles, messageID)
		if err != nil {
			return err
		}
		// And the role queues' (lockMailboxes), which a role delivery's
		// write changes.
		if err := lockMarks(ctx, tx, slices.Sorted(slices.Values(roles.ids)), false); err != nil {
			return err
		}
		if unread {
			if err := foldNow(ctx, tx, t.recipient, t.seq); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, update, t.recipient, t.seq); err != nil {
			return err
		}
		return s.notify(ctx, tx, roles.change(me, t.recipient))
	})
}

// Delete removes the message from the caller's mailbox for good.
func (s *Store) Delete(ctx context.Context, messageID string) (mailroom.DeleteReceipt, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.DeleteReceipt{}, err
	}
	at := s.now()
	err = s.write(ctx, func(tx pgx.Tx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		t, err := resolve(ctx, tx, me, roles, messageID)
		if err != nil {
			return err
		}
		if err := lockMailbox(ctx, tx, me.ID); err != nil {
			return err
		}
		// The personal delivery goes; a role delivery is the other
		// holders' too, so the caller's tombstone hides it from them alone.
		if _, err := tx.Exec(ctx, `DELETE FROM delivery WHERE recipient = $1 AND message_seq = $2`, me.ID, t.seq); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO message_deleted (identity_id, message_seq, deleted_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, me.ID, t.seq, at); err != nil {
			return err
		}
		return s.notify(ctx, tx, mailroom.Change{Identities: []int64{me.ID}})
	})
	if err != nil {
		return mailroom.DeleteReceipt{}, err
	}
	return mailroom.DeleteReceipt{MessageID: messageID, DeletedAt: at, Status: "deleted", Durable: true}, nil
}

// Retract scrubs a message the caller sent. The tsvector is a generated
// column, so scrubbing the text scrubs the index in the same statement.
func (s *Store) Retract(ctx context.Context, messageID string) (mailroom.RetractReceipt, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.RetractReceipt{}, err
	}
	err = s.write(ctx, func(tx pgx.Tx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		t, err := resolve(ctx, tx, me, roles, messageID)
		if err != nil {
			return err
		}
		if t.sender != me.ID {
			return mailroom.NotSender(messageID)
		}
		var subject, body string
		var retracted, pending bool
		if err := tx.QueryRow(ctx, `SELECT subject, body, retracted, EXISTS (SELECT 1 FROM concept_job WHERE message_seq = seq) FROM message WHERE seq = $1 FOR UPDATE`, t.seq).
			Scan(&subject, &body, &retracted, &pending); err != nil {
			return err
		}
		if retracted {
			return nil
		}
		// Every recipient's view of the message changes.
		touched, err := deliveriesChange(ctx, tx, []int64{t.seq})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE message SET subject = '', body = '', retracted = true WHERE seq = $1`, t.seq); err != nil {
			return err
		}
		// A job still queued (or in a worker's hands) would tag the old
		// text: drop it, and its worker's completion finds the lease lost.
		if _, err := tx.Exec(ctx, `DELETE FROM concept_job WHERE message_seq = $1`, t.seq); err != nil {
			return err
		}
		// Extracted tags come from the text; tags the sender gave stay, as
		// the other edges do.
		removed, err := deleteConcepts(ctx, tx, `DELETE FROM message_concept WHERE message_seq = $1 AND source <> 'caller' RETURNING concept_id`, t.seq)
		if err != nil {
			return err
		}
		if err := dropOrphanConcepts(ctx, tx, removed); err != nil {
			return err
		}
		if !pending && s.terms != nil {
			terms := sortedUnique(s.terms(subject, body))
			if _, err := tx.Exec(ctx, `UPDATE concept_term SET df = df - 1 WHERE term = ANY($1)`, terms); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM concept_term WHERE df <= 0 AND term = ANY($1)`, terms); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE concept_corpus SET docs = greatest(docs - 1, 0) WHERE id = 1`); err != nil {
				return err
			}
		}
		return s.notify(ctx, tx, touched)
	})
	if err != nil {
		return mailroom.RetractReceipt{}, err
	}
	return mailroom.RetractReceipt{MessageID: messageID, Retracted: true, Status: "retracted", Durable: true}, nil
}

func deleteConcepts(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]string, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// dropOrphanConcepts removes the concept nodes in ids that no message
// carries any more: their names come from message text.
func dropOrphanConcepts(ctx context.Context, tx pgx.Tx, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `DELETE FROM concept WHERE id = ANY($1)
		AND NOT EXISTS (SELECT 1 FROM message_concept mc WHERE mc.concept_id = concept.id)`, sortedUnique(ids))
	return err
}

// Status counts the caller's mailbox in one read snapshot, with the same
// inbox branches and conditions List uses.
func (s *Store) Status(ctx context.Context) (mailroom.Status, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.Status{}, err
	}
	st := mailroom.Status{Identity: me.Address(), Roles: []mailroom.RoleCount{}}
	err = s.read(ctx, func(tx pgx.Tx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		args := []any{me.ID, roles.ids, roles.own}
		// Personal deliveries are counted from mailbox_count (kept by
		// triggers in every write transaction).
		u := &st.Unread
		var personalArchived int
		err = tx.QueryRow(ctx, `SELECT coalesce(sum(n) FILTER (WHERE unread AND NOT archived), 0)::bigint, coalesce(sum(n) FILTER (WHERE unread AND NOT archived AND via = 'direct'), 0)::bigint,
				coalesce(sum(n) FILTER (WHERE unread AND NOT archived AND via = 'broadcast'), 0)::bigint, coalesce(sum(n) FILTER (WHERE unread AND NOT archived AND human), 0)::bigint,
				coalesce(sum(n) FILTER (WHERE unread AND NOT archived AND priority = 'high'), 0)::bigint, coalesce(sum(n) FILTER (WHERE unread AND NOT archived AND priority = 'normal'), 0)::bigint,
				coalesce(sum(n) FILTER (WHERE unread AND NOT archived AND priority = 'low'), 0)::bigint, coalesce(sum(n) FILTER (WHERE archived), 0)::bigint
			FROM mailbox_count WHERE recipient = $1 AND (archived OR unread)`, me.ID).
			Scan(&u.Total, &u.Direct, &u.Broadcast, &u.Human, &u.ByPriority.High, &u.ByPriority.Normal, &u.ByPriority.Low, &personalArchived)
		if err != nil {
			return err
		}
		// The oldest unread personal delivery: the first of the caller's
		// key range that is unread (no index covers read_at, see 0001).
		var oldest *time.Time
		if u.Total > 0 {
			// Planned for this caller (unnamed): a generic plan guesses
			// the caller's share of delivery and may walk delivery_message
			// from the oldest message of any mailbox.
			if err := tx.QueryRow(ctx, `SELECT m.created_at FROM message m WHERE m.seq = (SELECT d.message_seq FROM delivery d
				WHERE d.recipient = $1 AND d.via <> 'role' AND d.read_at IS NULL AND d.message_seq > `+markedThroughOwner+` AND d.archived_at IS NULL ORDER BY d.message_seq LIMIT 1)`, pgx.QueryExecModeExec, me.ID).Scan(&oldest); err != nil && !isNoRows(err) {
				return err
			}
		}
		// The role queues are counted the same way, less the counted
		// deliveries the role branch leaves out (a few candidates: what
		// the caller sent, got personally, deleted, or sees through
		// another role; migration 0009).
		var r struct{ n, human, high, normal, low, archived int }
		err = tx.QueryRow(ctx, `SELECT c.n - h.n, c.human - h.human, c.high - h.high, c.normal - h.normal, c.low - h.low, c.archived - h.archived
			FROM (SELECT coalesce(sum(n) FILTER (WHERE unread AND NOT archived), 0)::bigint AS n, coalesce(sum(n) FILTER (WHERE unread AND NOT archived AND human), 0)::bigint AS human,
					coalesce(sum(n) FILTER (WHERE unread AND NOT archived AND priority = 'high'), 0)::bigint AS high,
					coalesce(sum(n) FILTER (WHERE unread AND NOT archived AND priority = 'normal'), 0)::bigint AS normal,
					coalesce(sum(n) FILTER (WHERE unread AND NOT archived AND priority = 'low'), 0)::bigint AS low,
					coalesce(sum(n) FILTER (WHERE archived), 0)::bigint AS archived
				FROM mailbox_count WHERE recipient = ANY($2) AND (archived OR unread)) c,
			(SELECT count(*) FILTER (WHERE h.read_at IS NULL AND h.archived_at IS NULL) AS n, count(*) FILTER (WHERE h.read_at IS NULL AND h.archived_at IS NULL AND h.human) AS human,
					count(*) FILTER (WHERE h.read_at IS NULL AND h.archived_at IS NULL AND h.priority = 'high') AS high,
					count(*) FILTER (WHERE h.read_at IS NULL AND h.archived_at IS NULL AND h.priority = 'normal') AS normal,
					count(*) FILTER (WHERE h.read_at IS NULL AND h.archived_at IS NULL AND h.priority = 'low') AS low,
					count(*) FILTER (WHERE h.archived_at IS NOT NULL) AS archived
				FROM (`+roleHidden+`) h) h`, args...).
			Scan(&r.n, &r.human, &r.high, &r.normal, &r.low, &r.archived)
		if err != nil {
			return err
		}
		u.Total += r.n
		u.Role = r.n
		u.Human += r.human
		u.ByPriority.High += r.high
		u.ByPriority.Normal += r.normal
		u.ByPriority.Low += r.low
		st.Archived = personalArchived + r.archived
		if r.n > 0 {
			// Each queue's first unread delivery the caller sees: its
			// unread ones in seq order (role_unread), passing over hidden
			// ones, which are candidates (few).
			var roleOldest *time.Time
			if err := tx.QueryRow(ctx, `SELECT m.created_at FROM message m WHERE m.seq = (SELECT min(o.seq) FROM unnest($2::bigint[]) AS q (mb)
				CROSS JOIN LATERAL (SELECT u.message_seq AS seq FROM role_unread u CROSS JOIN LATERAL (SELECT 1 FROM delivery d JOIN message m ON m.seq = d.message_seq
					WHERE d.recipient = u.recipient AND d.message_seq = u.message_seq AND `+roleVisibleProbes+` OFFSET 0) v
					WHERE u.recipient = q.mb AND u.message_seq > `+markOf("q.mb")+` ORDER BY u.message_seq LIMIT 1) o)`, args...).Scan(&roleOldest); err != nil && !isNoRows(err) {
				return err
			}
			if oldest == nil || (roleOldest != nil && roleOldest.Before(*oldest)) {
				oldest = roleOldest
			}
		}
		st.OldestUnreadAt = utc(oldest)
		// Per role, the unread role mail addressed to it, shown through any
		// role the caller holds: its queue's counter, less its unread
		// candidates, plus the candidates' messages the caller sees unread.
		// With one queue that is all the role mail the caller sees.
		perRole := map[string]int{}
		if len(roles.ids) == 1 {
			perRole[roles.names[roles.ids[0]]] = r.n
		} else if err := countPerRole(ctx, tx, args, roles, perRole); err != nil {
			return err
		}
		held, err := heldRoles(ctx, tx, me)
		if err != nil {
			return err
		}
		for _, r := range held {
			// Role-queue mail only (via: role), as the role count's list call says.
			st.Roles = append(st.Roles, mailroom.RoleCount{Role: "role:" + r, Unread: perRole[r]})
		}
		st.Watermark, err = watermark(ctx, tx, me, roles)
		return err
	})
	return st, err
}

// countPerRole sets perRole[name] to the unread role mail addressed to
// each of the caller's role queues (args: the caller parameters).
func countPerRole(ctx context.Context, tx pgx.Tx, args []any, roles roleSet, perRole map[string]int) error {
	rows, err := tx.Query(ctx, `WITH c AS MATERIALIZED (SELECT c.recipient, c.message_seq, u.unread FROM (`+roleCandidates+`) c
			CROSS JOIN LATERAL (SELECT `+unreadD+` AND d.archived_at IS NULL AS unread FROM delivery d
				WHERE d.recipient = c.recipient AND d.message_seq = c.message_seq OFFSET 0) u)
		SELECT q.mb, (SELECT coalesce(sum(n), 0)::bigint FROM mailbox_count WHERE recipient = q.mb AND unread AND NOT archived)
			- (SELECT count(*) FROM c WHERE c.recipient = q.mb AND c.unread)
			+ (SELECT count(*) FROM c WHERE c.recipient = q.mb AND EXISTS (SELECT 1 FROM delivery d JOIN message m ON m.seq = d.message_seq
				WHERE d.recipient = ANY($2) AND d.message_seq = c.message_seq AND `+unreadD+` AND d.archived_at IS NULL AND `+roleVisibleProbes+` OFFSET 0))
		FROM unnest($2::bigint[]) AS q (mb)`, args...)
	if err != nil {
		return err
	}
	var mb int64
	var n int
	_, err = pgx.ForEachRow(rows, []any{&mb, &n}, func() error {
		perRole[roles.names[mb]] = n
		return nil
	})
	return err
}

// heldRoles names every role the caller holds, implicit ones first, then
// explicit grants by name: the roles SQLite's store lists.
func heldRoles(ctx context.Context, q querier, me mailroom.Identity) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT role FROM role_grant WHERE identity_id = $1`, me.ID)
	if err != nil {
		return nil, err
	}
	granted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	held := me.ImplicitRoles()
	for _, r := range granted {
		if !slices.Contains(held, r) { // an implicit role granted explicitly too
			held = append(held, r)
		}
	}
	return held, err
}

// purgeBatch bounds one purge transaction, so senders wait for a batch, not
// for the whole purge.
const purgeBatch = 2000

// Purge removes old mail with its edges, index entries and concept tags.
func (s *Store) Purge(ctx context.Context, r mailroom.PurgeRequest) (mailroom.PurgeReport, error) {
	rep := mailroom.PurgeReport{Before: r.Before, DryRun: r.DryRun}
	unread := `EXISTS (SELECT 1 FROM delivery d WHERE d.message_seq = m.seq AND d.read_at IS NULL AND d.archived_at IS NULL AND NOT ` + coveredD + `)`
	cond := `m.created_at < $1`
	if !r.IncludeUnread {
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM message m WHERE `+cond+` AND `+unread, r.Before).Scan(&rep.Kept); err != nil {
			return rep, err
		}
		cond += ` AND NOT ` + unread
	}
	if r.DryRun {
		err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum((SELECT count(*) FROM delivery d WHERE d.message_seq = m.seq)), 0),
			coalesce(sum((SELECT count(*) FROM message_concept c WHERE c.message_seq = m.seq)), 0)
			FROM message m WHERE `+cond, r.Before).Scan(&rep.Messages, &rep.Deliveries, &rep.Concepts)
		return rep, err
	}
	for {
		n := 0
		var d, c int
		err := s.write(ctx, func(tx pgx.Tx) error {
			n, d, c = 0, 0, 0 // s.write retries this function after a deadlock
			// No drain by a mark beside a purge (mark.go): its counts
			// would miss the rows this batch deletes.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+storeLockKey+`)`); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT m.seq FROM message m WHERE `+cond+` ORDER BY m.created_at LIMIT `+itoa(purgeBatch)+` FOR UPDATE SKIP LOCKED`, r.Before)
			if err != nil {
				return err
			}
			seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil || len(seqs) == 0 {
				return err
			}
			n = len(seqs)
			if s.hooks.PurgeDecided != nil {
				s.hooks.PurgeDecided()
			}
			rows, err = tx.Query(ctx, `SELECT DISTINCT thread_id FROM message WHERE seq = ANY($1)`, seqs)
			if err != nil {
				return err
			}
			threads, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			// The mailboxes that lose a delivery change.
			touched, err := deliveriesChange(ctx, tx, seqs)
			if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `DELETE FROM delivery WHERE message_seq = ANY($1)`, seqs)
			if err != nil {
				return err
			}
			d = int(tag.RowsAffected())
			removed, err := deleteConcepts(ctx, tx, `DELETE FROM message_concept WHERE message_seq = ANY($1) RETURNING concept_id`, seqs)
			if err != nil {
				return err
			}
			c = len(removed)
			for _, q := range []string{
				`DELETE FROM message_to WHERE message_seq = ANY($1)`,
				`DELETE FROM message_session WHERE message_seq = ANY($1)`,
				`DELETE FROM message_ticket WHERE message_seq = ANY($1)`,
				`DELETE FROM concept_job WHERE message_seq = ANY($1)`,
				`DELETE FROM message_deleted WHERE message_seq = ANY($1)`,
				`DELETE FROM role_hint WHERE message_seq = ANY($1)`,
				`DELETE FROM role_later WHERE message_seq = ANY($1)`,
				`UPDATE message SET in_reply_to = NULL WHERE in_reply_to = ANY($1)`,
				`DELETE FROM message WHERE seq = ANY($1)`,
			} {
				if _, err := tx.Exec(ctx, q, seqs); err != nil {
					return err
				}
			}
			if err := dropOrphanConcepts(ctx, tx, removed); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM thread WHERE id = ANY($1)
				AND NOT EXISTS (SELECT 1 FROM message m WHERE m.thread_id = thread.id)`, threads); err != nil {
				return err
			}
			return s.notify(ctx, tx, touched)
		})
		if err != nil {
			return rep, err
		}
		rep.Messages += n
		rep.Deliveries += d
		rep.Concepts += c
		if n < purgeBatch {
			break
		}
	}
	return rep, nil
}

// GrantReadInbox lets grantee read owner's inbox.
func (s *Store) GrantReadInbox(ctx context.Context, grantee, owner string) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		g, o, err := mailroom.GrantPair(grantee, owner, byName(ctx, tx))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO read_grant (grantee_id, owner_id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, g.ID, o.ID, s.now())
		return err
	})
}

// RevokeReadInbox removes a read grant and reports whether it existed.
func (s *Store) RevokeReadInbox(ctx context.Context, grantee, owner string) (bool, error) {
	found := false
	err := s.write(ctx, func(tx pgx.Tx) error {
		g, o, err := mailroom.GrantPair(grantee, owner, byName(ctx, tx))
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM read_grant WHERE grantee_id = $1 AND owner_id = $2`, g.ID, o.ID)
		found = err == nil && tag.RowsAffected() > 0
		return err
	})
	return found, err
}

func itoa(i int) string { return strconv.Itoa(i) }
