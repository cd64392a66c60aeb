-- Document frequencies of extractor terms across processed messages, for
-- the embedded extractor's rarity scores.
CREATE TABLE concept_term (
	term TEXT PRIMARY KEY,
	df   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE concept_corpus (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	docs INTEGER NOT NULL
);
INSERT INTO concept_corpus (id, docs) VALUES (1, 0);
