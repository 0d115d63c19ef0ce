package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
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
