package citustest

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/migrations"
)

// TestMovingASingleNodeDatabase follows the move onto Citus in doc/scaling-out.md: a
// database that mcpsearch migrated on one PostgreSQL, holding files,
// chunks, a vector index and audit rows, gains Citus and its workers, and
// `mcpsearch migrate` then distributes its tables with their rows.
func TestMovingASingleNodeDatabase(t *testing.T) {
	ctx := context.Background()
	// Citus and the workers are there, the schema is not: what a database
	// is once Citus is installed in it, had its tables been made before.
	pool := openPool(t, pgtest.NewEmptyCitusDatabase(t))

	// The schema as a build on one PostgreSQL leaves it: every migration,
	// recorded as Apply records them, and no distribution.
	ms, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := pool.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("migration %s: %v", m.Name, err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)`,
			m.Version, m.Name, m.Checksum); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := migrations.Distributed(ctx, pool); err != nil || d {
		t.Fatalf("before the move: distributed %v, %v; want local tables", d, err)
	}
	if _, err := pool.Exec(ctx, seedSQL); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if _, err := pool.Exec(ctx, hnswSQL); err != nil {
		t.Fatalf("vector index: %v", err)
	}
	before := contents(ctx, t, pool)

	applied, err := migrations.Apply(ctx, pool)
	if err != nil {
		t.Fatalf("migrate after Citus came: %v", err)
	}
	if !slices.Equal(applied, []string{"citus/distribute.sql"}) {
		t.Errorf("migrate applied %q; want the distribution alone", applied)
	}
	if d, err := migrations.Distributed(ctx, pool); err != nil || !d {
		t.Fatalf("after the move: distributed %v, %v", d, err)
	}
	after := contents(ctx, t, pool)
	for q, want := range before {
		if got := after[q]; got != want {
			t.Errorf("%s: %s before the move, %s after", q, want, got)
		}
	}

	// The rows live on the workers: the coordinator's own copies of the
	// tables are empty, every shard of chunks is on a worker, and each
	// worker has its shards' copies of the vector index.
	for _, table := range []string{"files", "chunks", "conversation_stats", "chat_mcp_tool_calls"} {
		var size int64
		if err := pool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass)`, table).Scan(&size); err != nil {
			t.Fatal(err)
		}
		if size != 0 {
			t.Errorf("the coordinator's copy of %s holds %d bytes after the move; want it emptied", table, size)
		}
	}
	var onCoordinator, workers int
	if err := pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE n.groupid = 0), count(DISTINCT n.nodeid) FILTER (WHERE n.groupid <> 0)
		FROM citus_shards s JOIN pg_dist_node n ON n.nodename = s.nodename AND n.nodeport = s.nodeport
		WHERE s.table_name = 'chunks'::regclass`).Scan(&onCoordinator, &workers); err != nil {
		t.Fatal(err)
	}
	if onCoordinator != 0 || workers < 2 {
		t.Errorf("chunks' shards: %d on the coordinator, spread over %d workers; want none and every worker", onCoordinator, workers)
	}
	rows, err := pool.Query(ctx, `SELECT nodeport, success, result FROM run_command_on_workers(
		$$SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'chunks_hnsw_m_3_1%'$$)`)
	if err != nil {
		t.Fatal(err)
	}
	var port int
	var ok bool
	var result string
	if _, err := pgx.ForEachRow(rows, []any{&port, &ok, &result}, func() error {
		if !ok || result == "0" {
			t.Errorf("worker %d: vector index shards %q (ok %v); want the index on its shards", port, result, ok)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A second migrate finds nothing to do.
	if applied, err := migrations.Apply(ctx, pool); err != nil || len(applied) != 0 {
		t.Errorf("migrate again: applied %q, %v; want nothing", applied, err)
	}
}

// contents returns, for queries over what the seed wrote, their answers
// as text: the same before and after the move means no row was lost or
// changed.
func contents(ctx context.Context, t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, q := range []string{
		`SELECT count(*)::text || ' ' || coalesce(sum(chunk_count), 0)::text FROM files`,
		`SELECT string_agg(conversation_id || '=' || n, ',' ORDER BY conversation_id) FROM
			(SELECT conversation_id, count(*) n FROM chunks GROUP BY conversation_id) c`,
		`SELECT md5(string_agg(file_id::text || ordinal || content || embedding::text, '' ORDER BY file_id, ordinal)) FROM chunks`,
		`SELECT string_agg(conversation_id || '=' || chunk_count || '/' || ready_files, ',' ORDER BY conversation_id) FROM conversation_stats`,
		`SELECT string_agg(conversation_id || '=' || chunks, ',' ORDER BY conversation_id) FROM conversation_models`,
		`SELECT count(*)::text || ' ' || count(conversation_id)::text FROM chat_mcp_tool_calls`,
		`SELECT string_agg(index_name || '@' || watermark, ',') FROM vector_indexes`,
		// A routed read, as a search of one conversation sends.
		`SELECT count(*)::text FROM chunks WHERE conversation_id = 'conv-3' AND embedding_model = 'm'`,
	} {
		var s *string
		if err := pool.QueryRow(ctx, q).Scan(&s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if s == nil {
			t.Fatalf("%s: no rows; the seed should fill it", q)
		}
		out[q] = *s
	}
	return out
}
