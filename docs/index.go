package docs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The HNSW index of a model's embeddings is built in bulk, in the
// background, rather than maintained as chunks are stored: an HNSW insert
// costs milliseconds a row, which capped ingestion near 300 chunks a second
// per core, while pgvector builds the same index several times faster in
// one pass (see doc/performance.md).
//
// Every write of chunks takes a number from chunk_write_seq and stamps it
// on the chunks and their file (write_seq). An index covers the chunks of
// its model written up to its watermark:
//
//	CREATE INDEX CONCURRENTLY chunks_hnsw_<model>_<dims>_<digest>_<watermark> ON chunks
//	  USING hnsw ((embedding::vector(<dims>)) vector_cosine_ops)
//	  WHERE embedding_model = '<model>' AND write_seq <= <watermark>
//
// and vector_indexes names the index searches use. A search of a large
// conversation ranks the covered chunks through the index and the fresh
// ones (written after the watermark) exactly, and merges the two lists; a
// small conversation is ranked exactly whatever the index. So a file is
// searchable on every replica as soon as it is stored; the index only
// decides how fast a large conversation is searched.
//
// A build starts when a large conversation has enough fresh chunks to slow
// its searches down (IndexPolicy.FreshChunks) and writes have paused for
// IndexPolicy.Settle, or when the fresh chunks of the model outnumber the
// indexed ones, so that a database that never stops ingesting is still
// indexed, at a cost proportional to its growth. One process builds at a
// time (an advisory lock); the new index replaces the old one only once it
// is complete, so searches never lose their index.

// pgvector's HNSW index accepts vector up to 2,000 dimensions and halfvec up
// to MaxIndexDimensions. Larger embeddings are stored and searched exactly,
// unindexed.
const (
	maxVectorIndexDims = 2000
	MaxIndexDimensions = 4000
)

// Defaults of IndexPolicy.
const (
	// DefaultIndexSettle is how long writes must pause before a build.
	DefaultIndexSettle = 5 * time.Second
	// DefaultIndexInterval is how often an Ingester checks its model's index.
	DefaultIndexInterval = 5 * time.Second
	// DefaultIndexBuildMemory is the maintenance_work_mem of a build:
	// pgvector builds several times faster when the graph fits in it
	// (about 2 KB a chunk of 384 dimensions).
	DefaultIndexBuildMemory = 1 << 30
)

// IndexPolicy says when the vector index of the embedder's model is
// rebuilt, and with how much memory. The zero value is the defaults.
type IndexPolicy struct {
	// FreshChunks is how many chunks of one conversation larger than the
	// exact-ranking limit must be fresh (not yet covered) before a build;
	// zero means that limit (2,000), the size every small conversation is
	// ranked exactly at anyway.
	FreshChunks int64
	// Settle is how long no file of the model must have been stored
	// before a build; zero means DefaultIndexSettle. A build starts
	// without waiting once the fresh chunks outnumber the covered ones.
	Settle time.Duration
	// Interval is how often an Ingester checks; zero means
	// DefaultIndexInterval. Negative disables background builds: then
	// only BuildIndex builds (mcpsearch index).
	Interval time.Duration
	// BuildMemory is PostgreSQL's maintenance_work_mem for a build, in
	// bytes; zero means DefaultIndexBuildMemory.
	BuildMemory int64
}

func (p IndexPolicy) withDefaults(exactChunks int64) IndexPolicy {
	if p.FreshChunks <= 0 {
		p.FreshChunks = max(exactChunks, 1)
	}
	if p.Settle <= 0 {
		p.Settle = DefaultIndexSettle
	}
	if p.Interval == 0 {
		p.Interval = DefaultIndexInterval
	}
	if p.BuildMemory <= 0 {
		p.BuildMemory = DefaultIndexBuildMemory
	}
	return p
}

// vectorType is the SQL type a model's embeddings are cast to, both in its
// index expression and in every query, so that the planner can use the
// index: vector(d), or halfvec(d) for dimensions vector cannot index.
func vectorType(dims int) string {
	if dims > maxVectorIndexDims {
		return fmt.Sprintf("halfvec(%d)", dims)
	}
	return fmt.Sprintf("vector(%d)", dims)
}

// vectorExpr is the indexed expression for a model of dims dimensions.
func vectorExpr(dims int) string {
	return "(embedding::" + vectorType(dims) + ")"
}

// modelLiteral quotes a model name as an SQL string literal. Searches write
// the model into the SQL text rather than binding it, because the planner
// proves a partial index usable only against constants. checkEmbedder has
// refused names with backslashes or control characters, and
// standard_conforming_strings (on since PostgreSQL 9.1) leaves everything
// else literal once quotes are doubled.
func modelLiteral(model string) string {
	return "'" + strings.ReplaceAll(model, "'", "''") + "'"
}

// indexPrefix is the start of the names of a model's indexes: a readable
// form of the model plus a digest of the exact name. indexName adds the
// watermark, within PostgreSQL's 63-byte limit.
func indexPrefix(model string, dims int) string {
	var b strings.Builder
	underscore := false
	for _, r := range strings.ToLower(model) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			underscore = false
		} else if !underscore {
			b.WriteByte('_')
			underscore = true
		}
	}
	readable := strings.Trim(b.String(), "_")
	if len(readable) > 19 {
		readable = strings.TrimRight(readable[:19], "_")
	}
	sum := sha256.Sum256([]byte(model))
	return fmt.Sprintf("chunks_hnsw_%s_%d_%s_", readable, dims, hex.EncodeToString(sum[:3]))
}

// indexName is the name of a model's index covering writes up to watermark.
func indexName(model string, dims int, watermark int64) string {
	return fmt.Sprintf("%s%d", indexPrefix(model, dims), watermark)
}

// indexable reports whether pgvector can index embeddings of dims
// dimensions.
func indexable(dims int) bool { return dims <= MaxIndexDimensions }

// IndexState is a model's vector index and the chunks it does not cover.
type IndexState struct {
	// Model and Dimensions are the embedder's.
	Model      string
	Dimensions int
	// Index names the index searches use; "" when none is built yet.
	Index string
	// Watermark is the last write the index covers; -1 without an index.
	Watermark int64
	// Indexed counts the chunks the index covered when it was built, and
	// Fresh the chunks of the model's ready files it does not cover.
	Indexed, Fresh int64
	// FreshLarge is the most fresh chunks of one conversation too large
	// to be ranked exactly without the index.
	FreshLarge int64
	// Idle is how long ago fresh chunks were last stored.
	Idle time.Duration
}

// due reports whether the state calls for a build under p.
func (st IndexState) due(p IndexPolicy) bool {
	if !indexable(st.Dimensions) || st.FreshLarge < p.FreshChunks {
		return false
	}
	return st.Idle >= p.Settle || st.Fresh >= st.Indexed
}

// IndexState reads the state of the vector index of the store's embedder:
// the index's row, and the conversations holding chunks it does not cover
// (conversation_models, through an index of those alone). Its cost grows
// with the conversations written since the last build, not with the
// database.
func (s *Store) IndexState(ctx context.Context) (IndexState, error) {
	emb := s.Embedder()
	st := IndexState{Model: emb.Model(), Dimensions: emb.Dimensions(), Watermark: -1}
	err := s.pool.QueryRow(ctx, `SELECT index_name, watermark, chunk_count FROM vector_indexes WHERE embedding_model = $1`,
		st.Model).Scan(&st.Index, &st.Watermark, &st.Indexed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, dbError("docs: vector index", err)
	}
	var idle float64
	err = s.pool.QueryRow(ctx, `
		SELECT coalesce(sum(chunks - covered), 0),
		       coalesce(max(chunks - covered) FILTER (WHERE chunks > $2), 0),
		       coalesce(extract(epoch FROM now() - max(last_write_at)), 0)::float8
		FROM conversation_models
		WHERE embedding_model = $1 AND chunks > covered`, st.Model, s.exactChunks).Scan(&st.Fresh, &st.FreshLarge, &idle)
	if err != nil {
		return st, dbError("docs: vector index", err)
	}
	st.Idle = time.Duration(idle * float64(time.Second))
	return st, nil
}

// buildCandidate reports whether a conversation too large to be ranked
// exactly has at least fresh chunks the index does not cover: the one
// statement a server runs every few seconds to check its index, an index
// range scan over such conversations alone.
func (s *Store) buildCandidate(ctx context.Context, fresh int64) (bool, error) {
	var found bool
	err := s.pool.QueryRow(ctx, `
		SELECT true FROM conversation_models
		WHERE embedding_model = $1 AND chunks > covered AND chunks - covered >= $2 AND chunks > $3
		LIMIT 1`,
		s.Embedder().Model(), fresh, s.exactChunks).Scan(&found)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, dbError("docs: vector index", err)
	}
	return found, nil
}

// BuildIndex builds the vector index of the store's embedder over every
// chunk stored so far, replaces the one searches use, and reports whether
// it built one. Unless force is set it builds only when policy says the
// index is due (see IndexPolicy). It returns false, with no error, when
// another process is building it, when there is nothing to index, and for
// embeddings pgvector cannot index (over 4,000 dimensions), which are
// always ranked exactly. A build cancelled by ctx leaves the previous
// index in use and drops its unfinished one (failing that, the next build
// does).
func (s *Store) BuildIndex(ctx context.Context, policy IndexPolicy, force bool) (bool, error) {
	policy = policy.withDefaults(s.exactChunks)
	emb := s.Embedder()
	model, dims := emb.Model(), emb.Dimensions()
	if !indexable(dims) {
		return false, nil
	}
	// Checked through the pool first: every replica checks every few
	// seconds, and a build is rarely due.
	if !force {
		if due, err := s.buildCandidate(ctx, policy.FreshChunks); err != nil || !due {
			return false, err
		}
	}
	wanted := func(st IndexState) bool {
		return (st.Fresh > 0 || st.Index == "" && st.Indexed > 0) && (force || st.due(policy))
	}
	if st, err := s.IndexState(ctx); err != nil || !wanted(st) {
		return false, err
	}
	// A connection of its own: CREATE INDEX CONCURRENTLY runs outside a
	// transaction, and the session's lock and settings end with it.
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, dbError("docs: build vector index", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockKey("vector-index/"+model)).Scan(&locked); err != nil {
		return false, dbError("docs: build vector index", err)
	}
	if !locked {
		return false, nil
	}
	// The state is read under the lock: another process may have just
	// built the index.
	st, err := s.IndexState(ctx)
	if err != nil {
		return false, err
	}
	if !wanted(st) {
		return false, nil
	}
	if err := dropIndexes(ctx, conn, indexPrefix(model, dims), st.Index); err != nil {
		return false, err
	}
	if err := dropUnused(ctx, conn, model); err != nil {
		return false, err
	}
	if err := dropLegacy(ctx, conn); err != nil {
		return false, err
	}

	start := time.Now()
	var watermark int64
	if err := conn.QueryRow(ctx, `SELECT nextval('chunk_write_seq')`).Scan(&watermark); err != nil {
		return false, dbError("docs: build vector index", err)
	}
	name := indexName(model, dims, watermark)
	ops := "vector_cosine_ops"
	if dims > maxVectorIndexDims {
		ops = "halfvec_cosine_ops"
	}
	// A build takes minutes on a large table: a statement_timeout the
	// operator set for queries (in DATABASE_URL, say) must not cut it.
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET maintenance_work_mem = '%dkB'; SET statement_timeout = 0", max(policy.BuildMemory>>10, 1024))); err != nil {
		return false, dbError("docs: build vector index", err)
	}
	// On Citus each worker builds its shards' indexes with its own
	// maintenance_work_mem: Citus does not pass the session's to them.
	if low, err := workersShortOfMemory(ctx, conn, policy.BuildMemory); err != nil {
		s.log.Warn("docs: could not read the workers' maintenance_work_mem", "err", err)
	} else {
		for _, w := range low {
			s.log.Warn("docs: a Citus worker builds its vector indexes with less memory than the build asks: set maintenance_work_mem on the worker (pgvector builds several times slower when the graph does not fit)",
				"worker", w.node, "maintenance_work_mem", w.setting, "build_memory_bytes", policy.BuildMemory)
		}
	}
	s.log.Info("docs: building the vector index", "model", model, "index", name, "fresh_chunks", st.Fresh)
	// Rows written while the index is built carry later write numbers
	// than its watermark: they stay out of it, and ingestion does not wait.
	sql := fmt.Sprintf(`CREATE INDEX CONCURRENTLY %s ON chunks USING hnsw (%s %s) WHERE embedding_model = %s AND write_seq <= %d`,
		pgx.Identifier{name}.Sanitize(), vectorExpr(dims), ops, modelLiteral(model), watermark)
	if _, err := conn.Exec(ctx, sql); err != nil {
		s.dropInvalid(ctx, name)
		return false, dbError("docs: build vector index "+name, err)
	}
	took := time.Since(start)
	covered, err := registerIndex(ctx, conn, model, dims, name, st.Watermark, watermark, took)
	if err != nil {
		return false, err
	}
	s.log.Info("docs: vector index built", "model", model, "index", name, "chunks", covered, "seconds", took.Seconds())
	// Searches that read the old watermark a moment ago rank its chunks
	// without an index until they finish; DROP INDEX CONCURRENTLY waits
	// for them.
	if err := dropIndexes(ctx, conn, indexPrefix(model, dims), name); err != nil {
		return true, err
	}
	return true, nil
}

// registerIndex makes the index name, covering the model's chunks written
// up to watermark, the one searches use, and counts in conversation_models
// the chunks it covers that the previous one (up to old) did not: those of
// the files written in between. It returns the chunks the index covers.
func registerIndex(ctx context.Context, conn *pgx.Conn, model string, dims int, name string, old, watermark int64, took time.Duration) (int64, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, dbError("docs: build vector index", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `
		UPDATE conversation_models m SET covered = least(m.covered + d.n, m.chunks)
		FROM (SELECT f.conversation_id, sum(f.chunk_count) AS n FROM files f
		      WHERE f.embedding_model = $1 AND f.status = 'ready' AND f.write_seq > $2 AND f.write_seq <= $3 AND `+visible+`
		      GROUP BY f.conversation_id) d
		WHERE m.conversation_id = d.conversation_id AND m.embedding_model = $1`, model, old, watermark); err != nil {
		return 0, dbError("docs: build vector index", err)
	}
	var covered int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(sum(covered), 0) FROM conversation_models WHERE embedding_model = $1`, model).Scan(&covered); err != nil {
		return 0, dbError("docs: build vector index", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO vector_indexes (embedding_model, dimensions, index_name, watermark, chunk_count, build_seconds)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (embedding_model) DO UPDATE
		SET dimensions = excluded.dimensions, index_name = excluded.index_name, watermark = excluded.watermark,
		    chunk_count = excluded.chunk_count, build_seconds = excluded.build_seconds, built_at = excluded.built_at`,
		model, dims, name, watermark, covered, took.Seconds()); err != nil {
		return 0, dbError("docs: build vector index", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, dbError("docs: build vector index", err)
	}
	return covered, nil
}

// dropInvalid drops what a failed concurrent build left behind, an invalid
// index, on a connection of its own: a cancelled build's connection is
// closed by the cancellation. Should that fail too, the next build drops
// it.
func (s *Store) dropInvalid(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		s.log.Warn("docs: dropping an unfinished vector index", "index", name, "error", err)
		return
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
		s.log.Warn("docs: dropping an unfinished vector index", "index", name, "error", err)
	}
}

// dropIndexes drops the indexes on chunks whose name starts with prefix,
// except keep: the index a build replaced, and whatever an interrupted
// build left behind.
func dropIndexes(ctx context.Context, conn *pgx.Conn, prefix, keep string) error {
	return dropListed(ctx, conn, `
		SELECT indexname FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'chunks' AND starts_with(indexname, $1) AND indexname <> $2`,
		prefix, keep)
}

// dropListed drops the indexes whose names the statement returns.
func dropListed(ctx context.Context, conn *pgx.Conn, query string, args ...any) error {
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return dbError("docs: drop vector index", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return dbError("docs: drop vector index", err)
	}
	for _, name := range names {
		if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			return dbError("docs: drop vector index "+name, err)
		}
	}
	return nil
}

// dropUnused drops the indexes of models other than model that no file
// uses any more, as after mcpsearch reembed moved every chunk to model,
// with their rows in vector_indexes.
func dropUnused(ctx context.Context, conn *pgx.Conn, model string) error {
	rows, err := conn.Query(ctx, `SELECT embedding_model FROM vector_indexes WHERE embedding_model <> $1`, model)
	if err != nil {
		return dbError("docs: drop vector index", err)
	}
	others, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return dbError("docs: drop vector index", err)
	}
	// One model at a time: on a distributed database vector_indexes is a
	// reference table, which a statement that also reads files cannot
	// change.
	for _, m := range others {
		var used bool
		err := conn.QueryRow(ctx, `SELECT true FROM files WHERE embedding_model = $1 AND status = 'ready' LIMIT 1`, m).Scan(&used)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return dbError("docs: drop vector index", err)
		}
		if used {
			continue
		}
		if err := dropListed(ctx, conn, `DELETE FROM vector_indexes WHERE embedding_model = $1 RETURNING index_name`, m); err != nil {
			return err
		}
	}
	return nil
}

// dropLegacy drops the vector indexes of versions before migration 007,
// which an older binary still running beside this one may create again
// (named chunks_hnsw_<model>_<dims>_<8 hex digits>, without a watermark):
// they cover every chunk of their model, so each insert pays for them.
// The names indexName gives end in a 6-hex-digit digest and a watermark,
// which a legacy name, ending in the dimensions and a digest, cannot.
func dropLegacy(ctx context.Context, conn *pgx.Conn) error {
	return dropListed(ctx, conn, `
		SELECT indexname FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'chunks'
		  AND starts_with(indexname, 'chunks_hnsw_') AND indexname !~ '_[0-9a-f]{6}_[0-9]+$'`)
}

// lockKey derives an advisory lock key from a name.
func lockKey(name string) int64 {
	sum := sha256.Sum256([]byte("mcpsearch/docs/" + name))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// shortWorker is a Citus worker whose maintenance_work_mem is below a
// build's memory.
type shortWorker struct{ node, setting string }

// workersShortOfMemory returns the workers of a Citus cluster whose
// maintenance_work_mem is below want bytes; none on a database without
// Citus. A build's SET reaches the coordinator's session alone: CREATE
// INDEX CONCURRENTLY runs outside a transaction, where Citus does not
// propagate settings, so each worker uses its configured value.
func workersShortOfMemory(ctx context.Context, conn *pgx.Conn, want int64) ([]shortWorker, error) {
	var citus bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil || !citus {
		return nil, err
	}
	rows, err := conn.Query(ctx, `
		SELECT nodename || ':' || nodeport, success, result
		FROM run_command_on_workers($$SELECT setting || ' ' || pg_size_pretty(setting::bigint * 1024) FROM pg_settings WHERE name = 'maintenance_work_mem'$$)`)
	if err != nil {
		return nil, err
	}
	var out []shortWorker
	var node, result string
	var ok bool
	_, err = pgx.ForEachRow(rows, []any{&node, &ok, &result}, func() error {
		if !ok {
			return fmt.Errorf("worker %s: %s", node, result)
		}
		kb, pretty, found := strings.Cut(result, " ")
		n, err := strconv.ParseInt(kb, 10, 64)
		if !found || err != nil {
			return fmt.Errorf("worker %s: maintenance_work_mem %q", node, result)
		}
		if n<<10 < want {
			out = append(out, shortWorker{node, pretty})
		}
		return nil
	})
	return out, err
}
