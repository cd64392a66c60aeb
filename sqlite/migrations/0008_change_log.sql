-- One row per write transaction naming whose inboxes it touched, so that the
-- change watcher of every process sharing the file learns cheaply whom a
-- commit concerns (PRAGMA data_version only says that something changed).
-- origin is the writing store instance, whose own process already knows.
-- Old rows are pruned by the writers.
CREATE TABLE change_log (
	seq         INTEGER PRIMARY KEY,
	origin      TEXT NOT NULL,
	all_inboxes INTEGER NOT NULL,   -- 1: any inbox may have changed
	identities  TEXT NOT NULL,      -- JSON array of identity ids
	roles       TEXT NOT NULL       -- JSON array of role names
);
