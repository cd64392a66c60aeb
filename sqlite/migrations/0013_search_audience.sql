-- Full text within the caller's mail. The index also holds each message's
-- audience (its sender, direct recipients, whether it was broadcast, its
-- role queues) as tokens in a third column, so that a search asks FTS5 for
-- the words AND the caller's tokens, and FTS5 skips the matches nobody
-- shows the caller. Before, a search stepped through every message holding
-- its words and asked of each whether the caller may see it: an agent who
-- sees 5% of a 1% word's matches at 1,000,000 messages paid ~46 ms per
-- search for 10,000 lookups. The listing's own rule still decides what
-- shows (archived, deleted, read state, the role branch's exclusions):
-- the tokens only narrow the candidates, and never below it, since every
-- message a listing can show carries the token of the branch that shows it.
--
-- Tokens (sqlite/fts.go writes the same): s<id> the sender, r<id> a direct
-- recipient, b a broadcast, q<hex of the role name>0 a role queue (the
-- final 0 keeps the stemmer off it). They are fixed at send time and kept
-- in message_audience, so that the index's 'delete' gets exactly the
-- tokens it was given, whatever happens to the deliveries later.
CREATE TABLE message_audience (
	message_seq INTEGER PRIMARY KEY REFERENCES message (seq),
	tokens      TEXT NOT NULL
);

INSERT INTO message_audience (message_seq, tokens)
	SELECT m.seq, 's' || m.sender_id
		|| coalesce((SELECT ' ' || group_concat('r' || d.recipient_id, ' ' ORDER BY d.id) FROM delivery d
			WHERE d.message_seq = m.seq AND d.recipient_id IS NOT NULL AND d.via <> 'broadcast'), '')
		|| CASE WHEN EXISTS (SELECT 1 FROM delivery d WHERE d.message_seq = m.seq AND d.via = 'broadcast') THEN ' b' ELSE '' END
		|| coalesce((SELECT ' ' || group_concat('q' || lower(hex(d.role)) || '0', ' ' ORDER BY d.id) FROM delivery d
			WHERE d.message_seq = m.seq AND d.role IS NOT NULL), '')
	FROM message m ORDER BY m.seq;

-- What the index holds per message: FTS5 reads it for 'rebuild' and for
-- column values; a 'delete' is given the same row.
CREATE VIEW message_text AS
	SELECT m.seq AS seq, m.subject AS subject, m.body AS body, coalesce(a.tokens, '') AS audience
	FROM message m LEFT JOIN message_audience a ON a.message_seq = m.seq;

DROP TABLE message_fts;
CREATE VIRTUAL TABLE message_fts USING fts5 (
	subject, body, audience,
	content = 'message_text', content_rowid = 'seq',
	tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO message_fts (message_fts) VALUES ('rebuild');
-- As 0005 set it on the old index: a retraction removes the old tokens.
INSERT INTO message_fts (message_fts, rank) VALUES ('secure-delete', 1);
