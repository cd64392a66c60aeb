package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/mailroom/mailroom"
)

// target is a message as one caller reaches it: its seq and the caller's
// delivery (0 when the caller only sent it).
type target struct {
	seq      int64
	sender   int64
	thread   string
	delivery int64
}

// resolve is the single-id authorisation path shared by every tool: it finds
// the caller's own delivery of messageID (personal first, else a role they
// hold) and answers NotFound for anything the caller may not see.
func resolve(ctx context.Context, tx *ptx, me mailroom.Identity, roles string, messageID string) (target, error) {
	var t target
	if err := mailroom.ValidateMessageID("messageId", messageID); err != nil {
		return t, err
	}
	var deleted bool
	err := tx.QueryRowContext(ctx, `SELECT m.seq, m.sender_id, m.thread_id,
			coalesce((SELECT d.id FROM delivery d WHERE d.message_seq = m.seq AND d.recipient_id = ?2),
				(SELECT d.id FROM delivery d WHERE d.message_seq = m.seq AND d.role IN (SELECT value FROM json_each(?3))
					AND (m.sender_id <> ?2 OR d.role = `+ownSuccessorRole("?2")+`)
					ORDER BY d.id LIMIT 1),
				0),
			EXISTS (SELECT 1 FROM message_deleted x WHERE x.identity_id = ?2 AND x.message_seq = m.seq)
		FROM message m WHERE m.id = ?1`, messageID, me.ID, roles).Scan(&t.seq, &t.sender, &t.thread, &t.delivery, &deleted)
	if isNoRows(err) || (err == nil && (deleted || (t.delivery == 0 && t.sender != me.ID))) {
		return target{}, mailroom.NotFound(messageID)
	}
	return t, err
}

// resolveRecipient is resolve for recipient-only operations.
func resolveRecipient(ctx context.Context, tx *ptx, me mailroom.Identity, roles string, messageID string) (target, error) {
	t, err := resolve(ctx, tx, me, roles, messageID)
	if err == nil && t.delivery == 0 {
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
	err = s.read(ctx, func(tx *ptx) error {
		me, err := reader(ctx, tx, me, owner, ownerKind)
		if err != nil {
			return err
		}
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		t, err := resolve(ctx, tx, me, jsonStrings(roles), messageID)
		if err != nil {
			return err
		}
		if owner != "" && t.delivery == 0 {
			// A grant reads the owner's inbox, not their outbox.
			return mailroom.NotFound(messageID)
		}
		var did sql.NullInt64
		if t.delivery != 0 {
			did = sql.NullInt64{Int64: t.delivery, Valid: true}
		}
		var parent sql.NullString
		row := tx.QueryRowContext(ctx, `WITH box(seq, did) AS (SELECT ?1, ?2)
			SELECT `+rowColumns+`, m.body, (SELECT p.id FROM message p WHERE p.seq = m.in_reply_to), m.origin_session_id
			FROM box b JOIN message m ON m.seq = b.seq LEFT JOIN delivery d ON d.id = b.did`, t.seq, did)
		var r scanner = row
		var body, origin string
		m.Row, err = scanRow(extraScan{r, []any{&body, &parent, &origin}})
		if err != nil {
			return err
		}
		m.Body, m.OriginSessionID = body, origin
		if parent.Valid {
			// A parent the caller may not see does not exist for them.
			if _, err := resolve(ctx, tx, me, jsonStrings(roles), parent.String); err == nil {
				m.InReplyTo = &parent.String
			} else if mailroom.ErrorCode(err) != mailroom.ENOTFOUND {
				return err
			}
		}
		if m.RelatedSessions, err = strings1(ctx, tx, `SELECT session_id FROM message_session WHERE message_seq = ? ORDER BY session_id`, t.seq); err != nil {
			return err
		}
		if m.RelatedTickets, err = strings1(ctx, tx, `SELECT ticket_id FROM message_ticket WHERE message_seq = ? ORDER BY ticket_id`, t.seq); err != nil {
			return err
		}
		m.TaggedConcepts, err = conceptsOf(ctx, tx, t.seq)
		return err
	})
	return m, err
}

type scanner interface{ Scan(...any) error }

// extraScan appends destinations to a row scan, so scanRow can read rows
// that carry more columns than a listing.
type extraScan struct {
	sc    scanner
	extra []any
}

func (e extraScan) Scan(dest ...any) error { return e.sc.Scan(append(dest, e.extra...)...) }

func strings1(ctx context.Context, tx *ptx, q string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func conceptsOf(ctx context.Context, tx *ptx, seq int64) ([]mailroom.Concept, error) {
	rows, err := tx.QueryContext(ctx, `SELECT c.id, c.name FROM message_concept mc JOIN concept c ON c.id = mc.concept_id WHERE mc.message_seq = ? ORDER BY mc.source <> 'caller', mc.rank, mc.concept_id`, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []mailroom.Concept{}
	for rows.Next() {
		var c mailroom.Concept
		if err := rows.Scan(&c.ID, &c.Name); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Archive archives the caller's delivery of a message.
func (s *Store) Archive(ctx context.Context, messageID string) (mailroom.ArchiveReceipt, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.ArchiveReceipt{}, err
	}
	var at string
	err = s.write(ctx, func(tx *ptx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		tx.touch([]int64{me.ID}, roles)
		t, err := resolveRecipient(ctx, tx, me, jsonStrings(roles), messageID)
		if err != nil {
			return err
		}
		if err := countOut(ctx, tx, `= ?`, t.delivery); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `UPDATE delivery SET archived_at = coalesce(archived_at, ?) WHERE id = ? RETURNING archived_at`, ts(tx.now()), t.delivery).Scan(&at); err != nil {
			return err
		}
		return countIn(ctx, tx, `= ?`, t.delivery)
	})
	if err != nil {
		return mailroom.ArchiveReceipt{}, err
	}
	return mailroom.ArchiveReceipt{MessageID: messageID, ArchivedAt: parseTS(at), Status: "archived", Durable: s.durable}, nil
}

// marker is the single-id write path of scalar and array mark_read: each id
// is authorised by resolveRecipient and marked by one UPDATE. A drain applies
// the same UPDATE rule (read_at set once, read_by the caller) to its whole
// snapshot in one statement; its snapshot query applies the same visibility
// rule to the whole inbox at once.
type marker struct {
	s    *Store
	tx   *ptx
	me   mailroom.Identity
	stmt *sql.Stmt
	at   string
}

func (s *Store) newMarker(ctx context.Context, tx *ptx, me mailroom.Identity) (*marker, error) {
	// read_by says who read a role delivery (its rows show readBy); a
	// personal delivery is read only by its recipient and leaves it NULL.
	// A delivery a mark covers keeps the mark's readAt (and readBy).
	stmt, err := tx.PrepareContext(ctx, `UPDATE delivery SET read_at = coalesce((SELECT k.at FROM read_mark k WHERE k.recipient_id = delivery.recipient_id AND delivery.message_seq <= k.through_seq),
			(SELECT rk.at FROM role_mark rk WHERE rk.role = delivery.role AND delivery.message_seq <= rk.through_seq), ?1),
		read_by = CASE WHEN role IS NOT NULL THEN coalesce((SELECT rk.read_by FROM role_mark rk WHERE rk.role = delivery.role AND delivery.message_seq <= rk.through_seq), ?2) END
		WHERE id = ?3 AND read_at IS NULL`)
	if err != nil {
		return nil, err
	}
	return &marker{s: s, tx: tx, me: me, stmt: stmt, at: ts(tx.now())}, nil
}

// mark marks one delivery read; one already read keeps its first readAt.
// messageID is asked for only by the test hook, so a drain need not load
// every id.
func (mk *marker) mark(ctx context.Context, delivery int64, messageID func() string) error {
	if mk.s.hooks.FailMark != nil {
		if err := mk.s.hooks.FailMark(messageID()); err != nil {
			return err
		}
	}
	if err := countOut(ctx, mk.tx, `= ?`, delivery); err != nil {
		return err
	}
	if _, err := mk.stmt.ExecContext(ctx, mk.at, mk.me.ID, delivery); err != nil {
		return err
	}
	return countIn(ctx, mk.tx, `= ?`, delivery)
}

// MarkRead marks each id read for the caller, one result per id in order.
func (s *Store) MarkRead(ctx context.Context, ids []string) []mailroom.MarkResult {
	results := make([]mailroom.MarkResult, len(ids))
	fail := func(err error) []mailroom.MarkResult {
		for i, id := range ids {
			results[i] = markFailure(s, id, err)
		}
		return results
	}
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return fail(err)
	}
	err = s.write(ctx, func(tx *ptx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		tx.touch([]int64{me.ID}, roles)
		rj := jsonStrings(roles)
		mk, err := s.newMarker(ctx, tx, me)
		if err != nil {
			return err
		}
		defer mk.stmt.Close()
		for i, id := range ids {
			t, err := resolveRecipient(ctx, tx, me, rj, id)
			if err != nil {
				results[i] = markFailure(s, id, err)
				continue
			}
			if err := mk.mark(ctx, t.delivery, func() string { return id }); err != nil {
				results[i] = markFailure(s, id, err)
				continue
			}
			var at string
			if err := tx.QueryRowContext(ctx, `SELECT read_at FROM delivery WHERE id = ?`, t.delivery).Scan(&at); err != nil {
				results[i] = markFailure(s, id, err)
				continue
			}
			readAt := parseTS(at)
			results[i] = mailroom.MarkResult{MessageID: id, Status: "read", ReadAt: &readAt}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return results
}

func markFailure(s *Store, id string, err error) mailroom.MarkResult {
	if mailroom.ErrorCode(err) == mailroom.EINTERNAL {
		s.log.Error("mark_read", "messageId", id, "err", err)
	}
	return mailroom.MarkResult{MessageID: id, Status: "error", Error: mailroom.ErrorMessage(err), Err: err}
}

// MarkAllRead drains the caller's unread snapshot. The snapshot is one
// query per inbox branch (personal, and role deliveries when asked), each
// kept as a JSON list of delivery ids inside SQLite; the marking is one
// UPDATE over exactly that list with the single-id path's rule (a read
// keeps its first readAt), so a drain of 100,000 costs a few set
// operations, not 100,000 statements.
//
// When the drain is of the caller's whole unread, unarchived personal set
// up to its watermark, if any (role mail, when asked for, is marked row by
// row in the same write transaction, from a snapshot taken there), and nothing unread at or
// below the watermark is archived, it writes a read-through mark instead
// (mark.go): snapshot and mark are taken in one write transaction, from
// counts, the newest unread delivery up to the watermark and the unread
// mail after it, so there is no moment between them for the inbox to
// move; the rows are folded off the request path.
func (s *Store) MarkAllRead(ctx context.Context, through string, includeRoles bool) (mailroom.DrainReceipt, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.DrainReceipt{}, err
	}
	// JSON arrays of delivery ids: personal, and role deliveries.
	personal, role := "[]", "[]"
	var nPersonal int
	rc := mailroom.DrainReceipt{Failures: []mailroom.Failure{}}
	var rolesTouched []string
	rolesJSON := "[]" // the roles held, for a drain by a mark's role snapshot
	limit := int64(-1)
	// byMark: the drain may be a mark (markWhole says when it is). Not
	// with the test hooks that put a failure into each item's write or
	// an event between snapshot and marking: the mark has neither.
	byMark := s.hooks.FailMark == nil && s.hooks.AfterSnapshot == nil
	err = s.read(ctx, func(tx *ptx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		if includeRoles {
			rolesTouched = roles
		}
		rj := jsonStrings(roles)
		if through != "" {
			t, err := resolve(ctx, tx, me, rj, through)
			if err != nil {
				return err
			}
			limit = t.seq
		}
		rc.SnapshotAt = tx.now()
		// The snapshot: one query per inbox branch, role deliveries only
		// when asked; the withheld ones are only counted.
		unread := " AND d.read_at IS NULL AND d.archived_at IS NULL AND (?3 < 0 OR d.message_seq <= ?3)"
		branches := inboxBranches(unread, "")
		if !includeRoles && len(roles) > 0 {
			// Counted, not walked: all unread role mail, less what came
			// after the watermark (the queue's newest few).
			const unreadAll = ` AND d.read_at IS NULL AND d.archived_at IS NULL`
			newer := inboxBranches(unreadAll+` AND ?3 >= 0 AND d.message_seq > ?3`, "")[1]
			if err := tx.QueryRowContext(ctx, `SELECT `+roleTotal(` AND archived = 0 AND unread = 1`, unreadAll, "")+` - (SELECT count(*) FROM (`+newer+`))`,
				me.ID, rj, limit).Scan(&rc.WithheldRoleCount); err != nil {
				return err
			}
		}
		if byMark {
			// The role snapshot of a drain by a mark is taken in its
			// write transaction, with the mark: one snapshot. So is a
			// drain's with roles held, whose role queues may be marks
			// (drainRoles): the personal part is then marked from a
			// snapshot taken there too when it cannot be a mark. So is
			// the drain's of a caller with a mark, which the write
			// transaction may leave to the folder (markLeft) rather
			// than fold in the request.
			n, _, ok, err := markWhole(ctx, tx, me.ID, limit)
			if err != nil {
				return err
			}
			// So is the drain's when the clock is behind stored mail
			// (it stepped back): a snapshot taken in the read is marked
			// only where delivered from before its time (markPersonal),
			// which would leave out the mail from "later". One
			// statement asks for the mark and the clock.
			var hasMark, behind bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM read_mark WHERE recipient_id = ?1), `+clockBehind,
				me.ID, ts(rc.SnapshotAt)).Scan(&hasMark, &behind); err != nil {
				return err
			}
			if ok || len(rolesTouched) > 0 || hasMark || behind {
				nPersonal = max(n, 0)
				rc.MatchedCount += nPersonal
				rolesJSON = rj
				if len(rolesTouched) > 0 {
					// What the write will find, counted, not walked: only
					// so that a drain with nothing to read writes nothing.
					const unreadAll = ` AND d.read_at IS NULL AND d.archived_at IS NULL`
					newer := inboxBranches(unreadAll+` AND ?3 >= 0 AND d.message_seq > ?3`, "")[1]
					var nr int
					if err := tx.QueryRowContext(ctx, `SELECT `+roleTotal(` AND archived = 0 AND unread = 1`, unreadAll, "")+` - (SELECT count(*) FROM (`+newer+`))`,
						me.ID, rj, limit).Scan(&nr); err != nil {
						return err
					}
					rc.MatchedCount += nr
				}
				return nil
			}
			byMark = false
		}
		if includeRoles {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(json_group_array(did), '[]') FROM (`+branches[1]+`)`, me.ID, rj, limit).Scan(&n, &role); err != nil {
				return err
			}
			rc.MatchedCount += n
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(json_group_array(did), '[]') FROM (`+branches[0]+`)`, me.ID, rj, limit).Scan(&nPersonal, &personal); err != nil {
			return err
		}
		rc.MatchedCount += nPersonal
		return nil
	})
	if err != nil {
		return mailroom.DrainReceipt{}, err
	}
	if rc.MatchedCount == 0 {
		rc.Settle(s.durable)
		return rc, nil
	}
	if s.hooks.AfterSnapshot != nil {
		s.hooks.AfterSnapshot()
	}
	var mark readMark    // the mark written, if any
	var newer int        // unread mail after its watermark it left
	var marks []roleMark // the role marks written
	markedPersonal, markedRole := personal, role
	// What this drain's write read (made read), personal and role rows
	// apart: a message of the snapshot that another call read between
	// the drain's read and its write is that call's, not this drain's, so
	// that concurrent drains count each message once.
	var readPersonal, readRole int
	var at string // the drain's readAt
	err = s.write(ctx, func(tx *ptx) error {
		tx.touch([]int64{me.ID}, rolesTouched)
		rc.Failures = rc.Failures[:0]
		mark, marks = readMark{}, nil
		readPersonal, readRole, at = 0, 0, ""
		// One mark per recipient: a second drain folds what is left of
		// the first one when that is at most a chunk; with more left it
		// marks its own mail by rows (the snapshot below, taken here,
		// leaves out what the mark covers) and leaves the fold to the
		// folder, so it pays for what it reads, not for the first drain.
		// (A drain with a test hook folds it, as before.)
		left := false
		if byMark {
			var err error
			if left, err = markLeft(ctx, tx, me.ID, s.foldChunk); err != nil {
				return err
			}
		}
		if !left {
			if err := foldNow(ctx, tx, me.ID); err != nil {
				return err
			}
		}
		markedPersonal, markedRole = personal, role
		n := nPersonal
		byMarkDone := false
		if byMark {
			if !left {
				var err error
				if mark, n, newer, byMarkDone, err = writeMark(ctx, tx, me.ID, limit); err != nil {
					return err
				}
			}
			unread := " AND d.read_at IS NULL AND d.archived_at IS NULL AND (?3 < 0 OR d.message_seq <= ?3)"
			if byMarkDone {
				rc.SnapshotAt = parseTS(mark.at)
				at = mark.at // one drain, one readAt
				readPersonal = n
			} else {
				// The inbox moved since the read (or the drain holds
				// roles): the snapshot is taken here, and marked row by
				// row.
				if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(json_group_array(did), '[]') FROM (`+inboxBranches(unread, "")[0]+`)`, me.ID, "[]", limit).Scan(&n, &markedPersonal); err != nil {
					return err
				}
				// One reading of the clock: readAt is snapshotAt.
				at = ts(tx.now())
				rc.SnapshotAt = parseTS(at)
			}
			if len(rolesTouched) > 0 {
				// The role queues' share, from the same snapshot: a
				// role mark per queue where it can be one, rows for
				// the rest.
				nr, ids, ks, err := drainRoles(ctx, tx, me.ID, rolesTouched, rolesJSON, limit, at, s.foldChunk)
				if err != nil {
					return err
				}
				readRole = nr
				markedRole, marks = ids, ks
			}
		}
		if s.hooks.FailMark != nil {
			var err error
			if markedPersonal, err = s.failMarks(ctx, tx, personal, &rc); err != nil {
				return err
			}
			n -= len(rc.Failures)
			if markedRole, err = s.failMarks(ctx, tx, role, &rc); err != nil {
				return err
			}
		}
		if !byMark {
			// The snapshot's time, taken in the read: readAt is
			// snapshotAt, as on the paths above.
			at = ts(rc.SnapshotAt)
			rc.SnapshotAt = parseTS(at)
		}
		// Deliveries of a snapshot taken in the read are those from
		// before its time (markPersonal); one taken here has no such
		// bound.
		before := at
		if byMark {
			before = anyTime
		}
		if markedRole != "[]" {
			k, err := markRoles(ctx, tx, me.ID, at, before, markedRole)
			if err != nil {
				return err
			}
			readRole += k
		}
		if byMarkDone {
			return nil
		}
		ok, k, err := markAllCounted(ctx, tx, me.ID, at, before, markedPersonal, n)
		if !ok && err == nil {
			k, err = markCounted(ctx, tx, me.ID, at, before, markedPersonal)
		}
		readPersonal = k
		return err
	})
	if err != nil {
		return mailroom.DrainReceipt{}, err
	}
	rc.ReadCount = readPersonal + readRole
	rc.MatchedCount = rc.ReadCount + len(rc.Failures)
	if s.durable {
		// Evidence, not intent: count what storage holds now, of the rows
		// this drain's write read (those with its readAt, and for role
		// rows its reader; at most what it read, should another drain
		// have written the same instant). The list drives the join (a
		// seek by id each), with no temporary index built over it as id
		// IN (...) would.
		for _, m := range []struct {
			ids, cond string
			read      int
		}{{markedPersonal, `d.read_at = ?2`, readPersonal}, {markedRole, `d.read_at = ?2 AND d.read_by = ?3`, readRole}} {
			if m.ids == "[]" || m.read == 0 {
				continue
			}
			var n int
			err := s.db.QueryRowContext(ctx, `SELECT min(?4, count(*)) FROM json_each(?1) j JOIN delivery d ON d.id = j.value WHERE `+m.cond, m.ids, at, me.ID, m.read).Scan(&n)
			if err != nil {
				return mailroom.DrainReceipt{}, err
			}
			rc.DurableCount += n
		}
		if mark.at != "" {
			n, err := s.markedCount(ctx, mark)
			if err != nil {
				return mailroom.DrainReceipt{}, err
			}
			rc.DurableCount += n
		}
		for _, k := range marks {
			n, err := s.roleMarkedCount(ctx, k)
			if err != nil {
				return mailroom.DrainReceipt{}, err
			}
			rc.DurableCount += n
		}
	}
	if len(marks) > 0 {
		s.roleMarks.Add(int64(len(marks)))
		s.wakeFolder()
	}
	if mark.at != "" {
		s.marks.Add(1)
		if newer > 0 {
			s.marksOver.Add(1)
		}
		s.wakeFolder()
	}
	rc.Settle(s.durable)
	return rc, nil
}

// markWhole reports whether the caller's unread, unarchived personal
// deliveries at or below the watermark limit (-1 for none; n of them) are
// a drain's whole personal snapshot in a form a read-through mark marks
// exactly as row marking would: a mark through the newest of them covers
// every unread personal delivery at or below it, so none of those may be
// archived (a mark would read it, a drain leaves it), and the unread ones
// above it (newer, the mail that came after the watermark) stay unread
// and keep their counts (writeMark moves them back). All from counts and
// index ranges above the watermark: the archived unread ones at or below
// it are the caller's archived unread count less those above it. A drain
// with more newer unread than it marks is left to row marking, whose cost
// is the smaller side's.
func markWhole(ctx context.Context, tx *ptx, me, limit int64) (n, newer int, ok bool, err error) {
	var archived, archivedAbove int
	var newest sql.NullInt64
	// Unread above the watermark and the mark, one bound of the index
	// range (with two, SQLite bounds it by one and filters by the other).
	const above = `max(?2, ` + markedThroughOwner + `)`
	err = tx.QueryRowContext(ctx, `SELECT coalesce(sum(n) FILTER (WHERE archived = 0), 0), coalesce(sum(n) FILTER (WHERE archived = 1), 0),
			(SELECT max(d.message_seq) FROM delivery d WHERE d.recipient_id = ?1`+personalUnread(` AND d.read_at IS NULL`)+` AND d.archived_at IS NULL AND d.message_seq <= ?2),
			(SELECT count(*) FROM delivery d WHERE d.recipient_id = ?1 AND d.read_at IS NULL AND d.archived_at IS NULL AND d.message_seq > `+above+`),
			(SELECT count(*) FROM delivery d WHERE d.recipient_id = ?1 AND d.archived_at IS NOT NULL AND d.read_at IS NULL AND d.message_seq > `+above+`)
		FROM mailbox_count WHERE recipient_id = ?1 AND unread = 1`, me, upTo(limit)).Scan(&n, &archived, &newest, &newer, &archivedAbove)
	n -= newer
	if err != nil || archived != archivedAbove || n <= 0 || newer > n || !newest.Valid {
		return n, newer, false, err
	}
	return n, newer, true, nil
}

// upTo is the largest seq a drain through the watermark limit (-1 for
// none) reaches, as a bound of an index range.
func upTo(limit int64) int64 {
	if limit < 0 {
		return math.MaxInt64
	}
	return limit
}

// writeMark is the drain by a mark, inside the write transaction: when
// markWhole holds here (the caller has no mark now: the drain folded it),
// it writes the mark through the newest unread delivery at or below the
// watermark limit, so mail committed later (a larger seq) and mail after
// the watermark stay unread, and moves the caller's unread counts to read
// as markAllCounted does, less the newer deliveries', which it moves back.
func writeMark(ctx context.Context, tx *ptx, me, limit int64) (readMark, int, int, bool, error) {
	n, newer, ok, err := markWhole(ctx, tx, me, limit)
	if err != nil || !ok {
		return readMark{}, n, 0, false, err
	}
	k := readMark{recipient: me, at: ts(tx.now())}
	if err := tx.QueryRowContext(ctx, `SELECT max(message_seq) FROM delivery WHERE recipient_id = ?1 AND read_at IS NULL AND archived_at IS NULL AND message_seq <= ?2`, me, upTo(limit)).Scan(&k.through); err != nil {
		return readMark{}, 0, 0, false, err
	}
	// The newer unread deliveries: above the mark, so unread before and
	// after it; their counts go out before the move and back after.
	const newerIDs = `IN (SELECT id FROM delivery WHERE recipient_id = ? AND message_seq > ? AND read_at IS NULL AND archived_at IS NULL)`
	if newer > 0 {
		if err := personalCounter().out(ctx, tx, newerIDs, me, k.through); err != nil {
			return readMark{}, 0, 0, false, err
		}
	}
	if err := moveUnreadToRead(ctx, tx, me); err != nil {
		return readMark{}, 0, 0, false, err
	}
	if newer > 0 {
		if err := personalCounter().in(ctx, tx, newerIDs, me, k.through); err != nil {
			return readMark{}, 0, 0, false, err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO read_mark (recipient_id, through_seq, at) VALUES (?, ?, ?)`, me, k.through, k.at); err != nil {
		return readMark{}, 0, 0, false, err
	}
	return k, n, newer, true, nil
}

// markedCount is a drain's durable count by mark k, read back after
// commit: the deliveries its mark covers now, and those a fold has
// already given its at (none until the folder is woken, unless the mark
// was folded meanwhile by another write).
func (s *Store) markedCount(ctx context.Context, k readMark) (int, error) {
	var covered, folded int
	err := s.read(ctx, func(tx *ptx) error {
		now, ok, err := markOf(ctx, tx, k.recipient)
		if err != nil {
			return err
		}
		foldedTo := k.through
		if ok && now.at == k.at {
			foldedTo = now.folded
			// Unarchived covered rows are an index range of
			// delivery_unread; archived ones (archived since the drain)
			// a range of delivery_archived.
			if err := tx.QueryRowContext(ctx, `SELECT
					(SELECT count(*) FROM delivery WHERE recipient_id = ?1 AND message_seq > ?2 AND message_seq <= ?3 AND read_at IS NULL AND archived_at IS NULL)
					+ (SELECT count(*) FROM delivery WHERE recipient_id = ?1 AND message_seq > ?2 AND message_seq <= ?3 AND archived_at IS NOT NULL AND read_at IS NULL)`,
				k.recipient, now.folded, now.through).Scan(&covered); err != nil {
				return err
			}
		}
		if foldedTo > 0 {
			return tx.QueryRowContext(ctx, `SELECT count(*) FROM delivery WHERE recipient_id = ?1 AND message_seq <= ?2 AND read_at = ?3`,
				k.recipient, foldedTo, k.at).Scan(&folded)
		}
		return nil
	})
	return covered + folded, err
}

// markAllCounted is the drain's marking when its snapshot of personal
// deliveries (n delivery ids, JSON in marked) may be every unread,
// unarchived personal delivery of the caller (as many as the caller's
// count says): it marks them and, when it marked n, moves the caller's
// unread counts to read in two statements. Marking n means the snapshot
// was that whole set: it marks only unread, unarchived deliveries of the
// caller, and there are n. When the inbox moved under the drain (a read and
// an arrival since the snapshot) it marks what is left of the snapshot as
// markCounted would and recounts the caller's mailbox. It reports false,
// having changed nothing, when the counts already say the snapshot is not
// the whole unread set (mail arrived since, or the drain stops at a
// watermark): then markCounted marks it.
//
// Not a savepoint to try and roll back: it copied every page the UPDATE
// touched into the statement journal, a quarter more on a drain of 100,000.
func markAllCounted(ctx context.Context, tx *ptx, me int64, at, before, marked string, n int) (ok bool, read int, err error) {
	var unread int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0) FROM mailbox_count WHERE recipient_id = ? AND archived = 0 AND unread = 1`, me).Scan(&unread); err != nil {
		return false, 0, err
	}
	if unread != n || n == 0 {
		return false, 0, nil
	}
	// By id, as markCounted: + keeps delivery_unread out of the plan.
	res, err := tx.ExecContext(ctx, markPersonal+` AND archived_at IS NULL AND +recipient_id = ?2`, at, me, marked, before)
	if err != nil {
		return false, 0, err
	}
	if done, _ := res.RowsAffected(); int(done) != n {
		res, err := tx.ExecContext(ctx, markPersonal, at, me, marked, before)
		if err != nil {
			return false, 0, err
		}
		more, _ := res.RowsAffected()
		return true, int(done + more), recount(ctx, tx, me)
	}
	return true, n, moveUnreadToRead(ctx, tx, me)
}

// moveUnreadToRead moves the caller's unread, unarchived personal counts
// to read, in two statements.
func moveUnreadToRead(ctx context.Context, tx *ptx, me int64) error {
	for _, q := range []string{
		`INSERT INTO mailbox_count (recipient_id, archived, unread, via, priority, human, n, seqs)
			SELECT recipient_id, 0, 0, via, priority, human, n, seqs FROM mailbox_count WHERE recipient_id = ?1 AND archived = 0 AND unread = 1 AND n > 0
			ON CONFLICT DO UPDATE SET n = n + excluded.n, seqs = seqs + excluded.seqs`,
		`UPDATE mailbox_count SET n = 0, seqs = 0 WHERE recipient_id = ?1 AND archived = 0 AND unread = 1`,
	} {
		if _, err := tx.ExecContext(ctx, q, me); err != nil {
			return err
		}
	}
	return nil
}

// markRoles marks the role deliveries listed in ids (JSON) read at at by
// me (who read a role delivery is shown), those still unread (another
// holder may have read one since the snapshot), as the single-id path
// would. Each of them moves from its queue's unread count to the read one
// under the same other keys, so the counts move by key in one pass over
// them, before the marking (countOut and countIn would take a pass each).
func markRoles(ctx context.Context, tx *ptx, me int64, at, before, ids string) (int, error) {
	if _, err := tx.ExecContext(ctx, `WITH k (role, archived, priority, human, n, seqs) AS (
			SELECT d.role, d.archived_at IS NOT NULL, m.priority, s.kind = 'human', count(*), sum(d.message_seq)
			FROM json_each(?1) j CROSS JOIN delivery d ON d.id = j.value JOIN message m ON m.seq = d.message_seq JOIN identity s ON s.id = m.sender_id
			WHERE d.role IS NOT NULL AND `+roleUnreadD+` AND d.delivered_at <= ?2 GROUP BY 1, 2, 3, 4)
		INSERT INTO role_count (role, archived, unread, priority, human, n, seqs)
			SELECT k.role, k.archived, u.unread, k.priority, k.human, CASE WHEN u.unread THEN -k.n ELSE k.n END, CASE WHEN u.unread THEN -k.seqs ELSE k.seqs END
			FROM k CROSS JOIN (SELECT 1 AS unread UNION ALL SELECT 0) u WHERE 1
		ON CONFLICT DO UPDATE SET n = n + excluded.n, seqs = seqs + excluded.seqs`, ids, before); err != nil {
		return 0, err
	}
	// Delivered at or before before only, as markPersonal.
	res, err := tx.ExecContext(ctx, `UPDATE delivery SET read_at = ?1, read_by = ?2 WHERE id IN (SELECT value FROM json_each(?3)) AND role IS NOT NULL AND read_at IS NULL
		AND message_seq > `+roleMarkOf(`delivery.role`)+` AND delivered_at <= ?4`, at, me, ids, before)
	if err != nil {
		return 0, err
	}
	k, err := res.RowsAffected()
	return int(k), err
}

// markPersonal marks the personal deliveries listed in ?3 (JSON ids) read
// at ?1 (?2, the caller, is for conditions appended to it). It leaves read_by
// alone: a personal delivery is read only by its recipient, so read_by is
// kept for role deliveries only (see marker). Setting it would cost the
// drain a third: a foreign-key column in SET makes SQLite check each row's
// parent and run the UPDATE in two passes (collect the rowids, then seek
// each again). Only deliveries from at or before ?4: a purge between a
// drain's snapshot in its read and its write may free the ids of the
// newest deliveries, and a message sent then reuses them (a rowid is the
// largest plus one); that message is not the snapshot's. ?4 is then the
// snapshot's time; for a snapshot taken in the write itself (no purge
// between) it is anyTime, so that a clock that stepped back since a
// delivery does not hide it from the drain; a drain whose clock is behind
// stored mail takes its snapshot there (clockBehind), unless a test hook
// wants the snapshot in the read.
const markPersonal = `UPDATE delivery SET read_at = ?1 WHERE id IN (SELECT value FROM json_each(?3)) AND read_at IS NULL AND delivered_at <= ?4`

// anyTime is later than every stored time (the fixed-width timeFormat).
const anyTime = "9999-12-31T23:59:59.999999Z"

// clockBehind is "some stored message is from after ?2" (now): the
// store's clock stepped back since (an NTP step, a VM restored), and a
// time bound from now would leave out that mail. A delivery's delivered_at
// is its message's created_at (send.go, bulk.go), so one probe of
// message_created answers for every delivery.
const clockBehind = `EXISTS (SELECT 1 FROM message WHERE created_at > ?2)`

// markCounted marks the snapshot's personal deliveries (JSON ids in
// marked) read, taking them out of their counts first and putting them
// back after.
func markCounted(ctx context.Context, tx *ptx, me int64, at, before, marked string) (int, error) {
	if marked == "[]" {
		return 0, nil
	}
	const in = `IN (SELECT value FROM json_each(?))`
	if err := personalCounter().out(ctx, tx, in, marked); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, markPersonal, at, me, marked, before)
	if err != nil {
		return 0, err
	}
	k, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return int(k), personalCounter().in(ctx, tx, in, marked)
}

// failMarks runs the FailMark test hook over each snapshot item, as the
// single-id path would meet a storage failure: a failing id is reported
// and left out of the marking. It returns the delivery ids left to mark.
func (s *Store) failMarks(ctx context.Context, tx *ptx, snap string, rc *mailroom.DrainReceipt) (string, error) {
	var dids []int64
	if err := json.Unmarshal([]byte(snap), &dids); err != nil {
		return "", err
	}
	keep := dids[:0]
	for _, did := range dids {
		var id string
		if err := tx.QueryRowContext(ctx, `SELECT m.id FROM delivery d JOIN message m ON m.seq = d.message_seq WHERE d.id = ?`, did).Scan(&id); err != nil {
			id = fmt.Sprintf("MESSAGE(delivery %d, id unreadable: %v)", did, err)
		}
		if err := s.hooks.FailMark(id); err != nil {
			rc.Failures = append(rc.Failures, mailroom.Failure{MessageID: id, Error: markFailure(s, id, err).Error})
			continue
		}
		keep = append(keep, did)
	}
	return jsonInts(keep), nil
}

func jsonInts(list []int64) string {
	b := make([]byte, 0, len(list)*8+2)
	b = append(b, '[')
	for i, v := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, itoa(int(v))...)
	}
	return string(append(b, ']'))
}

// drainRoles is the role queues' share of a drain by me holding roles (rj,
// the same as JSON) through the watermark limit, inside its write
// transaction, with the drain's readAt at: each role's by a mark when it
// can be one (drainRoleByMark), after folding the role's earlier mark (one
// mark per role) when at most chunk of its deliveries are left to fold;
// the rest from a snapshot of their branches, whose ids
// (JSON) it returns for markRoles. n is how many its marks read.
func drainRoles(ctx context.Context, tx *ptx, me int64, roles []string, rj string, limit int64, at string, chunk int) (n int, ids string, marks []roleMark, err error) {
	var rest []int
	for i, r := range roles {
		// A role mark with more than a chunk left to fold stays for the
		// folder; the role's mail above it is marked by rows (the
		// branch leaves out what the mark covers).
		if left, err := roleMarkLeft(ctx, tx, r, chunk); err != nil {
			return 0, "", nil, err
		} else if left {
			rest = append(rest, i)
			continue
		}
		if err := foldRoleNow(ctx, tx, r); err != nil {
			return 0, "", nil, err
		}
		k, nr, partial, ok, err := drainRoleByMark(ctx, tx, me, rj, r, limit, at)
		if err != nil {
			return 0, "", nil, err
		}
		if ok {
			marks = append(marks, k)
			n += nr
		}
		if !ok || partial {
			rest = append(rest, i)
		}
	}
	ids = "[]"
	if len(rest) == 0 {
		return n, ids, marks, nil
	}
	// One branch per role left, each with the branch's own rule of which
	// role shows a message (perRole), so no message is marked twice, and
	// above the role's mark, if it has one now (the branch consults it).
	const unread = " AND d.read_at IS NULL AND d.archived_at IS NULL AND (?3 < 0 OR d.message_seq <= ?3)"
	per := perRole(inboxBranches(unread, "")[1], len(roles))
	parts := make([]string, len(rest))
	for j, i := range rest {
		parts[j] = per[i]
	}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(json_group_array(did), '[]') FROM (`+strings.Join(parts, " UNION ALL ")+`)`,
		me, rj, limit).Scan(&ids); err != nil {
		return 0, "", nil, err
	}
	return n, ids, marks, nil
}
