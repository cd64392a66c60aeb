package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mailroom/mailroom"
)

// inboxCTE defines vis(seq, did): the caller's inbox, one delivery per
// message. Parameters: ?1 the caller's id, ?2 the caller's roles (JSON). A
// personal delivery wins over a role one; among roles, the oldest delivery;
// a role message is not in its own sender's inbox.
const inboxCTE = `roles(role) AS (SELECT value FROM json_each(?2)),
vis(seq, did) AS (
	SELECT message_seq, id FROM delivery WHERE recipient_id = ?1
	UNION ALL
	SELECT d.message_seq, d.id FROM delivery d JOIN message m ON m.seq = d.message_seq
	WHERE d.role IN roles AND m.sender_id <> ?1
		AND NOT EXISTS (SELECT 1 FROM delivery p WHERE p.recipient_id = ?1 AND p.message_seq = d.message_seq)
		AND NOT EXISTS (SELECT 1 FROM delivery o WHERE o.message_seq = d.message_seq AND o.role IN roles AND o.id < d.id)
)`

// rowColumns reads a message row as the caller sees it, from box b (seq,
// did), message m and the caller's delivery d.
const rowColumns = `m.id, m.subject,
	(SELECT CASE s.kind WHEN 'human' THEN 'human:' || s.name ELSE '@' || s.name END FROM identity s WHERE s.id = m.sender_id),
	(SELECT json_group_array(address) FROM (SELECT address FROM message_to WHERE message_seq = m.seq ORDER BY position)),
	m.priority, m.created_at, d.read_at, d.archived_at, m.thread_id, m.retracted,
	CASE WHEN d.role IS NOT NULL THEN (SELECT CASE r.kind WHEN 'human' THEN 'human:' || r.name ELSE '@' || r.name END FROM identity r WHERE r.id = d.read_by) END`

func scanRow(sc interface{ Scan(...any) error }) (mailroom.Row, error) {
	var (
		r                mailroom.Row
		to               string
		sent             string
		readAt, archived sql.NullString
		readBy           sql.NullString
	)
	err := sc.Scan(&r.MessageID, &r.Subject, &r.From, &to, &r.Priority, &sent, &readAt, &archived, &r.ThreadID, &r.Retracted, &readBy)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(to), &r.To); err != nil {
		return r, err
	}
	r.SentAt = parseTS(sent)
	r.ReadAt, r.ArchivedAt = parseNullTS(readAt), parseNullTS(archived)
	if readBy.Valid {
		r.ReadBy = &readBy.String
	}
	return r, nil
}

// List answers list_messages with one query for the page, one for the
// total and one for the watermark, in one read snapshot.
func (s *Store) List(ctx context.Context, f mailroom.ListFilter) (mailroom.Page, error) {
	me, err := mailroom.CallerFrom(ctx)
	if err != nil {
		return mailroom.Page{}, err
	}
	page := mailroom.Page{Messages: []mailroom.Row{}}
	err = s.read(ctx, func(tx *sql.Tx) error {
		roles, err := rolesOf(ctx, tx, me)
		if err != nil {
			return err
		}
		args := []any{me.ID, jsonStrings(roles)}
		var box string
		switch f.Box {
		case mailroom.BoxInbox:
			box = `SELECT seq, did FROM vis`
		case mailroom.BoxOutbox:
			box = `SELECT seq, NULL FROM message WHERE sender_id = ?1`
		default:
			box = `SELECT seq, did FROM vis UNION ALL
				SELECT m.seq, NULL FROM message m WHERE m.sender_id = ?1 AND NOT EXISTS (SELECT 1 FROM vis WHERE vis.seq = m.seq)`
		}
		var where []string
		if !f.IncludeArchived {
			where = append(where, `d.archived_at IS NULL`)
		}
		if f.UnreadOnly {
			where = append(where, `b.did IS NOT NULL AND d.read_at IS NULL`)
		}
		if f.ThreadID != "" {
			args = append(args, f.ThreadID)
			where = append(where, `m.thread_id = ?`+itoa(len(args)))
		}
		if f.FromMe {
			where = append(where, `m.sender_id = ?1`)
		} else if f.FromName != "" {
			id, err := identityByName(ctx, tx, f.FromName)
			if err != nil || (f.FromKind != "" && id.Kind != f.FromKind) {
				if err == nil || mailroom.ErrorCode(err) == mailroom.ENOTFOUND {
					return mailroom.Errorf(mailroom.EINVALID, "from: unknown identity %s", refString(f.FromName, f.FromKind))
				}
				return err
			}
			args = append(args, id.ID)
			where = append(where, `m.sender_id = ?`+itoa(len(args)))
		}
		if f.To != "" {
			args = append(args, f.To)
			where = append(where, `EXISTS (SELECT 1 FROM message_to t WHERE t.message_seq = m.seq AND t.address = ?`+itoa(len(args))+`)`)
		}
		if f.QueryEmpty {
			where = append(where, `0`)
		} else if f.Query != "" {
			args = append(args, f.Query)
			where = append(where, `m.seq IN (SELECT rowid FROM message_fts WHERE message_fts MATCH ?`+itoa(len(args))+`)`)
		}
		for _, c := range f.Concepts {
			args = append(args, c)
			where = append(where, `EXISTS (SELECT 1 FROM message_concept c WHERE c.message_seq = m.seq AND c.concept_id = ?`+itoa(len(args))+`)`)
		}
		cond := ""
		if len(where) > 0 {
			cond = " WHERE " + strings.Join(where, " AND ")
		}
		from := ` FROM box b JOIN message m ON m.seq = b.seq LEFT JOIN delivery d ON d.id = b.did` + cond
		with := `WITH ` + inboxCTE + `, box(seq, did) AS (` + box + `) `

		if err := tx.QueryRowContext(ctx, with+`SELECT count(*)`+from, args...).Scan(&page.TotalCount); err != nil {
			return err
		}
		if f.Offset < page.TotalCount {
			rows, err := tx.QueryContext(ctx, with+`SELECT `+rowColumns+from+` ORDER BY b.seq DESC LIMIT ?`+itoa(len(args)+1)+` OFFSET ?`+itoa(len(args)+2),
				append(args, f.Limit, f.Offset)...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				r, err := scanRow(rows)
				if err != nil {
					return err
				}
				page.Messages = append(page.Messages, r)
			}
			if err := rows.Err(); err != nil {
				return err
			}
		}
		var wm sql.NullString
		err = tx.QueryRowContext(ctx, `WITH `+inboxCTE+` SELECT m.id FROM message m WHERE m.seq = (SELECT max(seq) FROM vis)`, me.ID, jsonStrings(roles)).Scan(&wm)
		if err != nil && !isNoRows(err) {
			return err
		}
		if wm.Valid {
			page.Watermark = &wm.String
		}
		return nil
	})
	if err != nil {
		return mailroom.Page{}, err
	}
	page.NextOffset = mailroom.NextOffsetFor(f.Offset, len(page.Messages), page.TotalCount)
	return page, nil
}

func refString(name string, kind mailroom.Kind) string {
	if kind == mailroom.KindHuman {
		return "human:" + name
	}
	return "@" + name
}

func jsonStrings(list []string) string {
	if list == nil {
		list = []string{}
	}
	b, _ := json.Marshal(list)
	return string(b)
}

func itoa(i int) string { return strconv.Itoa(i) }
