// Package docs stores uploaded documents and searches them: extract ->
// chunk -> embed -> PostgreSQL with pgvector. It knows Postgres, not MCP.
//
// Every file belongs to a conversation and is split into chunks, each stored
// with its embedding, the model that made it and a full-text vector. A file
// is stored whole or not at all: its chunks, the BM25 statistics and its
// status "ready" are committed in one transaction, so a search never sees
// half a file, and a failed file keeps no chunk, only its status "failed"
// and the reason.
//
// Search ranks chunks by cosine similarity (pgvector HNSW), by Okapi BM25
// over PostgreSQL full-text search, or by fusing both; see Search.
package docs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/docs/extract"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/migrations"
)

// Defaults applied by Open to zero Options fields.
const (
	DefaultWorkers         = 2
	DefaultShutdownTimeout = 30 * time.Second
)

// Options tunes a Store. The zero value is usable.
type Options struct {
	// Chunk sets chunk size and overlap; zero means chunk.DefaultOptions().
	Chunk chunk.Options
	// MaxFileBytes is the largest accepted upload; zero means 50 MB.
	MaxFileBytes int64
	// Workers is the number of files Submit's pool processes at once;
	// zero means DefaultWorkers.
	Workers int
	// QueueSize is how many submitted files may wait for a worker before
	// Submit returns ErrBusy; zero means 4 × Workers. At most QueueSize +
	// Workers uploads are held in memory.
	QueueSize int
	// ShutdownTimeout bounds how long Close waits for queued and running
	// files; what is left then is cancelled and marked failed. Zero means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives background processing events; nil discards them.
	Logger *slog.Logger
	// VectorWeight is the weight of the vector ranking in Hybrid search,
	// the keyword ranking's being 1: zero means 1, plain reciprocal rank
	// fusion. A weak embedder (the local one) is better given less weight
	// than BM25; see DefaultVectorWeight. At most MaxVectorWeight.
	VectorWeight float64
}

// MaxVectorWeight bounds Options.VectorWeight: beyond it the keyword ranking
// would only break ties, and Vector mode is the way to ask for that.
const MaxVectorWeight = 10

// Store is the document store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger

	embMu sync.RWMutex
	emb   embed.Embedder

	// indexed caches the models whose HNSW index is known to exist.
	indexMu sync.Mutex
	indexed map[string]bool

	// iterative caches whether the server's pgvector has
	// hnsw.iterative_scan (0.8+); nil until first known.
	iterMu    sync.Mutex
	iterative *bool

	// Submit's worker pool. slots bounds queued jobs so that sending on
	// jobs never blocks; closeMu orders Submit's sends before Close closes
	// jobs.
	jobs       chan job
	slots      chan struct{}
	closeMu    sync.RWMutex
	closed     bool
	workCtx    context.Context
	cancelWork context.CancelFunc
	workers    sync.WaitGroup
	closeOnce  sync.Once

	counters ingestCounters

	// forceExactFallback makes vector search behave as on pgvector < 0.8;
	// tests set it to exercise that path.
	forceExactFallback bool
}

// Open returns a Store on the database at databaseURL that embeds with emb.
// It does not connect: the pool connects on first use, so Open succeeds while
// the database is down and the Store recovers when it comes back. Use Ping and
// CheckSchema to report the database's state at start-up.
func Open(ctx context.Context, databaseURL string, emb embed.Embedder, opts Options) (*Store, error) {
	if emb == nil {
		return nil, errors.New("docs: open: nil embedder")
	}
	if err := checkEmbedder(emb); err != nil {
		return nil, fmt.Errorf("docs: open: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("docs: open: database URL: %w", err)
	}
	if opts.Chunk == (chunk.Options{}) {
		opts.Chunk = chunk.DefaultOptions()
	}
	if err := opts.Chunk.Validate(); err != nil {
		return nil, fmt.Errorf("docs: open: %w", err)
	}
	if opts.VectorWeight < 0 || opts.VectorWeight > MaxVectorWeight {
		return nil, fmt.Errorf("docs: open: vector weight %g is outside 0..%d", opts.VectorWeight, MaxVectorWeight)
	}
	if opts.VectorWeight == 0 {
		opts.VectorWeight = 1
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = extract.DefaultMaxBytes
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4 * opts.Workers
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.AfterConnect = registerVector
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("docs: open: %w", err)
	}

	s := &Store{
		pool:    pool,
		opts:    opts,
		log:     opts.Logger,
		emb:     emb,
		indexed: map[string]bool{},
		jobs:    make(chan job, opts.QueueSize),
		slots:   make(chan struct{}, opts.QueueSize),
	}
	// Background work outlives the requests that submit it.
	s.workCtx, s.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	for range opts.Workers {
		s.workers.Go(s.work)
	}
	return s, nil
}

// registerVector teaches a new connection pgvector's binary format. A
// database without the extension (not migrated yet) still gets a working
// connection, so that CheckSchema can say what is wrong.
func registerVector(ctx context.Context, conn *pgx.Conn) error {
	err := pgxvec.RegisterTypes(ctx, conn)
	if err == nil {
		return nil
	}
	var missing bool
	if qerr := conn.QueryRow(ctx, `SELECT to_regtype('vector') IS NULL`).Scan(&missing); qerr == nil && missing {
		return nil
	}
	return err
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

// Close stops accepting submissions, waits up to Options.ShutdownTimeout for
// queued and running files, cancels and marks failed what is left, and closes
// the connection pool. Calls after the first return at once.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		s.closeMu.Lock()
		s.closed = true
		close(s.jobs)
		s.closeMu.Unlock()

		done := make(chan struct{})
		go func() {
			s.workers.Wait()
			close(done)
		}()
		timer := time.NewTimer(s.opts.ShutdownTimeout)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			s.log.Warn("docs: shutdown timeout: cancelling unfinished files", "timeout", s.opts.ShutdownTimeout)
			s.cancelWork()
			<-done
		}
		s.cancelWork()
		s.pool.Close()
	})
}

// checkOpen returns ErrClosed after Close.
func (s *Store) checkOpen(op string) error {
	if s.isClosed() {
		return fmt.Errorf("%s: %w", op, ErrClosed)
	}
	return nil
}

// Pool returns the store's connection pool, for other writers to the same
// database.
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
	if err := s.checkOpen("docs: ping"); err != nil {
		return err
	}
	return dbError("docs: ping", s.pool.Ping(ctx))
}

// CheckSchema returns an error wrapping ErrSchemaOutdated when the database
// lacks migrations this build needs, and ErrUnavailable when it cannot be
// reached. It also fails, with advice, when the server's pgvector is older
// than 0.7.
func (s *Store) CheckSchema(ctx context.Context) error {
	if err := s.checkOpen("docs: check schema"); err != nil {
		return err
	}
	cur, err := migrations.Current(ctx, s.pool)
	if err != nil {
		return dbError("docs: check schema", err)
	}
	if want := migrations.Latest(); cur < want {
		return fmt.Errorf("docs: %w (the database is at version %d, this build needs %d)", ErrSchemaOutdated, cur, want)
	}
	var v string
	err = s.pool.QueryRow(ctx, `SELECT extversion FROM pg_extension WHERE extname = 'vector'`).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("docs: %w: the vector extension is missing", ErrSchemaOutdated)
	}
	if err != nil {
		return dbError("docs: check schema", err)
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
