-- A drain of a role queue by a read-through mark (issue 13): rewriting the
-- role rows of a 100,000-message includeRoles drain costs ~0.9 s of CPU
-- here, so when a drainer's branch shows every unread, unarchived delivery
-- of a role up to the drain's end and none of them is archived, the drain
-- writes one row instead. The role's deliveries with message_seq <=
-- through_seq and read_at IS NULL are read at `at` by read_by (a role
-- delivery's read state is its holders' shared state, sqlite/mark.go).
-- Every reader of role read state consults it; the store folds it into the
-- rows (read_at = at, read_by = read_by) off the request path, in chunks,
-- and deletes it. folded is how far the fold has got. No existing row
-- changes meaning: the table starts empty.
CREATE TABLE role_mark (
	role        TEXT PRIMARY KEY,
	through_seq INTEGER NOT NULL,
	at          TEXT NOT NULL,
	read_by     INTEGER NOT NULL,
	folded      INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- The role count triggers of 0011, with a covered delivery counted as read
-- (a purge deletes covered deliveries; an insert is never covered while
-- seqs grow, counted the same way all the same).
DROP TRIGGER IF EXISTS delivery_role_count_insert;
DROP TRIGGER IF EXISTS delivery_role_count_delete;

CREATE TRIGGER delivery_role_count_insert AFTER INSERT ON delivery WHEN NEW.role IS NOT NULL
BEGIN
	INSERT INTO role_count (role, archived, unread, priority, human, n, seqs)
		SELECT NEW.role, NEW.archived_at IS NOT NULL,
			NEW.read_at IS NULL AND NEW.message_seq > coalesce((SELECT rk.through_seq FROM role_mark rk WHERE rk.role = NEW.role), 0),
			m.priority, s.kind = 'human', 1, NEW.message_seq
		FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = NEW.message_seq
		ON CONFLICT DO UPDATE SET n = n + 1, seqs = seqs + excluded.seqs;
	INSERT OR IGNORE INTO role_hint (identity_id, message_seq)
		SELECT sender_id, seq FROM message WHERE seq = NEW.message_seq
		UNION ALL
		SELECT recipient_id, message_seq FROM delivery WHERE message_seq = NEW.message_seq AND recipient_id IS NOT NULL;
	INSERT OR IGNORE INTO role_later (role, message_seq)
		SELECT NEW.role, NEW.message_seq WHERE EXISTS
			(SELECT 1 FROM delivery o WHERE o.message_seq = NEW.message_seq AND o.role IS NOT NULL AND o.id < NEW.id);
END;

CREATE TRIGGER delivery_role_count_delete AFTER DELETE ON delivery WHEN OLD.role IS NOT NULL
BEGIN
	UPDATE role_count SET n = n - 1, seqs = seqs - OLD.message_seq
		WHERE role = OLD.role AND archived = (OLD.archived_at IS NOT NULL)
		AND unread = (OLD.read_at IS NULL AND OLD.message_seq > coalesce((SELECT rk.through_seq FROM role_mark rk WHERE rk.role = OLD.role), 0))
		AND (priority, human) = (SELECT m.priority, s.kind = 'human' FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = OLD.message_seq);
	DELETE FROM role_hint WHERE message_seq = OLD.message_seq;
	DELETE FROM role_later WHERE role = OLD.role AND message_seq = OLD.message_seq;
END;
