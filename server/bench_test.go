package server

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
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
