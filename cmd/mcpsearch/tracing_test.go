package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// otlpReceiver is an OTLP/HTTP endpoint, as a collector serves it, that
// keeps the spans it is sent, decoded from their protobuf.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []receivedSpan
}

// receivedSpan is one exported span with the resource and scope it came
// under.
type receivedSpan struct {
	resource []*commonpb.KeyValue
	scope    string
	span     *tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a POST of application/x-protobuf to /v1/traces", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					rc.spans = append(rc.spans, receivedSpan{resource: rs.GetResource().GetAttributes(), scope: ss.GetScope().GetName(), span: s})
				}
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *otlpReceiver) all() []receivedSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedSpan(nil), rc.spans...)
}

// attr returns a span's attribute as text, "" when it has none.
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return anyText(kv.Value)
		}
	}
	return ""
}

// anyText writes an attribute value as text.
func anyText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return string(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, anyText(e))
		}
		return strings.Join(parts, ",")
	case *commonpb.AnyValue_KvlistValue:
		var parts []string
		for _, kv := range x.KvlistValue.Values {
			parts = append(parts, kv.Key+"="+anyText(kv.Value))
		}
		return strings.Join(parts, ",")
	}
	return ""
}

// tracedCaller is the span of a client that traces its calls.
const (
	tracedCallerTrace = "0af7651916cd43dd8448eb211c80319c"
	tracedCallerSpan  = "b7ad6b7169203331"
)

// Secrets the traces must not hold.
const (
	tracedKey      = "tracing-key-5b0c2e7f1a9d4e63"
	tracedConv     = "conv-private-81f3"
	queryMark      = "querytext8e1d"
	docMark        = "doctextf42a"
	headerMark     = "headervalue3c77"
	pathMark       = "pathsecret9b21"
	pageTokenMark  = "pagetoken6d05"
	tracedDocument = "# Manual\n\nThe " + docMark + " appliance reports error E1047 when its filter is blocked. " +
		"Replace the filter and restart the appliance.\n"
)

// TestTracesEndToEnd runs serve as it runs with OTEL_EXPORTER_OTLP_ENDPOINT
// pointing at a collector: an upload, a search_docs call over streamable
// HTTP under a caller's traceparent, a fetch_url and a web_search over the
// REST facade. The search is one trace under the caller's trace id with its
// statements below it; every log line of the call names it; the upload's
// files are processed in a trace of their own; and no exported span,
// attribute, event, link or resource holds the key, the conversation id,
// the query, the document's text, a header's value or a page's path.
func TestTracesEndToEnd(t *testing.T) {
	rc := newOTLPReceiver(t)
	db := pgtest.NewDatabase(t)
	fake := searxngtest.New(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html><head><title>Filters</title></head><body><article><h1>Filters</h1><p>Filters last a year.</p></article></body></html>")
	}))
	t.Cleanup(page.Close)
	otel := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_SERVICE_NAME":           "mcpsearch-e2e",
		"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment=test",
	}
	vars := map[string]string{
		"MCP_transport":              "http",
		"MCP_API_KEYS":               tracedKey,
		"DATABASE_URL":               db,
		"MCP_web_search_searxng_url": fake.URL,
		"MCP_web_search_cache_ttl":   "0",
		"MCP_fetch_url_allow_hosts":  "127.0.0.1",
		"MCP_log_format":             "json",
		"MCP_log_level":              "debug",
	}
	var environ []string
	for k, v := range otel {
		// The SDK reads the process environment; serve decides from
		// its own.
		t.Setenv(k, v)
		environ = append(environ, k+"="+v)
	}
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	var logs syncBuffer
	env := &environment{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &logs, environ: environ}
	cfg, _, err := loadConfig(env, "serve", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tp, log, stopTracing, err := startTracing(ctx, env, newLogger(env.stderr, cfg.LogFormat, cfg.LogLevel))
	if err != nil || tp == nil {
		t.Fatalf("tracing did not start: %v", err)
	}
	srv, stop, err := newServer(ctx, cfg, log, tp)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	stopped := false
	shutdown := func() {
		if !stopped {
			stopped = true
			hs.Close()
			stop()
			stopTracing()
		}
	}
	t.Cleanup(shutdown)

	uploadTraced(t, hs.URL)
	waitIndexed(t, hs.URL)

	caller := "00-" + tracedCallerTrace + "-" + tracedCallerSpan + "-01"
	hc := &http.Client{Transport: headers{next: http.DefaultTransport, set: map[string]string{
		"Authorization": "Bearer " + tracedKey, "traceparent": caller, "X-Team-Note": headerMark}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "traced-agent", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_docs",
		Arguments: map[string]any{"query": "what does error E1047 mean " + queryMark, "conversation_id": tracedConv, "threshold": 0}})
	if err != nil || res.IsError {
		t.Fatalf("search_docs: %v %+v", err, res)
	}
	if !strings.Contains(fmt.Sprint(res.StructuredContent), docMark) {
		t.Fatalf("search_docs did not find the document: %+v", res.StructuredContent)
	}
	cs.Close()
	restCall(t, hs.URL, "fetch_url", fmt.Sprintf(`{"url": %q}`, page.URL+"/"+pathMark+"?token="+pageTokenMark))
	restCall(t, hs.URL, "web_search", fmt.Sprintf(`{"query": %q}`, "filters "+queryMark))
	shutdown()

	spans := rc.all()
	byID := map[string]receivedSpan{}
	for _, s := range spans {
		byID[hex.EncodeToString(s.span.SpanId)] = s
	}
	named := func(name string) []receivedSpan {
		var out []receivedSpan
		for _, s := range spans {
			if s.span.Name == name {
				out = append(out, s)
			}
		}
		return out
	}

	// The search is one trace, under the caller's.
	calls := named("tools/call search_docs")
	if len(calls) != 1 {
		t.Fatalf("%d search_docs spans among %d", len(calls), len(spans))
	}
	call := calls[0].span
	if hex.EncodeToString(call.TraceId) != tracedCallerTrace || hex.EncodeToString(call.ParentSpanId) != tracedCallerSpan {
		t.Fatalf("search_docs span in trace %x under %x, want the caller's", call.TraceId, call.ParentSpanId)
	}
	if got := attr(call, "mcpsearch.conversation.hash"); len(got) != 16 || attr(call, "mcpsearch.conversation.id") != "" {
		t.Errorf("conversation attributes %v, want its hash alone", call.Attributes)
	}
	if attr(call, "mcpsearch.api_key.name") == "" || attr(call, "mcpsearch.outcome") != "ok" || attr(call, "jsonrpc.request.id") == "" {
		t.Errorf("call attributes %v", call.Attributes)
	}
	// Every span of the caller's trace is one of its MCP requests (the
	// client's discovery and the call) or below one; the call's own
	// children are its statements and the server's spans.
	below := map[string]int{}
	for _, s := range spans {
		if hex.EncodeToString(s.span.TraceId) != tracedCallerTrace {
			continue
		}
		top, hops := s.span, 0
		for hex.EncodeToString(top.ParentSpanId) != tracedCallerSpan {
			p, ok := byID[hex.EncodeToString(top.ParentSpanId)]
			if !ok || hops > 20 {
				t.Fatalf("span %q of the caller's trace is not below one of its requests", s.span.Name)
			}
			top, hops = p.span, hops+1
		}
		if attr(top, "mcp.method.name") == "" {
			t.Errorf("span %q under the caller's is not an MCP request", top.Name)
		}
		if top == call && s.span != call {
			below[s.scope]++
		}
		if s.span.Name == "embeddings local-hash-v1-384" && attr(s.span, "gen_ai.provider.name") != "local" {
			t.Errorf("embedder span %v", s.span.Attributes)
		}
	}
	if below["github.com/exaring/otelpgx"] == 0 || below["github.com/mcpsearch/mcpsearch"] == 0 {
		t.Fatalf("below the call: %v, want statements and the server's own spans", below)
	}
	for _, s := range spans {
		if s.scope == "github.com/exaring/otelpgx" && attr(s.span, "db.query.text") != "" {
			t.Errorf("statement text exported without MCP_trace_sql_text: %q", attr(s.span, "db.query.text"))
		}
	}

	// The upload API request, the files' processing and the audit write.
	if up := named("POST /v1/conversations/{id}/files"); len(up) != 1 || attr(up[0].span, "http.response.status_code") != "202" {
		t.Errorf("upload spans %v", up)
	}
	for _, name := range []string{"ingest", "extract", "chunk", "audit write", "read page", "searxng search", "POST /mcp/tools/{name}"} {
		if len(named(name)) == 0 {
			t.Errorf("no %q span", name)
		}
	}
	for _, w := range named("audit write") {
		if len(w.span.Links) == 0 {
			t.Errorf("audit write without links to its calls")
		}
	}
	if rs := spans[0].resource; !hasAttr(rs, "service.name", "mcpsearch-e2e") || !hasAttr(rs, "deployment.environment", "test") ||
		!hasAttr(rs, "service.version", version) {
		t.Errorf("resource %v, want OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and the version", rs)
	}

	// Every log line of the call names its trace, and the line of an
	// upload API request its own.
	lines, uploads := 0, 0
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case rec["tool"] == "search_docs":
			lines++
			if rec["trace_id"] != tracedCallerTrace || rec["span_id"] == nil {
				t.Errorf("log line of the call without its trace: %v", rec)
			}
		case rec["msg"] == "http request" && rec["method"] == "POST" && strings.HasPrefix(fmt.Sprint(rec["path"]), "/v1/"):
			uploads++
			up := named("POST /v1/conversations/{id}/files")
			if len(up) != 1 || rec["trace_id"] != hex.EncodeToString(up[0].span.TraceId) || rec["span_id"] != hex.EncodeToString(up[0].span.SpanId) {
				t.Errorf("upload's log line %v does not name its span", rec)
			}
		}
	}
	if lines == 0 || uploads != 1 {
		t.Errorf("%d log lines of the search_docs call and %d of the upload, want some and 1", lines, uploads)
	}

	checkNoSecrets(t, spans, []string{tracedKey, tracedConv, queryMark, docMark, headerMark, pathMark, pageTokenMark, db})
}

// checkNoSecrets reads everything every span exported and fails on any
// of secrets.
func checkNoSecrets(t *testing.T, spans []receivedSpan, secrets []string) {
	t.Helper()
	read := 0
	check := func(where, text string) {
		read++
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %q: %q", where, s, text)
			}
		}
	}
	checkKVs := func(where string, kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			check(where+" "+kv.Key, kv.Key+"="+anyText(kv.Value))
		}
	}
	for _, rs := range spans {
		s := rs.span
		where := fmt.Sprintf("span %q", s.Name)
		check(where+" name", s.Name)
		check(where+" trace state", s.TraceState)
		check(where+" status", s.GetStatus().GetMessage())
		checkKVs(where, s.Attributes)
		checkKVs(where+" resource", rs.resource)
		for _, e := range s.Events {
			check(where+" event", e.Name)
			checkKVs(where+" event "+e.Name, e.Attributes)
		}
		for _, l := range s.Links {
			check(where+" link", l.TraceState)
			checkKVs(where+" link", l.Attributes)
		}
	}
	t.Logf("read %d names, values and messages of %d spans", read, len(spans))
}

func hasAttr(kvs []*commonpb.KeyValue, key, value string) bool {
	for _, kv := range kvs {
		if kv.Key == key && anyText(kv.Value) == value {
			return true
		}
	}
	return false
}

// headers sets headers on every request.
type headers struct {
	next http.RoundTripper
	set  map[string]string
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.set {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

// uploadTraced uploads the document to tracedConv through the upload API.
func uploadTraced(t *testing.T, base string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, _ := mw.CreateFormFile("file", "manual.md")
	w.Write([]byte(tracedDocument))
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/conversations/"+tracedConv+"/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+tracedKey)
	req.Header.Set("X-Team-Note", headerMark)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upload: %s %s", resp.Status, b)
	}
}

// waitIndexed waits until the conversation's file is ready.
func waitIndexed(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/conversations/"+tracedConv+"/files", nil)
		req.Header.Set("Authorization", "Bearer "+tracedKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Files []struct{ Status string }
		}
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if len(list.Files) == 1 && list.Files[0].Status == "ready" {
			return
		}
		if len(list.Files) == 1 && list.Files[0].Status == "failed" || time.Now().After(deadline) {
			t.Fatalf("file not ready: %+v", list)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restCall invokes a tool through the REST facade.
func restCall(t *testing.T, base, tool, params string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp/tools/"+tool, strings.NewReader(params))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tracedKey)
	req.Header.Set("X-Team-Note", headerMark)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s %s", tool, resp.Status, b)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
