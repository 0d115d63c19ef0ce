-- Distributes the documents schema on a Citus cluster. Apply runs it, in one
-- transaction, after the numbered migrations, on a database that has the
-- citus extension and whose files table is not distributed yet: a new
-- database, or a single-node one moved onto Citus (see doc/scaling-out.md).
--
-- The documents tables are distributed by conversation_id and co-located:
-- a conversation's files, chunks, bytes, counters, keyword removals,
-- purge, jobs and sources live on one shard, so every statement about one conversation runs
-- on one worker. Citus wants the distribution column in every primary key,
-- unique constraint and foreign key, so files and chunks are keyed by
-- (conversation_id, id). Ids stay unique on their own: they are random
-- (128 bits, 96 of them random in ids that carry their conversation's key).
--
-- vector_indexes (one row per embedding model, read by every search) and
-- conversation_keys (one row per conversation, read by get_chunk) are
-- reference tables: a copy on every node, read where the query runs.
--
-- The audit table is distributed by its id: each call's row goes to any
-- shard, so writes spread over the workers. Its queries (by conversation,
-- by time) ask every shard; it is read by operators, not on the hot path.
-- The web page's sign-outs are distributed by their session id: each is
-- looked up by it, on one shard.
-- schema_migrations and rate_limit_buckets stay on the coordinator.
ALTER TABLE chunks DROP CONSTRAINT chunks_file_id_fkey;
ALTER TABLE file_bytes DROP CONSTRAINT file_bytes_file_id_fkey;
ALTER TABLE files DROP CONSTRAINT files_pkey, ADD PRIMARY KEY (conversation_id, id);
ALTER TABLE chunks DROP CONSTRAINT chunks_pkey, ADD PRIMARY KEY (conversation_id, id);
ALTER TABLE chunks DROP CONSTRAINT chunks_file_id_ordinal_key, ADD UNIQUE (conversation_id, file_id, ordinal);
ALTER TABLE file_bytes DROP CONSTRAINT file_bytes_pkey, ADD PRIMARY KEY (conversation_id, file_id, seq);

SELECT create_distributed_table('files', 'conversation_id');
SELECT create_distributed_table('chunks', 'conversation_id', colocate_with => 'files');
SELECT create_distributed_table('file_bytes', 'conversation_id', colocate_with => 'files');
SELECT create_distributed_table('conversation_stats', 'conversation_id', colocate_with => 'files');
SELECT create_distributed_table('conversation_models', 'conversation_id', colocate_with => 'files');
SELECT create_distributed_table('keyword_removals', 'conversation_id', colocate_with => 'files');
SELECT create_distributed_table('conversation_purges', 'conversation_id', colocate_with => 'files');
SELECT create_distributed_table('jobs', 'conversation_id', colocate_with => 'files');
SELECT create_distributed_table('sources', 'conversation_id', colocate_with => 'files');
SELECT create_distributed_table('source_pages', 'conversation_id', colocate_with => 'files');

ALTER TABLE chunks ADD FOREIGN KEY (conversation_id, file_id) REFERENCES files (conversation_id, id) ON DELETE CASCADE;
ALTER TABLE file_bytes ADD FOREIGN KEY (conversation_id, file_id) REFERENCES files (conversation_id, id) ON DELETE CASCADE;

SELECT create_reference_table('vector_indexes');
SELECT create_reference_table('conversation_keys');
SELECT create_distributed_table('chat_mcp_tool_calls', 'id');
SELECT create_distributed_table('ui_signouts', 'session_id');
