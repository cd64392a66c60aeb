-- mailbox_status counts unread broadcasts from the index alone, so its
-- pass over the unread inbox reads no delivery rows.
CREATE INDEX delivery_unread_via ON delivery (recipient_id, via, message_seq)
	WHERE read_at IS NULL AND archived_at IS NULL;
