-- Lifecycle (SPEC section 9) and read delegation (section 10).

-- A message gone from one identity's mailbox for good (deleted from the
-- inbox or the outbox). Leads with the identity: it is per recipient. A
-- personal delivery is removed too; role deliveries are shared by the
-- role's holders and stay, so the visibility queries consult this table
-- wherever a role or outbox row could show.
CREATE TABLE message_deleted (
	identity_id bigint NOT NULL REFERENCES identity (id),
	message_seq bigint NOT NULL REFERENCES message (seq),
	deleted_at  timestamptz NOT NULL,
	PRIMARY KEY (identity_id, message_seq)
);

-- Archived mail, counted by mailbox_status and listed by archivedOnly.
CREATE INDEX delivery_archived ON delivery (recipient, message_seq)
	WHERE archived_at IS NOT NULL;

-- CAN_READ_INBOX_OF: grantee may read owner's inbox, never change it.
CREATE TABLE read_grant (
	grantee_id bigint NOT NULL REFERENCES identity (id),
	owner_id   bigint NOT NULL REFERENCES identity (id),
	created_at timestamptz NOT NULL,
	PRIMARY KEY (grantee_id, owner_id)
);

-- Purge finds old messages by time and clears reply edges pointing at them.
CREATE INDEX message_created ON message (created_at);
CREATE INDEX message_reply ON message (in_reply_to) WHERE in_reply_to IS NOT NULL;
