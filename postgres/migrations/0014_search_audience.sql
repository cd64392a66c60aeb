-- Full text within the caller's mail (issue 13), as SQLite's 0013: the
-- full-text index also holds each message's audience, so that a search by
-- a reader sent little of the store asks GIN for the words AND the
-- caller's tokens, and GIN steps through the caller's few entries instead
-- of every match of the words (an AND of five words in 45% of 1,000,000
-- messages each: ~90 ms to find 16,815 matches; with agent-3's tokens
-- ~7 ms to find its 102). The listing's own rule still decides what shows:
-- the tokens only narrow the candidates, never below it, since every
-- message a listing can show carries the token of the branch that shows
-- it (postgres/search.go).
--
-- Tokens, fixed at send time (postgres/send.go writes the same): -id of
-- the sender, the id of each direct recipient, the mailbox_id of each role
-- queue (ids are positive, from one sequence), 0 for a broadcast. A row
-- written without one (an old binary's send) gets {0}, which every
-- narrowed search asks for: it is examined as before, never lost.
ALTER TABLE message ADD COLUMN audience bigint[] NOT NULL DEFAULT '{0}';
-- Dropped first: the UPDATE then writes no GIN entries, and the index is
-- built once from the final rows.
DROP INDEX message_fts;
-- From the addresses as resolved at send time (message_to), not from the
-- deliveries, which a delete removes: the same tokens the send wrote. An
-- address that names nothing known becomes 0 (examined by every search).
WITH token AS (
	SELECT '@' || name AS address, id AS t FROM identity WHERE kind = 'agent'
	UNION ALL SELECT 'human:' || name, id FROM identity WHERE kind = 'human'
	UNION ALL SELECT 'role:' || name, mailbox_id FROM role
	UNION ALL SELECT '*', 0),
aud AS (SELECT a.message_seq, array_agg(coalesce(k.t, 0) ORDER BY a.position) AS ts
	FROM message_to a LEFT JOIN token k ON k.address = a.address GROUP BY a.message_seq)
UPDATE message m SET audience = ARRAY[-m.sender_id] || aud.ts FROM aud WHERE aud.message_seq = m.seq;
-- The audience first: GIN ANDs the index's columns key by key in column
-- order, each advancing the next to its current item, so the caller's
-- short token lists drive the words' long posting lists (words first, the
-- tsquery's own AND stepped through every entry of its rarest word, as
-- before). A search without tokens reads the other columns as before.
CREATE INDEX message_fts ON message USING gin (audience, fts, (ARRAY[seq >> 14]));
DO $$ BEGIN
	IF EXISTS (SELECT 1 FROM message) THEN
		ANALYZE message;
	END IF;
END $$;
