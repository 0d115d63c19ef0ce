package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/pg"
	"github.com/mcpsearch/mcpsearch/ratelimit"
)

// BenchmarkWebSearchInProcess measures one web_search round trip through
// the MCP client, the middleware and the SearXNG client against the fake,
// with the cache off so every call reaches SearXNG.
func BenchmarkWebSearchInProcess(b *testing.B) {
	h := newBenchHarness(b)
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "benchmark query", "max_results": 5}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := h.session.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("call failed: %v %v", err, res)
		}
	}
}

func newBenchHarness(b *testing.B) *harness {
	return newHarnessTB(b, func(c *config.Config) {
		c.WebSearchCacheTTL = 0
		c.RateLimit = config.RateLimit{}
	})
}

// BenchmarkRateLimitStores measures a web_search call answered from the
// cache, through the MCP client and the middleware, with the rate limits
// kept in this process or in PostgreSQL: the difference is what the shared
// store adds to a call, its one round trip. Limits are high enough never
// to refuse.
func BenchmarkRateLimitStores(b *testing.B) {
	for _, store := range []string{"memory", "postgres"} {
		b.Run(store, func(b *testing.B) {
			h := newHarnessDeps(b, func(c *config.Config) {
				c.RateLimit = config.RateLimit{PerMinute: 1 << 30, Burst: 1 << 30}
			}, func(d *Deps) {
				if store == "postgres" {
					pool, err := pgxpool.New(context.Background(), pgtest.NewDatabase(b))
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(pool.Close)
					d.RateLimits = ratelimit.New(pool, ratelimit.Options{Timeout: 5 * time.Second})
				}
			})
			ctx := context.Background()
			params := &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "cached query", "max_results": 5}}
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				res, err := h.session.CallTool(ctx, params)
				if err != nil || res.IsError {
					b.Fatalf("call failed: %v %v", err, res)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkTracing measures a web_search call answered from the cache,
// through the MCP client and the middleware: with tracing off (no
// provider: the hooks allocate nothing, so allocs/op is that of a server
// without them), on with every call sampled into an exporter that keeps
// nothing, and on with no call sampled.
func BenchmarkTracing(b *testing.B) {
	for _, mode := range []string{"off", "sampled", "unsampled"} {
		b.Run(mode, func(b *testing.B) {
			var tp *sdktrace.TracerProvider
			switch mode {
			case "sampled":
				tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
			case "unsampled":
				tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
			}
			h := newHarnessDeps(b, func(c *config.Config) {
				c.RateLimit = config.RateLimit{PerMinute: 1 << 30, Burst: 1 << 30}
			}, func(d *Deps) {
				if tp != nil {
					d.Tracing = tp
				}
			})
			ctx := context.Background()
			params := &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "cached query", "max_results": 5}}
			b.ReportAllocs()
			for b.Loop() {
				res, err := h.session.CallTool(ctx, params)
				if err != nil || res.IsError {
					b.Fatalf("call failed: %v %v", err, res)
				}
			}
		})
	}
}

// BenchmarkAddDocumentWait adds 60 small HTML pages one add_document call
// at a time, each waiting for its job (wait_seconds), and again without
// waiting, then until the 60 are ready, on a server wired as serve wires
// it (the local embedder, the default worker and job settings). A waiting
// call answers once its job ends, told by the jobs store rather than by
// reading the job again and again: the difference between the two is the
// wait itself. Reported per page:
//
//	go test -run '^$' -bench BenchmarkAddDocumentWait -benchtime 1x ./server/
func BenchmarkAddDocumentWait(b *testing.B) {
	const pages = 60
	url := pgtest.NewDatabase(b)
	h := newHarnessDeps(b, nil, func(d *Deps) {
		emb, err := embed.NewLocal(0)
		if err != nil {
			b.Fatal(err)
		}
		pool, err := pg.Open(context.Background(), url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		st, err := docs.NewStore(pool, emb, docs.Options{})
		if err != nil {
			b.Fatal(err)
		}
		in, err := docs.NewIngester(st, docs.IngestOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(in.Close)
		r := jobs.NewRunner(jobs.NewStore(st), in, jobs.Options{})
		b.Cleanup(r.Close)
		d.Docs, d.Ingest, d.Jobs = st, in, r
	})
	ctx := context.Background()
	add := func(conv string, i, wait int) {
		page := fmt.Sprintf("<html><head><title>Page %d</title></head><body><h1>Page %d of %s</h1><p>%s</p></body></html>", i, i, conv,
			strings.Repeat(fmt.Sprintf("Paragraph about topic %d, revision %d. ", i, i*7), 20))
		res, err := h.session.CallTool(ctx, &mcp.CallToolParams{Name: "add_document", Arguments: map[string]any{
			"conversation_id": conv, "file_name": fmt.Sprintf("page-%d.html", i), "wait_seconds": wait,
			"content_base64": base64.StdEncoding.EncodeToString([]byte(page))}})
		if err != nil || res.IsError {
			b.Fatalf("add_document: %v %v", err, res)
		}
		if wait > 0 {
			var out AddDocumentOutput
			raw, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(raw, &out); err != nil || out.Status != jobs.Succeeded {
				b.Fatalf("a waiting add_document answered %s, want its job succeeded", raw)
			}
		}
	}
	for n := 0; b.Loop(); n++ {
		conv := fmt.Sprintf("wait-%d", n)
		t0 := time.Now()
		for i := range pages {
			add(conv, i, 30)
		}
		waited := time.Since(t0)

		conv = fmt.Sprintf("nowait-%d", n)
		t0 = time.Now()
		for i := range pages {
			add(conv, i, 0)
		}
		calls := time.Since(t0)
		for {
			page, err := h.srv.deps.Docs.ListFilesPage(ctx, docs.FileQuery{ConversationID: conv, Status: docs.StatusReady, Limit: pages})
			if err != nil {
				b.Fatal(err)
			}
			if page.Total == pages {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		ready := time.Since(t0)
		b.ReportMetric(float64(waited.Milliseconds())/pages, "ms/page-waiting")
		b.ReportMetric(float64(calls.Milliseconds())/pages, "ms/page-not-waiting")
		b.ReportMetric(float64(ready.Milliseconds())/pages, "ms/page-until-ready")
		b.Logf("%d pages: %.2f s waiting for each, %.2f s without waiting (%.2f s until all were ready)", pages, waited.Seconds(), calls.Seconds(), ready.Seconds())
	}
}
