-- The sum of the counted deliveries' message seqs beside each count, so
-- that InboxState's fingerprint of the unread set (its count and seq sum,
-- mailroom.InboxFingerprint) is a sum over a few count rows like any count:
-- summing the unread set itself cost a wake round's check 96 ms of server
-- CPU for a role queue of 100,000 (BenchmarkRoleQueue .../inbox-state).
--
-- Writers wait while this runs, so the backfill and the writes after it
-- count every row once.
LOCK TABLE delivery IN SHARE MODE;

ALTER TABLE mailbox_count ADD COLUMN seqs bigint NOT NULL DEFAULT 0;

-- One grouped pass over delivery (personal and role deliveries alike).
UPDATE mailbox_count c SET seqs = k.s FROM (
	SELECT recipient, archived_at IS NOT NULL AS archived, read_at IS NULL AS unread, via, priority, human, sum(message_seq)::bigint AS s
	FROM delivery GROUP BY 1, 2, 3, 4, 5, 6) AS k
	WHERE (c.recipient, c.archived, c.unread, c.via, c.priority, c.human) = (k.recipient, k.archived, k.unread, k.via, k.priority, k.human);

-- The count functions of 0009, with seqs.
CREATE OR REPLACE FUNCTION mailbox_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n, seqs)
		SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, count(*), sum(message_seq)::bigint
		FROM new_rows
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n, seqs = c.seqs + excluded.seqs;
	INSERT INTO role_unread (recipient, message_seq)
		SELECT recipient, message_seq FROM new_rows WHERE via = 'role' AND read_at IS NULL AND archived_at IS NULL;
	RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION mailbox_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n, seqs)
		SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, -count(*), -sum(message_seq)::bigint
		FROM old_rows
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n, seqs = c.seqs + excluded.seqs;
	DELETE FROM role_unread u USING old_rows o
		WHERE o.via = 'role' AND o.read_at IS NULL AND o.archived_at IS NULL
		AND u.recipient = o.recipient AND u.message_seq = o.message_seq;
	RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION mailbox_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF current_setting('mailroom.writer_counts', true) = 'on' THEN
		RETURN NULL;
	END IF;
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n, seqs)
		SELECT recipient, archived, unread, via, priority, human, sum(n), sum(s)::bigint
		FROM (
			SELECT recipient, archived_at IS NOT NULL AS archived, read_at IS NULL AS unread, via, priority, human, -count(*) AS n, -sum(message_seq) AS s
			FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6
			UNION ALL
			SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, count(*), sum(message_seq)
			FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6
		) k
		GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0 OR sum(s) <> 0 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n, seqs = c.seqs + excluded.seqs;
	-- Out with every role row that was unread, in with every one that is.
	DELETE FROM role_unread u USING old_rows o
		WHERE o.via = 'role' AND o.read_at IS NULL AND o.archived_at IS NULL
		AND u.recipient = o.recipient AND u.message_seq = o.message_seq;
	INSERT INTO role_unread (recipient, message_seq)
		SELECT recipient, message_seq FROM new_rows WHERE via = 'role' AND read_at IS NULL AND archived_at IS NULL
		ON CONFLICT DO NOTHING;
	RETURN NULL;
END $$;
