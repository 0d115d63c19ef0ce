package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
	"github.com/mcpsearch/mcpsearch/searxng"
)

// harness is a Server connected to a go-sdk client in memory, with the
// fake SearXNG behind it.
type harness struct {
	srv     *Server
	fake    *searxngtest.Server
	session *mcp.ClientSession
}

func newHarness(t *testing.T, tweak func(*config.Config)) *harness {
	t.Helper()
	return newHarnessTB(t, tweak)
}

func newHarnessTB(t testing.TB, tweak func(*config.Config)) *harness {
	t.Helper()
	return newHarnessDeps(t, tweak, nil)
}

// newHarnessDeps builds a harness whose dependencies deps may add to.
func newHarnessDeps(t testing.TB, tweak func(*config.Config), deps func(*Deps)) *harness {
	t.Helper()
	return buildHarness(t, tweak, deps, false)
}

// buildHarness builds a harness; describeAll offers every tool mcpsearch
// has, whatever dependencies deps gives.
func buildHarness(t testing.TB, tweak func(*config.Config), deps func(*Deps), describeAll bool) *harness {
	t.Helper()
	fake := searxngtest.New(t)
	cfg := config.Default()
	cfg.SearXNGURL = fake.URL
	cfg.RateLimit = config.RateLimit{PerMinute: 6000, Burst: 1000}
	// The write tools' own lower defaults would limit tests that call them
	// often; their defaults are config's to test.
	cfg.BuiltinRateLimits = nil
	cfg.WebSearchMaxResults = 10
	if tweak != nil {
		tweak(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	client, err := searxng.New(cfg.SearXNGURL, searxng.WithTimeout(cfg.WebSearchTimeout))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := Deps{Search: client}
	if deps != nil {
		deps(&d)
	}
	srv := newServer(cfg, d, log, "test", describeAll)
	return &harness{srv: srv, fake: fake, session: connect(t, srv.MCP("stdio"))}
}

func connect(t testing.TB, m *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := m.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Close()
	})
	return cs
}

func (h *harness) call(t *testing.T, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := h.session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", tool, err)
	}
	return res
}

// toolErr decodes the contract error body of a failed call.
func toolErr(t *testing.T, res *mcp.CallToolResult) ToolError {
	t.Helper()
	if !res.IsError {
		t.Fatalf("call succeeded, want an error: %s", textOf(res))
	}
	var body struct {
		Error *ToolError `json:"error"`
	}
	if err := json.Unmarshal([]byte(textOf(res)), &body); err != nil || body.Error == nil {
		t.Fatalf("error text is not the contract's JSON: %q (%v)", textOf(res), err)
	}
	return *body.Error
}

func decode[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	if res.IsError {
		t.Fatalf("call failed: %s", textOf(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	return v
}

func TestWebSearch(t *testing.T) {
	h := newHarness(t, nil)
	res := h.call(t, "web_search", map[string]any{"query": "  golang   generics ", "max_results": 8})
	out := decode[WebSearchOutput](t, res)
	if out.Query != "golang generics" {
		t.Errorf("query = %q, want white space folded", out.Query)
	}
	if len(out.Results) == 0 || len(out.Results) > 8 {
		t.Fatalf("got %d results, want 1..8", len(out.Results))
	}
	seen := map[string]bool{}
	for i, r := range out.Results {
		if r.Title == "" || r.URL == "" || r.Engine == "" {
			t.Errorf("result %d lacks title, url or engine: %+v", i, r)
		}
		if seen[normalURL(r.URL)] {
			t.Errorf("duplicate URL %s not merged", r.URL)
		}
		seen[normalURL(r.URL)] = true
	}
	merged := false
	for _, r := range out.Results {
		merged = merged || len(r.Engines) > 1
	}
	if !merged {
		t.Error("no result lists the engines of a merged duplicate")
	}
	if len(out.Suggestions) == 0 || len(out.UnresponsiveEngines) == 0 || len(out.Answers) == 0 || len(out.Infoboxes) == 0 {
		t.Errorf("suggestions, answers, infoboxes or unresponsive engines missing: %+v", out)
	}
	text := textOf(res)
	for _, want := range []string{"1. " + out.Results[0].Title, out.Results[0].URL, "Related searches:", "did not respond"} {
		if !strings.Contains(text, want) {
			t.Errorf("text block lacks %q:\n%s", want, text)
		}
	}
	q := h.fake.LastQuery()
	if q.Get("format") != "json" || q.Get("categories") != "general" || q.Get("q") != "golang generics" {
		t.Errorf("SearXNG got %v", q)
	}
}

func TestWebSearchDefaultsAndParameters(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.WebSearchCacheTTL = 0 })
	out := decode[WebSearchOutput](t, h.call(t, "web_search", map[string]any{"query": "x"}))
	if len(out.Results) != 5 {
		t.Errorf("default max_results gave %d results, want 5", len(out.Results))
	}
	h.call(t, "web_search", map[string]any{"query": "x", "language": "de", "categories": []string{"news", "it"},
		"time_range": "month", "page": 2, "safesearch": 2})
	q := h.fake.LastQuery()
	for k, want := range map[string]string{"language": "de", "categories": "news,it", "time_range": "month", "pageno": "2", "safesearch": "2"} {
		if q.Get(k) != want {
			t.Errorf("SearXNG parameter %s = %q, want %q", k, q.Get(k), want)
		}
	}
}

func TestWebSearchInvalidArguments(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		name string
		args any
		want string
	}{
		{"empty query", map[string]any{"query": "   "}, "send the words"},
		{"missing query", map[string]any{}, "query"},
		{"huge query", map[string]any{"query": strings.Repeat("a", 2001)}, "at most 2000"},
		{"max_results too big", map[string]any{"query": "x", "max_results": 1000}, "send 1 to 10"},
		{"max_results negative", map[string]any{"query": "x", "max_results": -1}, "send 1 to 10"},
		{"unknown category", map[string]any{"query": "x", "categories": []string{"nope"}}, "general, images"},
		{"bad time_range", map[string]any{"query": "x", "time_range": "decade"}, "day, week, month or year"},
		{"bad safesearch", map[string]any{"query": "x", "safesearch": 7}, "send 0 to 2"},
		{"unknown argument", map[string]any{"query": "x", "lang": "de"}, `unknown argument "lang"`},
		{"fraction", map[string]any{"query": "x", "page": 1.5}, "integer"},
		{"wrong type", map[string]any{"query": "x", "max_results": "five"}, "integer"},
		{"query not a string", map[string]any{"query": 42}, "string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := toolErr(t, h.call(t, "web_search", tt.args))
			if te.Code != CodeToolError || te.Retryable {
				t.Errorf("got %+v, want non-retryable TOOL_ERROR", te)
			}
			if !strings.Contains(te.Message, "invalid arguments") || !strings.Contains(te.Message, tt.want) {
				t.Errorf("message %q should say what to send (%q)", te.Message, tt.want)
			}
		})
	}
	if n := h.fake.Requests(); n != 0 {
		t.Errorf("invalid calls reached SearXNG %d times", n)
	}
}

func TestWebSearchUpstreamFailures(t *testing.T) {
	tests := []struct {
		mode      searxngtest.Mode
		retryable bool
		want      string
	}{
		{searxngtest.FormatDisabled, false, "search.formats"},
		{searxngtest.RateLimited, true, "limiter"},
		{searxngtest.ServerError, true, "500"},
		{searxngtest.BadRequest, false, "xx-bogus"},
		{searxngtest.Garbage, false, "JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.SetMode(tt.mode)
			te := toolErr(t, h.call(t, "web_search", map[string]any{"query": "x"}))
			if te.Code != CodeToolError || te.Retryable != tt.retryable || !strings.Contains(te.Message, tt.want) {
				t.Errorf("got %+v; want TOOL_ERROR retryable=%v mentioning %q", te, tt.retryable, tt.want)
			}
		})
	}
	t.Run("down", func(t *testing.T) {
		down := searxngtest.New(t).URLDown()
		h := newHarness(t, func(c *config.Config) { c.SearXNGURL = down })
		te := toolErr(t, h.call(t, "web_search", map[string]any{"query": "x"}))
		if te.Code != CodeToolError || !te.Retryable {
			t.Errorf("got %+v, want retryable TOOL_ERROR", te)
		}
	})
	t.Run("no engines", func(t *testing.T) {
		h := newHarness(t, nil)
		h.fake.SetMode(searxngtest.NoEngines)
		out := decode[WebSearchOutput](t, h.call(t, "web_search", map[string]any{"query": "x"}))
		if len(out.Results) != 0 || len(out.UnresponsiveEngines) == 0 {
			t.Errorf("got %+v, want no results and the engines that failed", out)
		}
	})
}

func TestWebSearchTimeout(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.WebSearchTimeout = 150 * time.Millisecond })
	h.fake.SetDelay(5 * time.Second)
	te := toolErr(t, h.call(t, "web_search", map[string]any{"query": "slow"}))
	if te.Code != CodeTimeout || !te.Retryable {
		t.Errorf("got %+v, want retryable TIMEOUT", te)
	}
}

func TestRateLimit(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.RateLimit = config.RateLimit{PerMinute: 1000, Burst: 1000}
		c.RateLimits["web_search"] = config.RateLimit{PerMinute: 1, Burst: 2}
	})
	for i := 0; i < 2; i++ {
		if res := h.call(t, "web_search", map[string]any{"query": "x"}); res.IsError {
			t.Fatalf("call %d failed: %s", i+1, textOf(res))
		}
	}
	te := toolErr(t, h.call(t, "web_search", map[string]any{"query": "x"}))
	if te.Code != CodeRateLimited || !te.Retryable || te.RetryAfterMS <= 0 || te.RetryAfterMS > 60_000 {
		t.Errorf("got %+v, want RATE_LIMITED with retry_after_ms in (0, 60000]", te)
	}
	// Invalid calls spend tokens too: the bucket guards the server, not SearXNG.
	te = toolErr(t, h.call(t, "web_search", map[string]any{"query": ""}))
	if te.Code != CodeRateLimited {
		t.Errorf("invalid call over the limit got %s, want RATE_LIMITED", te.Code)
	}
}

func TestCache(t *testing.T) {
	for _, ttl := range []time.Duration{5 * time.Minute, 0} {
		h := newHarness(t, func(c *config.Config) { c.WebSearchCacheTTL = ttl })
		h.call(t, "web_search", map[string]any{"query": "same thing"})
		h.call(t, "web_search", map[string]any{"query": "Same  thing", "max_results": 3})
		want := 1
		if ttl == 0 {
			want = 2
		}
		if got := h.fake.Requests(); got != want {
			t.Errorf("ttl %s: SearXNG saw %d requests, want %d", ttl, got, want)
		}
	}
}

func TestUnknownTool(t *testing.T) {
	h := newHarness(t, nil)
	_, err := h.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool"})
	if err == nil || !strings.Contains(err.Error(), "no_such_tool") {
		t.Fatalf("got %v, want a JSON-RPC error naming the tool", err)
	}
}

func TestDisabledToolIsNotListed(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.WebSearchEnabled = false })
	res, err := h.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == "web_search" {
			t.Fatal("web_search listed while disabled")
		}
	}
}

func TestPanicBecomesToolError(t *testing.T) {
	c := &call{Tool: "web_search"}
	ctx := withCall(context.Background(), c)
	h := typed(slog.New(slog.DiscardHandler), "", resultCap{limit: 64 << 10, log: slog.New(slog.DiscardHandler)}, func(context.Context, WebSearchInput) (*mcp.CallToolResult, WebSearchOutput, error) {
		panic("boom")
	})
	_, _, err := h(ctx, nil, WebSearchInput{Query: "q"})
	if err == nil {
		t.Fatal("a panic returned no error")
	}
	if te := c.outcome().failure; te == nil || te.Code != CodeToolError || !strings.Contains(te.Message, "keeps running") {
		t.Errorf("got %+v", te)
	}
}

func TestToolErrorMapping(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		err       error
		code      string
		status    int
		retryable bool
	}{
		{badArg("x"), CodeToolError, 400, false},
		{context.DeadlineExceeded, CodeTimeout, 504, true},
		{searxng.ErrTimeout, CodeTimeout, 504, true},
		{searxng.ErrUnreachable, CodeToolError, 503, true},
		{searxng.ErrFormatDisabled, CodeToolError, 502, false},
		{fmt.Errorf("docs: search: %w", docs.ErrUnavailable), CodeToolError, 503, true},
		{fmt.Errorf("docs: search: %w", docs.ErrClosed), CodeToolError, 503, true},
		{fmt.Errorf("docs: submit: %w", docs.ErrBusy), CodeToolError, 503, true},
		{fmt.Errorf("docs: get chunk: %w", docs.ErrInvalidID), CodeToolError, 400, false},
		{fmt.Errorf("docs: get file: %w", docs.ErrNotFound), CodeToolError, 404, false},
		{fmt.Errorf("docs: submit: %w", docs.ErrTooLarge), CodeToolError, 413, false},
		{fmt.Errorf("docs: submit: %w", docs.ErrUnsupportedType), CodeToolError, 415, false},
		{fmt.Errorf("embed: ollama: %w", embed.ErrUnavailable), CodeToolError, 503, true},
		{fmt.Errorf("x: %w", errForbiddenConversation), CodeAuthError, 403, false},
		{errNoKey, CodeAuthError, 401, false},
		{&rateLimited{tool: "web_search", wait: time.Second}, CodeRateLimited, 429, true},
		{errors.New("anything else"), CodeToolError, 500, false},
	}
	for _, tt := range tests {
		te := classify(ctx, tt.err)
		if te.Code != tt.code || te.Status != tt.status || te.Retryable != tt.retryable {
			t.Errorf("classify(%v) = %+v, want %s %d retryable=%v", tt.err, te, tt.code, tt.status, tt.retryable)
		}
	}
}

// TestCleanMessages checks that failures whose text names what only the
// operator should see answer a sentence of their own, keeping the error
// for the log.
func TestCleanMessages(t *testing.T) {
	detail := errors.New("failed to connect to `user=leakuser database=leakdb`: 10.0.0.7:5432 (10.0.0.7): dial error")
	tests := []struct {
		err       error
		retryable bool
		want      string
	}{
		{fmt.Errorf("list files: docs: list files: %w: %w", docs.ErrUnavailable, detail), true, "document store is unavailable"},
		{fmt.Errorf("docs: search: %w: check the user and password in DATABASE_URL: %w", docs.ErrMisconfigured, detail), false, "fix DATABASE_URL"},
		{fmt.Errorf("docs: search: embed query: %w: %w", embed.ErrUnavailable, detail), true, "embedding service is unavailable"},
		{fmt.Errorf("docs: list files: %w: %w", docs.ErrSchemaOutdated, detail), false, "mcpsearch migrate"},
	}
	for _, tt := range tests {
		te := classify(context.Background(), tt.err)
		if te.Status != http.StatusServiceUnavailable || te.Retryable != tt.retryable || !strings.Contains(te.Message, tt.want) ||
			strings.Contains(te.Message, "leak") || strings.Contains(te.Message, "10.0.0.7") || strings.Contains(te.Message, "docs:") {
			t.Errorf("classify(%v) = %+v, want 503 retryable=%v saying %q and nothing of the error's text", tt.err, te, tt.retryable, tt.want)
		}
		if !errors.Is(te.cause, tt.err) {
			t.Errorf("classify(%v) keeps cause %v, want the error for the log", tt.err, te.cause)
		}
	}
}

// newFullHarness returns a harness offering every tool of the catalogue,
// so that the golden schemas and the reference in doc/tools.md list each one
// without this harness knowing them. Its document store, whose embedder
// the search_docs schema describes (emb, or the default local one when
// nil), points at a port where nothing listens: listing tools needs no
// database.
func newFullHarness(t *testing.T, emb embed.Embedder) *harness {
	t.Helper()
	h := buildHarness(t, nil, func(d *Deps) {
		const nowhere = "postgres://mcpsearch@127.0.0.1:1/none?connect_timeout=1"
		if emb == nil {
			setDocs(t, d, nowhere)
			return
		}
		setDocsOn(t, d, nowhere, emb, docs.IngestOptions{})
	}, true)
	if got, want := len(h.srv.tools.defs), len(ToolNames()); got != want {
		t.Fatalf("the full harness offers %d tools, mcpsearch has %d", got, want)
	}
	return h
}
