-- Sessions of the web page (package ui) that were signed out. A session is
-- a signed cookie that any replica accepts until it expires; signing out
-- records it here, and every replica refuses a cookie whose session is
-- listed. A row is kept until the session would have expired (expires_at),
-- then removed: past that the cookie is refused for its age alone.
-- session_id is the session's random id from the cookie, not the cookie.
CREATE TABLE ui_signouts (
	session_id    text PRIMARY KEY,
	expires_at    timestamptz NOT NULL,
	signed_out_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX ui_signouts_expiry_idx ON ui_signouts (expires_at);

-- What a job's files had come to when it ended (stored, ready, failed,
-- chunks, pages), written with its end: the job then reads as what
-- happened when it ran, whatever is deleted later. NULL while it runs,
-- and for jobs that ended before this column (read from their files
-- then, as before).
ALTER TABLE jobs ADD COLUMN ended_files jsonb;

-- On a Citus cluster whose documents tables are already distributed, the
-- sign-outs are spread by their id; a database distributed later gets the
-- same from migrations/citus/distribute.sql.
DO $$
BEGIN
	-- Nested: pg_dist_partition exists only where Citus is installed.
	IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
		IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = to_regclass('files')) THEN
			PERFORM create_distributed_table('ui_signouts', 'session_id');
		END IF;
	END IF;
END
$$;
