-- The graph of SPEC section 2 as typed node and edge tables.

-- Nodes.
CREATE TABLE identity (               -- AgentIdentity
	id         INTEGER PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	kind       TEXT NOT NULL CHECK (kind IN ('agent', 'human')),
	created_at TEXT NOT NULL
);
CREATE INDEX identity_kind ON identity (kind, id);

CREATE TABLE token (
	digest      BLOB PRIMARY KEY,       -- SHA-256 of the token; never the token
	identity_id INTEGER NOT NULL REFERENCES identity (id),
	created_at  TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE role (name TEXT PRIMARY KEY) WITHOUT ROWID;

CREATE TABLE role_grant (
	identity_id INTEGER NOT NULL REFERENCES identity (id),
	role        TEXT NOT NULL REFERENCES role (name),
	PRIMARY KEY (identity_id, role)
) WITHOUT ROWID;

CREATE TABLE session (id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE ticket (id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE concept (id TEXT PRIMARY KEY, name TEXT NOT NULL) WITHOUT ROWID;

CREATE TABLE thread (
	id         TEXT PRIMARY KEY,
	created_at TEXT NOT NULL
) WITHOUT ROWID;

-- seq is the store's commit order: writes take the lock before they insert,
-- so a larger seq was committed later. Watermarks compare seq, never id text.
CREATE TABLE message (
	seq               INTEGER PRIMARY KEY,
	id                TEXT NOT NULL UNIQUE,
	subject           TEXT NOT NULL,
	body              TEXT NOT NULL,
	created_at        TEXT NOT NULL,
	priority          TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high')),
	retracted         INTEGER NOT NULL DEFAULT 0,
	sender_id         INTEGER NOT NULL REFERENCES identity (id),   -- SENT_BY
	thread_id         TEXT NOT NULL REFERENCES thread (id),        -- PART_OF_THREAD
	origin_session_id TEXT NOT NULL REFERENCES session (id),       -- ORIGINATES_IN
	in_reply_to       INTEGER REFERENCES message (seq)             -- IN_REPLY_TO
);
CREATE INDEX message_sender ON message (sender_id, seq);
CREATE INDEX message_thread ON message (thread_id, seq);

-- SENT_TO: one row per address as resolved at send time.
CREATE TABLE message_to (
	message_seq INTEGER NOT NULL REFERENCES message (seq),
	position    INTEGER NOT NULL,
	address     TEXT NOT NULL,         -- @bob, human:y, role:x, *
	PRIMARY KEY (message_seq, position)
) WITHOUT ROWID;
CREATE INDEX message_to_address ON message_to (address, message_seq);

-- DELIVERED_TO: one row per recipient identity, or one per role queue.
CREATE TABLE delivery (
	id           INTEGER PRIMARY KEY,
	message_seq  INTEGER NOT NULL REFERENCES message (seq),
	recipient_id INTEGER REFERENCES identity (id),
	role         TEXT REFERENCES role (name),
	via          TEXT NOT NULL CHECK (via IN ('direct', 'broadcast', 'role')),
	delivered_at TEXT NOT NULL,
	read_at      TEXT,
	read_by      INTEGER REFERENCES identity (id),
	archived_at  TEXT,
	CHECK ((recipient_id IS NULL) <> (role IS NULL))
);
CREATE UNIQUE INDEX delivery_personal ON delivery (recipient_id, message_seq);
CREATE UNIQUE INDEX delivery_role ON delivery (role, message_seq);
CREATE INDEX delivery_message ON delivery (message_seq);
CREATE INDEX delivery_unread ON delivery (recipient_id, message_seq)
	WHERE read_at IS NULL AND archived_at IS NULL;

CREATE TABLE message_session (        -- RELATED_SESSION
	message_seq INTEGER NOT NULL REFERENCES message (seq),
	session_id  TEXT NOT NULL REFERENCES session (id),
	PRIMARY KEY (message_seq, session_id)
) WITHOUT ROWID;
CREATE INDEX message_session_session ON message_session (session_id, message_seq);

CREATE TABLE message_ticket (         -- REFERENCES_TICKET
	message_seq INTEGER NOT NULL REFERENCES message (seq),
	ticket_id   TEXT NOT NULL REFERENCES ticket (id),
	PRIMARY KEY (message_seq, ticket_id)
) WITHOUT ROWID;
CREATE INDEX message_ticket_ticket ON message_ticket (ticket_id, message_seq);

CREATE TABLE message_concept (        -- TAGGED_CONCEPT
	message_seq INTEGER NOT NULL REFERENCES message (seq),
	concept_id  TEXT NOT NULL REFERENCES concept (id),
	source      TEXT NOT NULL,          -- caller or an extractor's name
	rank        INTEGER NOT NULL,       -- order within its source, best first
	PRIMARY KEY (message_seq, concept_id)
) WITHOUT ROWID;
CREATE INDEX message_concept_concept ON message_concept (concept_id, message_seq);

-- Concept extraction jobs, written in the send transaction and worked off
-- the send path by any server process sharing the database.
CREATE TABLE concept_job (
	message_seq  INTEGER PRIMARY KEY REFERENCES message (seq),
	attempts     INTEGER NOT NULL DEFAULT 0,
	run_after    TEXT NOT NULL,
	locked_by    TEXT,
	locked_until TEXT,
	last_error   TEXT
);
CREATE INDEX concept_job_due ON concept_job (run_after);

CREATE VIRTUAL TABLE message_fts USING fts5 (
	subject, body,
	content = 'message', content_rowid = 'seq',
	tokenize = 'porter unicode61 remove_diacritics 2'
);
