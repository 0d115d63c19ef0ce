package interop

import (
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// releaseNotes is the Markdown file the LangChain test uploads.
const releaseNotes = `# Release checklist

Before tagging, run the migration dry run against a copy of production and
compare the row counts.

## Rollback

If the canary's error rate passes two percent, the on-call engineer rolls the
deployment back with the blue-green switch and files an incident report.
`

// incidentNotes is the note the LangChain test adds with add_document.
const incidentNotes = `The nightly backup failed three times last week: the storage bucket's
expired credentials were rotated by hand on Friday, and the backup job now
reads them from the secrets store.`

// TestLangChain drives a keyed server with LangChain's MCP adapters, the
// client LangChain and LangGraph agents use: MultiServerMCPClient sends the
// key as a header, loads every tool and calls web_search, search_docs on a
// Markdown file uploaded over the HTTP API, and get_chunk, over streamable
// HTTP and over SSE; it adds a note with add_document, which search_docs
// then finds. A wrong key must stop it from loading the tools.
func TestLangChain(t *testing.T) {
	requireNode(t, "@langchain/mcp-adapters", "@langchain/core")
	t.Parallel()
	const key = "interop-langchain-key-0123456789"
	const conv, name = "conv-langchain", "release-notes.md"
	fake := searxngtest.New(t)
	cfg := docsConfig(t, fake.URL).with("MCP_API_KEYS=" + key)
	srv := startServer(t, transportCase{name: "http,sse", transport: "http,sse"}, cfg)

	apiClient{base: srv.base, key: key}.upload(t, conv, name, "text/markdown", []byte(releaseNotes))
	s := connectGo(t, target{transport: "http", url: srv.base + "/mcp", cfg: cfg, srv: srv, key: key})
	waitReady(t, s, conv, 1)

	for _, transport := range []string{"http", "sse"} {
		url := srv.base + "/mcp"
		if transport == "sse" {
			url = srv.base + "/sse"
		}
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			const q = "langchain adapters"
			before := fake.Requests()
			rep := runNodeScript(t, "langchain-client.mjs", "tools", transport, []string{
				"--transport", transport, "--url", url, "--header", "Authorization: Bearer " + key,
				"--web-query", q, "--max-results", "3", "--expect-first-url", searxngtest.ResultURL(q, 1),
				"--conversation", conv, "--docs-query", "who rolls the deployment back when the canary fails",
				"--expect-file", name, "--expect-docs-text", "blue-green switch",
			})
			if n, _ := rep.Details["docs_chunks"].(float64); n < 1 {
				t.Errorf("search_docs returned %v chunks", rep.Details["docs_chunks"])
			}
			// One web_search reached SearXNG; the invalid one did not.
			if got := fake.Requests() - before; got < 1 {
				t.Errorf("SearXNG got %d requests, want the web_search call", got)
			}
		})
		t.Run(transport+"/add_document", func(t *testing.T) {
			t.Parallel()
			conv := "conv-langchain-notes-" + transport
			rep := runNodeScript(t, "langchain-client.mjs", "add-document", transport, []string{
				"--transport", transport, "--url", url, "--header", "Authorization: Bearer " + key,
				"--conversation", conv, "--title", "Incident review", "--text", incidentNotes,
				"--docs-query", "what broke the nightly backup", "--expect-docs-text", "expired credentials",
			})
			id, _ := rep.Details["job_id"].(string)
			if id == "" {
				t.Fatalf("add_document reported no job: %v", rep.Details)
			}
			waitAuditedJob(t, cfg["DATABASE_URL"], "add_document", id)
		})
		t.Run(transport+"/wrong key", func(t *testing.T) {
			t.Parallel()
			runNodeScript(t, "langchain-client.mjs", "unauthorized", transport, []string{
				"--transport", transport, "--url", url, "--header", "Authorization: Bearer wrong-" + key,
			})
		})
	}
}
