package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// The types below restate the contract's result shapes on the client side
// rather than importing the server's, so a change of the server's types
// cannot silently change what the tests expect.

type content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type searchResult struct {
	Title   string   `json:"title"`
	URL     string   `json:"url"`
	Content *string  `json:"content"`
	Engine  *string  `json:"engine"`
	Engines []string `json:"engines"`
}

type searchOutput struct {
	Query               string         `json:"query"`
	Results             []searchResult `json:"results"`
	Suggestions         []string       `json:"suggestions"`
	Answers             []any          `json:"answers"`
	Corrections         []string       `json:"corrections"`
	Infoboxes           []any          `json:"infoboxes"`
	UnresponsiveEngines []unresponsive `json:"unresponsive_engines"`
}

type unresponsive struct {
	Engine string `json:"engine"`
	Reason string `json:"reason"`
}

type toolError struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Retryable    *bool  `json:"retryable"`
	RetryAfterMS *int64 `json:"retry_after_ms"`
}

// goClient is how the Go SDK's client names itself in most tests.
var goClient = &mcp.Implementation{Name: "mcpsearch-interop-go", Version: "1.0.0"}

// connectGo connects the Go SDK's client to tg. For stdio it starts the
// binary itself and, at cleanup, checks that closing stdin ends it with
// status 0.
func connectGo(t *testing.T, tg target) *mcp.ClientSession {
	t.Helper()
	return connectGoAs(t, tg, goClient)
}

// connectGoAs is connectGo with a client that names itself impl.
func connectGoAs(t *testing.T, tg target, impl *mcp.Implementation) *mcp.ClientSession {
	t.Helper()
	// The SSE transport ties its event stream to the context of Connect, so
	// that context lives until the test ends; the timer only bounds the
	// handshake.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	handshake := time.AfterFunc(30*time.Second, cancel)
	defer handshake.Stop()
	client := mcp.NewClient(impl, nil)
	var transport mcp.Transport
	var cmd *exec.Cmd
	stderr := &syncBuffer{}
	switch tg.transport {
	case "stdio":
		cmd = exec.Command(binPath, "serve", "--transport", "stdio")
		cmd.Env = tg.cfg.processEnv()
		cmd.Stderr = stderr
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: shutdownLimit}
	case "sse":
		transport = &mcp.SSEClientTransport{Endpoint: tg.url, HTTPClient: tg.httpClient()}
	default:
		transport = &mcp.StreamableClientTransport{Endpoint: tg.url, MaxRetries: -1, HTTPClient: tg.httpClient()}
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect over %s: %v\nserver output:\n%s", tg.transport, err, stderr.String())
	}
	t.Cleanup(func() {
		err := session.Close()
		if cmd == nil {
			if err != nil {
				t.Errorf("close %s session: %v", tg.transport, err)
			}
			return
		}
		// Closing the session closes the server's stdin; the server must
		// take that as the end and exit 0.
		if err != nil || cmd.ProcessState == nil || !cmd.ProcessState.Success() {
			t.Errorf("stdio server did not exit cleanly when stdin closed: %v (%v)\noutput:\n%s", err, cmd.ProcessState, stderr.String())
		}
		checkJSONLogs(t, stderr.String())
	})
	return session
}

// callSearch calls web_search and fails the test on a protocol error.
func callSearch(t *testing.T, s *mcp.ClientSession, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "web_search", Arguments: args})
	if err != nil {
		t.Fatalf("web_search %v: %v", args, err)
	}
	return res
}

// searchOK decodes a successful web_search result.
func searchOK(t *testing.T, res *mcp.CallToolResult) searchOutput {
	t.Helper()
	out, err := decodeSearch(res)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeSearch decodes a successful web_search result and checks the
// fields the contract requires.
func decodeSearch(res *mcp.CallToolResult) (searchOutput, error) {
	var out searchOutput
	if res.IsError {
		return out, fmt.Errorf("web_search failed: %s", resultText(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return out, fmt.Errorf("marshal structuredContent: %w", err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("structuredContent %s: %w", raw, err)
	}
	if out.Results == nil || out.Suggestions == nil {
		return out, fmt.Errorf("structuredContent lacks results or suggestions (they must be arrays, even empty): %s", raw)
	}
	for i, r := range out.Results {
		if r.Title == "" || r.URL == "" || r.Content == nil || r.Engine == nil {
			return out, fmt.Errorf("results[%d] lacks title, url, content or engine: %+v", i, r)
		}
	}
	if resultText(res) == "" {
		return out, errors.New("web_search result has no text block")
	}
	return out, nil
}

// searchErr decodes the contract's error body from an isError result.
func searchErr(t *testing.T, res *mcp.CallToolResult) toolError {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want an error result, got %s", resultText(res))
	}
	var body struct {
		Error *toolError `json:"error"`
	}
	text := resultText(res)
	if err := json.Unmarshal([]byte(text), &body); err != nil || body.Error == nil {
		t.Fatalf("error text is not {\"error\":{...}}: %q (%v)", text, err)
	}
	e := body.Error
	if e.Code == "" || e.Message == "" || e.Retryable == nil {
		t.Fatalf("error body lacks code, message or retryable: %s", text)
	}
	return *e
}

func resultText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// wantError checks an error body against code, retryable and a substring
// of the message.
func wantError(t *testing.T, e toolError, code string, retryable bool, substring string) {
	t.Helper()
	if e.Code != code || *e.Retryable != retryable {
		t.Errorf("error = %s retryable=%v (%s), want %s retryable=%v", e.Code, *e.Retryable, e.Message, code, retryable)
	}
	if !strings.Contains(strings.ToLower(e.Message), strings.ToLower(substring)) {
		t.Errorf("error message %q does not mention %q", e.Message, substring)
	}
}

// TestGoSDK drives mcpsearch with the Go SDK's client over every transport.
func TestGoSDK(t *testing.T) {
	for _, tc := range transportCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := searxngtest.New(t)
			cfg := baseConfig(fake.URL)
			tg := newTarget(t, tc, cfg)
			s := connectGo(t, tg)
			ctx := context.Background()

			t.Run("initialize", func(t *testing.T) {
				init := s.InitializeResult()
				if init == nil || init.ServerInfo == nil {
					t.Fatalf("no initialize result")
				}
				if init.ServerInfo.Name != "mcpsearch" || init.ServerInfo.Version == "" {
					t.Errorf("serverInfo = %+v, want name mcpsearch and a version", init.ServerInfo)
				}
				if init.Capabilities == nil || init.Capabilities.Tools == nil {
					t.Errorf("server does not declare tools: %+v", init.Capabilities)
				}
				if init.ProtocolVersion == "" {
					t.Errorf("no protocol version negotiated")
				}
				// The client asks for 2026-07-28 first; legacy SSE has no
				// binding for it and must settle on the newest handshake.
				if tc.transport == "sse" && init.ProtocolVersion != legacyRevision {
					t.Errorf("negotiated %s over SSE, want %s", init.ProtocolVersion, legacyRevision)
				}
			})

			t.Run("tools/list", func(t *testing.T) {
				res, err := s.ListTools(ctx, nil)
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				var names []string
				for _, tool := range res.Tools {
					names = append(names, tool.Name)
				}
				// Documents are disabled, so web_search is the only tool.
				if !slices.Equal(names, []string{"web_search"}) {
					t.Fatalf("tools = %v, want [web_search]", names)
				}
				schema, err := json.Marshal(res.Tools[0].InputSchema)
				if err != nil {
					t.Fatal(err)
				}
				var in struct {
					Type       string         `json:"type"`
					Required   []string       `json:"required"`
					Properties map[string]any `json:"properties"`
				}
				if err := json.Unmarshal(schema, &in); err != nil {
					t.Fatal(err)
				}
				if in.Type != "object" || !slices.Equal(in.Required, []string{"query"}) {
					t.Errorf("inputSchema type %q required %v, want object with [query]", in.Type, in.Required)
				}
				for _, p := range []string{"query", "max_results", "language", "categories", "time_range", "page", "safesearch"} {
					if _, ok := in.Properties[p]; !ok {
						t.Errorf("inputSchema lacks %s", p)
					}
				}
				if res.Tools[0].OutputSchema == nil {
					t.Errorf("web_search has no outputSchema")
				}
			})

			t.Run("call", func(t *testing.T) {
				const q = "Go  generics tutorial "
				const norm = "Go generics tutorial"
				before := fake.Requests()
				out := searchOK(t, callSearch(t, s, map[string]any{"query": q}))
				if fake.Requests()-before != 1 {
					t.Errorf("SearXNG got %d requests, want 1", fake.Requests()-before)
				}
				sent := fake.LastQuery()
				if sent.Get("q") != norm || sent.Get("format") != "json" {
					t.Errorf("SearXNG got q=%q format=%q, want q=%q format=json", sent.Get("q"), sent.Get("format"), norm)
				}
				if out.Query != norm {
					t.Errorf("structuredContent.query = %q, want %q", out.Query, norm)
				}
				// max_results defaults to 5.
				var urls []string
				for _, r := range out.Results {
					urls = append(urls, r.URL)
				}
				var want []string
				for n := 1; n <= 5; n++ {
					want = append(want, searxngtest.ResultURL(norm, n))
				}
				if !slices.Equal(urls, want) {
					t.Errorf("result URLs = %v, want %v", urls, want)
				}
				if len(out.Results) > 0 && !slices.Contains(out.Results[0].Engines, searxngtest.DuplicateEngine) {
					t.Errorf("first result's engines %v lack %s, whose duplicate should be merged into it", out.Results[0].Engines, searxngtest.DuplicateEngine)
				}
				if len(out.Suggestions) == 0 {
					t.Errorf("no suggestions passed through")
				}
				if len(out.UnresponsiveEngines) != 1 || out.UnresponsiveEngines[0].Engine != "wikidata" {
					t.Errorf("unresponsive_engines = %+v, want wikidata", out.UnresponsiveEngines)
				}
			})

			t.Run("call with every argument", func(t *testing.T) {
				const q = "climate report"
				out := searchOK(t, callSearch(t, s, map[string]any{
					"query": q, "max_results": 2, "language": "de", "categories": []string{"news", "science"},
					"time_range": "week", "page": 2, "safesearch": 2,
				}))
				sent := fake.LastQuery()
				for k, want := range map[string]string{"language": "de", "categories": "news,science", "time_range": "week", "pageno": "2", "safesearch": "2"} {
					if got := sent.Get(k); got != want {
						t.Errorf("SearXNG got %s=%q, want %q", k, got, want)
					}
				}
				if len(out.Results) != 2 || out.Results[0].URL != searxngtest.ResultURL(q, searxngtest.PerPage+1) {
					t.Errorf("page 2 results = %+v, want 2 starting at result %d", out.Results, searxngtest.PerPage+1)
				}
			})

			t.Run("concurrent calls", func(t *testing.T) {
				// Calls on one session overlap; each must get its own answer.
				const n = 8
				errs := make(chan error, n)
				for i := range n {
					go func() {
						q := fmt.Sprintf("parallel query %d", i)
						cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
						defer cancel()
						res, err := s.CallTool(cctx, &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": q, "max_results": 1}})
						if err != nil {
							errs <- fmt.Errorf("%s: %w", q, err)
							return
						}
						out, err := decodeSearch(res)
						switch {
						case err != nil:
							errs <- fmt.Errorf("%s: %w", q, err)
						case out.Query != q || len(out.Results) != 1 || out.Results[0].URL != searxngtest.ResultURL(q, 1):
							errs <- fmt.Errorf("%s: got the answer for %q: %+v", q, out.Query, out.Results)
						default:
							errs <- nil
						}
					}()
				}
				for range n {
					if err := <-errs; err != nil {
						t.Error(err)
					}
				}
			})

			t.Run("no engine answered", func(t *testing.T) {
				setMode(t, fake, searxngtest.NoEngines)
				res := callSearch(t, s, map[string]any{"query": "quiet day"})
				out := searchOK(t, res)
				if len(out.Results) != 0 || len(out.UnresponsiveEngines) == 0 {
					t.Errorf("want no results and the unresponsive engines, got %+v", out)
				}
				if !strings.Contains(resultText(res), "No web results") {
					t.Errorf("text does not say there are no results: %q", resultText(res))
				}
			})

			t.Run("invalid arguments", func(t *testing.T) {
				cases := []struct {
					name      string
					args      map[string]any
					substring string
				}{
					{"empty query", map[string]any{"query": ""}, "query"},
					{"missing query", map[string]any{}, "query"},
					{"max_results too large", map[string]any{"query": "x", "max_results": 1000}, "send 1 to 10"},
					{"unknown category", map[string]any{"query": "x", "categories": []string{"nope"}}, "nope"},
					{"unknown time_range", map[string]any{"query": "x", "time_range": "decade"}, "day, week, month or year"},
					{"max_results a string", map[string]any{"query": "x", "max_results": "five"}, "max_results"},
					{"page out of range", map[string]any{"query": "x", "page": 500}, "page"},
					{"query too long", map[string]any{"query": strings.Repeat("a", 2001)}, "2000"},
				}
				for _, c := range cases {
					t.Run(c.name, func(t *testing.T) {
						before := fake.Requests()
						wantError(t, searchErr(t, callSearch(t, s, c.args)), "TOOL_ERROR", false, c.substring)
						if fake.Requests() != before {
							t.Errorf("invalid arguments reached SearXNG")
						}
					})
				}
			})

			t.Run("unknown tool", func(t *testing.T) {
				_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
				var werr *jsonrpc.Error
				if !errors.As(err, &werr) {
					t.Fatalf("want a JSON-RPC error, got %v", err)
				}
				if werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "no_such_tool") {
					t.Errorf("error = %d %q, want %d naming the tool", werr.Code, werr.Message, jsonrpc.CodeInvalidParams)
				}
				// The session survives.
				if _, err := s.ListTools(ctx, nil); err != nil {
					t.Errorf("tools/list after the error: %v", err)
				}
			})

			for _, uc := range upstreamCases {
				t.Run("upstream/"+uc.name, func(t *testing.T) {
					setMode(t, fake, uc.mode)
					e := searchErr(t, callSearch(t, s, map[string]any{"query": "upstream " + uc.mode.String()}))
					wantError(t, e, uc.code, uc.retryable, uc.substring)
				})
			}

			t.Run("upstream/slow", func(t *testing.T) {
				slowCfg := timeoutConfig(cfg)
				slow := connectGo(t, newTarget(t, tc, slowCfg))
				setDelay(t, fake, 30*time.Second)
				start := time.Now()
				e := searchErr(t, callSearch(t, slow, map[string]any{"query": "slow"}))
				wantError(t, e, "TIMEOUT", true, "")
				t.Logf("TIMEOUT after %v with MCP_web_search_timeout_ms=%s: %s", time.Since(start).Round(time.Millisecond), slowCfg["MCP_web_search_timeout_ms"], e.Message)
			})

			t.Run("upstream/down", func(t *testing.T) {
				down := connectGo(t, newTarget(t, tc, cfg.with("MCP_web_search_searxng_url="+fake.URLDown())))
				e := searchErr(t, callSearch(t, down, map[string]any{"query": "nobody listens"}))
				wantError(t, e, "TOOL_ERROR", true, "unreachable")
			})

			t.Run("rate limited", func(t *testing.T) {
				limited := connectGo(t, newTarget(t, tc, cfg.with("MCP_rate_limit_per_minute=1", "MCP_rate_limit_burst=2")))
				before := fake.Requests()
				for i := range 2 {
					searchOK(t, callSearch(t, limited, map[string]any{"query": "limited", "page": i + 1}))
				}
				e := searchErr(t, callSearch(t, limited, map[string]any{"query": "limited", "page": 3}))
				wantError(t, e, "RATE_LIMITED", true, "web_search")
				if e.RetryAfterMS == nil || *e.RetryAfterMS <= 0 || *e.RetryAfterMS > time.Minute.Milliseconds() {
					t.Errorf("retry_after_ms = %v, want 1..60000 for one token per minute", e.RetryAfterMS)
				}
				if got := fake.Requests() - before; got != 2 {
					t.Errorf("SearXNG got %d requests, want 2: a limited call must not reach it", got)
				}
			})
		})
	}
}

// TestStdioSIGTERM checks that a stdio server exits 0 on SIGTERM while a
// client is still connected, as it does when a host shuts down.
func TestStdioSIGTERM(t *testing.T) {
	fake := searxngtest.New(t)
	cmd := exec.Command(binPath, "serve", "--transport", "stdio")
	cmd.Env = baseConfig(fake.URL).processEnv()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpsearch-interop-go", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: shutdownLimit}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	searchOK(t, callSearch(t, s, map[string]any{"query": "before sigterm"}))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case <-done:
	case <-time.After(shutdownLimit):
		t.Fatalf("the session did not end within %v of SIGTERM; output:\n%s", shutdownLimit, stderr.String())
	}
	// Close reaps the process and returns its exit error, if any.
	if err := s.Close(); err != nil || cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("stdio server after SIGTERM: %v (%v); output:\n%s", err, cmd.ProcessState, stderr.String())
	}
	checkJSONLogs(t, stderr.String())
}

// TestShutdownWithCallInFlight sends SIGTERM to an HTTP server while a
// web_search is waiting on a slow SearXNG: the call must still get its
// result and the server must then exit 0.
func TestShutdownWithCallInFlight(t *testing.T) {
	for _, tc := range []transportCase{{name: "sse", transport: "sse"}, {name: "http", transport: "http"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := searxngtest.New(t)
			const delay = 500 * time.Millisecond
			fake.SetDelay(delay)
			tg := newTarget(t, tc, baseConfig(fake.URL).with("MCP_web_search_timeout_ms=10000"))
			// No connectGo: the session outlives the server here, so
			// closing it at the end may fail and that is expected.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var transport mcp.Transport = &mcp.SSEClientTransport{Endpoint: tg.url}
			if tc.transport == "http" {
				transport = &mcp.StreamableClientTransport{Endpoint: tg.url, MaxRetries: -1}
			}
			s, err := mcp.NewClient(&mcp.Implementation{Name: "mcpsearch-interop-go", Version: "1.0.0"}, nil).Connect(ctx, transport, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer s.Close()

			type outcome struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "in flight"}})
				done <- outcome{res, err}
			}()
			for deadline := time.Now().Add(10 * time.Second); fake.Requests() == 0; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the call never reached SearXNG")
				}
			}
			took := tg.srv.stop(t)
			t.Logf("server exited %v after SIGTERM with a %v call in flight", took.Round(time.Millisecond), delay)
			select {
			case o := <-done:
				if o.err != nil {
					t.Fatalf("the in-flight call failed on shutdown: %v", o.err)
				}
				if _, err := decodeSearch(o.res); err != nil {
					t.Errorf("the in-flight call: %v", err)
				}
			case <-time.After(shutdownLimit):
				t.Fatal("the in-flight call got no answer")
			}
		})
	}
}

// TestHTTPAndSSETogether serves both HTTP transports from one process, as
// `--transport http,sse` does, and calls web_search through each.
func TestHTTPAndSSETogether(t *testing.T) {
	fake := searxngtest.New(t)
	cfg := baseConfig(fake.URL)
	srv := startServer(t, transportCase{name: "http,sse", transport: "http,sse"}, cfg)
	for _, tg := range []target{
		{transport: "sse", url: srv.base + "/sse", cfg: cfg},
		{transport: "http", url: srv.base + "/mcp", cfg: cfg},
	} {
		t.Run(tg.transport, func(t *testing.T) {
			q := "both transports " + tg.transport
			out := searchOK(t, callSearch(t, connectGo(t, tg), map[string]any{"query": q, "max_results": 2}))
			if len(out.Results) != 2 || out.Results[0].URL != searxngtest.ResultURL(q, 1) {
				t.Errorf("results = %+v, want 2 starting at %s", out.Results, searxngtest.ResultURL(q, 1))
			}
		})
	}
}
