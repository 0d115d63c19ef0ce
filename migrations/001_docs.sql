-- Uploaded documents, their chunks and the statistics BM25 ranking needs.
--
-- Vectors are stored without a fixed dimension so that embedders of any size,
-- and a move from one to another, share one table. Each model gets its own
-- HNSW index, created at run time by the docs store as an expression index on
-- the dimension-typed cast, restricted to that model's rows:
--
--   CREATE INDEX chunks_hnsw_<model> ON chunks
--     USING hnsw ((embedding::vector(<dims>)) vector_cosine_ops)
--     WHERE embedding_model = '<model>';

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE files (
	id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	conversation_id text NOT NULL,
	file_name       text NOT NULL,
	mime_type       text NOT NULL,
	size_bytes      bigint NOT NULL CHECK (size_bytes >= 0),
	sha256          text NOT NULL,
	status          text NOT NULL DEFAULT 'processing'
	                CHECK (status IN ('processing', 'ready', 'failed')),
	-- Why processing failed, in words a user can act on; '' otherwise.
	error           text NOT NULL DEFAULT '',
	chunk_count     integer NOT NULL DEFAULT 0,
	page_count      integer NOT NULL DEFAULT 0,
	-- The model of every chunk's embedding; '' until the file is ready.
	embedding_model text NOT NULL DEFAULT '',
	-- The whole extracted text, served as the file's resource.
	extracted_text  text,
	created_at      timestamptz NOT NULL DEFAULT now(),
	updated_at      timestamptz NOT NULL DEFAULT now(),
	-- The same bytes uploaded twice to one conversation are one file.
	UNIQUE (conversation_id, sha256)
);

CREATE INDEX files_conversation_idx ON files (conversation_id, created_at);

-- tsvector_token_count is the number of word occurrences a tsvector holds
-- (stop words excluded): the document length of BM25.
CREATE FUNCTION tsvector_token_count(tsv tsvector) RETURNS integer
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	RETURN (SELECT coalesce(sum(cardinality(positions)), 0)::integer FROM unnest(tsv));

CREATE TABLE chunks (
	id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	file_id         uuid NOT NULL REFERENCES files (id) ON DELETE CASCADE,
	-- Copied from files so that search filters chunks without a join.
	conversation_id text NOT NULL,
	ordinal         integer NOT NULL,
	content         text NOT NULL,
	-- 0 for formats without pages; PDF pages count from 1.
	page_number     integer NOT NULL DEFAULT 0,
	-- Rune offsets of content in the file's extracted text.
	char_start      integer NOT NULL,
	char_end        integer NOT NULL,
	embedding_model text NOT NULL,
	embedding       vector NOT NULL,
	tsv             tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
	-- A generated column cannot read another one, so the text is parsed a
	-- second time rather than counted from tsv.
	token_count     integer GENERATED ALWAYS AS
	                (tsvector_token_count(to_tsvector('english', content))) STORED,
	UNIQUE (file_id, ordinal)
);

CREATE INDEX chunks_tsv_idx ON chunks USING gin (tsv);
-- Serves filters on conversation_id alone as well.
CREATE INDEX chunks_conversation_model_idx ON chunks (conversation_id, embedding_model);

-- BM25 statistics per conversation, maintained by ingestion and deletion in
-- the same transaction as the chunks they describe. They count every chunk of
-- the conversation whatever its embedding model.
CREATE TABLE conversation_stats (
	conversation_id text PRIMARY KEY,
	chunk_count     bigint NOT NULL,
	total_tokens    bigint NOT NULL
);

-- df is the number of the conversation's chunks whose tsv holds term.
CREATE TABLE term_stats (
	conversation_id text NOT NULL,
	term            text NOT NULL,
	df              bigint NOT NULL,
	PRIMARY KEY (conversation_id, term)
);
