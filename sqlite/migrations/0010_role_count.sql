-- Counts of role deliveries, so that a role holder's totalCount and
-- mailbox_status cost what the holder's own activity costs, not a pass
-- over the role's queue (0.1 s for a queue of 100,000).
--
-- A role delivery is in a holder's inbox unless the holder sent it (except
-- to its own next-session-of role), also got it personally, deleted it, or
-- sees it through an older delivery of the message to another role it
-- holds. So a holder's role count is the role_count rows of its roles, with
-- the deliveries that may be hidden from it, the candidates, counted again
-- exactly (sqlite/counts.go). The candidates are a superset kept at write
-- time: role_hint for the first three, role_later for the fourth
-- (deletions come from message_deleted). A stale candidate costs a lookup,
-- never a wrong count: every candidate is tested against the inbox's rule.

CREATE TABLE role_count (
	role     TEXT NOT NULL,
	archived INTEGER NOT NULL,   -- archived_at IS NOT NULL
	unread   INTEGER NOT NULL,   -- read_at IS NULL
	priority TEXT NOT NULL,      -- the message's
	human    INTEGER NOT NULL,   -- the sender is a human
	n        INTEGER NOT NULL,
	PRIMARY KEY (role, archived, unread, priority, human)
) WITHOUT ROWID;

-- Messages with a role delivery, for their sender and each personal
-- recipient.
CREATE TABLE role_hint (
	identity_id INTEGER NOT NULL,
	message_seq INTEGER NOT NULL,
	PRIMARY KEY (identity_id, message_seq)
) WITHOUT ROWID;
CREATE INDEX role_hint_message ON role_hint (message_seq);

-- Role deliveries that are not their message's first.
CREATE TABLE role_later (
	role        TEXT NOT NULL,
	message_seq INTEGER NOT NULL,
	PRIMARY KEY (role, message_seq)
) WITHOUT ROWID;

-- The oldest unread role mail of a holder (mailbox_status) without walking
-- the read part of the queue.
CREATE INDEX delivery_role_unread ON delivery (role, message_seq)
	WHERE role IS NOT NULL AND read_at IS NULL AND archived_at IS NULL;

INSERT INTO role_count (role, archived, unread, priority, human, n)
	SELECT d.role, d.archived_at IS NOT NULL, d.read_at IS NULL, m.priority, s.kind = 'human', count(*)
	FROM delivery d JOIN message m ON m.seq = d.message_seq JOIN identity s ON s.id = m.sender_id
	WHERE d.role IS NOT NULL
	GROUP BY 1, 2, 3, 4, 5;

INSERT OR IGNORE INTO role_hint (identity_id, message_seq)
	SELECT m.sender_id, m.seq FROM message m
	WHERE m.seq IN (SELECT message_seq FROM delivery WHERE role IS NOT NULL);
INSERT OR IGNORE INTO role_hint (identity_id, message_seq)
	SELECT p.recipient_id, p.message_seq FROM delivery p
	WHERE p.recipient_id IS NOT NULL AND p.message_seq IN (SELECT message_seq FROM delivery WHERE role IS NOT NULL);

INSERT INTO role_later (role, message_seq)
	SELECT d.role, d.message_seq FROM delivery d
	WHERE d.role IS NOT NULL AND EXISTS (SELECT 1 FROM delivery o WHERE o.message_seq = d.message_seq AND o.role IS NOT NULL AND o.id < d.id);

-- A message's deliveries are all inserted by its send, personal ones
-- before role ones (sqlite/send.go, sqlite/bulk.go), so a role delivery's
-- insert sees every personal delivery and earlier role delivery it needs.
CREATE TRIGGER delivery_role_count_insert AFTER INSERT ON delivery WHEN NEW.role IS NOT NULL
BEGIN
	INSERT INTO role_count (role, archived, unread, priority, human, n)
		SELECT NEW.role, NEW.archived_at IS NOT NULL, NEW.read_at IS NULL, m.priority, s.kind = 'human', 1
		FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = NEW.message_seq
		ON CONFLICT DO UPDATE SET n = n + 1;
	INSERT OR IGNORE INTO role_hint (identity_id, message_seq)
		SELECT sender_id, seq FROM message WHERE seq = NEW.message_seq
		UNION ALL
		SELECT recipient_id, message_seq FROM delivery WHERE message_seq = NEW.message_seq AND recipient_id IS NOT NULL;
	INSERT OR IGNORE INTO role_later (role, message_seq)
		SELECT NEW.role, NEW.message_seq WHERE EXISTS
			(SELECT 1 FROM delivery o WHERE o.message_seq = NEW.message_seq AND o.role IS NOT NULL AND o.id < NEW.id);
END;

-- Role deliveries go only with their message (purge).
CREATE TRIGGER delivery_role_count_delete AFTER DELETE ON delivery WHEN OLD.role IS NOT NULL
BEGIN
	UPDATE role_count SET n = n - 1
		WHERE role = OLD.role AND archived = (OLD.archived_at IS NOT NULL) AND unread = (OLD.read_at IS NULL)
		AND (priority, human) = (SELECT m.priority, s.kind = 'human' FROM message m JOIN identity s ON s.id = m.sender_id WHERE m.seq = OLD.message_seq);
	DELETE FROM role_hint WHERE message_seq = OLD.message_seq;
	DELETE FROM role_later WHERE role = OLD.role AND message_seq = OLD.message_seq;
END;

INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
	('role_count', 'role_count', '60 20 10 5 2 1'),
	('role_hint', 'role_hint', '260000 5200 1'),
	('role_hint', 'role_hint_message', '260000 2'),
	('role_later', 'role_later', '1000 333 1'),
	('delivery', 'delivery_role_unread', '20000 6700 1');
