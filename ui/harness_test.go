package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/crawl"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/internal/oidctest"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/pg"
	"github.com/mcpsearch/mcpsearch/server"
	"github.com/mcpsearch/mcpsearch/sources"
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

// The page's client at the identity provider.
const (
	pageClientID     = "mcpsearch-page"
	pageClientSecret = "page-client-secret"
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

// stack is a real server over a database: the documents store, its
// ingester and jobs, the audit, and the HTTP surface with the web page.
type stack struct {
	url    string
	pool   *pgxpool.Pool
	store  *docs.Store
	ingest *docs.Ingester
	jobs   *jobs.Runner
	audit  *audit.Writer
	http   *httptest.Server
	// base is the address the browser opens: the server's own, or the
	// public URL it is told it has.
	base string
	opts stackOptions
}

// stackOptions shape a stack.
type stackOptions struct {
	// keys is the keys file ("" for none).
	keys string
	// op, when set, is the identity provider the page signs people in
	// through; the server is then reached at localhost, another site than
	// the provider's 127.0.0.1, as a provider of another domain would be.
	op *oidctest.Provider
	// web lets the server fetch and crawl sites on loopback.
	web bool
	// url is the database: "" for a fresh one, or another stack's for a
	// replica of it.
	url string
	// tweak changes the configuration.
	tweak func(*config.Config)
}

// newStack starts the server; keys is the keys file ("" for none).
func newStack(tb testing.TB, keys string) *stack {
	tb.Helper()
	return newStackWith(tb, stackOptions{keys: keys})
}

func newStackWith(tb testing.TB, o stackOptions) *stack {
	tb.Helper()
	ctx := context.Background()
	url := o.url
	if url == "" {
		url = pgtest.NewDatabase(tb)
	}
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
	jopts := jobs.Options{Poll: 100 * time.Millisecond, Check: 100 * time.Millisecond, Unpack: jobs.ArchiveUnpacker{MaxFileBytes: 50 << 20}}
	var fc *fetch.Client
	var sy *sources.Syncer
	if o.web {
		if fc, err = fetch.New(fetch.Options{AllowHosts: []string{"127.0.0.1"}, CacheTTL: -1}); err != nil {
			tb.Fatal(err)
		}
		sy = sources.NewSyncer(sources.NewStore(st), fc, crawl.Options{Delay: -1}, nil)
		jopts.Fetch, jopts.Kinds = fc, sy.Kinds()
	}
	runner := jobs.NewRunner(jobs.NewStore(st), in, jopts)
	tb.Cleanup(runner.Close)
	aw := audit.NewWriter(pool, audit.Options{FlushInterval: 50 * time.Millisecond})
	tb.Cleanup(func() { _ = aw.Close(context.Background()) })

	hs := httptest.NewUnstartedServer(nil)
	base := "http://" + hs.Listener.Addr().String()
	cfg := config.Default()
	cfg.Transports = []string{"http"}
	cfg.DatabaseURL = url
	cfg.RateLimit = config.RateLimit{PerMinute: 6000, Burst: 1000}
	cfg.WebSearchEnabled = false
	cfg.FetchURLEnabled = o.web
	if o.web {
		cfg.FetchURLAllowHosts = []string{"127.0.0.1"}
	}
	if o.op != nil {
		_, port, _ := net.SplitHostPort(hs.Listener.Addr().String())
		base = "http://localhost:" + port
		cfg.PublicURL = base
		cfg.AuthIssuer = o.op.URL
		cfg.AuthConversationsClaim = oidctest.DefaultConversationsClaim
		cfg.UIOAuthClientID, cfg.UIOAuthClientSecret = pageClientID, pageClientSecret
		o.op.AddWebClient(pageClientID, pageClientSecret, base+"/ui/oauth/callback")
	}
	if o.tweak != nil {
		o.tweak(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	var apiKeys []server.APIKey
	if o.keys != "" {
		if apiKeys, err = server.LoadAPIKeys(nil, strings.NewReader(o.keys)); err != nil {
			tb.Fatal(err)
		}
	}
	deps := server.Deps{Docs: st, Ingest: in, Jobs: runner, APIKeys: apiKeys, Audit: aw}
	if o.web {
		deps.Fetch, deps.Sources = fc, sources.NewService(sy, runner)
	}
	if deps.Tokens, err = server.NewTokenVerifier(cfg); err != nil {
		tb.Fatal(err)
	}
	srv := server.New(cfg, deps, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	hs.Config.Handler = srv.Handler()
	hs.Start()
	tb.Cleanup(hs.Close)
	return &stack{url: url, pool: pool, store: st, ingest: in, jobs: runner, audit: aw, http: hs, base: base, opts: o}
}

// replica starts another server like s over s's database: another
// replica behind the same load balancer.
func (s *stack) replica(tb testing.TB) *stack {
	tb.Helper()
	o := s.opts
	o.url = s.url
	return newStackWith(tb, o)
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

// auditRows returns the audit's rows of transport ui as "action caller
// outcome conversation", oldest first; caller is the key's name or the
// person's subject.
func (s *stack) auditRows(tb testing.TB) []string {
	tb.Helper()
	rows, err := s.pool.Query(context.Background(), `
		SELECT tool_name || ' ' || coalesce(api_key_name, subject, '-') || ' ' || coalesce(error_code, 'ok') || ' ' || coalesce(conversation_id, '-')
		FROM chat_mcp_tool_calls WHERE transport = 'ui' ORDER BY created_at, id`)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// waitAudit waits until the audit's rows of transport ui, which the
// writer stores within a flush, hold want in order (among others when
// some is true), and fails the test with what they hold otherwise.
func (s *stack) waitAudit(tb testing.TB, want []string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := s.auditRows(tb)
		if containsInOrder(got, want) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("audit rows of the page:\n%s\nwant among them, in order:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// containsInOrder reports whether want are rows of got, in their order.
func containsInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}
