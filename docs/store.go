// Package docs stores uploaded documents and searches them: extract ->
// chunk -> embed -> PostgreSQL with pgvector. It knows Postgres, not MCP.
//
// Every file belongs to a conversation and is split into chunks, each stored
// with its embedding, the model that made it and a full-text vector. A file
// is stored whole or not at all: its chunks, its keyword postings, its
// conversation's counters and its status "ready" are committed in one
// transaction, so a search never sees half a file, and a failed file keeps
// no chunk, only its status "failed" and the reason.
//
// Search ranks chunks by cosine similarity (exactly, or through a pgvector
// HNSW index built in the background: see index.go), by Okapi BM25 over
// PostgreSQL's full-text lexemes, or by fusing both; see Search.
//
// The caller opens the connection pool (pg.Open) and owns it. A Store reads
// and writes; an Ingester built on a Store runs the upload pipeline.
package docs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/docs/keyword"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/migrations"
)

// Options tunes a Store. The zero value is usable.
type Options struct {
	// Logger receives the store's events; nil discards them.
	Logger *slog.Logger
	// VectorWeight is the weight of the vector ranking in Hybrid search,
	// the keyword ranking's being 1: zero means auto, chosen for the
	// embedder (see Store.VectorWeight). At most MaxVectorWeight.
	VectorWeight float64
	// KeywordCacheBytes bounds the memory of the in-process keyword
	// indexes (about 360 bytes per chunk of 1,000 characters once merged, 600 before); zero means
	// DefaultKeywordCacheBytes.
	KeywordCacheBytes int64
	// DefaultThreshold is the similarity threshold of queries that set
	// none, 0..1; zero means the embedder's calibrated value (see
	// Store.DefaultThreshold).
	DefaultThreshold float64
	// BM25K1 and BM25B are Okapi BM25's term frequency saturation (0..10)
	// and length normalisation (0..1) in Keyword and Hybrid search; zero
	// means DefaultBM25K1 and DefaultBM25B. Set both to tune them.
	BM25K1, BM25B float64

	// exactChunks overrides exactVectorChunks; tests lower it to reach
	// the vector index with little data.
	exactChunks int64
}

// DefaultKeywordCacheBytes is the default memory budget of the keyword
// indexes: about 700,000 chunks of 1,000 characters once merged.
const DefaultKeywordCacheBytes = keyword.DefaultCacheBytes

// MaxVectorWeight bounds Options.VectorWeight: beyond it the keyword ranking
// would only break ties, and Vector mode is the way to ask for that.
const MaxVectorWeight = 10

// Store reads and writes the documents database: searches, listings, file
// and chunk lookups, deletions, and the storage of one processed file in one
// transaction. The pipeline that extracts, chunks and embeds uploads is the
// Ingester's. A Store is safe for concurrent use and holds no connection of
// its own: the pool belongs to the caller, who closes it after the Store's
// last use.
type Store struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger

	embMu sync.RWMutex
	emb   embed.Embedder

	// exactChunks is the largest conversation ranked exactly by vector
	// search: exactVectorChunks unless Options lowers it.
	exactChunks int64

	// version caches the server's pgvector version; "" until first known.
	versionMu sync.Mutex
	version   string

	keywords *keyword.Cache

	// jobs are the functions told of jobs that may have moved (OnJobs).
	jobs jobListeners

	// forceExactFallback makes vector search behave as on pgvector < 0.8;
	// tests set it to exercise that path.
	forceExactFallback bool
}

// NewStore returns a Store on pool, typically opened with pg.Open, that
// embeds queries (and, through an Ingester, uploads) with emb. It does not
// connect: Ping and CheckSchema report the database's state.
func NewStore(pool *pgxpool.Pool, emb embed.Embedder, opts Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("docs: new store: nil pool")
	}
	if emb == nil {
		return nil, errors.New("docs: new store: nil embedder")
	}
	if err := checkEmbedder(emb); err != nil {
		return nil, fmt.Errorf("docs: new store: %w", err)
	}
	if opts.VectorWeight < 0 || opts.VectorWeight > MaxVectorWeight {
		return nil, fmt.Errorf("docs: new store: vector weight %g is outside 0..%d", opts.VectorWeight, MaxVectorWeight)
	}
	if math.IsNaN(opts.DefaultThreshold) || opts.DefaultThreshold < 0 || opts.DefaultThreshold > 1 {
		return nil, fmt.Errorf("docs: new store: default threshold %g is outside 0..1", opts.DefaultThreshold)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BM25K1 < 0 || opts.BM25K1 > 10 || opts.BM25B < 0 || opts.BM25B > 1 {
		return nil, fmt.Errorf("docs: new store: BM25 k1 %g must be within 0..10 and b %g within 0..1", opts.BM25K1, opts.BM25B)
	}
	if opts.BM25K1 == 0 && opts.BM25B == 0 {
		opts.BM25K1, opts.BM25B = DefaultBM25K1, DefaultBM25B
	}
	if opts.KeywordCacheBytes <= 0 {
		opts.KeywordCacheBytes = DefaultKeywordCacheBytes
	}
	if opts.exactChunks == 0 {
		opts.exactChunks = exactVectorChunks
	}
	return &Store{pool: pool, opts: opts, log: opts.Logger, emb: emb, exactChunks: opts.exactChunks,
		keywords: keyword.NewCache(opts.KeywordCacheBytes, opts.Logger)}, nil
}

// checkEmbedder rejects an embedder whose model name cannot key stored
// vectors. The name is written into SQL as a literal (see modelLiteral).
func checkEmbedder(e embed.Embedder) error {
	m := e.Model()
	switch {
	case m == "":
		return errors.New("embedder has an empty model name")
	case len(m) > 200:
		return fmt.Errorf("embedder model name is %d bytes long; the limit is 200", len(m))
	case e.Dimensions() < 1:
		return fmt.Errorf("embedder %q reports %d dimensions", m, e.Dimensions())
	}
	for _, r := range m {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Errorf("embedder model name %q contains a control character or backslash", m)
		}
	}
	return nil
}

// Pool returns the connection pool the store was given.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Embedder returns the embedder the store currently ingests and searches
// with (see Reembed).
func (s *Store) Embedder() embed.Embedder {
	s.embMu.RLock()
	defer s.embMu.RUnlock()
	return s.emb
}

func (s *Store) setEmbedder(e embed.Embedder) {
	s.embMu.Lock()
	defer s.embMu.Unlock()
	s.emb = e
}

// Ping checks that the database answers. It returns an error wrapping
// ErrUnavailable when it does not.
func (s *Store) Ping(ctx context.Context) error {
	return dbError("docs: ping", s.pool.Ping(ctx))
}

// CheckSchema returns an error wrapping ErrSchemaOutdated when the database
// lacks migrations this build needs, and ErrUnavailable when it cannot be
// reached. It also fails, with advice, when the server's pgvector is older
// than 0.7.
func (s *Store) CheckSchema(ctx context.Context) error {
	var outdated *migrations.OutdatedError
	if err := migrations.Check(ctx, s.pool); errors.As(err, &outdated) {
		return fmt.Errorf("docs: %w (the database is at version %d, this build needs %d)", ErrSchemaOutdated, outdated.Current, outdated.Latest)
	} else if err != nil {
		return dbError("docs: check schema", err)
	}
	v, err := s.pgvectorVersion(ctx)
	if err != nil {
		return err
	}
	if !versionAtLeast(v, minPgvectorMajor, minPgvectorMinor) {
		return fmt.Errorf("docs: the database has pgvector %s; mcpsearch needs %d.%d or later "+
			"(upgrade the package, then run ALTER EXTENSION vector UPDATE)", v, minPgvectorMajor, minPgvectorMinor)
	}
	return nil
}

// The oldest pgvector supported: 0.7 brought halfvec, which indexes
// embeddings over 2,000 dimensions.
const (
	minPgvectorMajor = 0
	minPgvectorMinor = 7
)

// pgvectorVersion returns the server's pgvector version, asking once per
// Store. Its absence wraps ErrSchemaOutdated.
func (s *Store) pgvectorVersion(ctx context.Context) (string, error) {
	s.versionMu.Lock()
	defer s.versionMu.Unlock()
	if s.version != "" {
		return s.version, nil
	}
	var v string
	err := s.pool.QueryRow(ctx, `SELECT extversion FROM pg_extension WHERE extname = 'vector'`).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("docs: %w: the vector extension is missing", ErrSchemaOutdated)
	}
	if err != nil {
		return "", dbError("docs: pgvector version", err)
	}
	s.version = v
	return v, nil
}
