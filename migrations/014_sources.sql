-- Where a conversation's files come from, kept so that they can be synced
-- (package sources): a site crawled from a start URL, or a folder the CLI
-- ingests. A source remembers its options and, per page or file, what the
-- next sync needs to tell whether it changed: the HTTP validators (ETag,
-- Last-Modified) and a hash of its content, or a file's size and time.
CREATE TABLE sources (
	conversation_id text NOT NULL,
	id              uuid NOT NULL,
	-- site or folder.
	kind            text NOT NULL CHECK (kind IN ('site', 'folder')),
	-- The start URL of a site, the absolute path of a folder.
	root            text NOT NULL,
	-- The crawl's options (max_pages, max_depth, scope, include, exclude).
	options         jsonb NOT NULL DEFAULT '{}',
	created_at      timestamptz NOT NULL DEFAULT now(),
	-- The last sync that ended, and its job and summary (added, updated,
	-- removed, unchanged, skipped by reason).
	last_sync_at    timestamptz,
	last_job_id     uuid,
	last_summary    jsonb NOT NULL DEFAULT '{}',
	PRIMARY KEY (conversation_id, id),
	UNIQUE (conversation_id, kind, root)
);

-- One row per page (URL) of a site or file (path relative to the folder)
-- of a source, with the file holding its content: a file may hold the
-- content of several pages (the same text under two URLs) and of several
-- sources; it is deleted with the last page that holds it.
CREATE TABLE source_pages (
	conversation_id text NOT NULL,
	source_id       uuid NOT NULL,
	url             text NOT NULL,
	file_id         uuid,
	etag            text NOT NULL DEFAULT '',
	last_modified   text NOT NULL DEFAULT '',
	-- A hash of the page's text (of its bytes for formats without text of
	-- their own), as the crawler computes it: a page with the same text
	-- under two URLs is stored once.
	content_hash    text NOT NULL DEFAULT '',
	-- The links the page held when last read: a page answered 304 carries
	-- none, and the crawl goes on from these.
	links           text[] NOT NULL DEFAULT '{}',
	-- A folder's file: its size and modification time.
	size_bytes      bigint NOT NULL DEFAULT 0,
	modified_at     timestamptz,
	synced_at       timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (conversation_id, source_id, url)
);

CREATE INDEX source_pages_file_idx ON source_pages (conversation_id, file_id);

-- What a job that runs long before its files are all known (a crawl, a
-- sync) reports of itself: pages fetched, queued and skipped while it runs,
-- then what it added, updated, removed and left unchanged.
ALTER TABLE jobs ADD COLUMN report jsonb;

-- Sources to sync periodically (MCP_sync_interval), the least recent first.
CREATE INDEX sources_sync_idx ON sources (last_sync_at NULLS FIRST, conversation_id, id);

DO $$
BEGIN
	-- Nested: pg_dist_partition exists only where Citus is installed.
	IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
		IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = to_regclass('files')) THEN
			PERFORM create_distributed_table('sources', 'conversation_id', colocate_with => 'files');
			PERFORM create_distributed_table('source_pages', 'conversation_id', colocate_with => 'files');
		END IF;
	END IF;
END
$$;
