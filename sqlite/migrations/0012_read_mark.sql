-- A drain of a whole inbox by a read-through mark (issue 13): rewriting
-- every delivery row of a 100,000-message drain costs at least 0.23 s of
-- CPU here, so a drain of a caller's whole unread, unarchived personal set
-- writes one row instead. A recipient's personal deliveries with
-- message_seq <= through_seq and read_at IS NULL are read, at `at`
-- (sqlite/mark.go). Every reader of personal read state consults it; the
-- store folds a mark into the rows (read_at = at) off the request path, in
-- chunks, and deletes it. folded is how far the fold has got: rows at or
-- below it carry read_at already.
CREATE TABLE read_mark (
	recipient_id INTEGER PRIMARY KEY,
	through_seq  INTEGER NOT NULL,
	at           TEXT NOT NULL,
	folded       INTEGER NOT NULL DEFAULT 0
);

-- The count triggers of 0011, with a covered delivery counted as read.
-- (An insert is never covered while seqs grow, sqlite/mark.go; counted
-- the same way all the same, so counts always agree with what is shown.)
DROP TRIGGER IF EXISTS delivery_count_insert;
DROP TRIGGER IF EXISTS delivery_count_delete;

CREATE TRIGGER delivery_count_insert AFTER INSERT ON delivery WHEN NEW.recipient_id IS NOT NULL
BEGIN
	INSERT INTO mailbox_count (recipient_id, archived, unread, via, priority, human, n, seqs)
		SELECT NEW.recipient_id, NEW.archived_at IS NOT NULL,
			NEW.read_at IS NULL AND NEW.message_seq > coalesce((SELECT k.through_seq FROM read_mark k WHERE k.recipient_id = NEW.recipient_id), 0),
			NEW.via, m.priority, s.kind = 'human', 1, NEW.message_seq
		FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = NEW.message_seq
		ON CONFLICT DO UPDATE SET n = n + 1, seqs = seqs + excluded.seqs;
END;

CREATE TRIGGER delivery_count_delete AFTER DELETE ON delivery WHEN OLD.recipient_id IS NOT NULL
BEGIN
	UPDATE mailbox_count SET n = n - 1, seqs = seqs - OLD.message_seq
		WHERE recipient_id = OLD.recipient_id AND archived = (OLD.archived_at IS NOT NULL)
		AND unread = (OLD.read_at IS NULL AND OLD.message_seq > coalesce((SELECT k.through_seq FROM read_mark k WHERE k.recipient_id = OLD.recipient_id), 0))
		AND via = OLD.via
		AND (priority, human) = (SELECT m.priority, s.kind = 'human' FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = OLD.message_seq);
END;
