-- Every ingestion is a job (package jobs): an upload, a document an agent
-- adds, a URL fetched, an archive unpacked, a folder the CLI ingests. A job
-- lives here, not in a process's memory, so that any replica answers for it
-- and none is left "running" by a process that stopped.
--
-- A job's files carry its id (files.job_id): what the job has done is read
-- from them (ready, failed, chunks, pages), so a job's progress is never
-- out of step with its files. The job's own row holds what its files do
-- not: what it was asked, who asked, when it started and ended, whether it
-- was cancelled, and the lease of the process running the part of the job
-- that comes before its files exist (fetching a URL, unpacking an archive,
-- a CLI run): claimed_by names that process's claim and claimed_until is
-- renewed while it works. A job whose lease expired before its files were
-- all submitted is resumed by another process, or failed when it cannot be
-- (attempts counts the claims).
--
-- Ids carry their conversation's key, as file ids do (docs/ids.go), so a
-- job known by its id alone is looked up on its conversation's node.
CREATE TABLE jobs (
	conversation_id text NOT NULL,
	id              uuid NOT NULL,
	-- upload, document, url, archive, ingest (the CLI), ...
	kind            text NOT NULL,
	-- queued, running, succeeded, failed or cancelled. While the job's
	-- files are being processed it stays running; its end is read from its
	-- files and written back when first seen.
	status          text NOT NULL DEFAULT 'queued'
	                CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
	-- What the job was asked (a URL, a title, file names), for list_jobs.
	input           jsonb NOT NULL DEFAULT '{}',
	-- The caller: an API key's name, "stdio", "cli".
	caller          text NOT NULL DEFAULT '',
	-- Why the job failed or was cancelled, in words; '' otherwise.
	error           text NOT NULL DEFAULT '',
	-- True once every file of the job is stored: its outcome is then its
	-- files'.
	submitted       boolean NOT NULL DEFAULT false,
	-- Files the job found already in the conversation (the same bytes):
	-- they count as done without being stored again.
	duplicates      integer NOT NULL DEFAULT 0,
	-- Files the job refused before storing them (unsupported type, too
	-- large), with their reasons in refusals.
	refused         integer NOT NULL DEFAULT 0,
	refusals        jsonb NOT NULL DEFAULT '[]',
	created_at      timestamptz NOT NULL DEFAULT now(),
	started_at      timestamptz,
	finished_at     timestamptz,
	claimed_by      uuid,
	claimed_until   timestamptz,
	attempts        integer NOT NULL DEFAULT 0,
	PRIMARY KEY (conversation_id, id)
);

-- list_jobs: a conversation's jobs, newest first.
CREATE INDEX jobs_recent_idx ON jobs (conversation_id, created_at DESC, id DESC);

-- Runners look for jobs whose files are not all submitted; few are at any
-- time, so the partial index stays small.
CREATE INDEX jobs_pending_idx ON jobs (created_at, conversation_id, id)
	WHERE NOT submitted AND status IN ('queued', 'running');

ALTER TABLE files ADD COLUMN job_id uuid;

-- get_job counts a job's files.
CREATE INDEX files_job_idx ON files (conversation_id, job_id) WHERE job_id IS NOT NULL;

-- Every tool call's audit row names the job it started or touched.
ALTER TABLE chat_mcp_tool_calls ADD COLUMN job_id text;

-- On a Citus cluster whose documents tables are already distributed, jobs
-- join them, by conversation; a database distributed later gets the same
-- from migrations/citus/distribute.sql.
DO $$
BEGIN
	-- Nested: pg_dist_partition exists only where Citus is installed.
	IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
		IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = to_regclass('files')) THEN
			PERFORM create_distributed_table('jobs', 'conversation_id', colocate_with => 'files');
		END IF;
	END IF;
END
$$;
