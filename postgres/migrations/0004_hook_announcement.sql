-- What `mailroom hook claude-code` told each harness session, so a reminder
-- is never repeated. Leads with the recipient. No foreign key to message:
-- purging old mail must not trip over a reminder of it.
CREATE TABLE hook_announcement (
	identity_id  bigint NOT NULL REFERENCES identity (id),
	session      text NOT NULL,
	message_seq  bigint NOT NULL,
	announced_at timestamptz NOT NULL,
	PRIMARY KEY (identity_id, session, message_seq)
);
