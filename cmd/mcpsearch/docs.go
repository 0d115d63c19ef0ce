package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/term"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/docs/extract"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/migrations"
	"github.com/mcpsearch/mcpsearch/pg"
)

// newEmbedder builds the configured embedder.
func newEmbedder(cfg config.Config) (embed.Embedder, error) {
	e, err := embed.New(embed.Config{Provider: cfg.EmbedProvider, Model: cfg.EmbedModel, BaseURL: cfg.EmbedBaseURL,
		APIKey: cfg.EmbedAPIKey, Dimensions: cfg.EmbedDimensions, BatchSize: cfg.EmbedBatchSize})
	if err != nil {
		return nil, fmt.Errorf("embedder (MCP_embed_*): %w", err)
	}
	return e, nil
}

// openPool opens the connection pool on DATABASE_URL, which it needs. It
// does not connect yet.
func openPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	if cfg.DatabaseURL == "" {
		return nil, usageError{errors.New("DATABASE_URL is not set: point it at PostgreSQL with pgvector (scripts/pg.sh prints one for a local server)")}
	}
	pool, err := pg.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, usageError{fmt.Errorf("DATABASE_URL: %w", err)}
	}
	return pool, nil
}

// newStore builds the documents store of cfg on pool, with its embedder.
func newStore(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*docs.Store, error) {
	emb, err := newEmbedder(cfg)
	if err != nil {
		return nil, err
	}
	st, err := docs.NewStore(pool, emb, docs.Options{VectorWeight: cfg.HybridVectorWeight(), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open documents store: %w", err)
	}
	return st, nil
}

// newIngester starts the upload pipeline of cfg on st; Close stops it.
func newIngester(cfg config.Config, st *docs.Store, log *slog.Logger) (*docs.Ingester, error) {
	in, err := docs.NewIngester(st, docs.IngestOptions{
		Chunk:        chunk.Options{Size: cfg.ChunkSize, Overlap: cfg.ChunkOverlap},
		MaxFileBytes: cfg.MaxFileBytes,
		Workers:      cfg.Workers,
		Logger:       log,
	})
	if err != nil {
		return nil, fmt.Errorf("start ingestion: %w", err)
	}
	return in, nil
}

// migratedStore opens the pool and the store of cfg and checks that the
// schema is current. The caller closes the pool.
func migratedStore(ctx context.Context, cfg config.Config, log *slog.Logger) (*pgxpool.Pool, *docs.Store, error) {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	st, err := newStore(cfg, pool, log)
	if err == nil {
		err = st.CheckSchema(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, st, nil
}

func runMigrate(ctx context.Context, env *environment, args []string) error {
	cfg, _, err := loadConfig(env, "migrate", args, nil)
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := migrations.Apply(ctx, pool)
	if err != nil {
		return fmt.Errorf("migrate: %w", pg.Error("database", err))
	}
	if len(applied) == 0 {
		fmt.Fprintf(env.stdout, "schema is up to date (version %d)\n", migrations.Latest())
		return nil
	}
	for _, name := range applied {
		fmt.Fprintln(env.stdout, "applied", name)
	}
	return nil
}

func runIngest(ctx context.Context, env *environment, args []string) error {
	var conv string
	cfg, fs, err := loadConfig(env, "ingest", args, func(fs *flag.FlagSet) {
		fs.StringVar(&conv, "conversation", "", "conversation the files belong to (required)")
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(conv) == "" || fs.NArg() == 0 {
		return usageError{errors.New("usage: mcpsearch ingest --conversation ID PATH... (files or folders)")}
	}
	paths, err := collectFiles(fs.Args())
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return errors.New("no supported files (PDF, text, Markdown, HTML) under the given paths")
	}
	log := newLogger(env.stderr, cfg.LogFormat, "warn")
	pool, st, err := migratedStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	in, err := newIngester(cfg, st, log)
	if err != nil {
		return err
	}
	defer in.Close()
	return ingestFiles(ctx, env, in, conv, paths, cfg.Workers)
}

// collectFiles expands folders into the files below them that look like a
// supported type; files named explicitly are always tried.
func collectFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		info, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, a)
			continue
		}
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != a && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if _, err := extract.DetectType(d.Name(), "", nil); err == nil {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(out)
	return out, nil
}

// progress reports ingestion: a redrawn bar on a terminal, one line per
// file otherwise.
type progress struct {
	w      io.Writer
	tty    bool
	total  int
	start  time.Time
	mu     sync.Mutex
	done   int
	failed int
	pages  int
	chunks int
}

func (p *progress) file(name string, f docs.File, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	var line string
	switch {
	case err != nil:
		p.failed++
		line = fmt.Sprintf("failed  %s: %v", name, err)
	case f.Status == "failed":
		p.failed++
		line = fmt.Sprintf("failed  %s: %s", name, f.Error)
	case f.Duplicate:
		line = fmt.Sprintf("exists  %s (id %s, already uploaded)", name, f.ID)
	default:
		p.pages += f.PageCount
		p.chunks += f.ChunkCount
		line = fmt.Sprintf("ready   %s: %d pages, %d chunks (id %s)", name, f.PageCount, f.ChunkCount, f.ID)
	}
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	rate := float64(p.chunks) / max(time.Since(p.start).Seconds(), 0.001)
	width := 24
	filled := width * p.done / p.total
	fmt.Fprintf(p.w, "\r\033[K%s\n\r[%s%s] files %d/%d  pages %d  chunks %d  %.0f chunks/s",
		line, strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.done, p.total, p.pages, p.chunks, rate)
	if p.done == p.total {
		fmt.Fprintln(p.w)
	}
}

func ingestFiles(ctx context.Context, env *environment, in *docs.Ingester, conv string, paths []string, workers int) error {
	tty := false
	if f, ok := env.stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	p := &progress{w: env.stderr, tty: tty, total: len(paths), start: time.Now()}
	// Failures are counted by p, not returned, so every file is tried.
	_ = forEach(ctx, len(paths), workers, func(i int) error {
		data, err := os.ReadFile(paths[i])
		var f docs.File
		if err == nil {
			f, err = in.Ingest(ctx, conv, filepath.Base(paths[i]), "", data)
		}
		p.file(paths[i], f, err)
		return nil
	})
	secs := time.Since(p.start).Seconds()
	fmt.Fprintf(env.stdout, "%d files (%d failed), %d pages, %d chunks in %.1fs into conversation %s\n",
		p.done, p.failed, p.pages, p.chunks, secs, conv)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if p.failed > 0 {
		return fmt.Errorf("%d of %d files failed", p.failed, p.total)
	}
	return nil
}

func runReembed(ctx context.Context, env *environment, args []string) error {
	cfg, _, err := loadConfig(env, "reembed", args, nil)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogFormat, cfg.LogLevel)
	pool, st, err := migratedStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	to, err := newEmbedder(cfg)
	if err != nil {
		return err
	}
	last := time.Time{}
	err = st.Reembed(ctx, to, func(done, total int) {
		if time.Since(last) > time.Second || done == total {
			last = time.Now()
			fmt.Fprintf(env.stderr, "reembed: %d/%d chunks\n", done, total)
		}
	})
	if err != nil {
		return fmt.Errorf("reembed to %s: %w", to.Model(), err)
	}
	fmt.Fprintf(env.stdout, "every chunk now uses %s (%d dimensions)\n", to.Model(), to.Dimensions())
	return nil
}
