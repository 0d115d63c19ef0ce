package citustest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/pg"
)

// seedSQL writes 20 conversations of 10 ready files of 5 chunks each, and
// one of 3,000 chunks, the vector index's row and the counters.
const seedSQL = `
INSERT INTO files (id, conversation_id, file_name, mime_type, size_bytes, sha256, status, embedding_model, write_seq, chunk_count, ready_gen)
SELECT gen_random_uuid(), 'conv-' || (i % 20), 'f' || i, 'text/plain', 10, md5(i::text), 'ready', 'm', 1, 5, 1
FROM generate_series(1, 200) i;
INSERT INTO files (id, conversation_id, file_name, mime_type, size_bytes, sha256, status, embedding_model, write_seq, chunk_count, ready_gen)
VALUES (gen_random_uuid(), 'conv-big', 'big', 'text/plain', 10, 'big', 'ready', 'm', 1, 3000, 1);
INSERT INTO chunks (file_id, conversation_id, ordinal, content, char_start, char_end, embedding_model, embedding, write_seq)
SELECT f.id, f.conversation_id, o, 'chunk ' || o, 0, 7, 'm', ARRAY[random(), random(), random()]::vector, 1
FROM files f, generate_series(1, f.chunk_count) o;
INSERT INTO conversation_stats (conversation_id, chunk_count, generation, epoch, ready_files)
SELECT conversation_id, sum(chunk_count), 1, 1, count(*) FROM files GROUP BY conversation_id;
INSERT INTO conversation_models (conversation_id, embedding_model, chunks)
SELECT conversation_id, 'm', sum(chunk_count) FROM files GROUP BY conversation_id;
INSERT INTO vector_indexes (embedding_model, dimensions, index_name, watermark, chunk_count, build_seconds)
VALUES ('m', 3, 'chunks_hnsw_m', 1, 4000, 0.1);
INSERT INTO chat_mcp_tool_calls (id, conversation_id, tool_name)
SELECT gen_random_uuid(), CASE WHEN i % 2 = 0 THEN 'conv-' || (i % 20) END, 'search_docs' FROM generate_series(1, 100) i;
`

// visible is docs' condition that a file on f is not its deleted
// conversation's.
const visible = `NOT EXISTS (SELECT FROM conversation_purges p
	WHERE p.conversation_id = f.conversation_id AND f.upload_seq <= p.floor)`

// hnswSQL is a vector index as docs builds it, on every chunk of model m
// written up to watermark 1.
const hnswSQL = `CREATE INDEX CONCURRENTLY chunks_hnsw_m_3_1 ON chunks
	USING hnsw ((embedding::vector(3)) vector_cosine_ops) WHERE embedding_model = 'm' AND write_seq <= 1`

// longIndex is an index name of docs' longest form (a 19-character model,
// 4-digit dimensions, a digest and a 19-digit watermark): 63 bytes, to
// which each shard's index would add its shard id.
const longIndex = "chunks_hnsw_sentence_transforme_1024_a1b2c3_1234567890123456789"

// TestDistributedSchema builds the schema with every migration on a Citus
// cluster, which distributes it (migrations/citus/distribute.sql), and
// checks what the
// documents store needs of it: which statements run on one worker, which
// must touch every shard, which Citus refuses, how the sequences behave
// and how vector indexes are built.
func TestDistributedSchema(t *testing.T) {
	ctx := context.Background()
	pool := openPool(t, pgtest.NewCitusDatabase(t))

	// mcpsearch migrate distributed the schema (migrations/citus); the
	// seed rows go to the shards.
	if _, err := pool.Exec(ctx, seedSQL); err != nil {
		t.Fatalf("seed: %v", err)
	}

	t.Run("tables", func(t *testing.T) { checkTables(ctx, t, pool) })
	t.Run("routed", func(t *testing.T) { checkRouted(ctx, t, pool) })
	t.Run("fan out", func(t *testing.T) { checkFanOut(ctx, t, pool) })
	t.Run("refused", func(t *testing.T) { checkRefused(ctx, t, pool) })
	t.Run("sequences", func(t *testing.T) { checkSequences(ctx, t, pool) })
	t.Run("vector index per shard", func(t *testing.T) { checkVectorIndex(ctx, t, pool) })
	t.Run("foreign keys", func(t *testing.T) { checkForeignKeys(ctx, t, pool) })
}

// tables says where each table mcpsearch migrate creates lives on a Citus
// cluster: "distributed by" its column, "reference" (a copy on every node)
// or "coordinator", for the tables that stay there by design, whose reason
// onCoordinator gives.
var tables = map[string]string{
	"files":               "distributed by conversation_id",
	"chunks":              "distributed by conversation_id",
	"file_bytes":          "distributed by conversation_id",
	"conversation_stats":  "distributed by conversation_id",
	"conversation_models": "distributed by conversation_id",
	"keyword_removals":    "distributed by conversation_id",
	"conversation_purges": "distributed by conversation_id",
	"jobs":                "distributed by conversation_id",
	"sources":             "distributed by conversation_id",
	"source_pages":        "distributed by conversation_id",
	"vector_indexes":      "reference",
	"conversation_keys":   "reference",
	"chat_mcp_tool_calls": "distributed by id",
	"ui_signouts":         "distributed by session_id",
	"schema_migrations":   "coordinator",
	"rate_limit_buckets":  "coordinator",
}

// onCoordinator gives the reason of each table tables keeps on the
// coordinator.
var onCoordinator = map[string]string{
	"schema_migrations":  "mcpsearch migrate's record of the migrations applied; read by migrate alone",
	"rate_limit_buckets": "the shared rate limits' buckets: one row each, one statement per tool call, which the coordinator receives anyway",
}

func checkTables(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	for _, p := range tableProblems(ctx, t, pool) {
		t.Error(p)
	}
	// A table a migration would add, left out of distribute.sql, is
	// found.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TABLE left_out (conversation_id text PRIMARY KEY)`); err != nil {
			return err
		}
		problems := tableProblems(ctx, t, tx)
		if len(problems) != 1 || !strings.Contains(problems[0], "left_out") {
			t.Errorf("with a table left out of distribute.sql: %q, want one problem naming it", problems)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
}

// tableProblems compares every table of the schema, read from the catalog,
// with tables, through pg_dist_partition, and returns what differs.
func tableProblems(ctx context.Context, t *testing.T, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) []string {
	t.Helper()
	rows, err := db.Query(ctx, `
		SELECT c.relname::text,
		       CASE WHEN p.logicalrelid IS NULL THEN 'coordinator'
		            WHEN p.partmethod = 'h' THEN 'distributed by ' || column_to_column_name(p.logicalrelid, p.partkey)
		            WHEN p.partmethod = 'n' AND p.repmodel = 't' THEN 'reference'
		            ELSE 'a Citus local table' END,
		       coalesce(p.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'files'::regclass), false)
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	seen := map[string]bool{}
	var name, kind string
	var withFiles bool
	if _, err := pgx.ForEachRow(rows, []any{&name, &kind, &withFiles}, func() error {
		seen[name] = true
		want, ok := tables[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("table %s is %s and not known to this test: distribute it in migrations/citus/distribute.sql, "+
				"or make it a reference table, and add it to tables (or, if it must stay on the coordinator, say why in onCoordinator)", name, kind))
		case kind != want:
			problems = append(problems, fmt.Sprintf("table %s is %s, want %s", name, kind, want))
		case kind == "coordinator" && onCoordinator[name] == "":
			problems = append(problems, fmt.Sprintf("table %s stays on the coordinator without a reason in onCoordinator", name))
		case kind == "distributed by conversation_id" && !withFiles:
			problems = append(problems, fmt.Sprintf("table %s is not co-located with files: a join of the two would leave the worker", name))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name := range tables {
		if !seen[name] {
			problems = append(problems, fmt.Sprintf("table %s is listed but migrate did not create it", name))
		}
	}
	return problems
}

// statement is a statement with its arguments.
type statement struct {
	name string
	sql  string
	args []any
}

// checkRouted asserts that the statements the store would send about one
// conversation, written with conversation_id = $n, each run as one task on
// one worker.
func checkRouted(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	chunkID, fileID := anyChunk(ctx, t, pool, "conv-3")
	const conv = "conv-3"
	// The query vector goes as the store sends it: pgvector's binary type.
	query := pgvector.NewVector([]float32{0.1, 0.2, 0.3})
	for _, s := range []statement{
		{"search: counters and watermark", `
			SELECT s.chunk_count, s.generation, s.epoch, s.removal_floor, s.write_floor,
			       coalesce(v.watermark, -1), coalesce(m.covered, 0)
			FROM conversation_stats s
			LEFT JOIN conversation_models m ON m.conversation_id = s.conversation_id AND m.embedding_model = $2
			LEFT JOIN vector_indexes v ON v.embedding_model = $2
			WHERE s.conversation_id = $1`, []any{conv, "m"}},
		{"search: vector ranking through the index", `
			SELECT id::text, file_id::text, 1 - ((embedding::vector(3)) <=> $1::vector::vector(3))
			FROM chunks
			WHERE embedding_model = 'm' AND write_seq <= 1 AND conversation_id = $2 AND write_seq > 0
			ORDER BY (embedding::vector(3)) <=> $1::vector::vector(3)
			LIMIT $3`, []any{query, conv, 10}},
		{"search: exact vector ranking", `
			WITH d AS MATERIALIZED (
				SELECT id, file_id, (embedding::vector(3)) <=> $1::vector::vector(3) AS distance
				FROM chunks
				WHERE conversation_id = $2 AND embedding_model = 'm' AND write_seq > 1)
			SELECT id::text, file_id::text, 1 - distance FROM d ORDER BY distance LIMIT $3`, []any{query, conv, 10}},
		{"search: details, joined on the conversation too", `
			SELECT c.id::text, c.file_id::text, f.file_name, c.content, f.source_url,
			       1 - ((c.embedding::vector(3)) <=> $2::vector::vector(3))
			FROM chunks c JOIN files f ON f.conversation_id = c.conversation_id AND f.id = c.file_id
			WHERE c.conversation_id = $3 AND c.id = ANY($1::uuid[])`, []any{[]string{chunkID}, query, conv}},
		{"keyword: generation", `SELECT coalesce((SELECT generation FROM conversation_stats WHERE conversation_id = $1), -1)`, []any{conv}},
		{"keyword: files made ready since", `
			SELECT f.id, f.embedding_model, f.keyword_postings FROM files f
			WHERE f.conversation_id = $1 AND f.status = 'ready' AND f.ready_gen > $2 AND ` + visible + `
			ORDER BY f.id`, []any{conv, 0}},
		{"keyword: removals since", `SELECT file_id FROM keyword_removals WHERE conversation_id = $1 AND generation > $2`, []any{conv, 0}},
		{"list_files", `
			SELECT f.id::text, f.file_name, f.status FROM files f
			WHERE f.conversation_id = $1 AND ` + visible + `
			ORDER BY f.created_at, f.id`, []any{conv}},
		{"get_chunk, given its conversation", `
			SELECT c.id::text, c.file_id::text, f.file_name, c.content
			FROM chunks c JOIN files f ON f.conversation_id = c.conversation_id AND f.id = c.file_id
			WHERE c.conversation_id = $2 AND c.id = $1 AND ` + visible, []any{chunkID, conv}},
		{"write: lock the conversation's counters", `SELECT conversation_id FROM conversation_stats WHERE conversation_id = $1 FOR UPDATE`, []any{conv}},
		{"write: counters and a new generation", `
			UPDATE conversation_stats SET chunk_count = chunk_count + $2,
			       generation = (SELECT nextval('conversation_generation_seq'))
			WHERE conversation_id = $1 RETURNING generation`, []any{conv, 5}},
		{"write: a model's counters", `
			INSERT INTO conversation_models AS m (conversation_id, embedding_model, chunks, covered) VALUES ($1, $2, $3, 0)
			ON CONFLICT (conversation_id, embedding_model) DO UPDATE SET chunks = m.chunks + excluded.chunks`, []any{conv, "m", 5}},
		{"upload: a file", `
			INSERT INTO files (id, conversation_id, file_name, mime_type, size_bytes, sha256, upload_seq)
			VALUES (gen_random_uuid(), $1, 'a.txt', 'text/plain', 3, 'abc', $2)`, []any{conv, 7}},
		{"upload: files of the same bytes, locked", `
			SELECT f.sha256, f.status FROM files f
			WHERE f.conversation_id = $1 AND f.sha256 = ANY($2) ORDER BY f.id FOR UPDATE`, []any{conv, []string{"abc", "def"}}},
		{"upload: its bytes", `INSERT INTO file_bytes (conversation_id, file_id, seq, data) VALUES ($1, $2, 0, 'abc')`, []any{conv, fileID}},
		{"delete_file, given its conversation", `
			DELETE FROM files f WHERE f.conversation_id = $2 AND f.id = $1 AND ` + visible + `
			RETURNING f.status, f.embedding_model, f.chunk_count`, []any{fileID, conv}},
		{"delete_conversation: the purge's record, its time from the row proposed", `
			INSERT INTO conversation_purges AS p (conversation_id, floor) VALUES ($1, $2)
			ON CONFLICT (conversation_id) DO UPDATE SET floor = greatest(p.floor, excluded.floor), requested_at = excluded.requested_at`, []any{conv, 9}},
		{"purge: a batch of chunks, by ctid within the conversation", `
			DELETE FROM chunks WHERE conversation_id = $1 AND ctid = ANY(ARRAY(
				SELECT ctid FROM chunks WHERE conversation_id = $1 AND write_seq <= $2 LIMIT $3))`, []any{conv, 9, 2000}},
		{"purge: a batch of files", `
			DELETE FROM files WHERE conversation_id = $1 AND id = ANY(ARRAY(
				SELECT id FROM files WHERE conversation_id = $1 AND upload_seq <= $2 LIMIT $3))`, []any{conv, 9, 500}},
	} {
		t.Run(s.name, func(t *testing.T) {
			p, err := Explain(ctx, pool, s.sql, s.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Routed() {
				t.Errorf("%s; want one task on one worker\n%s", p, p.JSON)
			}
			// Planned is not enough: the statement must run too.
			if err := inRolledBack(ctx, pool, s.sql, s.args...); err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
}

// checkFanOut names the statements that must touch every shard, with the
// number of tasks they cost.
func checkFanOut(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	var shardCount int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'files'::regclass`).Scan(&shardCount); err != nil {
		t.Fatal(err)
	}
	chunkID, _ := anyChunk(ctx, t, pool, "conv-5")
	for _, s := range []statement{
		{"list_conversations", `
			SELECT conversation_id, ready_files, chunk_count, last_upload_at FROM conversation_stats
			WHERE ready_files + processing_files + failed_files > 0
			ORDER BY last_upload_at DESC, conversation_id LIMIT $1`, []any{50}},
		{"get_chunk by its id alone", `
			SELECT c.id::text, c.content, f.file_name
			FROM chunks c JOIN files f ON f.conversation_id = c.conversation_id AND f.id = c.file_id
			WHERE c.id = $1`, []any{chunkID}},
		{"index build: files written since the last build", `
			SELECT conversation_id, sum(chunk_count) FROM files
			WHERE embedding_model = $1 AND write_seq > $2 AND status = 'ready' GROUP BY conversation_id`, []any{"m", 0}},
		{"index policy: conversations with fresh chunks", `
			SELECT conversation_id, chunks - covered FROM conversation_models
			WHERE embedding_model = $1 AND chunks > covered ORDER BY chunks - covered DESC LIMIT 10`, []any{"m"}},
		{"audit: a conversation's calls", `
			SELECT id, tool_name, created_at FROM chat_mcp_tool_calls
			WHERE conversation_id = $1 ORDER BY created_at DESC, id LIMIT 50`, []any{"conv-5"}},
		{"audit: prune", `DELETE FROM chat_mcp_tool_calls WHERE created_at < now() - make_interval(secs => $1)`, []any{3600}},
	} {
		t.Run(s.name, func(t *testing.T) {
			p, err := Explain(ctx, pool, s.sql, s.args...)
			if err != nil {
				t.Fatal(err)
			}
			if p.Tasks() != shardCount || len(p.Nodes()) < 2 {
				t.Errorf("%s; want %d tasks over every worker\n%s", p, shardCount, p.JSON)
			}
			if err := inRolledBack(ctx, pool, s.sql, s.args...); err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
}

// checkRefused runs statements of the single-node store that Citus
// refuses on the distributed schema, and checks Citus's reason.
func checkRefused(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	// Two conversations of the seed on different shards: on one shard,
	// Citus would route the statements about both.
	var other string
	if err := pool.QueryRow(ctx, `
		SELECT conversation_id FROM conversation_stats
		WHERE get_shard_id_for_distribution_column('conversation_stats', conversation_id)
		   <> get_shard_id_for_distribution_column('conversation_stats', 'conv-1')
		ORDER BY conversation_id LIMIT 1`).Scan(&other); err != nil {
		t.Fatalf("a conversation on another shard than conv-1's: %v", err)
	}
	convs := []string{"conv-1", other}
	for _, tt := range []struct {
		statement
		want string
	}{
		{statement{"lock several conversations' counters at once", `
			SELECT conversation_id FROM conversation_stats
			WHERE conversation_id = ANY($1) ORDER BY conversation_id FOR UPDATE`, []any{convs}},
			"could not run distributed query with FOR UPDATE/SHARE commands"},
		{statement{"nextval in an UPDATE, even of one conversation", `
			UPDATE conversation_stats SET generation = nextval('conversation_generation_seq') WHERE conversation_id = $1`, []any{"conv-1"}},
			"functions used in UPDATE queries on distributed tables must not be VOLATILE"},
		{statement{"counters of several conversations with nextval (applyDeltas)", `
			UPDATE conversation_stats s
			SET chunk_count = s.chunk_count + d.chunks,
			    generation = CASE WHEN d.bump THEN nextval('conversation_generation_seq') ELSE s.generation END
			FROM unnest($1::text[], $2::bigint[], $3::bool[]) AS d(c, chunks, bump)
			WHERE s.conversation_id = d.c
			RETURNING s.conversation_id, s.generation`, []any{convs, []int64{1, 2}, []bool{true, false}}},
			"functions used in UPDATE queries on distributed tables must not be VOLATILE"},
		{statement{"new counters rows with a correlated subquery (lockConversations)", `
			INSERT INTO conversation_stats (conversation_id, chunk_count, generation, epoch, write_floor)
			SELECT c, 0, g, g, coalesce((SELECT floor FROM conversation_purges p WHERE p.conversation_id = c), 0)
			FROM (SELECT c, nextval('conversation_generation_seq') AS g FROM unnest($1::text[]) AS c) n
			ORDER BY c
			ON CONFLICT (conversation_id) DO NOTHING`, []any{[]string{"conv-new"}}},
			"correlated subqueries are not supported when the FROM clause contains a set returning function"},
		{statement{"claim the oldest processing files of every conversation (claimFiles)", `
			UPDATE files f SET claimed_by = $1, claimed_until = now() + make_interval(secs => $2), attempts = f.attempts + 1
			FROM (
				SELECT id, sum(size_bytes) OVER (ORDER BY created_at, id) AS run, row_number() OVER (ORDER BY created_at, id) AS n
				FROM (
					SELECT f.id, f.size_bytes, f.created_at FROM files f
					WHERE f.status = 'processing' AND (f.claimed_until IS NULL OR f.claimed_until < now()) AND ` + visible + `
					ORDER BY f.created_at, f.id
					LIMIT $3
					FOR UPDATE SKIP LOCKED) l) w
			WHERE f.id = w.id AND (w.n = 1 OR w.run <= $4)
			RETURNING f.id`, []any{"8c1b9a4e-0000-4000-8000-000000000000", 60.0, 8, int64(1 << 20)}},
			"could not run distributed query with FOR UPDATE/SHARE commands"},
		{statement{"details joined on the file id alone (search)", `
			SELECT c.id::text, f.file_name FROM chunks c JOIN files f ON f.id = c.file_id
			WHERE c.id = ANY($1::uuid[])`, []any{[]string{"8c1b9a4e-0000-4000-8000-000000000000"}}},
			"the query contains a join that requires repartitioning"},
		{statement{"now() in ON CONFLICT DO UPDATE of a reference table (BuildIndex)", `
			INSERT INTO vector_indexes (embedding_model, dimensions, index_name, watermark, chunk_count, build_seconds)
			VALUES ($1, 3, 'x', 5, 10, 1.0)
			ON CONFLICT (embedding_model) DO UPDATE SET watermark = excluded.watermark, built_at = now()`, []any{"m"}},
			"functions used in the DO UPDATE SET clause of INSERTs on distributed tables must be marked IMMUTABLE"},
		{statement{"the oldest deletion to purge, locked (purgeStep)", `
			SELECT conversation_id, floor FROM conversation_purges
			ORDER BY requested_at LIMIT 1 FOR UPDATE SKIP LOCKED`, nil},
			"could not run distributed query with FOR UPDATE/SHARE commands"},
		{statement{"files to write postings for, locked by id (keyword postings backfill)", `
			WITH todo AS (
				SELECT id FROM files WHERE id = ANY($1) AND status = 'ready' AND keyword_postings IS NULL
				ORDER BY id FOR UPDATE SKIP LOCKED)
			UPDATE files f SET keyword_postings = v.p
			FROM todo JOIN unnest($1::uuid[], $2::bytea[]) AS v(id, p) ON v.id = todo.id
			WHERE f.id = todo.id`, []any{[]string{"8c1b9a4e-0000-4000-8000-000000000000"}, [][]byte{{0}}}},
			"could not run distributed query with FOR UPDATE/SHARE commands"},
		{statement{"files of the same bytes, locked through unnest, even of one conversation (storeUpload)", `
			SELECT f.conversation_id, f.sha256, f.status FROM files f
			JOIN unnest($1::text[], $2::text[]) AS u(c, sha) ON f.conversation_id = u.c AND f.sha256 = u.sha
			ORDER BY f.id FOR UPDATE OF f`, []any{[]string{"conv-1"}, []string{"x"}}},
			"could not run distributed query with FOR UPDATE/SHARE commands"},
		{statement{"now() in ON CONFLICT DO UPDATE (deleteConversation)", `
			INSERT INTO conversation_purges AS p (conversation_id, floor) VALUES ($1, $2)
			ON CONFLICT (conversation_id) DO UPDATE SET floor = greatest(p.floor, excluded.floor), requested_at = now()`, []any{"conv-1", 9}},
			"functions used in the DO UPDATE SET clause of INSERTs on distributed tables must be marked IMMUTABLE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, inRolledBack(ctx, pool, tt.sql, tt.args...), tt.want)
		})
	}
	// The rewrites that replace them work.
	for _, s := range []statement{
		{"new counters rows, joined instead", `
			INSERT INTO conversation_stats (conversation_id, chunk_count, generation, epoch, write_floor)
			SELECT n.c, 0, n.g, n.g, coalesce(p.floor, 0)
			FROM (SELECT c, nextval('conversation_generation_seq') AS g FROM unnest($1::text[]) AS c) n
			LEFT JOIN conversation_purges p ON p.conversation_id = n.c
			ORDER BY n.c
			ON CONFLICT (conversation_id) DO NOTHING`, []any{[]string{"conv-new", "conv-1"}}},
		{"the vector index's row, its time from the row proposed", `
			INSERT INTO vector_indexes (embedding_model, dimensions, index_name, watermark, chunk_count, build_seconds)
			VALUES ($1, 3, 'x', 5, 10, 1.0)
			ON CONFLICT (embedding_model) DO UPDATE SET watermark = excluded.watermark, built_at = excluded.built_at`, []any{"m"}},
		{"audit: a batch through a temporary table (audit.Writer)", `
			CREATE TEMP TABLE audit_stage (LIKE chat_mcp_tool_calls INCLUDING DEFAULTS) ON COMMIT DROP;
			INSERT INTO audit_stage (id, tool_name) SELECT gen_random_uuid(), 'web_search' FROM generate_series(1, 5);
			INSERT INTO chat_mcp_tool_calls SELECT * FROM audit_stage ON CONFLICT (id) DO NOTHING`, nil},
		{"counters of several conversations, generations taken first", `
			WITH d AS MATERIALIZED (
				SELECT c, chunks, CASE WHEN bump THEN nextval('conversation_generation_seq') END AS gen
				FROM unnest($1::text[], $2::bigint[], $3::bool[]) AS d(c, chunks, bump))
			UPDATE conversation_stats s
			SET chunk_count = s.chunk_count + d.chunks, generation = coalesce(d.gen, s.generation)
			FROM d WHERE s.conversation_id = d.c
			RETURNING s.conversation_id, s.generation`, []any{convs, []int64{1, 2}, []bool{true, false}}},
	} {
		t.Run(s.name, func(t *testing.T) {
			if err := inRolledBack(ctx, pool, s.sql, s.args...); err != nil {
				t.Error(err)
			}
		})
	}
}

// checkSequences shows where sequence numbers come from. A sequence that
// a distributed table's column defaults to (conversation_generation_seq,
// for conversation_stats.generation) is created on the workers too, each
// with its own range starting at its group id << 48, so a number taken on a
// worker is far above the coordinator's: numbers that must grow in commit
// order (generations, write numbers and watermarks are compared, not just
// matched) must come from the coordinator. chunk_write_seq, which no
// column defaults to, exists on the coordinator alone.
func checkSequences(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	var onCoordinator int64
	if err := pool.QueryRow(ctx, `SELECT nextval('conversation_generation_seq')`).Scan(&onCoordinator); err != nil {
		t.Fatal(err)
	}
	if onCoordinator >= 1<<48 {
		t.Errorf("the coordinator's conversation_generation_seq gave %d", onCoordinator)
	}
	for _, w := range onWorkers(ctx, t, pool, `SELECT nextval('conversation_generation_seq')`) {
		if !w.ok {
			t.Errorf("worker %s: %s", w.node, w.result)
			continue
		}
		n, err := strconv.ParseInt(w.result, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if n < 1<<48 {
			t.Errorf("worker %s's conversation_generation_seq gave %d, want its own range above 2^48", w.node, n)
		}
	}
	for _, w := range onWorkers(ctx, t, pool, `SELECT nextval('chunk_write_seq')`) {
		if w.ok || !strings.Contains(w.result, `relation "chunk_write_seq" does not exist`) {
			t.Errorf("worker %s: chunk_write_seq gave %v %q, want it missing", w.node, w.ok, w.result)
		}
	}
	// A scalar subquery is a subplan the coordinator computes before it
	// sends the single task: the number is the coordinator's.
	var gen int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `
			UPDATE conversation_stats SET generation = (SELECT nextval('conversation_generation_seq'))
			WHERE conversation_id = 'conv-7' RETURNING generation`).Scan(&gen); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if gen <= onCoordinator || gen >= 1<<48 {
		t.Errorf("generation from a subquery is %d, want the coordinator's next number after %d", gen, onCoordinator)
	}
}

// checkVectorIndex builds a vector index as docs does, CONCURRENTLY, on the
// distributed chunks table: Citus builds one on every shard, and a search
// of one conversation uses its shard's.
func checkVectorIndex(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	if _, err := pool.Exec(ctx, hnswSQL); err != nil {
		t.Fatalf("%s: %v", hnswSQL, err)
	}
	// Per worker: the indexes on chunks shards named after the index, and
	// those not valid. The workers also hold the table's shell, which has
	// the index under its own name.
	for _, w := range onWorkers(ctx, t, pool, `
		SELECT count(*) FILTER (WHERE c.relname <> 'chunks_hnsw_m_3_1') || ' ' || count(*) FILTER (WHERE NOT i.indisvalid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname LIKE 'chunks\_hnsw\_m\_3\_1%'`) {
		if !w.ok {
			t.Fatalf("worker %s: %s", w.node, w.result)
		}
		var shards, invalid int
		if _, err := fmt.Sscan(w.result, &shards, &invalid); err != nil {
			t.Fatal(err)
		}
		var placements int
		if err := pool.QueryRow(ctx, `
			SELECT count(*) FROM citus_shards WHERE table_name = 'chunks'::regclass AND nodename || ':' || nodeport = $1`,
			w.node).Scan(&placements); err != nil {
			t.Fatal(err)
		}
		if shards != placements || invalid != 0 {
			t.Errorf("worker %s: %d shard indexes (%d invalid) for %d shards of chunks", w.node, shards, invalid, placements)
		}
	}
	// A name at PostgreSQL's limit: the table keeps it, the shards' indexes
	// get a shortened name with a hash and their shard id, so the
	// coordinator's catalog (pg_indexes) is where docs finds its indexes.
	if _, err := pool.Exec(ctx, `CREATE INDEX CONCURRENTLY `+longIndex+` ON chunks (write_seq)`); err != nil {
		t.Fatalf("an index with a name of 63 bytes: %v", err)
	}
	var kept bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_indexes WHERE tablename = 'chunks' AND indexname = $1)`, longIndex).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if !kept {
		t.Errorf("the coordinator lacks the index %s", longIndex)
	}
	for _, w := range onWorkers(ctx, t, pool, `SELECT count(*) FROM pg_indexes WHERE indexname ~ '^chunks_hnsw_sentence_transforme_.*_[0-9a-f]{8}_[0-9]+$'`) {
		if !w.ok || w.result == "0" {
			t.Errorf("worker %s: shard indexes named with a hash and the shard id: %v %s", w.node, w.ok, w.result)
		}
	}

	// The shard's planner can serve a search of one conversation with the
	// shard's index. Sorts and sequential scans are turned off, on the
	// worker too, so that the test does not depend on the cost estimates
	// of a small table (where reading the conversation's rows through the
	// b-tree index and sorting them is cheaper).
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, set := range []string{`SET LOCAL citus.propagate_set_commands = 'local'`, `SET LOCAL enable_seqscan = off`, `SET LOCAL enable_sort = off`} {
			if _, err := tx.Exec(ctx, set); err != nil {
				return err
			}
		}
		// The query vector is written out, not a parameter: the worker
		// then gives the plan of its shard (see Job.Unplanned).
		p, err := Explain(ctx, tx, `
			SELECT id FROM chunks
			WHERE embedding_model = 'm' AND write_seq <= 1 AND conversation_id = $1 AND write_seq > 0
			ORDER BY (embedding::vector(3)) <=> '[0.5,0.5,0.5]'::vector(3) LIMIT 10`, "conv-big")
		if err != nil {
			return err
		}
		if !p.Routed() || !strings.Contains(p.JSON, `"Index Name": "chunks_hnsw_m_3_1_`) {
			t.Errorf("%s; want one task using the shard's chunks_hnsw_m_3_1\n%s", p, p.JSON)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
}

// checkForeignKeys deletes a file: its chunks and bytes go with it, on the
// worker, as on a single node.
func checkForeignKeys(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	_, fileID := anyChunk(ctx, t, pool, "conv-11")
	if _, err := pool.Exec(ctx, `INSERT INTO file_bytes (conversation_id, file_id, seq, data) VALUES ('conv-11', $1, 0, 'x')`, fileID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM files WHERE conversation_id = 'conv-11' AND id = $1`, fileID); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM chunks WHERE conversation_id = 'conv-11' AND file_id = $1)
		     + (SELECT count(*) FROM file_bytes WHERE conversation_id = 'conv-11' AND file_id = $1)`, fileID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d chunks and bytes of a deleted file remain", left)
	}
	// A chunk of a file that is not there is refused.
	_, err := pool.Exec(ctx, `
		INSERT INTO chunks (file_id, conversation_id, ordinal, content, char_start, char_end, embedding_model, embedding)
		VALUES ($1, 'conv-11', 1, 'x', 0, 1, 'm', '[1,2,3]')`, fileID)
	wantError(t, err, "violates foreign key constraint")
}

// errRollback ends a pgx.BeginFunc with a rollback.
var errRollback = errors.New("rolled back on purpose")

// inRolledBack runs sql in a transaction it rolls back.
func inRolledBack(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}

// wantError fails the test unless err is a PostgreSQL error whose message
// or detail holds want.
func wantError(t *testing.T, err error, want string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a PostgreSQL error saying %q", err, want)
	}
	if !strings.Contains(pe.Message+"\n"+pe.Detail, want) {
		t.Errorf("got %q (%s), want %q", pe.Message, pe.Detail, want)
	}
}

// anyChunk returns a chunk of conversation conv and its file.
func anyChunk(ctx context.Context, t *testing.T, pool *pgxpool.Pool, conv string) (chunkID, fileID string) {
	t.Helper()
	if err := pool.QueryRow(ctx, `SELECT id::text, file_id::text FROM chunks WHERE conversation_id = $1 LIMIT 1`, conv).Scan(&chunkID, &fileID); err != nil {
		t.Fatal(err)
	}
	return chunkID, fileID
}

// workerResult is one worker's answer to run_command_on_workers.
type workerResult struct {
	node   string
	ok     bool
	result string
}

func onWorkers(ctx context.Context, t *testing.T, pool *pgxpool.Pool, sql string) []workerResult {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT nodename || ':' || nodeport, success, result FROM run_command_on_workers($1)`, sql)
	if err != nil {
		t.Fatal(err)
	}
	var out []workerResult
	var w workerResult
	if _, err := pgx.ForEachRow(rows, []any{&w.node, &w.ok, &w.result}, func() error { out = append(out, w); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("the cluster has no worker")
	}
	return out
}

// openPool opens a pool as the server does, with pgvector's types.
func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
