-- Every row of a conversation names it, so that a distributed database
-- (Citus, see migrations/citus) can keep a conversation's rows together on
-- one node and send each statement about it to that node alone.
--
-- file_bytes was keyed by its file alone.
ALTER TABLE file_bytes ADD COLUMN conversation_id text;
UPDATE file_bytes b SET conversation_id = f.conversation_id FROM files f WHERE f.id = b.file_id;
ALTER TABLE file_bytes ALTER COLUMN conversation_id SET NOT NULL;

-- conversation_key is the first 32 bits of the SHA-256 of a conversation's
-- name, as a signed integer. Files and chunks written from now on get ids
-- whose first 32 bits are their conversation's key (UUIDs of version 8, see
-- docs/ids.go), so that get_chunk, which receives a chunk id alone, finds
-- the conversation to ask through this table, which has a row per
-- conversation, not per chunk. Two conversations may share a key: the
-- lookup then names both.
CREATE FUNCTION conversation_key(conversation text) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT ('x' || substr(encode(sha256(convert_to(conversation, 'UTF8')), 'hex'), 1, 8))::bit(32)::integer $$;

CREATE TABLE conversation_keys (
	key             integer NOT NULL,
	conversation_id text NOT NULL,
	PRIMARY KEY (key, conversation_id)
);

INSERT INTO conversation_keys (key, conversation_id)
SELECT conversation_key(conversation_id), conversation_id FROM conversation_stats
ON CONFLICT DO NOTHING;

-- Workers look for conversations with files to process (docs/writes.go,
-- claimFiles) in their counters rather than in files: on a distributed
-- database that is the one statement of a poll that asks every node.
CREATE INDEX conversation_stats_processing_idx ON conversation_stats (last_upload_at, conversation_id)
	WHERE processing_files > 0;
