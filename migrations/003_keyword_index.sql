-- BM25 ranking moves out of SQL: each process keeps an inverted index per
-- conversation, built from the chunks' tsv and kept current by a generation
-- number that every change to the conversation's chunks replaces. The
-- per-term statistics, the token counts and the full-text GIN index that
-- ranking in SQL needed are no longer read, and no longer paid for on every
-- insert.

DROP TABLE term_stats;
DROP INDEX chunks_tsv_idx;
ALTER TABLE chunks DROP COLUMN token_count;
DROP FUNCTION tsvector_token_count(tsvector);

-- Generations come from one sequence, so a number is never reused: a
-- conversation emptied (its row deleted) and filled again cannot be mistaken
-- for the state a process has cached.
CREATE SEQUENCE conversation_generation_seq;

ALTER TABLE conversation_stats
	DROP COLUMN total_tokens,
	ADD COLUMN generation bigint NOT NULL DEFAULT nextval('conversation_generation_seq');

-- Vector ranking reads every embedding of a small conversation. Kept in the
-- row (compressed if need be) rather than moved to TOAST, an embedding costs
-- no extra lookups; the content and the tsv are moved out first.
ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN;
