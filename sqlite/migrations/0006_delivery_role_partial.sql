-- Role deliveries are a small part of delivery, and every personal
-- delivery has no role: indexed in full, role is NULL in most entries, so
-- ANALYZE averages them all into "rows per role" and the planner scans the
-- whole table for a role inbox instead of searching its few rows. Indexed
-- only where a role is set, the statistics measure role deliveries alone.
DROP INDEX delivery_role;
CREATE UNIQUE INDEX delivery_role ON delivery (role, message_seq) WHERE role IS NOT NULL;

-- The fixed statistics of 0004, replaced by measured ones: ANALYZE of the
-- representative mailbox that TestPlansDoNotDependOnStoreSize grows (50
-- agents all sending, 25 of them receiving, every fifth message also to
-- one of 3 roles, 2 concepts per message), scaled to 1,000,000 messages.
-- Still no rows for the full-text index's own tables.
DELETE FROM sqlite_stat1;
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
	('identity', 'sqlite_autoindex_identity_1', '50 1'),
	('identity', 'identity_kind', '50 50 1'),
	('token', 'token', '50 1'),
	('role', 'role', '3 1'),
	('role_grant', 'role_grant', '9 3 1'),
	('session', 'session', '20000 1'),
	('ticket', 'ticket', '5000 1'),
	('concept', 'concept', '15000 1'),
	('thread', 'thread', '960000 1'),
	('message', 'sqlite_autoindex_message_1', '1000000 1'),
	('message', 'message_sender', '1000000 20000 1'),
	('message', 'message_thread', '1000000 1 1'),
	('message_to', 'message_to', '1200000 2 1'),
	('message_to', 'message_to_address', '1200000 41400 1'),
	('delivery', 'delivery_personal', '1200000 23600 1'),
	('delivery', 'delivery_role', '200000 66700 1'),
	('delivery', 'delivery_message', '1200000 2'),
	('delivery', 'delivery_unread', '1160000 23250 1'),
	('message_session', 'message_session', '50000 1 1'),
	('message_session', 'message_session_session', '50000 1 1'),
	('message_ticket', 'message_ticket', '10000 1 1'),
	('message_ticket', 'message_ticket_ticket', '10000 2 1'),
	('message_concept', 'message_concept', '1960000 2 1'),
	('message_concept', 'message_concept_concept', '1960000 6550 1'),
	('concept_job', 'concept_job_due', '1000 1'),
	('concept_term', 'concept_term', '50000 1');
