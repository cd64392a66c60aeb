-- delivery_message (0006) keyed by (message_seq, recipient) instead of
-- message_seq alone. A probe of one mailbox's delivery of given messages
-- (a search's page: recipient = me AND message_seq = ANY(seqs), newest
-- first; a search's probe of the caller's delivery of a candidate) was
-- planned on this index, the only one that returns message_seq = ANY(...)
-- in seq order, and it read every delivery of each message to filter on
-- recipient on the heap: a broadcast's twenty at 20 agents (953 rows for a
-- page of 51 at 1M messages). With the recipient in the key the probe
-- finds just its own. Purge keeps using it by message_seq. It is one index
-- entry per delivery as before, but each key is unique, so btree
-- deduplication no longer packs a message's entries (28 -> 59 MB at 1.95M
-- deliveries). Built in the migration's transaction: writers to delivery
-- wait while it builds (docs/benchmarks.md: seconds at 1M messages).
-- Like 0006 it does not cover read_at, so marking read stays heap-only.
DROP INDEX delivery_message;
CREATE INDEX delivery_message ON delivery (message_seq, recipient);
