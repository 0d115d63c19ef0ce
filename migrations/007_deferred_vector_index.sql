-- The HNSW index of a model's embeddings is no longer maintained row by
-- row as files are stored: inserting into HNSW costs milliseconds a chunk
-- and bounded ingestion. Chunks are stored unindexed, and the index is
-- built in bulk, CONCURRENTLY, in the background, by one process at a time
-- (see docs/index.go):
--
--   CREATE INDEX CONCURRENTLY chunks_hnsw_<model>_<dims>_<digest>_<watermark>
--     ON chunks USING hnsw ((embedding::vector(<dims>)) vector_cosine_ops)
--     WHERE embedding_model = '<model>' AND write_seq <= <watermark>
--
-- Every write of chunks (a file stored, a file re-embedded) takes a number
-- from chunk_write_seq and stamps it on the chunks and their file. An index
-- covers the chunks written up to its watermark; a search ranks those
-- through the index and the later ones, the fresh chunks, exactly. So a
-- file is searchable, on every replica, as soon as it is stored, and the
-- index only decides how fast.

CREATE SEQUENCE chunk_write_seq;

-- Rows stored before this migration are write 0, covered by the first
-- index built. A constant default rewrites neither table.
ALTER TABLE chunks ADD COLUMN write_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN write_seq bigint NOT NULL DEFAULT 0;

-- A conversation's fresh chunks of a model are one range of this index.
CREATE INDEX chunks_conversation_model_write_idx ON chunks (conversation_id, embedding_model, write_seq);
DROP INDEX chunks_conversation_model_idx;

-- The index searches use for each model: its name and watermark. Written
-- by the process that built it, read by every search.
CREATE TABLE vector_indexes (
	embedding_model text PRIMARY KEY,
	dimensions      integer NOT NULL,
	index_name      text NOT NULL,
	watermark       bigint NOT NULL,
	-- The chunks of the model the index covered when it was built.
	chunk_count     bigint NOT NULL,
	build_seconds   double precision NOT NULL,
	built_at        timestamptz NOT NULL DEFAULT now()
);

-- The indexes of earlier versions cover every chunk of their model, so
-- each insert would still pay for them. They are replaced by the first
-- build, which starts as soon as a conversation needs it; until then,
-- searches rank exactly.
DO $$
DECLARE
	ix text;
BEGIN
	FOR ix IN SELECT indexname FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'chunks' AND indexname LIKE 'chunks\_hnsw\_%'
	LOOP
		EXECUTE format('DROP INDEX %I', ix);
	END LOOP;
END
$$;
