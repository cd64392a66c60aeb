-- A drain of a whole inbox by a read-through mark (issue 13), as SQLite's
-- 0012: rewriting every delivery row of a 100,000-message drain costs
-- 0.2 s of server CPU for the UPDATE alone (heap-only as it is), so a
-- drain of a caller's whole unread, unarchived personal set (or of all of
-- it up to a watermark, with no archived unread mail there) writes one row
-- instead. A recipient's deliveries with message_seq <= through_seq and
-- read_at IS NULL are read, at `at` (postgres/mark.go). Every reader of
-- personal read state consults it; the store's folder writes `at` into the
-- rows in chunks off the request path and deletes the mark. folded is how
-- far the fold has got: rows at or below it carry read_at already. Only
-- identities have marks: role deliveries keep their shared read state.
CREATE TABLE read_mark (
	recipient   bigint PRIMARY KEY,     -- identity.id
	through_seq bigint NOT NULL,
	at          timestamptz NOT NULL,
	folded      bigint NOT NULL DEFAULT 0
);

-- The count functions of 0010, with a delivery its recipient's mark covers
-- counted as read. (A delivery is never inserted under a mark, since seqs
-- grow in commit order and a mark reads through a committed seq; counted
-- the same way all the same, so counts always agree with what is shown.)
CREATE OR REPLACE FUNCTION mailbox_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n, seqs)
		SELECT d.recipient, d.archived_at IS NOT NULL, d.read_at IS NULL AND d.message_seq > coalesce(k.through_seq, 0), d.via, d.priority, d.human,
			count(*), sum(d.message_seq)::bigint
		FROM new_rows d LEFT JOIN read_mark k ON k.recipient = d.recipient
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n, seqs = c.seqs + excluded.seqs;
	INSERT INTO role_unread (recipient, message_seq)
		SELECT recipient, message_seq FROM new_rows WHERE via = 'role' AND read_at IS NULL AND archived_at IS NULL;
	RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION mailbox_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n, seqs)
		SELECT d.recipient, d.archived_at IS NOT NULL, d.read_at IS NULL AND d.message_seq > coalesce(k.through_seq, 0), d.via, d.priority, d.human,
			-count(*), -sum(d.message_seq)::bigint
		FROM old_rows d LEFT JOIN read_mark k ON k.recipient = d.recipient
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
			SELECT d.recipient, d.archived_at IS NOT NULL AS archived, d.read_at IS NULL AND d.message_seq > coalesce(k.through_seq, 0) AS unread,
				d.via, d.priority, d.human, -count(*) AS n, -sum(d.message_seq) AS s
			FROM old_rows d LEFT JOIN read_mark k ON k.recipient = d.recipient GROUP BY 1, 2, 3, 4, 5, 6
			UNION ALL
			SELECT d.recipient, d.archived_at IS NOT NULL, d.read_at IS NULL AND d.message_seq > coalesce(k.through_seq, 0),
				d.via, d.priority, d.human, count(*), sum(d.message_seq)
			FROM new_rows d LEFT JOIN read_mark k ON k.recipient = d.recipient GROUP BY 1, 2, 3, 4, 5, 6
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
