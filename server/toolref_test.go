package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/readmetest"
)

var update = flag.Bool("update", false, "rewrite the golden tool schemas and the tool reference in doc/tools.md")

// listTools returns every tool of a server with all tools enabled, whose
// documents store embeds with emb (nil: the default local embedder).
func listTools(t *testing.T, emb embed.Embedder) []*mcp.Tool {
	t.Helper()
	h := newFullHarness(t, emb)
	res, err := h.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// semanticEmbedder is a model2vec model (a small one made for tests): a
// semantic embedder, whose server tells agents that search finds passages
// by meaning.
func semanticEmbedder(t *testing.T) embed.Embedder {
	t.Helper()
	m, err := embed.New(embed.Config{Provider: embed.ProviderModel2Vec, ModelDir: filepath.Join("..", "embed", "model2vec", "testdata", "f32")})
	if err != nil {
		t.Fatal(err)
	}
	if !embed.Semantic(m) {
		t.Fatalf("model2vec model %s is not semantic", m.Model())
	}
	return m
}

// TestToolSchemasGolden pins every tool's name, description, input and
// output schema and annotations: agents and prompts depend on them, so a
// change must be deliberate (go test ./server -run Golden -update). What
// search_docs says it can match follows the embedder, so both kinds are
// pinned: the default local (hashing) embedder, which matches words and
// pieces of words, and a semantic one (model2vec).
func TestToolSchemasGolden(t *testing.T) {
	tests := []struct {
		file string
		emb  func(t *testing.T) embed.Embedder
	}{
		{"tools.golden.json", func(*testing.T) embed.Embedder { return nil }},
		{"tools.semantic.golden.json", semanticEmbedder},
	}
	for _, tt := range tests {
		got, err := json.MarshalIndent(listTools(t, tt.emb(t)), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("testdata", tt.file)
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
			t.Errorf("tool definitions changed (%s); if that is intended run go test ./server -run 'Golden|README' -update\ngot:\n%s", tt.file, got)
		}
	}
}

// TestToolTextFollowsEmbedder checks that no text an agent reads claims
// meaning where the embedder has none, and that a semantic embedder's
// does say so.
func TestToolTextFollowsEmbedder(t *testing.T) {
	text := func(tools []*mcp.Tool) string {
		b, err := json.Marshal(tools)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	lexical, semantic := text(listTools(t, nil)), text(listTools(t, semanticEmbedder(t)))
	for _, claim := range []string{"by meaning", "meaning only", "passage's meaning", "paraphrases highest", "in natural language"} {
		if strings.Contains(lexical, claim) {
			t.Errorf("with the hashing embedder a tool says %q", claim)
		}
		if !strings.Contains(semantic, claim) {
			t.Errorf("with a semantic embedder no tool says %q", claim)
		}
	}
	for _, advice := range []string{"not meaning", "not paraphrases or synonyms", "terms the documents are likely to use"} {
		if !strings.Contains(lexical, advice) {
			t.Errorf("with the hashing embedder no tool says %q", advice)
		}
	}
}

// TestREADMEToolReference keeps the tool reference (doc/tools.md) in step with
// the tool definitions: as the default (hashing) embedder has them, and
// what a semantic embedder changes.
func TestREADMEToolReference(t *testing.T) {
	intro := fmt.Sprintf("With `MCP_embed_provider` `model2vec` (shown here), `openai` or `ollama`, whose models match meaning, it says instead "+
		"(the default threshold is the embedder's: %.2f for model2vec, %.2f for the others):", docs.Model2VecThreshold, docs.RemoteThreshold)
	ref := ToolReference(listTools(t, nil)) + ToolDifferences(listTools(t, nil), listTools(t, semanticEmbedder(t)), "with a semantic embedder", intro)
	readmetest.Check(t, filepath.Join("..", "doc", "tools.md"), "tools", ref, *update, "go test ./server -run README -update")
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
