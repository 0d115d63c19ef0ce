package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/internal/readmetest"
)

var update = flag.Bool("update", false, "rewrite the golden tool schemas and the README's tool reference")

// listTools returns every tool of a server with all tools enabled.
func listTools(t *testing.T) []*mcp.Tool {
	t.Helper()
	h := newFullHarness(t)
	res, err := h.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// TestToolSchemasGolden pins every tool's name, description, input and
// output schema and annotations: agents and prompts depend on them, so a
// change must be deliberate (go test ./server -run Golden -update).
func TestToolSchemasGolden(t *testing.T) {
	got, err := json.MarshalIndent(listTools(t), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "tools.golden.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./server -run Golden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("tool definitions changed; if that is intended run go test ./server -run 'Golden|README' -update\ngot:\n%s", got)
	}
}

// TestREADMEToolReference keeps the README's tool reference in step with
// the tool definitions.
func TestREADMEToolReference(t *testing.T) {
	readmetest.Check(t, filepath.Join("..", "README.md"), "tools", ToolReference(listTools(t)), *update, "go test ./server -run README -update")
}

// TestCatalogue checks the list every surface reads tools from: names are
// unique and in the snake_case the per-tool settings (MCP_<tool>_...) and
// the interop switches (MCP_<tool>_enabled) expect.
func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range ToolNames() {
		if seen[name] || !regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`).MatchString(name) {
			t.Errorf("tool name %q is repeated or not snake_case", name)
		}
		seen[name] = true
	}
}
