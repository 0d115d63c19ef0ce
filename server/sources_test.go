package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/crawl"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/sources"
)

// withSources gives d a fetch client allowed on loopback, and sources over
// its documents store, with a jobs runner that runs their crawls.
func withSources(t *testing.T, d *Deps) {
	t.Helper()
	fc, err := fetch.New(fetch.Options{AllowHosts: []string{"127.0.0.1"}, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	d.Fetch = fc
	st := d.Docs.(*docs.Store)
	// The runner setDocs made runs no crawl: left working beside this one,
	// it could take a crawl job first and fail it.
	if old, ok := d.Jobs.(*jobs.Runner); ok {
		old.Close()
	}
	sy := sources.NewSyncer(sources.NewStore(st), fc, crawl.Options{Delay: -1}, nil)
	r := jobs.NewRunner(jobs.NewStore(st), d.Ingest.(*docs.Ingester), jobs.Options{Poll: 100 * time.Millisecond, Check: 100 * time.Millisecond,
		Fetch: fc, Kinds: sy.Kinds()})
	t.Cleanup(r.Close)
	d.Jobs, d.Sources = r, sources.NewService(sy, r)
}

func TestSiteSourceTools(t *testing.T) {
	pages := map[string]string{
		"/guide/":        `<html><body><h1>Guide</h1><p>Start with the harbour rules.</p><a href="rules">Rules</a></body></html>`,
		"/guide/rules":   `<html><body><h1>Rules</h1><p>Vessels give way to the pilot boat at the breakwater.</p></body></html>`,
		"/elsewhere/ads": `<html><body><p>Not part of the guide.</p></body></html>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		http.ServeContent(w, r, "", time.Unix(1700000000, 0), strings.NewReader(body))
	}))
	defer srv.Close()
	h := newDocsHarness(t, func(c *config.Config) { c.FetchURLAllowHosts = []string{"127.0.0.1"} }, func(d *Deps) { withSources(t, d) })

	out := decode[AddDocumentOutput](t, h.call(t, "add_document", map[string]any{"conversation_id": "g", "url": srv.URL + "/guide/",
		"crawl": map[string]any{"max_pages": 10}, "wait_seconds": 30}))
	if out.Status != "succeeded" || out.SourceID == "" || out.Kind != sources.JobCrawl || out.Report == nil || out.Report.Counts["added"] != 2 {
		t.Fatalf("crawl: %+v", out)
	}
	found := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"conversation_id": "g", "query": "pilot boat breakwater"}))
	if len(found.Chunks) == 0 || found.Chunks[0].Source != srv.URL+"/guide/rules" {
		t.Fatalf("search after the crawl: %+v", found)
	}
	list := decode[ListSourcesOutput](t, h.call(t, "list_sources", map[string]any{"conversation_id": "g"}))
	if len(list.Sources) != 1 || list.Sources[0].Pages != 2 || list.Sources[0].LastSync.Added != 2 || list.Sources[0].Kind != "site" {
		t.Fatalf("list_sources: %+v", list)
	}
	synced := decode[JobInfo](t, h.call(t, "sync_source", map[string]any{"source_id": out.SourceID}))
	done := h.waitJob(t, synced.JobID)
	if done.Status != "succeeded" || done.Report.Counts["unchanged"] != 2 || done.Report.Counts["added"] != 0 {
		t.Fatalf("sync: %+v %+v", done, done.Report)
	}
	if txt := textOf(h.call(t, "get_job", map[string]any{"job_id": synced.JobID})); !strings.Contains(txt, "0 added, 0 updated, 0 removed, 2 unchanged") {
		t.Fatalf("get_job text: %s", txt)
	}
	// The API shows and deletes the same.
	resp, err := http.Get(h.http.URL + "/v1/conversations/g/sources")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET sources: %v %v", resp, err)
	}
	resp.Body.Close()
	del := decode[DeleteSourceOutput](t, h.call(t, "delete_source", map[string]any{"source_id": out.SourceID}))
	if del.DeletedFiles != 2 {
		t.Fatalf("delete_source: %+v", del)
	}
	files := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": "g"}))
	if len(files.Files) != 0 {
		t.Fatalf("files left: %+v", files.Files)
	}
	for _, bad := range []map[string]any{
		{"conversation_id": "g", "text": "x", "title": "t", "crawl": map[string]any{}},
		{"conversation_id": "g", "url": srv.URL + "/guide/", "crawl": map[string]any{"scope": "galaxy"}},
		{"conversation_id": "g", "url": srv.URL + "/guide/", "crawl": map[string]any{"max_pages": 20001}},
	} {
		if res := h.call(t, "add_document", bad); !res.IsError {
			t.Errorf("accepted %v: %s", bad, textOf(res))
		}
	}
	if res := h.call(t, "sync_source", map[string]any{"source_id": docs.NewID("g")}); !res.IsError || !strings.Contains(toolErr(t, res).Message, "not found") {
		t.Errorf("sync of an unknown source: %s", textOf(res))
	}
}

// TestCrawlHeadersNeverShown crawls a private site with a cookie: the
// crawl reads it, and neither list_sources, the HTTP API, the audit nor the
// logs show the cookie's value, only its name. Headers that cannot be sent
// and the other new options out of range are invalid arguments that name
// them.
func TestCrawlHeadersNeverShown(t *testing.T) {
	const secret = "sid=s3cret-value"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") != secret {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/wiki/":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<html><body><h1>Wiki</h1><p>The team's wiki.</p><a href="ops">Ops</a></body></html>`))
		case "/wiki/ops":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<html><body><h1>Ops</h1><p>The pager rotates every Monday at nine.</p></body></html>`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	cfg := config.Default()
	cfg.Transports = []string{"http"}
	cfg.FetchURLAllowHosts = []string{"127.0.0.1"}
	cfg.RateLimit = config.RateLimit{PerMinute: 6000, Burst: 1000}
	// The write tools' own lower defaults would limit the calls below.
	cfg.BuiltinRateLimits = nil
	var d Deps
	st := setDocs(t, &d, pgtest.NewDatabase(t))
	withSources(t, &d)
	w := audit.NewWriter(st.Pool(), audit.Options{FlushInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { w.Close(context.Background()) })
	d.Audit = w
	logs := &logBuffer{}
	s := New(cfg, d, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), "test")
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	h := &harness{srv: s, session: connect(t, s.MCP("stdio"))}

	res := h.call(t, "add_document", map[string]any{"conversation_id": "g", "url": srv.URL + "/wiki/", "wait_seconds": 30,
		"crawl": map[string]any{"headers": map[string]any{"Cookie": secret}, "delay_ms": 1, "render": "never"}})
	out := decode[AddDocumentOutput](t, res)
	if out.Status != "succeeded" || out.Report == nil || out.Report.Counts["added"] != 2 {
		t.Fatalf("crawl: %+v %s", out, textOf(res))
	}
	shown := map[string]string{"add_document": string(mustJSON(t, res))}
	res = h.call(t, "list_sources", map[string]any{"conversation_id": "g"})
	list := decode[ListSourcesOutput](t, res)
	if len(list.Sources) != 1 || strings.Join(list.Sources[0].HeaderNames, ",") != "Cookie" || list.Sources[0].Options.DelayMS != 1 || list.Sources[0].Options.Render != "never" {
		t.Fatalf("list_sources: %+v", list)
	}
	shown["list_sources"] = string(mustJSON(t, res))
	resp, err := http.Get(hs.URL + "/v1/conversations/g/sources")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var api ListSourcesOutput
	if err := json.Unmarshal(body, &api); err != nil || resp.StatusCode != http.StatusOK || len(api.Sources) != 1 || strings.Join(api.Sources[0].HeaderNames, ",") != "Cookie" {
		t.Fatalf("GET sources: %s %s", resp.Status, body)
	}
	shown["GET /v1/conversations/g/sources"] = string(body)
	// The audit keeps the calls, with the header's name and not its value.
	var rows []audit.Entry
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rows, err = audit.Tail(context.Background(), st.Pool(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	var crawled bool
	for _, e := range rows {
		shown["audit "+e.ToolName] = string(e.Arguments) + string(e.Result) + e.Error
		var args struct {
			Crawl struct {
				Headers map[string]string `json:"headers"`
			} `json:"crawl"`
		}
		if e.ToolName == "add_document" && json.Unmarshal(e.Arguments, &args) == nil {
			crawled = crawled || args.Crawl.Headers["Cookie"] == "[REDACTED]"
		}
	}
	if !crawled {
		t.Errorf("no audit row of the crawl with the header's name: %+v", rows)
	}
	logs.mu.Lock()
	shown["logs"] = logs.b.String()
	logs.mu.Unlock()
	for where, text := range shown {
		if strings.Contains(text, "s3cret") {
			t.Errorf("%s shows the header's value: %s", where, text)
		}
	}

	for _, bad := range []struct {
		crawl   map[string]any
		message string
	}{
		{map[string]any{"delay_ms": -1}, "crawl.delay_ms -1 is out of range: send 0 to 60000"},
		{map[string]any{"delay_ms": 60001}, "crawl.delay_ms 60001 is out of range: send 0 to 60000"},
		{map[string]any{"render": "sometimes"}, `unknown crawl.render "sometimes": send never, auto or always`},
		{map[string]any{"headers": map[string]any{"Cookie": "a\r\nHost: evil"}}, "headers: the value of Cookie holds a line break"},
		{map[string]any{"headers": map[string]any{"X-Big": strings.Repeat("x", 9000)}}, `crawl.headers["X-Big"] has 9000 characters: send at most 8192`},
		{map[string]any{"headers": map[string]any{"X-A": strings.Repeat("x", 5000), "X-B": strings.Repeat("x", 5000)}}, "headers: 10006 bytes, more than 8192"},
		{map[string]any{"headers": map[string]any{"User-Agent": "x"}}, "headers: User-Agent is set by the crawler itself"},
	} {
		res := h.call(t, "add_document", map[string]any{"conversation_id": "g", "url": srv.URL + "/wiki/", "crawl": bad.crawl})
		if !res.IsError {
			t.Errorf("accepted %v: %s", bad.crawl, textOf(res))
			continue
		}
		if te := toolErr(t, res); te.Code != CodeToolError || !strings.HasPrefix(te.Message, "invalid arguments: ") || !strings.Contains(te.Message, bad.message) ||
			strings.Contains(te.Message, "xxxxxxxx") || strings.Contains(te.Message, "evil") {
			t.Errorf("%.80v: %+v, want %q", bad.crawl, te, bad.message)
		}
	}
}

// mustJSON is a call's result as JSON: its text and structured content.
func mustJSON(t *testing.T, res *mcp.CallToolResult) []byte {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
