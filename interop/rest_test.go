package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// The REST facade serves the tools to services that do not speak MCP:
// GET /mcp/tools, POST /mcp/invoke {"tool_name","params"}, POST
// /mcp/tools/{name} and GET /openapi.json. The tests below drive it with
// plain HTTP clients, and validate its OpenAPI document with a validator
// from npm (openapi-check.mjs).

// The keys of the REST server: one for every conversation and one scoped
// to restMine.
const (
	restKey        = "interop-rest-key-0123456789"
	restKeyName    = "rest-full"
	restScopedKey  = "interop-rest-scoped-key-0123456789"
	restScopedName = "rest-scoped"
	restMine       = "conv-rest-mine"
	restOther      = "conv-rest-other"
	// restUserAgent names the client in audit rows, as name/version.
	restUserAgent = "mcpsearch-interop-rest/1.0.0"
	// restSearchBurst is the web_search bucket of each key: it does not
	// refill within the test.
	restSearchBurst = 5
)

// restAnswer is the body of a REST invocation's answer.
type restAnswer struct {
	Success      *bool           `json:"success"`
	Result       json.RawMessage `json:"result"`
	Error        string          `json:"error"`
	ErrorType    string          `json:"error_type"`
	Retryable    *bool           `json:"retryable"`
	RetryAfterMS int64           `json:"retry_after_ms"`
}

// restClient invokes the facade of one server with one key.
type restClient struct {
	base, key string
	// calls counts the invocations that reach a tool, which the audit
	// must hold, by key name.
	calls map[string]int
	name  string
}

// invoke posts body to path and decodes the answer. reaches says whether
// the call reaches a tool and so must have an audit row.
func (c *restClient) invoke(t *testing.T, path, body string, reaches bool) (*http.Response, restAnswer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", restUserAgent)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if reaches {
		c.calls[c.name]++
	}
	var a restAnswer
	if err := json.Unmarshal(b, &a); err != nil || a.Success == nil {
		t.Fatalf("POST %s %s: %s %q is not the facade's answer", path, body, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("POST %s: Content-Type %q, want application/json", path, ct)
	}
	return resp, a
}

// ok invokes and decodes a successful result into out.
func (c *restClient) ok(t *testing.T, path, body string, out any) *http.Response {
	t.Helper()
	resp, a := c.invoke(t, path, body, true)
	if resp.StatusCode != http.StatusOK || !*a.Success {
		t.Fatalf("POST %s %s: %s %+v, want 200 and success", path, body, resp.Status, a)
	}
	if err := json.Unmarshal(a.Result, out); err != nil {
		t.Fatalf("POST %s: result %s: %v", path, a.Result, err)
	}
	return resp
}

// fails invokes and checks the failure: status, error_type, retryable.
func (c *restClient) fails(t *testing.T, path, body string, reaches bool, status int, errorType string, retryable bool) (*http.Response, restAnswer) {
	t.Helper()
	resp, a := c.invoke(t, path, body, reaches)
	if resp.StatusCode != status || *a.Success || a.ErrorType != errorType || a.Retryable == nil || *a.Retryable != retryable {
		t.Errorf("POST %s %s: %s %+v, want %d %s retryable=%v", path, body, resp.Status, a, status, errorType, retryable)
	}
	checkMessage(t, "POST "+path, "error", a.Error)
	return resp, a
}

// restRate reads the X-RateLimit-* headers, which must all be present.
func restRate(t *testing.T, resp *http.Response) rateHeaders {
	t.Helper()
	return parseRateHeaders(t, resp.Header)
}

// restConfig is the fullest server (fullConfig) with the two REST keys, a
// web_search bucket of restSearchBurst per key and a short web_search
// timeout.
func restConfig(t *testing.T, searxngURL string) config {
	t.Helper()
	keys := filepath.Join(t.TempDir(), "keys")
	lines := fmt.Sprintf("%s name=%s\n%s name=%s conversations=%s\n", restKey, restKeyName, restScopedKey, restScopedName, restMine)
	if err := os.WriteFile(keys, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return fullConfig(t, searxngURL).with(
		"MCP_API_KEYS_FILE="+keys,
		"MCP_web_search_timeout_ms=2000",
		"MCP_web_search_rate_limit_per_minute=1",
		"MCP_web_search_rate_limit_burst="+strconv.Itoa(restSearchBurst),
	)
}

// uploadReady uploads a text file with key and waits until it is ready.
func uploadReady(t *testing.T, base, key, conv, name, text string) fileInfo {
	t.Helper()
	api := apiClient{base: base, key: key}
	f := api.upload(t, conv, name, "text/plain", []byte(text))
	if s := waitSettled(t, api, f.ID); s.Status != "ready" {
		t.Fatalf("%s did not become ready: %+v", name, s)
	}
	return f.fileInfo
}

// TestOpenAPIDocument validates /openapi.json with @readme/openapi-parser
// and checks that it describes exactly the tools of tools/list.
func TestOpenAPIDocument(t *testing.T) {
	requireNode(t, "@readme/openapi-parser")
	t.Parallel()
	fake := searxngtest.New(t)
	srv := startServer(t, transportCase{name: "http", transport: "http"}, restConfig(t, fake.URL))
	rep := runNodeScript(t, "openapi-check.mjs", "openapi", "http",
		[]string{"--base", srv.base, "--header", "Authorization: Bearer " + restKey})
	tools, _ := rep.Details["tools"].([]any)
	names := make([]string, 0, len(tools))
	for _, name := range tools {
		names = append(names, fmt.Sprint(name))
	}
	offersEveryTool(t, "the REST facade's server", names)
}

// TestRESTFacade invokes every tool through the facade's two routes with
// real HTTP, checks the statuses of its failures, the X-RateLimit-* headers
// and a 429 with Retry-After, a scoped key kept to its conversation, and
// the audit rows, whose transport is rest and whose key and client are the
// caller's.
func TestRESTFacade(t *testing.T) {
	t.Parallel()
	fake := searxngtest.New(t)
	pages := newPageServer(t)
	cfg := restConfig(t, fake.URL)
	srv := startServer(t, transportCase{name: "http", transport: "http"}, cfg)
	calls := map[string]int{}
	full := &restClient{base: srv.base, key: restKey, name: restKeyName, calls: calls}
	scoped := &restClient{base: srv.base, key: restScopedKey, name: restScopedName, calls: calls}

	mine := uploadReady(t, srv.base, restKey, restMine, "tide-table.txt",
		"Tide table for the harbour. High water at the breakwater comes forty minutes after the lighthouse point.\n")
	other := uploadReady(t, srv.base, restKey, restOther, "orchard.txt",
		"Orchard notes. The beekeeper moved twelve hives into the apple orchard before the blossom.\n")

	remaining := restSearchBurst
	t.Run("web_search", func(t *testing.T) {
		for _, route := range []struct{ path, body string }{
			{"/mcp/invoke", `{"tool_name":"web_search","params":{"query":"rest invoke","max_results":2}}`},
			{"/mcp/tools/web_search", `{"query":"rest route","max_results":2}`},
		} {
			var out searchOutput
			resp := full.ok(t, route.path, route.body, &out)
			remaining--
			q := "rest invoke"
			if strings.Contains(route.path, "tools/") {
				q = "rest route"
			}
			if len(out.Results) != 2 || out.Results[0].URL != searxngtest.ResultURL(q, 1) {
				t.Errorf("%s: results %+v, want 2 starting with %s", route.path, out.Results, searxngtest.ResultURL(q, 1))
			}
			rh := restRate(t, resp)
			if rh.remaining != remaining || rh.limit <= 0 || rh.reset < time.Now().Unix()-1 {
				t.Errorf("%s: X-RateLimit %+v, want remaining %d of a positive limit, reset not in the past", route.path, rh, remaining)
			}
		}
	})
	t.Run("fetch_url", func(t *testing.T) {
		var page struct {
			Title       string `json:"title"`
			Content     string `json:"content"`
			ContentType string `json:"content_type"`
		}
		full.ok(t, "/mcp/tools/fetch_url", `{"url":"`+pages.URL+`/libffi.html","max_length":2000}`, &page)
		if page.Title == "" || !strings.Contains(page.Content, "ffi_call") || page.ContentType != "text/html" {
			t.Errorf("fetch_url over REST = title %q type %q content %.200q, want the libffi page", page.Title, page.ContentType, page.Content)
		}
		// The metadata address is refused whatever the allow-list says.
		full.fails(t, "/mcp/invoke", `{"tool_name":"fetch_url","params":{"url":"`+metadataURL+`"}}`, true, http.StatusForbidden, "TOOL_ERROR", false)
	})
	var chunkID string
	t.Run("documents", func(t *testing.T) {
		var files listFilesOutput
		full.ok(t, "/mcp/invoke", `{"tool_name":"list_files","params":{"conversation_id":"`+restMine+`"}}`, &files)
		if len(files.Files) != 1 || files.Files[0].ID != mine.ID || files.Files[0].Status != "ready" {
			t.Errorf("list_files over REST = %+v, want %s ready", files.Files, mine.ID)
		}
		var found searchDocsOutput
		full.ok(t, "/mcp/tools/search_docs", `{"query":"high water breakwater","conversation_id":"`+restMine+`","mode":"keyword"}`, &found)
		if len(found.Chunks) == 0 || found.Chunks[0].FileID != mine.ID {
			t.Fatalf("search_docs over REST = %+v, want a chunk of %s", found.Chunks, mine.ID)
		}
		chunkID = found.Chunks[0].ChunkID
		var chunk chunkOutput
		full.ok(t, "/mcp/invoke", `{"tool_name":"get_chunk","params":{"chunk_id":"`+chunkID+`"}}`, &chunk)
		if chunk.Content != found.Chunks[0].Content || chunk.Metadata.FileID != mine.ID {
			t.Errorf("get_chunk over REST = %+v, want the chunk search_docs found", chunk)
		}
	})
	t.Run("failures", func(t *testing.T) {
		// Unknown tools, on either route, are 404 before any tool runs.
		full.fails(t, "/mcp/invoke", `{"tool_name":"no_such_tool","params":{}}`, false, http.StatusNotFound, "TOOL_NOT_FOUND", false)
		full.fails(t, "/mcp/tools/no_such_tool", `{}`, false, http.StatusNotFound, "TOOL_NOT_FOUND", false)
		full.fails(t, "/mcp/invoke", `{"params":{}}`, false, http.StatusBadRequest, "TOOL_ERROR", false)
		full.fails(t, "/mcp/invoke", `not json`, false, http.StatusBadRequest, "TOOL_ERROR", false)
		// Invalid params reach the tool's schema and are audited.
		full.fails(t, "/mcp/tools/search_docs", `{"query":"x","conversation_id":"`+restMine+`","top_k":1000}`, true, http.StatusBadRequest, "TOOL_ERROR", false)
		full.fails(t, "/mcp/invoke", `{"tool_name":"get_chunk","params":{"chunk_id":"00000000-0000-0000-0000-000000000000"}}`, true, http.StatusNotFound, "TOOL_ERROR", false)
		for _, key := range []string{"", "not-a-key-of-this-server"} {
			c := &restClient{base: srv.base, key: key, name: "none", calls: map[string]int{}}
			resp, _ := c.fails(t, "/mcp/invoke", `{"tool_name":"web_search","params":{"query":"x"}}`, false, http.StatusUnauthorized, "AUTH_ERROR", false)
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge: %v", resp.Header)
			}
		}
	})
	t.Run("scoped key", func(t *testing.T) {
		var files listFilesOutput
		scoped.ok(t, "/mcp/tools/list_files", `{"conversation_id":"`+restMine+`"}`, &files)
		if len(files.Files) != 1 || files.Files[0].ID != mine.ID {
			t.Errorf("list_files of its own conversation with the scoped key = %+v", files.Files)
		}
		scoped.fails(t, "/mcp/tools/list_files", `{"conversation_id":"`+restOther+`"}`, true, http.StatusForbidden, "AUTH_ERROR", false)
		scoped.fails(t, "/mcp/invoke", `{"tool_name":"search_docs","params":{"query":"beekeeper","conversation_id":"`+restOther+`"}}`, true, http.StatusForbidden, "AUTH_ERROR", false)
		// A chunk of another conversation is answered like an unknown one.
		var found searchDocsOutput
		full.ok(t, "/mcp/tools/search_docs", `{"query":"beekeeper hives","conversation_id":"`+restOther+`","mode":"keyword"}`, &found)
		if len(found.Chunks) == 0 || found.Chunks[0].FileID != other.ID {
			t.Fatalf("search_docs of %s = %+v", restOther, found.Chunks)
		}
		scoped.fails(t, "/mcp/invoke", `{"tool_name":"get_chunk","params":{"chunk_id":"`+found.Chunks[0].ChunkID+`"}}`, true, http.StatusNotFound, "TOOL_ERROR", false)
	})
	t.Run("upstream", func(t *testing.T) {
		setMode(t, fake, searxngtest.ServerError)
		resp, _ := full.fails(t, "/mcp/invoke", `{"tool_name":"web_search","params":{"query":"rest upstream"}}`, true, http.StatusServiceUnavailable, "TOOL_ERROR", true)
		remaining--
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("503 without Retry-After: %v", resp.Header)
		}
		fake.SetMode(searxngtest.OK)
		setDelay(t, fake, 10*time.Second)
		full.fails(t, "/mcp/tools/web_search", `{"query":"rest slow"}`, true, http.StatusGatewayTimeout, "TIMEOUT", true)
		remaining--
	})
	t.Run("rate limited", func(t *testing.T) {
		for ; remaining > 0; remaining-- {
			var out searchOutput
			full.ok(t, "/mcp/invoke", `{"tool_name":"web_search","params":{"query":"rest drain","max_results":1}}`, &out)
		}
		resp, a := full.fails(t, "/mcp/invoke", `{"tool_name":"web_search","params":{"query":"rest over"}}`, true, http.StatusTooManyRequests, "RATE_LIMITED", true)
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 60 || a.RetryAfterMS <= 0 {
			t.Errorf("429: Retry-After %q, retry_after_ms %d, want 1 to 60 s and a positive wait", resp.Header.Get("Retry-After"), a.RetryAfterMS)
		}
		if rh := restRate(t, resp); rh.remaining != 0 {
			t.Errorf("429 with X-RateLimit-Remaining %d, want 0", rh.remaining)
		}
		// The scoped key has a bucket of its own.
		var out searchOutput
		scoped.ok(t, "/mcp/tools/web_search", `{"query":"rest scoped","max_results":1}`, &out)
	})

	srv.stop(t)
	rows := readAudit(t, cfg["DATABASE_URL"])
	got := map[string]int{}
	for i, r := range rows {
		got[r.Key]++
		if r.Transport != "rest" || r.Client != "mcpsearch-interop-rest" || r.ClientVersion != "1.0.0" || r.LatencyMS < 0 {
			t.Errorf("audit row %d (%s %s): transport %q client %q %q latency %d, want rest and mcpsearch-interop-rest 1.0.0",
				i, r.Tool, r.Code, r.Transport, r.Client, r.ClientVersion, r.LatencyMS)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(calls) {
		t.Errorf("audit rows by key %v, want one per invocation that reached a tool: %v", got, calls)
	}
	t.Logf("%d audit rows: %v; codes %s", len(rows), got, auditCodes(rows))
}

// TestDatabaseDownIsOneSentence starts the binary with its database behind
// a closed port: the documents tools over MCP (the Go SDK's client) and the
// REST facade, and the upload API, answer one retryable sentence that names
// neither the database's user, name nor address nor the words of the code
// that wrapped the driver's error. The server's log has the cause.
func TestDatabaseDownIsOneSentence(t *testing.T) {
	t.Parallel()
	const sentence = "the document store is unavailable right now; try again shortly"
	fake := searxngtest.New(t)
	cfg := docsConfig(t, fake.URL)
	dbURL := cfg["DATABASE_URL"]
	u, err := url.Parse(dbURL)
	if err != nil || u.User == nil {
		t.Fatalf("DATABASE_URL has no user: %v", err)
	}
	// A proxy cut before the server starts is a closed port; it listens
	// again before the server stops, so the audit rows are stored.
	proxy := newTCPProxy(t, hostPort(t, dbURL))
	proxy.cut()
	cfg = cfg.with("DATABASE_URL=" + viaProxy(t, dbURL, proxy.addr))
	leaks := []string{"user=", "database=", strings.TrimPrefix(u.Path, "/"), proxy.addr, hostPort(t, dbURL), "dial", "docs:", "list files:"}
	clean := func(where, msg string, retryable *bool) {
		t.Helper()
		if msg != sentence || retryable == nil || !*retryable {
			t.Errorf("%s: %q retryable %v, want %q retryable", where, msg, retryable, sentence)
		}
		for _, leak := range leaks {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: the answer shows %q: %s", where, leak, msg)
			}
		}
	}
	tg := newTarget(t, transportCase{name: "http", transport: "http"}, cfg)

	s := dialHTTP(t, tg)
	for _, c := range []auditCall{
		{"list_files", map[string]any{"conversation_id": "conv-down"}, "TOOL_ERROR"},
		{"search_docs", map[string]any{"query": "tide", "conversation_id": "conv-down"}, "TOOL_ERROR"},
		{"list_conversations", map[string]any{}, "TOOL_ERROR"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		cancel()
		if err != nil {
			t.Fatalf("MCP %s: %v", c.tool, err)
		}
		e := searchErr(t, res)
		if e.Code != c.code {
			t.Errorf("MCP %s: %s, want %s", c.tool, e.Code, c.code)
		}
		clean("MCP "+c.tool, e.Message, e.Retryable)
	}

	rest := &restClient{base: tg.srv.base, calls: map[string]int{}}
	for path, body := range map[string]string{
		"/mcp/invoke":            `{"tool_name":"list_files","params":{"conversation_id":"conv-down"}}`,
		"/mcp/tools/search_docs": `{"query":"tide","conversation_id":"conv-down"}`,
	} {
		_, a := rest.fails(t, path, body, true, http.StatusServiceUnavailable, "TOOL_ERROR", true)
		clean("REST "+path, a.Error, a.Retryable)
	}

	api := apiClient{base: tg.srv.base}
	status, body := api.do(t, http.MethodGet, "/v1/conversations/conv-down/files", "", nil)
	var e struct {
		Error *toolError `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || status != http.StatusServiceUnavailable || e.Error == nil {
		t.Errorf("GET /v1/conversations/conv-down/files: %d %s, want 503 and the contract's error", status, body)
	} else {
		clean("GET /v1/conversations/conv-down/files", e.Error.Message, e.Error.Retryable)
	}

	proxy.restore(t)
	if err := s.Close(); err != nil {
		t.Errorf("close session: %v", err)
	}
	tg.srv.stop(t)
	if out := tg.srv.output.String(); !strings.Contains(out, `"cause"`) || !strings.Contains(out, proxy.addr) {
		t.Errorf("the server's log does not give the cause of the outage:\n%s", out)
	}
}
