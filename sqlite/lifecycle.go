package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/mailroom/mailroom"
)

// Unarchive clears the caller's archivedAt.
func (s *Store) Unarchive(ctx context.Context, messageID string) (mailroom.UnarchiveReceipt, error) {
	err := s.recipientWrite(ctx, messageID, `UPDATE delivery SET archived_at = NULL WHERE id = ?`)
	if err != nil {
		return mailroom.UnarchiveReceipt{}, err
	}
	return mailroom.UnarchiveReceipt{MessageID: messageID, Status: "unarchived", Durable: s.durable}, nil
}

// MarkUnread clears the caller's readAt (a role message's shared state).
func (s *Store) MarkUnread(ctx context.Context, messageID string) (mailroom.UnreadReceipt, error) {
	err := s.recipientWriteFold(ctx, messageID, `UPDATE delivery SET read_at = NULL, read_by = NULL WHERE id = ?`, true)
	if err != nil {
		return mailroom.UnreadReceipt{}, err
	}
	return mailroom.UnreadReceipt{MessageID: messageID, Status: "unread", Durable: s.durable}, nil
}

// recipientWrite runs update (one parameter: the delivery id) on the
// caller's own delivery of messageID: the caller's inbox changes, and with
// a role delivery (whose state the role's holders share) the role's.
func (s *Store) recipientWrite(ctx context.Context, messageID, update string) error {
	return s.recipientWriteFold(ctx, messageID, update, false)
}

// recipientWriteFold is recipientWrite that, with fold, first folds the
// caller's read mark when it reaches the delivery: a row made unread under
// a mark that reads through it would still be read.
func (s *Store) recipientWriteFold(ctx context.Context, messageID, update string, fold bool) error {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return err
	}
	return s.write(ctx, func(tx *ptx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		t, err := resolveRecipient(ctx, tx, me, jsonStrings(roles), messageID)
		if err != nil {
			return err
		}
		if err := touchDelivery(ctx, tx, me, t.delivery); err != nil {
			return err
		}
		if fold {
			if k, ok, err := markOf(ctx, tx, me.ID); err != nil {
				return err
			} else if ok && t.seq <= k.through {
				if err := k.foldRange(ctx, tx, k.through); err != nil {
					return err
				}
			}
			// A role delivery's mark is its role's (rolemark.go).
			var role sql.NullString
			if err := tx.QueryRowContext(ctx, `SELECT role FROM delivery WHERE id = ?`, t.delivery).Scan(&role); err != nil {
				return err
			}
			if role.Valid {
				if k, ok, err := roleMarkFor(ctx, tx, role.String); err != nil {
					return err
				} else if ok && t.seq <= k.through {
					if err := k.foldRange(ctx, tx, k.through); err != nil {
						return err
					}
				}
			}
		}
		_, err = countedUpdate(ctx, tx, t.delivery, update, t.delivery)
		return err
	})
}

// Delete removes the message from the caller's mailbox for good.
func (s *Store) Delete(ctx context.Context, messageID string) (mailroom.DeleteReceipt, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.DeleteReceipt{}, err
	}
	at := s.now()
	err = s.write(ctx, func(tx *ptx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		t, err := resolve(ctx, tx, me, jsonStrings(roles), messageID)
		if err != nil {
			return err
		}
		// Only the caller's mailbox changes, whatever the route.
		tx.touch([]int64{me.ID}, nil)
		// The personal delivery goes; a role delivery is the other
		// holders' too, so the caller's tombstone hides it from them alone.
		if _, err := tx.ExecContext(ctx, `DELETE FROM delivery WHERE message_seq = ? AND recipient_id = ?`, t.seq, me.ID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO message_deleted (identity_id, message_seq, deleted_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, me.ID, t.seq, ts(at))
		return err
	})
	if err != nil {
		return mailroom.DeleteReceipt{}, err
	}
	return mailroom.DeleteReceipt{MessageID: messageID, DeletedAt: at, Status: "deleted", Durable: s.durable}, nil
}

// Retract scrubs a message the caller sent.
func (s *Store) Retract(ctx context.Context, messageID string) (mailroom.RetractReceipt, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.RetractReceipt{}, err
	}
	scrubbed := false
	err = s.write(ctx, func(tx *ptx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		t, err := resolve(ctx, tx, me, jsonStrings(roles), messageID)
		if err != nil {
			return err
		}
		if t.sender != me.ID {
			return mailroom.NotSender(messageID)
		}
		var subject, body string
		var retracted, pending bool
		if err := tx.QueryRowContext(ctx, `SELECT subject, body, retracted, EXISTS (SELECT 1 FROM concept_job WHERE message_seq = seq) FROM message WHERE seq = ?`, t.seq).
			Scan(&subject, &body, &retracted, &pending); err != nil {
			return err
		}
		if retracted {
			tx.touchNone()
			return nil
		}
		scrubbed = true
		// Every recipient's view of the message changes.
		if err := touchRecipients(ctx, tx, `SELECT recipient_id, role FROM delivery WHERE message_seq = ?`, t.seq); err != nil {
			return err
		}
		// External-content FTS5 forgets a row only when told its old text.
		if _, err := tx.ExecContext(ctx, `INSERT INTO message_fts (message_fts, rowid, subject, body, audience) SELECT 'delete', fts_rowid, subject, body, audience FROM message_text WHERE seq = ?`, t.seq); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE message SET subject = '', body = '', retracted = 1 WHERE seq = ?`, t.seq); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO message_fts (rowid, subject, body, audience) SELECT fts_rowid, subject, body, audience FROM message_text WHERE seq = ?`, t.seq); err != nil {
			return err
		}
		// A job still queued (or in a worker's hands) would tag the old
		// text: drop it, and its worker's completion finds the lease lost.
		if _, err := tx.ExecContext(ctx, `DELETE FROM concept_job WHERE message_seq = ?`, t.seq); err != nil {
			return err
		}
		// Extracted tags come from the text; tags the sender gave stay, as
		// the other edges do.
		removed, err := deleteConcepts(ctx, tx, `DELETE FROM message_concept WHERE message_seq = ? AND source <> 'caller' RETURNING concept_id`, t.seq)
		if err != nil {
			return err
		}
		if err := dropOrphanConcepts(ctx, tx, removed); err != nil {
			return err
		}
		if !pending && s.terms != nil {
			terms := jsonStrings(s.terms(subject, body))
			if _, err := tx.ExecContext(ctx, `UPDATE concept_term SET df = df - 1 WHERE term IN (SELECT value FROM json_each(?))`, terms); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM concept_term WHERE df <= 0 AND term IN (SELECT value FROM json_each(?))`, terms); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE concept_corpus SET docs = max(docs - 1, 0) WHERE id = 1`); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return mailroom.RetractReceipt{}, err
	}
	if scrubbed {
		s.checkpoint(ctx)
	}
	return mailroom.RetractReceipt{MessageID: messageID, Retracted: true, Status: "retracted", Durable: s.durable}, nil
}

// checkpoint copies the WAL into the database and truncates it, so text a
// retraction or purge scrubbed does not linger in old WAL frames. It is best
// effort: a reader in another process can hold it off until the next one.
func (s *Store) checkpoint(ctx context.Context) {
	if !s.durable {
		return
	}
	var busy, logFrames, done int
	// A truncating checkpoint changes data_version without a commit; the
	// watcher must not take it for a write that keeps no change log.
	s.writing()
	s.checkpoints.Add(1)
	defer s.checkpointsDone.Add(1)
	err := s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done)
	if err != nil || busy != 0 {
		s.log.Warn("WAL checkpoint after scrubbing did not complete; the next one will", "err", err, "busy", busy)
	}
}

func deleteConcepts(ctx context.Context, tx *ptx, q string, args ...any) ([]string, error) {
	// Untraced: q is one of deleteConcepts' callers' own statements.
	rows, err := tx.Tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// dropOrphanConcepts removes the concept nodes in ids that no message
// carries any more: their names come from message text.
func dropOrphanConcepts(ctx context.Context, tx *ptx, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM concept WHERE id IN (SELECT value FROM json_each(?))
		AND NOT EXISTS (SELECT 1 FROM message_concept mc WHERE mc.concept_id = concept.id)`, jsonStrings(unique(ids)))
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
	err = s.read(ctx, func(tx *ptx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		rj := jsonStrings(roles)
		// Personal deliveries are counted from mailbox_count (a few rows per
		// recipient, kept in every write transaction), role deliveries from
		// role_count with the caller's candidates counted exactly
		// (sqlite/counts.go).
		type pass struct {
			n, high, normal, low, human int
			oldest                      sql.NullInt64
		}
		var p, r pass
		var broadcast, personalArchived int
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(n) FILTER (WHERE unread), 0),
				coalesce(sum(n) FILTER (WHERE unread AND priority = 'high'), 0), coalesce(sum(n) FILTER (WHERE unread AND priority = 'normal'), 0),
				coalesce(sum(n) FILTER (WHERE unread AND priority = 'low'), 0), coalesce(sum(n) FILTER (WHERE unread AND human), 0),
				coalesce(sum(n) FILTER (WHERE unread AND via = 'broadcast'), 0),
				(SELECT coalesce(sum(n), 0) FROM mailbox_count WHERE recipient_id = ?1 AND archived = 1)
			FROM mailbox_count WHERE recipient_id = ?1 AND archived = 0`, me.ID).
			Scan(&p.n, &p.high, &p.normal, &p.low, &p.human, &broadcast, &personalArchived); err != nil {
			return err
		}
		if p.n > 0 {
			if err := tx.QueryRowContext(ctx, `SELECT min(d.message_seq) FROM delivery d WHERE d.recipient_id = ?1`+personalUnread(` AND d.read_at IS NULL`)+` AND d.archived_at IS NULL`, me.ID).
				Scan(&p.oldest); err != nil {
				return err
			}
		}
		if len(roles) > 0 {
			if err := roleStatus(ctx, tx, me.ID, roles, &r.n, &r.high, &r.normal, &r.low, &r.human, &st.Archived); err != nil {
				return err
			}
			if r.oldest, err = oldestRoleUnread(ctx, tx, me.ID, roles); err != nil {
				return err
			}
		}
		u := &st.Unread
		u.Total, u.Direct, u.Broadcast, u.Role = p.n+r.n, p.n-broadcast, broadcast, r.n
		u.Human = p.human + r.human
		u.ByPriority = mailroom.PriorityCounts{High: p.high + r.high, Normal: p.normal + r.normal, Low: p.low + r.low}
		oldest := p.oldest
		if !oldest.Valid || (r.oldest.Valid && r.oldest.Int64 < oldest.Int64) {
			oldest = r.oldest
		}
		if oldest.Valid {
			var at string
			if err := tx.QueryRowContext(ctx, `SELECT created_at FROM message WHERE seq = ?`, oldest.Int64).Scan(&at); err != nil {
				return err
			}
			t := parseTS(at)
			st.OldestUnreadAt = &t
		}
		st.Archived += personalArchived
		// Per role: the unread role-queue mail addressed to it, shown
		// through any role the caller holds.
		addressed, err := roleAddressedUnread(ctx, tx, me.ID, roles)
		if err != nil {
			return err
		}
		for _, r := range roles {
			st.Roles = append(st.Roles, mailroom.RoleCount{Role: "role:" + r, Unread: addressed[r]})
		}
		st.Watermark, err = watermark(ctx, tx, me.ID, rj)
		return err
	})
	return st, err
}

// purgeBatch bounds one purge transaction, so senders wait for a batch, not
// for the whole purge.
const purgeBatch = 2000

// Purge removes old mail with its edges, index entries and concept tags.
func (s *Store) Purge(ctx context.Context, r mailroom.PurgeRequest) (mailroom.PurgeReport, error) {
	rep := mailroom.PurgeReport{Before: r.Before, DryRun: r.DryRun}
	before := ts(r.Before)
	// What a read mark covers is read (mark.go).
	unread := `EXISTS (SELECT 1 FROM delivery d WHERE d.message_seq = m.seq AND ` + unreadAnyD + ` AND d.archived_at IS NULL)`
	cond := `m.created_at < ?1`
	if !r.IncludeUnread {
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM message m WHERE `+cond+` AND `+unread, before).Scan(&rep.Kept); err != nil {
			return rep, err
		}
		cond += ` AND NOT ` + unread
	}
	if r.DryRun {
		err := s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum((SELECT count(*) FROM delivery d WHERE d.message_seq = m.seq)), 0),
			coalesce(sum((SELECT count(*) FROM message_concept c WHERE c.message_seq = m.seq)), 0)
			FROM message m WHERE `+cond, before).Scan(&rep.Messages, &rep.Deliveries, &rep.Concepts)
		return rep, err
	}
	for {
		n := 0
		err := s.write(ctx, func(tx *ptx) error {
			seqs, err := strings1(ctx, tx, `SELECT m.seq FROM message m WHERE `+cond+` ORDER BY m.created_at LIMIT `+itoa(purgeBatch), before)
			if err != nil || len(seqs) == 0 {
				return err
			}
			n = len(seqs)
			if s.hooks.PurgeDecided != nil {
				s.hooks.PurgeDecided()
			}
			batch := "[" + strings.Join(seqs, ",") + "]"
			in := ` IN (SELECT value FROM json_each(?1))`
			// The mailboxes that lose a delivery change.
			if err := touchRecipients(ctx, tx, `SELECT DISTINCT recipient_id, role FROM delivery WHERE message_seq`+in, batch); err != nil {
				return err
			}
			threads, err := strings1(ctx, tx, `SELECT DISTINCT thread_id FROM message WHERE seq`+in, batch)
			if err != nil {
				return err
			}
			// FTS5's secure-delete rewrites segment pages per deleted token:
			// right for one retraction, a full rewrite per batch here. A
			// purge drops its rows with delete markers instead (restoring the
			// setting in the same transaction) and optimizes the index once
			// at the end, which removes the purged entries from the file.
			if _, err := tx.ExecContext(ctx, `INSERT INTO message_fts (message_fts, rank) VALUES ('secure-delete', 0)`); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO message_fts (message_fts, rowid, subject, body, audience) SELECT 'delete', fts_rowid, subject, body, audience FROM message_text WHERE seq`+in+` ORDER BY seq DESC`, batch); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO message_fts (message_fts, rank) VALUES ('secure-delete', 1)`); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, `DELETE FROM delivery WHERE message_seq`+in, batch)
			if err != nil {
				return err
			}
			d, _ := res.RowsAffected()
			removed, err := deleteConcepts(ctx, tx, `DELETE FROM message_concept WHERE message_seq`+in+` RETURNING concept_id`, batch)
			if err != nil {
				return err
			}
			for _, q := range []string{
				`DELETE FROM message_to WHERE message_seq` + in,
				`DELETE FROM message_session WHERE message_seq` + in,
				`DELETE FROM message_ticket WHERE message_seq` + in,
				`DELETE FROM concept_job WHERE message_seq` + in,
				`DELETE FROM message_deleted WHERE message_seq` + in,
				`DELETE FROM message_audience WHERE message_seq` + in,
				`UPDATE message SET in_reply_to = NULL WHERE in_reply_to` + in,
				`DELETE FROM message WHERE seq` + in,
			} {
				if _, err := tx.ExecContext(ctx, q, batch); err != nil {
					return err
				}
			}
			if err := lowerMarks(ctx, tx); err != nil {
				return err
			}
			// A purge of the newest mail frees its seqs for new messages
			// (a rowid is the largest plus one): what hook sessions were
			// told of them goes, or a new message would be taken as told.
			// Only then: the table has no index by message.
			if _, err := tx.ExecContext(ctx, `DELETE FROM hook_announcement WHERE message_seq > (SELECT coalesce(max(seq), 0) FROM message)
				AND (SELECT max(value) FROM json_each(?1)) > (SELECT coalesce(max(seq), 0) FROM message)`, batch); err != nil {
				return err
			}
			if err := dropOrphanConcepts(ctx, tx, removed); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM thread WHERE id IN (SELECT value FROM json_each(?))
				AND NOT EXISTS (SELECT 1 FROM message m WHERE m.thread_id = thread.id)`, jsonStrings(threads)); err != nil {
				return err
			}
			rep.Messages += n
			rep.Deliveries += int(d)
			rep.Concepts += len(removed)
			return nil
		})
		if err != nil {
			return rep, err
		}
		if n < purgeBatch {
			break
		}
	}
	if rep.Messages > 0 {
		err := s.write(ctx, func(tx *ptx) error {
			tx.touchNone() // the index's layout, no mailbox
			_, err := tx.ExecContext(ctx, `INSERT INTO message_fts (message_fts) VALUES ('optimize')`)
			return err
		})
		if err != nil {
			return rep, err
		}
		s.checkpoint(ctx)
	}
	return rep, nil
}

// GrantReadInbox lets grantee read owner's inbox.
func (s *Store) GrantReadInbox(ctx context.Context, grantee, owner string) error {
	return s.write(ctx, func(tx *ptx) error {
		// A grant changes what the grantee may read, no one's mailbox.
		tx.touchNone()
		g, o, err := mailroom.GrantPair(grantee, owner, byName(ctx, tx))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO read_grant (grantee_id, owner_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, g.ID, o.ID, ts(tx.now()))
		return err
	})
}

// RevokeReadInbox removes a read grant and reports whether it existed.
func (s *Store) RevokeReadInbox(ctx context.Context, grantee, owner string) (bool, error) {
	found := false
	err := s.write(ctx, func(tx *ptx) error {
		tx.touchNone()
		g, o, err := mailroom.GrantPair(grantee, owner, byName(ctx, tx))
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM read_grant WHERE grantee_id = ? AND owner_id = ?`, g.ID, o.ID)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		found = n > 0
		return nil
	})
	return found, err
}
