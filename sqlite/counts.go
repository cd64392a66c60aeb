package sqlite

import (
	"context"
	"database/sql"
)

// Changes of a personal delivery's read or archived state move it between
// mailbox_count rows (migration 0009). The update paths count them here,
// around their UPDATE: countOut takes the deliveries out under their old
// state, countIn puts them back under their new one. (Inserts and deletes
// are counted by triggers.)

// deliveryKeys selects the mailbox_count key and number of the personal
// deliveries whose id matches the condition that follows.
const deliveryKeys = `SELECT d.recipient_id AS recipient_id, d.archived_at IS NOT NULL AS archived, d.read_at IS NULL AS unread,
		d.via AS via, m.priority AS priority, s.kind = 'human' AS human, count(*) AS c
	FROM delivery d JOIN message m ON m.seq = d.message_seq JOIN identity s ON s.id = m.sender_id
	WHERE d.recipient_id IS NOT NULL AND d.id `

// countOut subtracts the deliveries matching idCond (e.g. "= ?") from
// their counts.
func countOut(ctx context.Context, tx *ptx, idCond string, args ...any) error {
	_, err := tx.ExecContext(ctx, `UPDATE mailbox_count SET n = n - k.c FROM (`+deliveryKeys+idCond+` GROUP BY 1, 2, 3, 4, 5, 6) AS k
		WHERE (mailbox_count.recipient_id, mailbox_count.archived, mailbox_count.unread, mailbox_count.via, mailbox_count.priority, mailbox_count.human) =
			(k.recipient_id, k.archived, k.unread, k.via, k.priority, k.human)`, args...)
	return err
}

// countIn adds the deliveries matching idCond to their counts.
func countIn(ctx context.Context, tx *ptx, idCond string, args ...any) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO mailbox_count (recipient_id, archived, unread, via, priority, human, n) `+
		deliveryKeys+idCond+` GROUP BY 1, 2, 3, 4, 5, 6 ON CONFLICT DO UPDATE SET n = n + excluded.n`, args...)
	return err
}

// countedUpdate runs update on the one delivery did, keeping its count.
func countedUpdate(ctx context.Context, tx *ptx, did int64, update string, args ...any) (sql.Result, error) {
	if err := countOut(ctx, tx, `= ?`, did); err != nil {
		return nil, err
	}
	res, err := tx.ExecContext(ctx, update, args...)
	if err != nil {
		return nil, err
	}
	return res, countIn(ctx, tx, `= ?`, did)
}

// recount counts the recipient's personal deliveries again from scratch:
// the one path that costs a pass over a mailbox, for a drain that raced
// other changes of the same inbox.
func recount(ctx context.Context, tx *ptx, recipient int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM mailbox_count WHERE recipient_id = ?`, recipient); err != nil {
		return err
	}
	return countIn(ctx, tx, `IN (SELECT id FROM delivery WHERE recipient_id = ?)`, recipient)
}
