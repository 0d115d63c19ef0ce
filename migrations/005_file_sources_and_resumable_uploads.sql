-- A file may come from a URL, which listings and search results show.
--
-- An upload accepted for background processing keeps its bytes in the
-- database, in file_bytes, from the moment it is accepted until it is ready
-- or failed, so that no accepted file is lost: a restarted process, or
-- another replica, resumes every file left processing.
--
-- The process working on a file holds a lease on it: claimed_by names the
-- claim and claimed_until is renewed while the work goes on. A processing
-- file whose lease is absent or expired is free for any process to claim
-- (UPDATE ... FOR UPDATE SKIP LOCKED), and a process stores its outcome only
-- while the claim is still its own, so no file is processed twice at once.
-- attempts counts the claims, so that a file that keeps stopping its process
-- is failed instead of resumed for ever.

ALTER TABLE files
	ADD COLUMN source_url    text NOT NULL DEFAULT '',
	ADD COLUMN claimed_by    uuid,
	ADD COLUMN claimed_until timestamptz,
	ADD COLUMN attempts      integer NOT NULL DEFAULT 0;

-- Workers look for the oldest processing file; few files are processing at
-- any time, so the partial index stays small.
CREATE INDEX files_processing_idx ON files (created_at, id) WHERE status = 'processing';

-- The bytes of an accepted upload in pieces of at most 256 KiB, written and
-- read a piece at a time so that neither side holds a whole upload in one
-- message. Deleted with the file, and as soon as it is ready or failed.
CREATE TABLE file_bytes (
	file_id uuid    NOT NULL REFERENCES files (id) ON DELETE CASCADE,
	seq     integer NOT NULL,
	data    bytea   NOT NULL,
	PRIMARY KEY (file_id, seq)
);

-- Uploads are mostly compressed formats (PDF): storing them without another
-- compression attempt saves the CPU it would cost.
ALTER TABLE file_bytes ALTER COLUMN data SET STORAGE EXTERNAL;
