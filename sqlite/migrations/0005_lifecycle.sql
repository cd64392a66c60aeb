-- Lifecycle (SPEC section 9) and read delegation (section 10).

-- A message that is gone from one identity's mailbox for good (deleted from
-- the inbox or the outbox). A personal delivery is removed too; role
-- deliveries are shared by the role's holders and stay, so the visibility
-- queries consult this table wherever a role or outbox row could show.
CREATE TABLE message_deleted (
	identity_id INTEGER NOT NULL REFERENCES identity (id),
	message_seq INTEGER NOT NULL REFERENCES message (seq),
	deleted_at  TEXT NOT NULL,
	PRIMARY KEY (identity_id, message_seq)
) WITHOUT ROWID;
CREATE INDEX message_deleted_message ON message_deleted (message_seq);

-- Archived mail, counted by mailbox_status and listed by archivedOnly.
CREATE INDEX delivery_archived ON delivery (recipient_id, message_seq)
	WHERE archived_at IS NOT NULL;

-- CAN_READ_INBOX_OF: grantee may read owner's inbox, never change it.
CREATE TABLE read_grant (
	grantee_id INTEGER NOT NULL REFERENCES identity (id),
	owner_id   INTEGER NOT NULL REFERENCES identity (id),
	created_at TEXT NOT NULL,
	PRIMARY KEY (grantee_id, owner_id)
) WITHOUT ROWID;

-- Purge finds old messages by time.
CREATE INDEX message_created ON message (created_at);

-- A retraction must remove the old tokens from the index itself, not add a
-- delete marker beside them: with secure-delete FTS5 rewrites the segment.
INSERT INTO message_fts (message_fts, rank) VALUES ('secure-delete', 1);

-- Purge clears the reply edges that point at the messages it removes.
CREATE INDEX message_reply ON message (in_reply_to) WHERE in_reply_to IS NOT NULL;
