package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/migrations"
	"github.com/mcpsearch/mcpsearch/pg"
	"github.com/mcpsearch/mcpsearch/ratelimit"
	"github.com/mcpsearch/mcpsearch/rerank"
	"github.com/mcpsearch/mcpsearch/research"
	"github.com/mcpsearch/mcpsearch/searxng"
	"github.com/mcpsearch/mcpsearch/server"
	"github.com/mcpsearch/mcpsearch/sources"
)

// loadConfig reads the environment, then the command's flags, and
// validates the result. Flags override the environment.
func loadConfig(env *environment, name string, args []string, extra func(fs *flag.FlagSet)) (config.Config, *flag.FlagSet, error) {
	cfg := config.Default()
	if err := cfg.LoadEnv(env.environ); err != nil {
		return cfg, nil, usageError{err}
	}
	fs := newFlagSet(name, &cfg)
	if extra != nil {
		extra(fs)
	}
	if err := parseFlags(env, fs, args); err != nil {
		return cfg, fs, err
	}
	if err := errors.Join(cfg.Validate(), server.CheckToolSettings(cfg)); err != nil {
		return cfg, fs, usageError{fmt.Errorf("invalid configuration:\n%w", err)}
	}
	for _, w := range config.UnknownVars(env.environ, server.ToolNames()) {
		fmt.Fprintln(env.stderr, "mcpsearch: warning:", w)
	}
	return cfg, fs, nil
}

func runServe(ctx context.Context, env *environment, args []string) error {
	cfg, _, err := loadConfig(env, "serve", args, nil)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogFormat, cfg.LogLevel)
	if limit, set := setMemoryLimit(env.environ, cfg.Workers); set {
		log.Info("memory limit", "soft_limit_mib", limit>>20, "set_by", "default (GOMEMLIMIT overrides it)")
	}
	// Registered before the server's stop, so that the spans of its
	// last work (the audit flush, jobs ending) are exported after it.
	tp, log, stopTracing, err := startTracing(ctx, env, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	srv, stop, err := newServer(ctx, cfg, log, tp)
	if err != nil {
		return err
	}
	defer stop()
	if cfg.Serves("stdio") {
		return srv.ServeStdio(ctx)
	}
	return srv.ServeHTTP(ctx, nil)
}

// newServer builds the server serve runs for cfg, with every dependency
// the configuration asks for, traced by tp (nil: tracing off). stop,
// called once the server is done, flushes the audit, drains the ingester
// and closes the database pools, in that order.
func newServer(ctx context.Context, cfg config.Config, log *slog.Logger, tp trace.TracerProvider) (srv *server.Server, stop func(), err error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	deps := server.Deps{Tracing: tp}
	// Every statement of a traced call or job is a span of its own.
	statements := pg.NewTracer(tp, cfg.TraceSQLText)
	if deps.APIKeys, err = loadKeys(cfg); err != nil {
		return nil, nil, err
	}
	if err := server.CheckExposure(cfg, deps.APIKeys); err != nil {
		return nil, nil, usageError{err}
	}
	if deps.Tokens, err = server.NewTokenVerifier(cfg); err != nil {
		return nil, nil, usageError{err}
	}
	if deps.Tokens != nil {
		log.Info("signing in with the identity provider", "issuer", cfg.AuthIssuer, "resource", cfg.PublicBase()+"/mcp",
			"metadata", cfg.PublicBase()+"/.well-known/oauth-protected-resource/mcp")
	}
	if cfg.WebSearchEnabled {
		p, err := searxng.NewPool(cfg.SearXNGURLs(), searxng.PoolOptions{Logger: log},
			searxng.WithTimeout(cfg.WebSearchTimeout), searxng.WithUserAgent("mcpsearch/"+version))
		if err != nil {
			return nil, nil, usageError{fmt.Errorf("MCP_web_search_searxng_url: %w", err)}
		}
		deps.Search = p
	}
	if cfg.FetchURLEnabled {
		f, err := newFetcher(cfg)
		if err != nil {
			return nil, nil, err
		}
		deps.Fetch = f
	}
	// One pool serves the documents store and the audit: audit rows reach
	// the database whether or not the documents tools are on.
	var pool *pgxpool.Pool
	pools := map[string]*pgxpool.Pool{} // by their name in /metrics
	if cfg.DatabaseURL != "" {
		if pool, err = openPool(ctx, cfg, pg.WithTracer(statements)); err != nil {
			return nil, nil, err
		}
		pools["main"] = pool
		// First, so the pool closes after the ingester drained and the
		// audit writer flushed.
		closers = append(closers, pool.Close)
		if err := checkMigrated(ctx, pool, log); err != nil {
			return nil, nil, err
		}
	}
	if cfg.SharedRateLimits() {
		lim, limPool, err := newRateLimiter(ctx, cfg, statements)
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, limPool.Close)
		pools["rate_limits"] = limPool
		deps.RateLimits = lim
		// A bucket unused for longer than it takes to fill is full: its
		// row can go, and comes back full when its caller does.
		pctx, stopPrune := context.WithCancel(context.Background())
		pruned := make(chan struct{})
		go func() {
			defer close(pruned)
			lim.PruneEvery(pctx, rateLimitPruneInterval, bucketIdle(cfg), func(err error) {
				log.Warn("rate limits: prune idle buckets", "error", err)
			})
		}()
		closers = append(closers, func() { stopPrune(); <-pruned })
	}
	if cfg.DocsEnabled {
		st, err := openDocs(ctx, cfg, pool, log)
		if err != nil {
			return nil, nil, err
		}
		if st != nil {
			in, err := newIngester(cfg, st, log, true, tp)
			if err != nil {
				return nil, nil, err
			}
			closers = append(closers, func() { in.Close() })
			deps.Docs, deps.Ingest = st, in
			// Jobs: what an agent or an upload adds, followed, resumed by
			// any replica, cancelled. Closed before the ingester.
			opts := jobs.Options{
				Workers:      cfg.Workers,
				Lease:        time.Duration(cfg.JobLeaseSeconds) * time.Second,
				FetchTimeout: cfg.FetchURLTimeout,
				Fetch:        fetcherOf(deps.Fetch),
				Unpack:       jobs.ArchiveUnpacker{Limits: extract.Limits{MaxBytes: cfg.MaxFileBytes}, MaxFileBytes: cfg.MaxFileBytes},
				Logger:       log,
				Tracer:       tp,
			}
			// Sites are crawled and synced through fetch_url's client.
			var syncer *sources.Syncer
			if fc, ok := deps.Fetch.(*fetch.Client); ok {
				// Closed after the runner, whose crawls render with it.
				rd := newRenderer(cfg, fc, log)
				closers = append(closers, rd.Close)
				syncer = sources.NewSyncer(sources.NewStore(st), fc, crawlBase(cfg, rd), log)
				opts.Kinds = syncer.Kinds()
			}
			runner := jobs.NewRunner(jobs.NewStore(st), in, opts)
			closers = append(closers, runner.Close)
			deps.Jobs = runner
			if syncer != nil {
				svc := sources.NewService(syncer, runner)
				deps.Sources = svc
				if cfg.SyncInterval > 0 {
					sctx, stopSync := context.WithCancel(context.Background())
					synced := make(chan struct{})
					go func() {
						defer close(synced)
						svc.SyncEvery(sctx, cfg.SyncInterval, min(cfg.SyncInterval, time.Minute))
					}()
					closers = append(closers, func() { stopSync(); <-synced })
				}
			}
		}
	}
	if cfg.RerankURL != "" {
		rr, err := rerank.New(rerank.Options{URL: cfg.RerankURL, APIKey: cfg.RerankAPIKey, Model: cfg.RerankModel, Timeout: cfg.RerankTimeout})
		if err != nil {
			return nil, nil, usageError{fmt.Errorf("MCP_rerank_url: %w", err)}
		}
		deps.Reranker = rr
	}
	if deps.Fetch != nil {
		deps.Research = newResearcher(cfg, deps, log)
	}
	deps.Audit = audit.NewWriter(pool, audit.Options{Logger: log, Tracer: tp})
	closers = append(closers, func() {
		// Flush what is queued; rows the database does not take in time go
		// to the log.
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := deps.Audit.Close(fctx); err != nil {
			log.Error("audit flush", "error", err)
		}
	})
	srv = server.New(cfg, deps, log, version)
	for name, p := range pools {
		if err := srv.Register(server.PoolMetrics(p, name)...); err != nil {
			return nil, nil, fmt.Errorf("metrics: %w", err)
		}
	}
	rateLimits := "memory"
	if deps.RateLimits != nil {
		rateLimits = "postgres"
	}
	log.Info("mcpsearch starting", "version", version, "transports", strings.Join(cfg.Transports, ","),
		"web_search", deps.Search != nil, "docs", deps.Docs != nil, "rate_limits", rateLimits)
	return srv, closeAll, nil
}

// rateLimitPruneInterval is how often a replica deletes the rows of
// buckets nobody used for bucketIdle.
const rateLimitPruneInterval = 10 * time.Minute

// bucketIdle is how long a bucket's row stays unused before it is pruned:
// twice the longest any of cfg's buckets takes to fill (Burst at PerMinute),
// and at least an hour.
func bucketIdle(cfg config.Config) time.Duration {
	idle := time.Hour
	limits := []config.RateLimit{cfg.RateLimit}
	for tool := range cfg.RateLimits {
		limits = append(limits, cfg.RateLimitFor(tool))
	}
	for _, rl := range limits {
		if rl.PerMinute > 0 {
			fill := time.Duration(float64(rl.Burst) / float64(rl.PerMinute) * float64(time.Minute))
			idle = max(idle, 2*fill)
		}
	}
	return idle
}

// rateLimitConns bounds the connections of the rate limiter's pool. A call
// holds one for one round trip, well under a millisecond on a local
// network, so a few serve thousands of calls a second.
const rateLimitConns = 4

// newRateLimiter keeps the token buckets in the database of cfg, with a
// pool of their own: in the pool the documents store and the audit share,
// an ingestion or an index build holding every connection would make each
// call wait past MCP_rate_limit_db_timeout_ms and be decided without the
// database. One connection is kept open so that a call after a quiet spell
// does not pay for a new one within its timeout, and none is pinged before
// use (pgx pings a connection idle for a second), so that a call stays one
// round trip: a connection the server dropped fails its call, which is
// decided without the database while the pool makes another. Its
// statements are traced by statements, when not nil. The caller closes the
// returned pool.
func newRateLimiter(ctx context.Context, cfg config.Config, statements pgx.QueryTracer) (*ratelimit.Limiter, *pgxpool.Pool, error) {
	onFailure, err := ratelimit.ParseFailure(cfg.RateLimitOnDBFailure)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("MCP_rate_limit_on_db_failure: %w", err)}
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("DATABASE_URL: %w", err)}
	}
	pcfg.MaxConns = rateLimitConns
	pcfg.MinConns = 1
	pcfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pg.WithTracer(statements)(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("open the rate limits' database pool: %w", err)
	}
	return ratelimit.New(pool, ratelimit.Options{Timeout: cfg.RateLimitDBTimeout, OnFailure: onFailure}), pool, nil
}

// checkMigrated refuses a database without the schema: audit rows (and
// documents) could not be stored. A database that does not answer yet is
// waited for by the audit writer and reported by the tools.
func checkMigrated(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := migrations.Check(cctx, pool)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, migrations.ErrOutdated):
		return fmt.Errorf("DATABASE_URL: %w "+
			"(audit rows and documents are stored there; unset DATABASE_URL to serve web search only, with audit rows in the log)", err)
	}
	err = pg.Error("check schema", err)
	if errors.Is(err, pg.ErrUnavailable) || errors.Is(cctx.Err(), context.DeadlineExceeded) {
		log.Warn("database unreachable at start; audit rows wait and the documents tools report it until it is back", "error", err)
		return nil
	}
	return fmt.Errorf("DATABASE_URL: %w", err)
}

// fetcherOf is the jobs' downloader: the fetch_url client, or none when
// fetching is off.
func fetcherOf(f server.PageFetcher) jobs.Fetcher {
	if f == nil {
		return nil
	}
	return f
}

// newFetcher builds the page reader of fetch_url and ingestion by URL.
func newFetcher(cfg config.Config) (*fetch.Client, error) {
	ua := cfg.FetchURLUserAgent
	if ua == "" {
		ua = "mcpsearch/" + version
	}
	// fetch.Options reads 0 as "the default" where the configuration
	// means "none".
	ttl, redirects := cfg.FetchURLCacheTTL, cfg.FetchURLRedirects
	if ttl == 0 {
		ttl = -1
	}
	if redirects == 0 {
		redirects = -1
	}
	f, err := fetch.New(fetch.Options{Timeout: cfg.FetchURLTimeout, MaxBodyBytes: cfg.FetchURLMaxBytes, MaxRedirects: redirects,
		UserAgent: ua, Proxy: cfg.FetchURLProxy, AllowHosts: cfg.FetchURLAllowHosts, CacheTTL: ttl, CacheSize: cfg.FetchURLCacheSize})
	if err != nil {
		return nil, usageError{fmt.Errorf("MCP_fetch_url_*: %w", err)}
	}
	return f, nil
}

func loadKeys(cfg config.Config) ([]server.APIKey, error) {
	var r io.Reader
	if cfg.APIKeysFile != "" {
		f, err := os.Open(cfg.APIKeysFile)
		if err != nil {
			return nil, fmt.Errorf("MCP_API_KEYS_FILE: %w", err)
		}
		defer f.Close()
		r = f
	}
	keys, err := server.LoadAPIKeys(cfg.APIKeys, r)
	if err != nil {
		return nil, fmt.Errorf("MCP_API_KEYS_FILE %s: %w", cfg.APIKeysFile, err)
	}
	return keys, nil
}

// openDocs opens the documents store for serve. Without DATABASE_URL the
// documents tools are off; with an unreachable database the server starts
// anyway and the tools report the outage until it comes back; with an old
// schema it refuses to start and says what to run.
func openDocs(ctx context.Context, cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*docs.Store, error) {
	if pool == nil {
		log.Warn("documents tools are off: set DATABASE_URL to a PostgreSQL with pgvector (or MCP_docs_enabled=false to silence this)")
		return nil, nil
	}
	st, err := newStore(cfg, pool, log)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	switch err := st.CheckSchema(cctx); {
	case err == nil:
	case errors.Is(err, docs.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
		log.Warn("database unreachable at start; documents tools report it until it is back", "error", err)
	default:
		return nil, err
	}
	return st, nil
}

func runConfig(_ context.Context, env *environment, args []string) error {
	cfg, _, err := loadConfig(env, "config", args, nil)
	if err != nil {
		return err
	}
	for _, kv := range cfg.Describe(server.ToolNames()) {
		fmt.Fprintf(env.stdout, "%s=%s\n", kv[0], kv[1])
	}
	return nil
}

// newResearcher reads web_search's result pages and fetch_url's passages
// through fetch_url's client: ranked by BM25, fused with the documents'
// embedder when it has meaning (a local model2vec model ranks every
// candidate; one behind an API the best 64), and reordered by the reranker
// when there is one.
func newResearcher(cfg config.Config, deps server.Deps, log *slog.Logger) *research.Reader {
	ranking := research.Ranking{}
	if st, ok := deps.Docs.(*docs.Store); ok {
		ranking.Vectors = st
		if cfg.EmbedProvider == "model2vec" {
			ranking.MaxEmbed = 512
		}
	}
	if deps.Reranker != nil {
		ranking.Reranker = deps.Reranker
	}
	return research.New(deps.Fetch, research.Options{Timeout: cfg.WebSearchReadTimeout, PerHost: cfg.WebSearchReadPerHost, Ranking: ranking, Log: log})
}
