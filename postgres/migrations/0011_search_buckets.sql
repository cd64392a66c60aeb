-- The full-text index also holds each message's bucket of 16,384 seqs (seq
-- >> 14) as a lexeme that begins with a space, which no query's lexeme
-- does (the parser never puts a space in a token). A search of the newest
-- messages then asks the index for its words AND the buckets of a seq
-- range, and GIN decodes the words' posting lists only where they meet
-- those buckets (its fast scan skips the rest: a bucket's list is short),
-- instead of all of them: an AND of five words each in 45% of 1,000,000
-- messages decoded ~2.2M entries (~100 ms) to find the 16,815 matches of
-- which the first page needs 701. postgres/search.go builds the same
-- expression (ftsBucketed); it rechecks fts itself, so a lexeme that did
-- match could cost time but never change a result.
DROP INDEX message_fts;
CREATE INDEX message_fts ON message USING gin ((fts || array_to_tsvector(ARRAY[' ' || (seq >> 14)::text])));
-- The planner's estimate of a match on the new expression comes from the
-- index's own statistics, which only ANALYZE makes (without them it took
-- every word for rare). Not on an empty store: statistics that say
-- "empty" would keep the planner from the indexes as the store fills.
DO $$ BEGIN
	IF EXISTS (SELECT 1 FROM message) THEN
		ANALYZE message;
	END IF;
END $$;
