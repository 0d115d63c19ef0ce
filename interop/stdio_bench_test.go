package interop

import (
	"context"
	"os/exec"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// BenchmarkWebSearchStdio measures one web_search round trip through the
// real binary over stdio, as Claude Desktop drives it, against the fake
// SearXNG with the cache off.
//
//	go test ./interop -run '^$' -bench WebSearchStdio -benchmem
func BenchmarkWebSearchStdio(b *testing.B) {
	fake := searxngtest.New(b)
	cmd := exec.Command(binPath, "serve", "--transport", "stdio")
	cmd.Env = baseConfig(fake.URL).processEnv()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	params := &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "benchmark query", "max_results": 5}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("call failed: %v %v", err, res)
		}
	}
}
