package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

const refBegin, refEnd = "<!-- tools:begin -->\n", "<!-- tools:end -->"

// TestREADMEToolReference keeps the README's tool reference in step with
// the tool definitions.
func TestREADMEToolReference(t *testing.T) {
	path := filepath.Join("..", "README.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i, j := strings.Index(s, refBegin), strings.Index(s, refEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the %q ... %q markers", refBegin, refEnd)
	}
	want := ToolReference(listTools(t))
	if got := s[i+len(refBegin) : j]; got != want {
		if *update {
			s = s[:i+len(refBegin)] + want + s[j:]
			if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("README tool reference is stale; run go test ./server -run README -update\nwant:\n%s", want)
	}
}
