package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/pg"
	"github.com/mcpsearch/mcpsearch/server"
)

// Keys of the real server the browser signs in to.
const (
	adminKey  = "admin-key-4f1c9e2a7b"
	tenantKey = "tenant-key-8d3b6a1f0c"
	readerKey = "reader-key-2e7d5c9b4a"
	keysFile  = adminKey + " name=admin\n" +
		tenantKey + " name=tenant conversations=c-tenant\n" +
		readerKey + " name=reader scopes=read\n"
)

// slowMarker in a file's text makes its embedding wait until the file's
// processing is cancelled: a job that runs until someone cancels it.
const slowMarker = "glacierslowmarker"

// slowEmbedder is the local embedder, but for texts holding slowMarker.
type slowEmbedder struct{ *embed.Local }

func (e slowEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	for _, t := range texts {
		if strings.Contains(t, slowMarker) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(2 * time.Minute):
			}
		}
	}
	return e.Local.Embed(ctx, texts)
}

// stack is a real server over a fresh database: the documents store, its
// ingester and jobs, the audit, and the HTTP surface with the web page.
type stack struct {
	pool   *pgxpool.Pool
	store  *docs.Store
	ingest *docs.Ingester
	jobs   *jobs.Runner
	audit  *audit.Writer
	http   *httptest.Server
}

// newStack starts the server; keys is the keys file ("" for none).
func newStack(tb testing.TB, keys string) *stack {
	tb.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(tb)
	pool, err := pg.Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	local, err := embed.NewLocal(0)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := docs.NewStore(pool, slowEmbedder{local}, docs.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	in, err := docs.NewIngester(st, docs.IngestOptions{Workers: 2, HeldCheck: 200 * time.Millisecond, PollInterval: 200 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(in.Close)
	runner := jobs.NewRunner(jobs.NewStore(st), in, jobs.Options{Poll: 100 * time.Millisecond, Check: 100 * time.Millisecond,
		Unpack: jobs.ArchiveUnpacker{MaxFileBytes: 50 << 20}})
	tb.Cleanup(runner.Close)
	aw := audit.NewWriter(pool, audit.Options{FlushInterval: 50 * time.Millisecond})
	tb.Cleanup(func() { _ = aw.Close(context.Background()) })

	cfg := config.Default()
	cfg.Transports = []string{"http"}
	cfg.DatabaseURL = url
	cfg.RateLimit = config.RateLimit{PerMinute: 6000, Burst: 1000}
	cfg.WebSearchEnabled = false
	cfg.FetchURLEnabled = false
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	var apiKeys []server.APIKey
	if keys != "" {
		if apiKeys, err = server.LoadAPIKeys(nil, strings.NewReader(keys)); err != nil {
			tb.Fatal(err)
		}
	}
	deps := server.Deps{Docs: st, Ingest: in, Jobs: runner, APIKeys: apiKeys, Audit: aw}
	srv := server.New(cfg, deps, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	hs := httptest.NewServer(srv.Handler())
	tb.Cleanup(hs.Close)
	return &stack{pool: pool, store: st, ingest: in, jobs: runner, audit: aw, http: hs}
}

// add stores a file in conversation conv at once, processed.
func (s *stack) add(tb testing.TB, conv, name, mime string, data []byte) docs.File {
	tb.Helper()
	f, err := s.ingest.Ingest(context.Background(), conv, name, mime, data)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}
