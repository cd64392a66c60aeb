-- Counts of every recipient's personal deliveries (direct and broadcast) by
-- the keys mailbox_status and list_messages count by, so that a count is a
-- sum over a few rows instead of a pass over the mailbox, kept inside the
-- transaction that changes a delivery: triggers count every insert (send,
-- bulk send) and delete (delete, purge). Changes of read or archived state
-- are counted by the store's update paths (sqlite/counts.go), not by a
-- trigger: a trigger program run per updated row cost a drain of 100,000
-- as much again as its UPDATE. Role deliveries are shared by a role's
-- holders and are not counted here.
CREATE TABLE mailbox_count (
	recipient_id INTEGER NOT NULL,
	archived     INTEGER NOT NULL,   -- archived_at IS NOT NULL
	unread       INTEGER NOT NULL,   -- read_at IS NULL
	via          TEXT NOT NULL,      -- direct, broadcast
	priority     TEXT NOT NULL,      -- the message's
	human        INTEGER NOT NULL,   -- the sender is a human
	n            INTEGER NOT NULL,
	PRIMARY KEY (recipient_id, archived, unread, via, priority, human)
) WITHOUT ROWID;

INSERT INTO mailbox_count (recipient_id, archived, unread, via, priority, human, n)
	SELECT d.recipient_id, d.archived_at IS NOT NULL, d.read_at IS NULL, d.via, m.priority, s.kind = 'human', count(*)
	FROM delivery d JOIN message m ON m.seq = d.message_seq JOIN identity s ON s.id = m.sender_id
	WHERE d.recipient_id IS NOT NULL
	GROUP BY 1, 2, 3, 4, 5, 6;

CREATE TRIGGER delivery_count_insert AFTER INSERT ON delivery WHEN NEW.recipient_id IS NOT NULL
BEGIN
	INSERT INTO mailbox_count (recipient_id, archived, unread, via, priority, human, n)
		SELECT NEW.recipient_id, NEW.archived_at IS NOT NULL, NEW.read_at IS NULL, NEW.via, m.priority, s.kind = 'human', 1
		FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = NEW.message_seq
		ON CONFLICT DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER delivery_count_delete AFTER DELETE ON delivery WHEN OLD.recipient_id IS NOT NULL
BEGIN
	UPDATE mailbox_count SET n = n - 1
		WHERE recipient_id = OLD.recipient_id AND archived = (OLD.archived_at IS NOT NULL) AND unread = (OLD.read_at IS NULL) AND via = OLD.via
		AND (priority, human) = (SELECT m.priority, s.kind = 'human' FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = OLD.message_seq);
END;
