-- The graph of SPEC section 2 as typed node and edge tables, on PostgreSQL.
--
-- Every per-recipient table and index leads with the recipient: a mailbox
-- id, which is an identity's id for personal mail and a role's mailbox_id
-- for a role queue (both drawn from one sequence, so they never collide).
-- That column is the distribution key a sharded deployment would use; see
-- docs/postgres.md.

CREATE SEQUENCE mailbox_id;

-- Nodes.
CREATE TABLE identity (               -- AgentIdentity; its id is its mailbox
	id         bigint PRIMARY KEY DEFAULT nextval('mailbox_id'),
	name       text NOT NULL UNIQUE,
	kind       text NOT NULL CHECK (kind IN ('agent', 'human')),
	created_at timestamptz NOT NULL
);
CREATE INDEX identity_kind ON identity (kind, id);

CREATE TABLE token (
	digest      bytea PRIMARY KEY,      -- SHA-256 of the token; never the token
	identity_id bigint NOT NULL REFERENCES identity (id),
	created_at  timestamptz NOT NULL
);

CREATE TABLE role (                   -- a role queue and its mailbox
	name       text PRIMARY KEY,
	mailbox_id bigint NOT NULL UNIQUE DEFAULT nextval('mailbox_id')
);

CREATE TABLE role_grant (
	identity_id bigint NOT NULL REFERENCES identity (id),
	role        text NOT NULL REFERENCES role (name),
	PRIMARY KEY (identity_id, role)
);

CREATE TABLE session (id text PRIMARY KEY);
CREATE TABLE ticket (id text PRIMARY KEY);
CREATE TABLE concept (id text PRIMARY KEY, name text NOT NULL);

CREATE TABLE thread (
	id         text PRIMARY KEY,
	created_at timestamptz NOT NULL
);

-- Full-text search: English Snowball stemming without a stop-word list, so
-- that every word the user types is searchable (FTS5's porter tokenizer
-- drops none either: "and or" must still find "AND OR NOT").
CREATE TEXT SEARCH DICTIONARY mailroom_stem (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION mailroom (COPY = pg_catalog.simple);
ALTER TEXT SEARCH CONFIGURATION mailroom
	ALTER MAPPING FOR asciiword, word, numword, asciihword, hword, numhword, hword_asciipart, hword_part, hword_numpart
	WITH mailroom_stem;

-- seq is the store's commit order: every send takes one transaction-level
-- advisory lock before it inserts, so a larger seq was committed later.
-- Watermarks compare seq, never id text.
CREATE TABLE message (
	seq               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id                text NOT NULL UNIQUE,
	subject           text NOT NULL,
	body              text NOT NULL,
	created_at        timestamptz NOT NULL,
	priority          text NOT NULL CHECK (priority IN ('low', 'normal', 'high')),
	retracted         boolean NOT NULL DEFAULT false,
	sender_id         bigint NOT NULL REFERENCES identity (id),    -- SENT_BY
	thread_id         text NOT NULL REFERENCES thread (id),        -- PART_OF_THREAD
	origin_session_id text NOT NULL REFERENCES session (id),       -- ORIGINATES_IN
	in_reply_to       bigint REFERENCES message (seq),             -- IN_REPLY_TO
	fts               tsvector GENERATED ALWAYS AS
		(to_tsvector('mailroom', subject || ' ' || body)) STORED
);
CREATE INDEX message_sender ON message (sender_id, seq);
CREATE INDEX message_thread ON message (thread_id, seq);
CREATE INDEX message_fts ON message USING gin (fts);

-- SENT_TO: one row per address as resolved at send time.
CREATE TABLE message_to (
	message_seq bigint NOT NULL REFERENCES message (seq),
	position    integer NOT NULL,
	address     text NOT NULL,          -- @bob, human:y, role:x, *
	PRIMARY KEY (message_seq, position)
);
CREATE INDEX message_to_address ON message_to (address, message_seq);

-- DELIVERED_TO: the per-recipient table. One row per recipient mailbox
-- (an identity, or one row per role queue), keyed by the recipient first.
CREATE TABLE delivery (
	recipient    bigint NOT NULL,        -- mailbox: identity.id or role.mailbox_id
	message_seq  bigint NOT NULL REFERENCES message (seq),
	via          text NOT NULL CHECK (via IN ('direct', 'broadcast', 'role')),
	delivered_at timestamptz NOT NULL,
	read_at      timestamptz,
	read_by      bigint,                 -- identity.id of the reader; no foreign key: a drain
	                                     -- sets it on 100,000 rows at once, and a per-row key
	                                     -- check costs more than the update itself
	archived_at  timestamptz,
	PRIMARY KEY (recipient, message_seq)
) WITH (fillfactor = 70);
-- No index covers read_at, and pages keep room: marking read (one id or a
-- drain of 100,000) is then a heap-only (HOT) update that writes no index
-- entries. Unread listings read the recipient's primary-key range and
-- filter on the heap instead of a partial unread index.

CREATE TABLE message_session (        -- RELATED_SESSION
	message_seq bigint NOT NULL REFERENCES message (seq),
	session_id  text NOT NULL REFERENCES session (id),
	PRIMARY KEY (message_seq, session_id)
);
CREATE INDEX message_session_session ON message_session (session_id, message_seq);

CREATE TABLE message_ticket (         -- REFERENCES_TICKET
	message_seq bigint NOT NULL REFERENCES message (seq),
	ticket_id   text NOT NULL REFERENCES ticket (id),
	PRIMARY KEY (message_seq, ticket_id)
);
CREATE INDEX message_ticket_ticket ON message_ticket (ticket_id, message_seq);

CREATE TABLE message_concept (        -- TAGGED_CONCEPT
	message_seq bigint NOT NULL REFERENCES message (seq),
	concept_id  text NOT NULL REFERENCES concept (id),
	source      text NOT NULL,          -- caller or an extractor's name
	rank        integer NOT NULL,       -- order within its source, best first
	PRIMARY KEY (message_seq, concept_id)
);
CREATE INDEX message_concept_concept ON message_concept (concept_id, message_seq);

-- Concept extraction jobs, written in the send transaction and claimed with
-- FOR UPDATE SKIP LOCKED by any instance sharing the database.
CREATE TABLE concept_job (
	message_seq  bigint PRIMARY KEY REFERENCES message (seq),
	attempts     integer NOT NULL DEFAULT 0,
	run_after    timestamptz NOT NULL,
	locked_by    text,
	locked_until timestamptz,
	last_error   text
);
CREATE INDEX concept_job_due ON concept_job (run_after, message_seq);

-- Document frequencies of extractor terms across processed messages, for
-- the embedded extractor's rarity scores.
CREATE TABLE concept_term (
	term text PRIMARY KEY,
	df   integer NOT NULL
);

CREATE TABLE concept_corpus (
	id   integer PRIMARY KEY CHECK (id = 1),
	docs integer NOT NULL
);
INSERT INTO concept_corpus (id, docs) VALUES (1, 0);
