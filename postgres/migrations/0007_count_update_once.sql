-- The update trigger of 0005 joined the transition tables and the message
-- table once for the rows leaving a count and again for those entering
-- one, which doubled the cost of a 100,000-message drain. An UPDATE of
-- delivery never changes a row's message, so one join serves both sides.
CREATE OR REPLACE FUNCTION mailbox_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mailbox_count AS c (recipient, archived, unread, via, priority, human, n)
		SELECT o.recipient, side.archived, side.unread, o.via, m.priority, s.kind = 'human', sum(side.n)
		FROM old_rows o
		JOIN new_rows w ON w.recipient = o.recipient AND w.message_seq = o.message_seq
		JOIN message m ON m.seq = o.message_seq
		JOIN identity s ON s.id = m.sender_id
		CROSS JOIN LATERAL (VALUES
			(o.archived_at IS NOT NULL, o.read_at IS NULL, -1),
			(w.archived_at IS NOT NULL, w.read_at IS NULL, 1)
		) AS side (archived, unread, n)
		WHERE o.via <> 'role' AND ((o.read_at IS NULL) <> (w.read_at IS NULL) OR (o.archived_at IS NULL) <> (w.archived_at IS NULL))
		GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (recipient, archived, unread, via, priority, human) DO UPDATE SET n = c.n + excluded.n;
	RETURN NULL;
END $$;
