-- The full-text index keys each message by -seq instead of seq, so that
-- a search's walk from the newest match down is FTS5's forward order.
-- FTS5 steps a doclist backwards by re-parsing each page it enters and
-- finds a term's last entry in every segment before it starts: at
-- 1,000,000 messages the first 520 matches of a 1% word within one
-- reader's audience cost ~18M instructions newest-first and ~10.5M in
-- forward order on the same index (measured in process, issue 13,
-- session 8). Nothing else changes: the same tokens, columns and
-- settings as 0013 made. sqlite/fts.go's ftsRowid is the mapping.
--
-- FTS5 flushes what it holds in memory whenever a statement writes a
-- rowid at or below the last one it wrote, so a statement that indexes
-- or deletes many messages does so in descending seq (ascending rowid)
-- order; the fill below does.
DROP TABLE message_fts;
DROP VIEW message_text;
CREATE VIEW message_text AS
	SELECT m.seq AS seq, -m.seq AS fts_rowid, m.subject AS subject, m.body AS body, coalesce(a.tokens, '') AS audience
	FROM message m LEFT JOIN message_audience a ON a.message_seq = m.seq;
CREATE VIRTUAL TABLE message_fts USING fts5 (
	subject, body, audience,
	content = 'message_text', content_rowid = 'fts_rowid',
	tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO message_fts (rowid, subject, body, audience)
	SELECT fts_rowid, subject, body, audience FROM message_text ORDER BY seq DESC;
INSERT INTO message_fts (message_fts, rank) VALUES ('secure-delete', 1);
