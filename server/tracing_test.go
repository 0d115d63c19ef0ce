package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/internal/closedport"
	"github.com/mcpsearch/mcpsearch/internal/researchtest"
	"github.com/mcpsearch/mcpsearch/research"
	"github.com/mcpsearch/mcpsearch/searxng"
	"github.com/mcpsearch/mcpsearch/telemetry"
)

// callerTrace is the span of a caller that traces its calls, and its W3C
// traceparent.
const (
	callerTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID      = "00f067aa0ba902b7"
	callerTraceparent = "00-" + callerTraceID + "-" + callerSpanID + "-01"
)

// tracedHarness is a harness whose server traces into an in-memory
// exporter, every span exported as it ends.
func tracedHarness(t *testing.T, tweak func(*config.Config)) (*harness, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := newHarnessDeps(t, tweak, func(d *Deps) { d.Tracing = tp })
	return h, exp
}

// spanNamed returns the one span named name, failing the test otherwise.
func spanNamed(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("%d spans named %q among %q, want 1", len(found), name, names)
	}
	return found[0]
}

// attrs returns a span's attributes by key.
func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// wantAttrs fails the test unless span s has each of want.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[attribute.Key]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if g, ok := got[k]; !ok || g.String() != v {
			t.Errorf("span %q: %s = %q, want %q (attributes %v)", s.Name, k, g.String(), v, s.Attributes)
		}
	}
}

func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Errorf("span %q is not a child of %q", child.Name, parent.Name)
	}
}

// A tool call is one span named and attributed as the conventions for MCP
// say, a child of the caller's span named in params._meta, with the rate
// limit and the SearXNG request below it.
func TestTraceToolCall(t *testing.T) {
	h, exp := tracedHarness(t, func(c *config.Config) { c.WebSearchCacheTTL = 0 })
	res, err := h.session.CallTool(context.Background(), &mcp.CallToolParams{
		Meta: mcp.Meta{"traceparent": callerTraceparent},
		Name: "web_search", Arguments: map[string]any{"query": "opentelemetry mcp", "max_results": 3}})
	if err != nil || res.IsError {
		t.Fatalf("web_search: %v %v", err, res)
	}
	spans := exp.GetSpans()
	call := spanNamed(t, spans, "tools/call web_search")
	if call.SpanContext.TraceID().String() != callerTraceID || call.Parent.SpanID().String() != callerSpanID || !call.Parent.IsRemote() {
		t.Fatalf("call span in trace %s under %s, want the caller's %s under %s", call.SpanContext.TraceID(), call.Parent.SpanID(),
			callerTraceID, callerSpanID)
	}
	if call.SpanKind != trace.SpanKindServer || call.Status.Code == codes.Error {
		t.Errorf("call span kind %v status %v, want a server span that did not fail", call.SpanKind, call.Status)
	}
	wantAttrs(t, call, map[attribute.Key]string{
		telemetry.MCPMethodKey:        "tools/call",
		telemetry.GenAIToolKey:        "web_search",
		telemetry.GenAIOperationKey:   "execute_tool",
		telemetry.TransportKey:        "stdio",
		telemetry.NetworkTransportKey: "pipe",
		telemetry.OutcomeKey:          "ok",
	})
	if sid := attrs(call)[telemetry.MCPSessionKey].AsString(); !strings.HasPrefix(sid, "conn-") {
		t.Errorf("mcp.session.id = %q, want the connection's id", sid)
	}
	limit := spanNamed(t, spans, "rate limit")
	childOf(t, limit, call)
	wantAttrs(t, limit, map[attribute.Key]string{telemetry.RateLimitAllowedKey: "true", telemetry.RateLimitStoreKey: "memory"})
	search := spanNamed(t, spans, "searxng search")
	childOf(t, search, call)
	wantAttrs(t, search, map[attribute.Key]string{
		telemetry.InstanceKey:   h.fake.URL,
		telemetry.HTTPStatusKey: "200",
		telemetry.ServerAddrKey: "127.0.0.1",
	})
	if n := attrs(search)[telemetry.ResultsKey].AsInt64(); n < int64(len(decode[WebSearchOutput](t, res).Results)) {
		t.Errorf("searxng span counts %d results, fewer than the call returned", n)
	}
	if search.SpanKind != trace.SpanKindClient {
		t.Errorf("searxng span kind %v, want client", search.SpanKind)
	}

	// Without a caller's span the call begins a trace.
	exp.Reset()
	h.call(t, "web_search", map[string]any{"query": "no caller"})
	if call := spanNamed(t, exp.GetSpans(), "tools/call web_search"); call.Parent.IsValid() {
		t.Errorf("call without a traceparent has parent %v", call.Parent.SpanID())
	}
}

// A web_search whose SearXNG is down shows the failed request below the
// failed call.
func TestTraceDeadSearXNG(t *testing.T) {
	dead := "http://" + closedport.Reserve(t).Addr()
	h, exp := tracedHarness(t, func(c *config.Config) { c.SearXNGURL = dead })
	res := h.call(t, "web_search", map[string]any{"query": "anything"})
	code := toolErr(t, res).Code
	spans := exp.GetSpans()
	call := spanNamed(t, spans, "tools/call web_search")
	search := spanNamed(t, spans, "searxng search")
	childOf(t, search, call)
	if search.Status.Code != codes.Error || search.Status.Description != "unreachable" {
		t.Errorf("searxng span status %+v, want an error of class unreachable", search.Status)
	}
	wantAttrs(t, search, map[attribute.Key]string{telemetry.ErrorTypeKey: "unreachable", telemetry.InstanceKey: dead})
	if _, ok := attrs(search)[telemetry.HTTPStatusKey]; ok {
		t.Error("a request that got no answer has a status")
	}
	if call.Status.Code != codes.Error {
		t.Errorf("call span status %+v, want an error", call.Status)
	}
	wantAttrs(t, call, map[attribute.Key]string{telemetry.ErrorTypeKey: "tool_error", telemetry.OutcomeKey: code})
}

// A JSON-RPC error (an unknown tool) is named by its code, and the tool the
// client named is not taken for the span's name.
func TestTraceProtocolError(t *testing.T) {
	h, exp := tracedHarness(t, nil)
	if _, err := h.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool_" + strings.Repeat("x", 50)}); err == nil {
		t.Fatal("unknown tool succeeded")
	}
	call := spanNamed(t, exp.GetSpans(), "tools/call")
	if _, ok := attrs(call)[telemetry.GenAIToolKey]; ok {
		t.Error("an unknown tool is named")
	}
	if call.Status.Code != codes.Error || attrs(call)[telemetry.RPCStatusCodeKey].AsString() == "" {
		t.Errorf("status %+v attributes %v, want the JSON-RPC error code", call.Status, call.Attributes)
	}
}

// traceparentHeader adds a traceparent header to every request.
type traceparentHeader struct {
	value string
	next  http.RoundTripper
}

func (t traceparentHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", t.value)
	return t.next.RoundTrip(r)
}

// Over streamable HTTP the traceparent header makes the call a child of
// the caller's span, and the span names the request's JSON-RPC id.
func TestTraceStreamableHTTP(t *testing.T) {
	h, exp := tracedHarness(t, func(c *config.Config) { c.Transports = []string{"http"} })
	hs := httptest.NewServer(h.srv.Handler())
	t.Cleanup(hs.Close)
	hc := &http.Client{Transport: traceparentHeader{callerTraceparent, http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "traced", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "over http"}}); err != nil || res.IsError {
		t.Fatalf("web_search: %v %v", err, res)
	}
	call := spanNamed(t, exp.GetSpans(), "tools/call web_search")
	if call.SpanContext.TraceID().String() != callerTraceID || call.Parent.SpanID().String() != callerSpanID {
		t.Fatal("the call is not a child of the traceparent header's span")
	}
	wantAttrs(t, call, map[attribute.Key]string{telemetry.TransportKey: "http", telemetry.NetworkTransportKey: "tcp",
		telemetry.NetworkProtocolKey: "http"})
	if attrs(call)[telemetry.MCPSessionKey].AsString() == "" {
		t.Error("no mcp.session.id")
	}
	if id := attrs(call)[telemetry.JSONRPCRequestIDKey].AsString(); id == "" || strings.Trim(id, "0123456789") != "" {
		t.Errorf("jsonrpc.request.id = %q, want the client's numeric id", id)
	}
	if v := attrs(call)[telemetry.MCPProtocolVersionKey].AsString(); v == "" {
		t.Error("no mcp.protocol.version")
	}
}

// Over stdio the span names the JSON-RPC id of the line.
func TestTraceStdioRequestID(t *testing.T) {
	h, exp := tracedHarness(t, nil)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"call-42","method":"tools/call","params":{"name":"web_search","arguments":{"query":"stdio"},"_meta":{"traceparent":"` + callerTraceparent + `"}}}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := h.srv.ServeIO(context.Background(), strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&out)
	answered := 0
	for sc.Scan() {
		var msg struct{ ID string }
		if json.Unmarshal(sc.Bytes(), &msg) == nil && msg.ID != "" {
			answered++
		}
	}
	if answered != 2 {
		t.Fatalf("%d answers: %s", answered, out.String())
	}
	spans := exp.GetSpans()
	wantAttrs(t, spanNamed(t, spans, "tools/call web_search"), map[attribute.Key]string{
		telemetry.JSONRPCRequestIDKey: "call-42", telemetry.TransportKey: "stdio"})
	wantAttrs(t, spanNamed(t, spans, "initialize"), map[attribute.Key]string{telemetry.JSONRPCRequestIDKey: "init-1"})
}

// A REST invocation is an HTTP server span, a child of the caller's, with
// the MCP call below it.
func TestTraceREST(t *testing.T) {
	h, exp := tracedHarness(t, func(c *config.Config) { c.Transports = []string{"http"} })
	hs := httptest.NewServer(h.srv.Handler())
	t.Cleanup(hs.Close)
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp/tools/web_search", strings.NewReader(`{"query":"rest"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", callerTraceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("invoke: %s", resp.Status)
	}
	spans := exp.GetSpans()
	httpSpan := spanNamed(t, spans, "POST /mcp/tools/{name}")
	if httpSpan.Parent.SpanID().String() != callerSpanID || httpSpan.SpanKind != trace.SpanKindServer {
		t.Fatalf("HTTP span under %s, kind %v; want a server span under the caller's", httpSpan.Parent.SpanID(), httpSpan.SpanKind)
	}
	wantAttrs(t, httpSpan, map[attribute.Key]string{telemetry.HTTPRouteKey: "/mcp/tools/{name}", telemetry.HTTPMethodKey: "POST",
		telemetry.HTTPStatusKey: "200"})
	call := spanNamed(t, spans, "tools/call web_search")
	childOf(t, call, httpSpan)
	if call.SpanKind != trace.SpanKindInternal {
		t.Errorf("REST call span kind %v, want internal", call.SpanKind)
	}
	wantAttrs(t, call, map[attribute.Key]string{telemetry.TransportKey: "rest"})
	childOf(t, spanNamed(t, spans, "searxng search"), call)
}

// Every log line of a traced call carries its trace and span.
func TestTraceLogLines(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	var buf syncBuffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil)))
	cfg := config.Default()
	cfg.SearXNGURL = "http://" + closedport.Reserve(t).Addr() + ",http://" + closedport.Reserve(t).Addr()
	pool, err := searxng.NewPool(cfg.SearXNGURLs(), searxng.PoolOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := New(cfg, Deps{Tracing: tp, Search: pool}, log, "test")
	cs := connect(t, srv.MCP("stdio"))
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "logs"}}); err != nil {
		t.Fatal(err)
	}
	call := spanNamed(t, exp.GetSpans(), "tools/call web_search")
	var lines int
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["msg"] != "tool call" && rec["msg"] != "searxng instance failed" {
			continue
		}
		lines++
		if rec["trace_id"] != call.SpanContext.TraceID().String() || rec["span_id"] == nil {
			t.Errorf("log line %v does not name the call's trace", rec)
		}
	}
	if lines < 2 {
		t.Fatalf("%d log lines of the call, want the failed instance and the call: %s", lines, buf.String())
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

// Tracing off, a call allocates nothing for it: the middleware's hooks
// and the helpers every package calls.
func TestTracingOffAllocatesNothing(t *testing.T) {
	h := newHarness(t, nil)
	if h.srv.tracer != nil {
		t.Fatal("tracing on without a provider")
	}
	ctx := context.Background()
	c := &call{Tool: "web_search"}
	allocs := testing.AllocsPerRun(1000, func() {
		h.srv.traceCall(ctx, c, outcome{conversation: "conv-1"}, "ok")
		endRequest(trace.SpanFromContext(ctx), nil, nil)
		_, span := telemetry.Start(ctx, "rate limit", trace.SpanKindInternal)
		span.End()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call with tracing off, want 0", allocs)
	}
}

// A call's query text and conversation id are in its span only when the
// operator allows them; the conversation is otherwise hashed.
func TestTraceQueryAndConversationOnlyWhenAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprint("allowed=", allow), func(t *testing.T) {
			h, exp := tracedHarness(t, func(c *config.Config) { c.TraceQueryText, c.TraceConversationID = allow, allow })
			h.call(t, "web_search", map[string]any{"query": "private words"})
			if got := attrs(spanNamed(t, exp.GetSpans(), "tools/call web_search"))[telemetry.QueryKey].AsString(); (got == "private words") != allow || (got != "" && !allow) {
				t.Errorf("mcpsearch.query = %q with the query allowed %v", got, allow)
			}

			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			ctx, span := tp.Tracer("test").Start(context.Background(), "tools/call search_docs")
			c := &call{Args: json.RawMessage(`{"query":"private words","conversation_id":"conv-9"}`)}
			h.srv.traceCall(ctx, c, outcome{conversation: "conv-9", job: "job-1"}, "ok")
			span.End()
			got := attrs(spanNamed(t, exp.GetSpans(), "tools/call search_docs"))
			if id, hash := got[telemetry.ConversationIDKey].AsString(), got[telemetry.ConversationHashKey].AsString(); allow && (id != "conv-9" || hash != "") ||
				!allow && (id != "" || len(hash) != 16) {
				t.Errorf("conversation id %q hash %q with the id allowed %v", id, hash, allow)
			}
			if got[telemetry.JobIDKey].AsString() != "job-1" || got[telemetry.OutcomeKey].AsString() != "ok" {
				t.Errorf("attributes %v", got)
			}
		})
	}
}

// A web_search that reads pages traces them under one parent, "read pages",
// each page's read below it, and the ranking beside them.
func TestTraceReadPages(t *testing.T) {
	site := researchtest.New(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f, err := fetch.New(fetch.Options{AllowPrivate: true, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessDeps(t, nil, func(d *Deps) {
		d.Tracing, d.Fetch, d.Research = tp, f, research.New(f, research.Options{})
	})
	q := "quill_max_sessions default"
	h.fake.SetResults(q, results(site.URL+"/settings.html", site.URL+"/install.html", site.URL+"/missing"))
	decode[WebSearchOutput](t, h.call(t, "web_search", map[string]any{"query": q, "read": 3}))
	spans := exp.GetSpans()
	call := spanNamed(t, spans, "tools/call web_search")
	parent := spanNamed(t, spans, "read pages")
	childOf(t, parent, call)
	wantAttrs(t, parent, map[attribute.Key]string{telemetry.PagesKey: "3", telemetry.PagesReadKey: "2"})
	childOf(t, spanNamed(t, spans, "rank passages"), parent)
	pages := 0
	for _, s := range spans {
		if s.Name == "read page" {
			pages++
			childOf(t, s, parent)
		}
	}
	if pages != 3 {
		t.Errorf("%d read page spans, want 3", pages)
	}
}
