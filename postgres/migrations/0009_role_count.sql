-- Role queues are counted like mailboxes, so that a role holder's counts
-- cost what the holder's own activity costs, not the queue's size (the
-- design: a role delivery reaches a holder unless the holder sent it, also
-- got it personally, deleted it, or sees it through an older role
-- delivery; each of these has a small candidate set, kept below).
--
-- Writers wait while this runs (a few seconds per million deliveries), so
-- the backfill and the writes after it count every row once.
LOCK TABLE delivery IN SHARE MODE;

-- 1. mailbox_count counts role deliveries too, keyed by the role's
-- mailbox id (identity ids and role mailbox ids come from one sequence,
-- so they never collide; every reader filters by recipient).
INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
	SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, count(*)
	FROM delivery WHERE via = 'role'
	GROUP BY 1, 2, 3, 4, 5, 6
	ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;

-- 2. Candidates: a superset of the role deliveries a holder does not see
-- (the listing's predicate is evaluated on them; a stale row is harmless).
-- For a message with a role delivery: its sender and each personal
-- recipient. Written in the send's statement; purge removes its rows.
CREATE TABLE role_hint (
	identity_id bigint NOT NULL,
	message_seq bigint NOT NULL,
	PRIMARY KEY (identity_id, message_seq)
);
CREATE INDEX role_hint_message ON role_hint (message_seq);

-- Each role delivery after its message's first (the lowest mailbox, the
-- one the listings show when a holder holds several of its roles).
CREATE TABLE role_later (
	recipient   bigint NOT NULL,
	message_seq bigint NOT NULL,
	PRIMARY KEY (recipient, message_seq)
);
CREATE INDEX role_later_message ON role_later (message_seq);

INSERT INTO role_hint (identity_id, message_seq)
	SELECT m.sender_id, m.seq FROM message m
	WHERE EXISTS (SELECT 1 FROM delivery r WHERE r.message_seq = m.seq AND r.via = 'role')
	UNION
	SELECT p.recipient, p.message_seq FROM delivery p
	WHERE p.via <> 'role' AND EXISTS (SELECT 1 FROM delivery r WHERE r.message_seq = p.message_seq AND r.via = 'role');

INSERT INTO role_later (recipient, message_seq)
	SELECT d.recipient, d.message_seq FROM delivery d
	WHERE d.via = 'role' AND EXISTS (SELECT 1 FROM delivery o WHERE o.message_seq = d.message_seq AND o.via = 'role' AND o.recipient < d.recipient);

-- 3. The unread, unarchived role deliveries by queue, for the oldest
-- unread role message (mailbox_status's oldestUnreadAt) without a walk
-- over a queue's read mail. A table kept by the count triggers rather than
-- a partial index on delivery: an index whose predicate names read_at
-- makes every mark of every delivery (a personal drain of 100,000) a
-- non-heap-only update that writes all of delivery's indexes (see 0001).
CREATE TABLE role_unread (
	recipient   bigint NOT NULL,
	message_seq bigint NOT NULL,
	PRIMARY KEY (recipient, message_seq)
);
INSERT INTO role_unread (recipient, message_seq)
	SELECT recipient, message_seq FROM delivery WHERE via = 'role' AND read_at IS NULL AND archived_at IS NULL;

-- The count functions of 0008 without their personal-only filter, and
-- keeping role_unread.
CREATE OR REPLACE FUNCTION mailbox_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
		SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, count(*)
		FROM new_rows
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;
	INSERT INTO role_unread (recipient, message_seq)
		SELECT recipient, message_seq FROM new_rows WHERE via = 'role' AND read_at IS NULL AND archived_at IS NULL;
	RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION mailbox_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
		SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, -count(*)
		FROM old_rows
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;
	DELETE FROM role_unread u USING old_rows o
		WHERE o.via = 'role' AND o.read_at IS NULL AND o.archived_at IS NULL
		AND u.recipient = o.recipient AND u.message_seq = o.message_seq;
	RETURN NULL;
END $$;

-- A writer that counts its own update (the drain, mailroom.writer_counts)
-- keeps role_unread itself too.
CREATE OR REPLACE FUNCTION mailbox_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF current_setting('mailroom.writer_counts', true) = 'on' THEN
		RETURN NULL;
	END IF;
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
		SELECT recipient, archived, unread, via, priority, human, sum(n)
		FROM (
			SELECT recipient, archived_at IS NOT NULL AS archived, read_at IS NULL AS unread, via, priority, human, -count(*) AS n
			FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6
			UNION ALL
			SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, count(*)
			FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6
		) k
		GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;
	-- Out with every role row that was unread, in with every one that is.
	DELETE FROM role_unread u USING old_rows o
		WHERE o.via = 'role' AND o.read_at IS NULL AND o.archived_at IS NULL
		AND u.recipient = o.recipient AND u.message_seq = o.message_seq;
	INSERT INTO role_unread (recipient, message_seq)
		SELECT recipient, message_seq FROM new_rows WHERE via = 'role' AND read_at IS NULL AND archived_at IS NULL
		ON CONFLICT DO NOTHING;
	RETURN NULL;
END $$;
