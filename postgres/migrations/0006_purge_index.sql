-- Purge removes messages by seq. Without these, each purged message made
-- the foreign-key checks of its DELETE (delivery_message_seq_fkey,
-- message_deleted_message_seq_fkey) scan the whole table: at 100,000
-- messages one batch of 1,000 took 25 s, now milliseconds (docs/benchmarks.md).
-- Neither covers read_at, so marking read stays a heap-only update. Built
-- in the migration's transaction (not CONCURRENTLY): writers to these
-- tables wait while it builds, about a second per million deliveries.
CREATE INDEX delivery_message ON delivery (message_seq);
CREATE INDEX message_deleted_message ON message_deleted (message_seq);
