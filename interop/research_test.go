package interop

import (
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/researchtest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// TestResearchTypeScript asks factual questions with the official
// TypeScript SDK's client over stdio and streamable HTTP: one web_search
// call with read reads the results' pages (a documentation site on
// loopback, which the server reads only because the operator allowed
// 127.0.0.1) and returns the passage that answers; fetch_url with query
// answers about one page.
func TestResearchTypeScript(t *testing.T) {
	requireNode(t)
	t.Parallel()
	fake := searxngtest.New(t)
	site := researchtest.New(t)
	results := []searxngtest.Result{
		{URL: site.URL + "/history.html", Title: "History"}, {URL: site.URL + "/install.html", Title: "Installing"},
		{URL: site.URL + "/settings.html", Title: "Settings"}, {URL: site.URL + "/limits.html", Title: "Limits"},
	}
	for _, a := range researchtest.Answers {
		fake.SetResults(a.Question, results)
	}
	base := baseConfig(fake.URL).with("MCP_fetch_url_enabled=true", "MCP_fetch_url_allow_hosts=127.0.0.1")
	for _, tc := range []transportCase{{name: "stdio", transport: "stdio"}, {name: "http", transport: "http"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tg := newTarget(t, tc, base)
			run := func(t *testing.T, scenario string, args ...string) tsReport {
				t.Helper()
				return runClient(t, tg, "research-client.mjs", scenario, args...)
			}
			for _, a := range researchtest.Answers {
				t.Run(a.Question, func(t *testing.T) {
					run(t, "answer", "--query", a.Question, "--read", "4", "--expect-text", a.Phrase, "--expect-url", site.URL+a.Page)
				})
			}
			t.Run("fetch_url with query", func(t *testing.T) {
				run(t, "ask", "--url", site.URL+"/settings.html", "--query", "how long are cache entries kept", "--expect-text", "kept for 90 minutes")
			})
		})
	}
}
