package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
)

// bearer adds an Authorization header to every request.
type bearer struct {
	key string
	rt  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.rt.RoundTrip(r)
}

// connectHTTP opens an MCP session over streamable HTTP or SSE with key.
func connectHTTP(t *testing.T, base, transport, key string) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: bearer{key, http.DefaultTransport}}
	var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}
	if transport == "sse" {
		tr = &mcp.SSEClientTransport{Endpoint: base + "/sse", HTTPClient: hc}
	}
	// The SSE stream lives as long as Connect's context: no deadline here.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "ops-test", Version: "7"}, nil).Connect(context.Background(), tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

const (
	fullKey   = "full-access-key-0123456789"
	scopedKey = "scoped-key-abcdefghijklmnop"
)

func keyedServer(t *testing.T) (*harness, *httptest.Server) {
	t.Helper()
	return keyedServerWith(t, nil)
}

func keyedServerWith(t *testing.T, tweak func(*config.Config)) (*harness, *httptest.Server) {
	t.Helper()
	keys, err := LoadAPIKeys([]string{fullKey}, strings.NewReader("# keys\n"+scopedKey+" name=tenant-a conversations=conv-a,conv-b\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessDeps(t, func(c *config.Config) {
		c.Transports = []string{"http", "sse"}
		if tweak != nil {
			tweak(c)
		}
	}, func(d *Deps) {
		d.APIKeys = keys
		setDocs(t, d, "postgres://mcpsearch@127.0.0.1:1/none?connect_timeout=1")
	})
	hs := httptest.NewServer(h.srv.Handler())
	t.Cleanup(hs.Close)
	return h, hs
}

func TestAuthMatrix(t *testing.T) {
	_, hs := keyedServer(t)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	tests := []struct {
		name   string
		path   string
		header map[string]string
		status int
	}{
		{"no key", "/mcp", nil, http.StatusUnauthorized},
		{"wrong key", "/mcp", map[string]string{"Authorization": "Bearer not-a-key-at-all-1234"}, http.StatusUnauthorized},
		{"not bearer", "/mcp", map[string]string{"Authorization": "Basic " + fullKey}, http.StatusUnauthorized},
		{"right key", "/mcp", map[string]string{"Authorization": "Bearer " + fullKey}, http.StatusOK},
		{"scoped key", "/mcp", map[string]string{"Authorization": "Bearer " + scopedKey}, http.StatusOK},
		{"foreign origin", "/mcp", map[string]string{"Authorization": "Bearer " + fullKey, "Origin": "https://evil.example"}, http.StatusForbidden},
		{"loopback origin", "/mcp", map[string]string{"Authorization": "Bearer " + fullKey, "Origin": "http://localhost:5173"}, http.StatusOK},
		{"upload api without key", "/v1/conversations/c/files", nil, http.StatusUnauthorized},
		{"metrics without key", "/metrics", nil, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := http.MethodPost
			if tt.path != "/mcp" {
				method = http.MethodGet
			}
			req, _ := http.NewRequest(method, hs.URL+tt.path, strings.NewReader(initialize))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.status == http.StatusUnauthorized || tt.status == http.StatusForbidden {
				var body struct{ Error ToolError }
				if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error.Code != CodeAuthError {
					t.Errorf("body: %+v (%v), want AUTH_ERROR", body, err)
				}
			}
			if tt.status == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	if _, err := http.Get(hs.URL + "/healthz"); err != nil {
		t.Fatal(err)
	}
}

func TestScopedKey(t *testing.T) {
	_, hs := keyedServer(t)
	for _, transport := range []string{"http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			cs, err := connectHTTP(t, hs.URL, transport, scopedKey)
			if err != nil {
				t.Fatal(err)
			}
			for tool, args := range map[string]map[string]any{
				"list_files":  {"conversation_id": "conv-z"},
				"search_docs": {"conversation_id": "conv-z", "query": "x"},
			} {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					t.Fatal(err)
				}
				if te := toolErr(t, res); te.Code != CodeAuthError {
					t.Errorf("%s outside the key's conversations: %+v, want AUTH_ERROR", tool, te)
				}
			}
			// Inside its scope the call reaches the (unreachable) database.
			res, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_files", Arguments: map[string]any{"conversation_id": "conv-a"}})
			if te := toolErr(t, res); te.Code == CodeAuthError {
				t.Errorf("call inside the scope refused: %+v", te)
			}
		})
	}
	// The upload API refuses the conversation before reading the body.
	resp := upload(t, hs.URL, "conv-z", map[string][]byte{"a.txt": []byte("x")}, http.Header{"Authorization": {"Bearer " + scopedKey}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("upload outside scope: %s", resp.Status)
	}
}

func TestSessionBoundToKey(t *testing.T) {
	_, hs := keyedServer(t)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	post := func(key, session, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	sid := post(fullKey, "", initialize).Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session id")
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp := post(scopedKey, sid, list); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another key used the session: %s", resp.Status)
	}
}

func TestCheckExposure(t *testing.T) {
	keys := []APIKey{NewAPIKey("k", "", nil)}
	tests := []struct {
		addr, auth string
		keys       []APIKey
		ok         bool
	}{
		{"127.0.0.1:8080", "", nil, true},
		{"localhost:8080", "", nil, true},
		{"[::1]:8080", "", nil, true},
		{"0.0.0.0:8080", "", nil, false},
		{":8080", "", nil, false},
		{"0.0.0.0:8080", "none", nil, true},
		{"0.0.0.0:8080", "", keys, true},
	}
	for _, tt := range tests {
		cfg := config.Default()
		cfg.Transports, cfg.Addr, cfg.Auth = []string{"http"}, tt.addr, tt.auth
		if err := CheckExposure(cfg, tt.keys); (err == nil) != tt.ok {
			t.Errorf("CheckExposure(%s, auth=%q, %d keys) = %v", tt.addr, tt.auth, len(tt.keys), err)
		}
	}
}

func TestLoadAPIKeys(t *testing.T) {
	for _, bad := range []string{"short", "long-enough-key-123 colour=red", "long-enough-key-123 conversations=a,,b"} {
		if _, err := LoadAPIKeys(nil, strings.NewReader(bad)); err == nil {
			t.Errorf("LoadAPIKeys accepted %q", bad)
		}
	}
	keys, err := LoadAPIKeys([]string{"from-env"}, strings.NewReader("\n# c\nlong-enough-key-123 name=bot conversations=a,b\n"))
	if err != nil || len(keys) != 2 || keys[1].Name != "bot" || len(keys[1].Conversations) != 2 || keys[0].Conversations != nil {
		t.Fatalf("got %+v, %v", keys, err)
	}
}

// scrapeMetrics returns the Prometheus text the server at base serves.
func scrapeMetrics(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMetricsMove(t *testing.T) {
	h := newHarnessDeps(t, func(c *config.Config) { c.Transports = []string{"http"} }, nil)
	hs := httptest.NewServer(h.srv.Handler())
	t.Cleanup(hs.Close)
	before := scrapeMetrics(t, hs.URL)
	h.call(t, "web_search", map[string]any{"query": "metrics"})
	h.call(t, "web_search", map[string]any{"query": ""})
	after := scrapeMetrics(t, hs.URL)
	for _, want := range []string{
		`mcpsearch_tool_calls_total{outcome="ok",tool="web_search",transport="stdio"} 1`,
		`mcpsearch_tool_calls_total{outcome="TOOL_ERROR",tool="web_search",transport="stdio"} 1`,
		`mcpsearch_tool_call_duration_seconds_count{tool="web_search"} 2`,
		`mcpsearch_web_search_cache_total{result="miss"} 1`,
	} {
		if strings.Contains(before, want) || !strings.Contains(after, want) {
			t.Errorf("metrics did not move to %s", want)
		}
	}
}

// TestAuditRows checks that success, error and rate-limited calls over each
// transport land in the audit table, with secrets redacted.
func TestAuditRows(t *testing.T) {
	var w *audit.Writer
	var pool *pgxpool.Pool
	h := newDocsHarness(t, func(c *config.Config) {
		c.RateLimits["web_search"] = config.RateLimit{PerMinute: 1, Burst: 2}
	}, func(d *Deps) {
		pool = d.Docs.(*docs.Store).Pool()
		w = audit.NewWriter(pool, audit.Options{FlushInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		d.Audit = w
	})
	calls := func(cs *mcp.ClientSession) {
		for _, args := range []map[string]any{
			{"query": "ok"},
			// Unknown arguments fail validation, and are recorded redacted.
			{"query": "", "api_key": "sk-secret"},
			{"query": "limited"},
		} {
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search", Arguments: args}); err != nil {
				t.Fatal(err)
			}
		}
	}
	calls(h.session)
	for _, transport := range []string{"http", "sse"} {
		cs, err := connectHTTP(t, h.http.URL, transport, "")
		if err != nil {
			t.Fatal(err)
		}
		calls(cs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT transport, coalesce(error_code, 'ok'), arguments::text, coalesce(client_name, ''), coalesce(session_id, '') FROM chat_mcp_tool_calls ORDER BY created_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	sessions := map[string]map[string]bool{} // transport -> session ids
	n := 0
	for rows.Next() {
		var transport, code, args, client, session string
		if err := rows.Scan(&transport, &code, &args, &client, &session); err != nil {
			t.Fatal(err)
		}
		if sessions[transport] == nil {
			sessions[transport] = map[string]bool{}
		}
		sessions[transport][session] = true
		n++
		got[transport+" "+code]++
		if strings.Contains(args, "sk-secret") {
			t.Errorf("secret stored in arguments: %s", args)
		}
		if client == "" {
			t.Errorf("row without client name")
		}
	}
	if n != 9 {
		t.Errorf("%d audit rows, want 9: %v", n, got)
	}
	// Every connection has an id, stdio and SSE included, and its three
	// calls share it. Over streamable HTTP the client speaks the stateless
	// revision, where each request stands alone.
	for transport, ids := range sessions {
		if ids[""] || (transport != "http" && len(ids) != 1) {
			t.Errorf("%s calls have session ids %v, want one, not empty", transport, ids)
		}
	}
	// The bucket is shared: after two calls it is empty for everyone.
	if got["stdio ok"] != 1 || got["stdio TOOL_ERROR"] != 1 || got["http RATE_LIMITED"] != 3 || got["sse RATE_LIMITED"] != 3 {
		t.Errorf("rows by transport and outcome: %v", got)
	}
}

// TestAuditRefusedCallsNameTheirConversation checks that calls refused
// before their handler runs, by the rate limit or by the input schema, are
// audited with the conversation their arguments name, or the default one
// for tools that take it, as the calls that ran are.
func TestAuditRefusedCallsNameTheirConversation(t *testing.T) {
	const conv, def = "audit-conv", "audit-default"
	var w *audit.Writer
	var pool *pgxpool.Pool
	h := newDocsHarness(t, func(c *config.Config) {
		c.RateLimits["list_files"] = config.RateLimit{PerMinute: 1, Burst: 5}
		c.DefaultConversation = def
	}, func(d *Deps) {
		pool = d.Docs.(*docs.Store).Pool()
		w = audit.NewWriter(pool, audit.Options{FlushInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		d.Audit = w
	})
	type row struct{ tool, code, conv string }
	var want []row
	call := func(tool string, args map[string]any, code, conv string) {
		t.Helper()
		res := h.call(t, tool, args)
		got := "ok"
		if res.IsError {
			got = toolErr(t, res).Code
		}
		if got != code {
			t.Fatalf("%s %v: %s, want %s", tool, args, got, code)
		}
		want = append(want, row{tool, code, conv})
	}
	// A burst of 5 that does not refill during the test: 5 calls run, 3
	// are refused by the rate limit.
	for i := range 8 {
		code := "ok"
		if i >= 5 {
			code = CodeRateLimited
		}
		call("list_files", map[string]any{"conversation_id": conv}, code, conv)
	}
	call("list_files", map[string]any{}, CodeRateLimited, def)
	// Refused by the schema: out of range, of the wrong type, and with the
	// conversation left to the default.
	call("search_docs", map[string]any{"query": "x", "conversation_id": conv, "top_k": 99}, CodeToolError, conv)
	call("search_docs", map[string]any{"query": "x", "conversation_id": " " + conv + " ", "top_k": "many"}, CodeToolError, conv)
	call("search_docs", map[string]any{"query": "x", "mode": "psychic"}, CodeToolError, def)
	// get_chunk learns its conversation from the chunk it reads: refused,
	// it names none.
	call("get_chunk", map[string]any{"chunk_id": ""}, CodeToolError, "")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT tool_name, coalesce(error_code, 'ok'), coalesce(conversation_id, '') FROM chat_mcp_tool_calls ORDER BY created_at, id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.tool, &x.code, &x.conv)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit rows (tool, outcome, conversation):\n got %v\nwant %v", got, want)
	}
}

func TestIngestMetricsMove(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	before := scrapeMetrics(t, h.http.URL)
	for _, want := range []string{`mcpsearch_ingest_files_total{status="ready"} 0`, `mcpsearch_ingest_queue_depth 0`, `mcpsearch_vector_index_builds_total 0`} {
		if !strings.Contains(before, want) {
			t.Errorf("metrics before any upload lack %s", want)
		}
	}
	resp := upload(t, h.http.URL, "metrics", map[string][]byte{
		"notes.md":   []byte("# Notes\n\nThe ingestion counters move when a file is processed.\n"),
		"blank.html": []byte("<html><body>  </body></html>"),
	}, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: %s", resp.Status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st := h.ingest.IngestStats(); st.Ready+st.Failed < 2; st = h.ingest.IngestStats() {
		if time.Now().After(deadline) {
			t.Fatalf("files not processed in time: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := scrapeMetrics(t, h.http.URL)
	for _, want := range []string{
		`mcpsearch_ingest_files_total{status="ready"} 1`,
		`mcpsearch_ingest_files_total{status="failed"} 1`,
		`mcpsearch_ingest_chunks_total 1`,
		`mcpsearch_ingest_bytes_total 63`,
	} {
		if !strings.Contains(after, want) {
			t.Errorf("metrics after the uploads lack %s", want)
		}
	}
}
