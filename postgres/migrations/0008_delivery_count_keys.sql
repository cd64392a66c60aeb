-- The count triggers (0005, 0007) group deliveries by their message's
-- priority and by whether its sender is a human, so each joined every
-- transition row with message and identity: about 0.6-0.9 s of a
-- 100,000-message drain went to sorting and joining 100,000 rows for two
-- keys that never change. A delivery row carries both now, filled by the
-- send paths, and the triggers read only their transition tables.
ALTER TABLE delivery ADD COLUMN priority text, ADD COLUMN human boolean;

-- The backfill changes no count: the update trigger stays out of it.
ALTER TABLE delivery DISABLE TRIGGER delivery_count_update;
UPDATE delivery d SET priority = m.priority, human = s.kind = 'human'
	FROM message m JOIN identity s ON s.id = m.sender_id
	WHERE m.seq = d.message_seq;
ALTER TABLE delivery ENABLE TRIGGER delivery_count_update;
ALTER TABLE delivery ALTER COLUMN priority SET NOT NULL, ALTER COLUMN human SET NOT NULL;

-- Pages keep room for a new version of every row they hold, so that a
-- drain of a mailbox whose rows fill whole pages (a burst of mail to one
-- agent) is still a heap-only update: at fillfactor 70 only a third of
-- such a drain's rows found room on their page, and each of the others
-- wrote two index entries (the primary key and delivery_message). A new
-- version is a little wider than the row it replaces (read_at, read_by),
-- so the fill must stay under half. The table grows by about half; pages
-- written before this migration keep their packing until rewritten.
ALTER TABLE delivery SET (fillfactor = 45);

CREATE OR REPLACE FUNCTION mailbox_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
		SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, count(*)
		FROM new_rows WHERE via <> 'role'
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;
	RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION mailbox_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
		SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, -count(*)
		FROM old_rows WHERE via <> 'role'
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;
	RETURN NULL;
END $$;

-- Every updated row leaves its old key and enters its new one; each side
-- is summed on its own (a few groups each, no join between the two
-- transition tables), and keys whose rows stayed put sum to zero. A
-- writer that counts its own update sets mailroom.writer_counts for the
-- statement (the drain: it knows every row it marks went from unread to
-- read, and summing 100,000 rows twice here cost more than its update).
CREATE OR REPLACE FUNCTION mailbox_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF current_setting('mailroom.writer_counts', true) = 'on' THEN
		RETURN NULL;
	END IF;
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
		SELECT recipient, archived, unread, via, priority, human, sum(n)
		FROM (
			SELECT recipient, archived_at IS NOT NULL AS archived, read_at IS NULL AS unread, via, priority, human, -count(*) AS n
			FROM old_rows WHERE via <> 'role' GROUP BY 1, 2, 3, 4, 5, 6
			UNION ALL
			SELECT recipient, archived_at IS NOT NULL, read_at IS NULL, via, priority, human, count(*)
			FROM new_rows WHERE via <> 'role' GROUP BY 1, 2, 3, 4, 5, 6
		) k
		GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;
	RETURN NULL;
END $$;
