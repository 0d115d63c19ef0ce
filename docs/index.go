package docs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgvector's HNSW index accepts vector up to 2,000 dimensions and halfvec up
// to 4,000. Larger embeddings are stored and searched exactly, unindexed.
const (
	maxVectorIndexDims  = 2000
	maxHalfvecIndexDims = 4000
)

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

// indexName is the name of a model's HNSW index: a readable form of the model
// plus a digest of the exact name, within PostgreSQL's 63-byte limit.
func indexName(model string, dims int) string {
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
	if len(readable) > 28 {
		readable = strings.TrimRight(readable[:28], "_")
	}
	sum := sha256.Sum256([]byte(model))
	return fmt.Sprintf("chunks_hnsw_%s_%d_%s", readable, dims, hex.EncodeToString(sum[:4]))
}

// EnsureModelIndex creates the HNSW cosine index for a model's embeddings of
// dims dimensions unless it exists:
//
//	CREATE INDEX chunks_hnsw_<model> ON chunks
//	  USING hnsw ((embedding::vector(<dims>)) vector_cosine_ops)
//	  WHERE embedding_model = '<model>'
//
// Ingestion and Reembed call it before storing a model's first vectors, so
// they enter the index as they are written. Embeddings over 2,000 dimensions
// are indexed as halfvec; over 4,000 they are not indexed and searched
// exactly. The outcome is cached per Store.
func (s *Store) EnsureModelIndex(ctx context.Context, model string, dims int) error {
	if dims > maxHalfvecIndexDims {
		return nil
	}
	name := indexName(model, dims)
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	if s.indexed[name] {
		return nil
	}
	ops := "vector_cosine_ops"
	if dims > maxVectorIndexDims {
		ops = "halfvec_cosine_ops"
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbError("docs: create index", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// Two processes creating the same index at once would both pass IF NOT
	// EXISTS and one would fail on the catalog's unique name.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey(name)); err != nil {
		return dbError("docs: create index", err)
	}
	sql := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON chunks USING hnsw (%s %s) WHERE embedding_model = %s`,
		pgx.Identifier{name}.Sanitize(), vectorExpr(dims), ops, modelLiteral(model))
	if _, err := tx.Exec(ctx, sql); err != nil {
		return dbError("docs: create index "+name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return dbError("docs: create index "+name, err)
	}
	s.indexed[name] = true
	return nil
}

// lockKey derives an advisory lock key from a name.
func lockKey(name string) int64 {
	sum := sha256.Sum256([]byte("mcpsearch/docs/" + name))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}
