-- Counts of every identity's personal deliveries (direct and broadcast) by
-- the keys mailbox_status and list_messages count by, so that a count is a
-- sum over a few rows instead of a pass over the mailbox. Statement-level
-- triggers keep it inside the statement's transaction on every write path
-- (send, bulk send, marks, drain, archive, delete, purge), one aggregated
-- upsert per statement: a drain of 100,000 adds a few rows' worth of work,
-- not 100,000 upserts. Role deliveries are shared by a role's holders and
-- are not counted here.
CREATE TABLE mailbox_count (
	recipient bigint NOT NULL,      -- identity.id
	archived  boolean NOT NULL,     -- archived_at IS NOT NULL
	unread    boolean NOT NULL,     -- read_at IS NULL
	via       text NOT NULL,        -- direct, broadcast
	priority  text NOT NULL,        -- the message's
	human     boolean NOT NULL,     -- the sender is a human
	n         bigint NOT NULL,
	PRIMARY KEY (recipient, archived, unread, via, priority, human)
);

INSERT INTO mailbox_count (recipient, archived, unread, via, priority, human, n)
	SELECT d.recipient, d.archived_at IS NOT NULL, d.read_at IS NULL, d.via, m.priority, s.kind = 'human', count(*)
	FROM delivery d JOIN message m ON m.seq = d.message_seq JOIN identity s ON s.id = m.sender_id
	WHERE d.via <> 'role'
	GROUP BY 1, 2, 3, 4, 5, 6;

-- Each function upserts the statement's net change per key, in key order
-- (so concurrent writers lock counter rows in one order).
CREATE FUNCTION mailbox_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
		SELECT d.recipient, d.archived_at IS NOT NULL, d.read_at IS NULL, d.via, m.priority, s.kind = 'human', count(*)
		FROM new_rows d JOIN message m ON m.seq = d.message_seq JOIN identity s ON s.id = m.sender_id
		WHERE d.via <> 'role'
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;
	RETURN NULL;
END $$;

CREATE FUNCTION mailbox_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
		SELECT d.recipient, d.archived_at IS NOT NULL, d.read_at IS NULL, d.via, m.priority, s.kind = 'human', -count(*)
		FROM old_rows d JOIN message m ON m.seq = d.message_seq JOIN identity s ON s.id = m.sender_id
		WHERE d.via <> 'role'
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;
	RETURN NULL;
END $$;

CREATE FUNCTION mailbox_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
		SELECT k.recipient, k.archived, k.unread, k.via, m.priority, s.kind = 'human', sum(k.n)
		FROM (
			SELECT o.recipient, o.message_seq, o.via, o.archived_at IS NOT NULL AS archived, o.read_at IS NULL AS unread, -1 AS n
			FROM old_rows o JOIN new_rows w ON w.recipient = o.recipient AND w.message_seq = o.message_seq
			WHERE o.via <> 'role' AND ((o.read_at IS NULL) <> (w.read_at IS NULL) OR (o.archived_at IS NULL) <> (w.archived_at IS NULL))
			UNION ALL
			SELECT w.recipient, w.message_seq, w.via, w.archived_at IS NOT NULL, w.read_at IS NULL, 1
			FROM old_rows o JOIN new_rows w ON w.recipient = o.recipient AND w.message_seq = o.message_seq
			WHERE w.via <> 'role' AND ((o.read_at IS NULL) <> (w.read_at IS NULL) OR (o.archived_at IS NULL) <> (w.archived_at IS NULL))
		) k JOIN message m ON m.seq = k.message_seq JOIN identity s ON s.id = m.sender_id
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;
	RETURN NULL;
END $$;

CREATE TRIGGER delivery_count_insert AFTER INSERT ON delivery
	REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mailbox_count_insert();
CREATE TRIGGER delivery_count_delete AFTER DELETE ON delivery
	REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mailbox_count_delete();
CREATE TRIGGER delivery_count_update AFTER UPDATE ON delivery
	REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mailbox_count_update();
