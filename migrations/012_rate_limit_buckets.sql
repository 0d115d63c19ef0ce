-- Token buckets shared by every replica of the server (package ratelimit),
-- used when MCP_rate_limit_store is postgres (the default of an HTTP server
-- with a database).
--
-- One row per bucket: a caller's bucket of a tool ('search_docs:key-1a2b')
-- or the bucket all callers of a tool share ('search_docs'). tokens is what
-- the bucket held at updated_at; the refill since then is computed when the
-- bucket is next used, from the database's clock, so that replicas whose
-- clocks differ agree. A bucket without a row is full.
--
-- Unlogged: a bucket is a few seconds of state, written on every call.
-- Without WAL a call costs less, and a crash, or a failover to a standby
-- (which does not receive unlogged tables), only refills every bucket: the
-- same as a bucket left idle. The fill factor leaves room on each page for
-- the next version of its rows, so an update stays on its page (no index
-- column changes: a HOT update).
--
-- On a Citus cluster the table stays on the coordinator, which receives
-- every call's statement anyway: a bucket is one row, touched by one
-- statement, and distributing it would only add a hop.
CREATE UNLOGGED TABLE rate_limit_buckets (
	key        text PRIMARY KEY,
	tokens     double precision NOT NULL,
	updated_at timestamptz NOT NULL
) WITH (fillfactor = 50);
