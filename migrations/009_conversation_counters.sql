-- What a search, a listing or the index policy needs to know about a
-- conversation is kept up to date as files are written, instead of being
-- summed over the conversation's files when it is read: a conversation of
-- 100,000 one-chunk files costs a search what one of 10 files costs.
--
-- conversation_stats holds one row per conversation that has files, in any
-- status. Every statement that changes a file's status or the
-- conversation's chunks updates the row in the same transaction (see
-- docs/writes.go). epoch is the generation the row started at: a
-- conversation deleted and filled again gets a new row and a new epoch, so a
-- process's cached keyword index of the old one is not mistaken for it.
ALTER TABLE conversation_stats
	ADD COLUMN ready_files      bigint NOT NULL DEFAULT 0,
	ADD COLUMN processing_files bigint NOT NULL DEFAULT 0,
	ADD COLUMN failed_files     bigint NOT NULL DEFAULT 0,
	ADD COLUMN last_upload_at   timestamptz NOT NULL DEFAULT now(),
	ADD COLUMN epoch            bigint NOT NULL DEFAULT 0,
	-- Removals of generations below this one have been pruned from
	-- keyword_removals: an index older than it is rebuilt.
	ADD COLUMN removal_floor    bigint NOT NULL DEFAULT 0,
	-- The write number of the deletion of the conversation's previous
	-- incarnation, if its rows are still being purged: chunks written up
	-- to it are not the conversation's (see conversation_purges).
	ADD COLUMN write_floor      bigint NOT NULL DEFAULT 0;

-- Conversations with files but no chunks (every file processing or failed)
-- had no row before.
INSERT INTO conversation_stats AS s (conversation_id, chunk_count, ready_files, processing_files, failed_files, last_upload_at)
SELECT conversation_id,
       coalesce(sum(chunk_count) FILTER (WHERE status = 'ready'), 0),
       count(*) FILTER (WHERE status = 'ready'),
       count(*) FILTER (WHERE status = 'processing'),
       count(*) FILTER (WHERE status = 'failed'),
       max(created_at)
FROM files
GROUP BY conversation_id
ON CONFLICT (conversation_id) DO UPDATE
SET chunk_count = excluded.chunk_count, ready_files = excluded.ready_files,
    processing_files = excluded.processing_files, failed_files = excluded.failed_files,
    last_upload_at = excluded.last_upload_at;

DELETE FROM conversation_stats s
WHERE NOT EXISTS (SELECT FROM files f WHERE f.conversation_id = s.conversation_id);

UPDATE conversation_stats SET epoch = generation;

-- list_conversations: the most recent upload first.
CREATE INDEX conversation_stats_recent_idx ON conversation_stats (last_upload_at DESC, conversation_id);

-- Per conversation and embedding model: its chunks, and how many of them
-- the model's vector index covers. covered is an estimate kept by the
-- index builds and by writes (see docs/index.go): searches use it only to
-- choose between the index and an exact scan, and results are exact either
-- way.
CREATE TABLE conversation_models (
	conversation_id text NOT NULL,
	embedding_model text NOT NULL,
	chunks          bigint NOT NULL DEFAULT 0,
	covered         bigint NOT NULL DEFAULT 0,
	-- When chunks were last added: the index policy waits for writes to
	-- pause.
	last_write_at   timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (conversation_id, embedding_model)
);

INSERT INTO conversation_models (conversation_id, embedding_model, chunks, covered, last_write_at)
SELECT f.conversation_id, f.embedding_model, sum(f.chunk_count),
       coalesce(sum(f.chunk_count) FILTER (WHERE f.write_seq <= v.watermark), 0),
       max(f.updated_at)
FROM files f
LEFT JOIN vector_indexes v ON v.embedding_model = f.embedding_model
WHERE f.status = 'ready'
GROUP BY f.conversation_id, f.embedding_model;

-- The index policy looks only at conversations with chunks the index does
-- not cover, the largest first: a few rows, however large the database.
CREATE INDEX conversation_models_fresh_idx ON conversation_models (embedding_model, (chunks - covered))
	WHERE chunks > covered;

-- The generation at which a file became ready (or moved to another model):
-- a process's keyword index reads only the files made ready after the
-- generation it holds. 0 for files stored before this migration, which a
-- first build reads anyway.
ALTER TABLE files ADD COLUMN ready_gen bigint NOT NULL DEFAULT 0;
CREATE INDEX files_ready_gen_idx ON files (conversation_id, ready_gen) WHERE status = 'ready';

-- An index build counts what it newly covers from the files written since
-- the previous build.
CREATE INDEX files_model_write_idx ON files (embedding_model, write_seq) WHERE status = 'ready';

-- Ready files deleted, by generation, so that a process takes them out of
-- its keyword index without reading the conversation's other files again.
CREATE TABLE keyword_removals (
	conversation_id text NOT NULL,
	generation      bigint NOT NULL,
	file_id         uuid NOT NULL,
	removed_at      timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (conversation_id, generation, file_id)
);

-- A deleted conversation disappears at once and its rows are deleted in
-- the background, a few thousand at a time, so that deleting a conversation
-- costs the caller the same for 10 files or 100,000, and the conversation
-- can be filled again meanwhile.
--
-- Deletion takes a number from chunk_write_seq, the floor. Every file
-- takes one when it is uploaded (upload_seq), every write of chunks one
-- too (write_seq), each under the lock of the conversation's statistics
-- row that the deletion also takes: the files uploaded up to the floor and
-- the chunks written up to it are the deleted conversation's, the others
-- are the new one's. Readers skip the former until they are purged.
CREATE TABLE conversation_purges (
	conversation_id text PRIMARY KEY,
	floor           bigint NOT NULL,
	requested_at    timestamptz NOT NULL DEFAULT now()
);

-- 0 for files uploaded before this migration: any deletion's floor is
-- above it.
ALTER TABLE files ADD COLUMN upload_seq bigint NOT NULL DEFAULT 0;
