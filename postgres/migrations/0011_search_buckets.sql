-- The full-text index also holds each message's bucket of 16,384 seqs
-- (seq >> 14) in a second column. A search of the newest messages then asks
-- the index for its words AND the buckets of a seq range, and GIN decodes
-- the words' posting lists only where they meet those buckets (it advances
-- them past what the short bucket lists skip) instead of all of them: an
-- AND of five words each in 45% of 1,000,000 messages decoded ~2.2M
-- entries (~100 ms) to find the 16,815 matches of which the first page
-- needs 701. A search by the words alone reads the first column as before.
-- postgres/search.go builds the same expression (searchBucket).
DROP INDEX message_fts;
CREATE INDEX message_fts ON message USING gin (fts, (ARRAY[seq >> 14]));
-- The planner's estimate of a match in the buckets comes from the index's
-- own statistics, which only ANALYZE makes. Not on an empty store:
-- statistics that say "empty" would keep the planner from the indexes as
-- the store fills.
DO $$ BEGIN
	IF EXISTS (SELECT 1 FROM message) THEN
		ANALYZE message;
	END IF;
END $$;
