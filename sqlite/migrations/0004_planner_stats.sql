-- Planner statistics for a large mailbox, fixed from the start, so that the
-- plans SQLite picks do not depend on how much mail a young database holds.
-- Statistics gathered on an empty or small store (as PRAGMA optimize did at
-- every open) describe tables of a few rows, and a plan chosen for them
-- outlives them: the full-text index's segment delete (DELETE FROM
-- message_fts_data WHERE id>=? AND id<=?) became a full scan of its ever
-- growing table once message_fts_data was recorded with 2 rows, and sends
-- slowed down with every message stored. Store.refreshStats replaces these
-- rows with measured ones once the store is large (sqlite.go).
--
-- The shape: 1,000,000 messages from 200 identities (5,000 per sender),
-- 2.5 messages per thread, 1.2 deliveries and addresses per message, 20
-- roles, 5 concepts per message. The full-text index's own tables get no
-- rows at all: unanalyzed, they are planned as large tables, which is what
-- they become.

ANALYZE schema_migration; -- creates sqlite_stat1 (the name is reserved)
DELETE FROM sqlite_stat1;
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
	('identity', 'sqlite_autoindex_identity_1', '200 1'),
	('identity', 'identity_kind', '200 100 1'),
	('token', 'token', '200 1'),
	('role', 'role', '20 1'),
	('role_grant', 'role_grant', '100 2 1'),
	('session', 'session', '200000 1'),
	('ticket', 'ticket', '50000 1'),
	('concept', 'concept', '20000 1'),
	('thread', 'thread', '400000 1'),
	('message', 'sqlite_autoindex_message_1', '1000000 1'),
	('message', 'message_sender', '1000000 5000 1'),
	('message', 'message_thread', '1000000 3 1'),
	('message_to', 'message_to', '1200000 2 1'),
	('message_to', 'message_to_address', '1200000 5000 1'),
	('delivery', 'delivery_personal', '1200000 6000 1'),
	('delivery', 'delivery_role', '1200000 57000 1'),
	('delivery', 'delivery_message', '1200000 2'),
	('delivery', 'delivery_unread', '200000 1000 1'),
	('message_session', 'message_session', '1000000 1 1'),
	('message_session', 'message_session_session', '1000000 5 1'),
	('message_ticket', 'message_ticket', '300000 1 1'),
	('message_ticket', 'message_ticket_ticket', '300000 6 1'),
	('message_concept', 'message_concept', '5000000 5 1'),
	('message_concept', 'message_concept_concept', '5000000 250 1'),
	('concept_job', 'concept_job_due', '1000 1'),
	('concept_term', 'concept_term', '50000 1');

-- How many messages the statistics were measured at; 0 while they are the
-- fixed ones above.
CREATE TABLE planner_stats (
	id       INTEGER PRIMARY KEY CHECK (id = 1),
	messages INTEGER NOT NULL
);
INSERT INTO planner_stats (id, messages) VALUES (1, 0);
