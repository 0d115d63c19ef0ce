-- The jobs of every conversation, newest first (the web page's jobs page, a
-- key that sees every conversation): without these, the newest few of a
-- million jobs were a scan and a sort of all of them (137 ms; 0.1 ms with
-- the index). The partial one serves "running" alone, which otherwise reads
-- through every ended job to find the few still under way.
CREATE INDEX jobs_created_idx ON jobs (created_at DESC, id DESC);
CREATE INDEX jobs_active_idx ON jobs (created_at DESC, id DESC) WHERE status IN ('queued', 'running');
