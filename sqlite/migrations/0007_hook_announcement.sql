-- What `mailroom hook claude-code` told each harness session, so a reminder
-- is never repeated. Leads with the recipient (SPEC 14). No foreign key to
-- message: purging old mail must not trip over a reminder of it.
CREATE TABLE hook_announcement (
	identity_id  INTEGER NOT NULL REFERENCES identity (id),
	session      TEXT NOT NULL,
	message_seq  INTEGER NOT NULL,
	announced_at TEXT NOT NULL,
	PRIMARY KEY (identity_id, session, message_seq)
) WITHOUT ROWID;
