package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Tracing: with Deps.Tracing set, every MCP request is a span named and
// attributed as the semantic conventions for MCP servers say ("tools/call
// search_docs": mcp.method.name, gen_ai.tool.name, mcp.session.id,
// jsonrpc.request.id, the transport, error.type), every request of the REST
// facade and the upload API an HTTP server span, and a call's rate limit a
// child. A W3C traceparent in the request's params._meta, or else in its
// HTTP header, makes the span a child of the caller's. Without Deps.Tracing
// s.tracer is nil and none of this runs.

// traceContext reads and writes W3C trace context.
var traceContext propagation.TraceContext

// rpcIDHeader carries the JSON-RPC id of a request to the MCP middleware,
// which the SDK does not hand it: set from the POSTed message over
// streamable HTTP, from the line over stdio. A client's own value is
// removed first.
const rpcIDHeader = "X-Mcpsearch-Rpc-Id"

// startRequest starts the span of one MCP request.
func (s *Server) startRequest(ctx context.Context, transport, method string, req mcp.Request) (context.Context, trace.Span) {
	ctx = remoteParent(ctx, req)
	name, tool := method, ""
	if ctr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" {
		// A tool the server does not have is not named: its name is
		// whatever the client sent.
		if _, known := s.tools.lookup(ctr.Params.Name); known {
			tool = ctr.Params.Name
			name = method + " " + tool
		}
	}
	kind := trace.SpanKindServer
	if transport == restTransport {
		// The facade's HTTP request is the server span; this is its
		// in-process call.
		kind = trace.SpanKindInternal
	}
	ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(kind))
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, telemetry.MCPMethodKey.String(method), telemetry.TransportKey.String(transport))
	if tool != "" {
		attrs = append(attrs, telemetry.GenAIToolKey.String(tool), telemetry.GenAIOperationKey.String("execute_tool"))
	}
	switch transport {
	case "stdio":
		attrs = append(attrs, telemetry.NetworkTransportKey.String("pipe"))
	default:
		attrs = append(attrs, telemetry.NetworkTransportKey.String("tcp"), telemetry.NetworkProtocolKey.String("http"))
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil && transport != restTransport {
		attrs = append(attrs, telemetry.MCPSessionKey.String(s.conns.of(ss)))
		if ip := ss.InitializeParams(); ip != nil && ip.ProtocolVersion != "" {
			attrs = append(attrs, telemetry.MCPProtocolVersionKey.String(ip.ProtocolVersion))
		}
	}
	if h := headerOf(req); h != nil {
		if id := h.Get(rpcIDHeader); id != "" {
			attrs = append(attrs, telemetry.JSONRPCRequestIDKey.String(id))
		}
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

// endRequest ends the span of an MCP request with how it ended: a JSON-RPC
// error (its code), or a tool result marked as an error (tool_error, with
// the contract's code in mcpsearch.outcome, set by finish).
func endRequest(span trace.Span, res mcp.Result, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		code := strconv.FormatInt(rpcErr.Code, 10)
		span.SetAttributes(telemetry.RPCStatusCodeKey.String(code))
		telemetry.Fail(span, code)
	case err != nil:
		telemetry.Fail(span, "_OTHER")
	default:
		if ctr, ok := res.(*mcp.CallToolResult); ok && ctr != nil && ctr.IsError {
			telemetry.Fail(span, "tool_error")
		}
	}
}

// traceCall adds to the span of a tool call what the call's end says of
// it: its outcome, the conversation it touched (hashed unless the operator
// allows its id), the job it started, the name of the caller's key and,
// when the operator allows it, the text it searched for.
func (s *Server) traceCall(ctx context.Context, c *call, o outcome, code string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{telemetry.OutcomeKey.String(code)}
	if o.conversation != "" {
		attrs = append(attrs, telemetry.Conversation(o.conversation, s.cfg.TraceConversationID))
	}
	if o.job != "" {
		attrs = append(attrs, telemetry.JobIDKey.String(o.job))
	}
	if key := c.Identity.keyName(); key != "" {
		attrs = append(attrs, telemetry.APIKeyNameKey.String(key))
	}
	if s.cfg.TraceQueryText {
		if q := queryOf(c.Args); q != "" {
			attrs = append(attrs, telemetry.QueryKey.String(q))
		}
	}
	span.SetAttributes(attrs...)
}

// maxTracedQuery bounds the query text a span keeps.
const maxTracedQuery = 4 * maxQueryRunes

// queryOf is the query argument of a call, if it has one.
func queryOf(args json.RawMessage) string {
	var in struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(args, &in) != nil {
		return ""
	}
	q := in.Query
	if len(q) > maxTracedQuery {
		q = q[:maxTracedQuery]
		for !utf8.ValidString(q) {
			q = q[:len(q)-1]
		}
	}
	return q
}

// remoteParent returns ctx carrying the caller's span, when the request
// names one: in params._meta, as the conventions for MCP say, or else in
// the header of the HTTP request that carried it.
func remoteParent(ctx context.Context, req mcp.Request) context.Context {
	meta := metaOf(req)
	if tp, ok := meta["traceparent"].(string); ok && tp != "" {
		c := propagation.MapCarrier{"traceparent": tp}
		if ts, ok := meta["tracestate"].(string); ok {
			c["tracestate"] = ts
		}
		return traceContext.Extract(ctx, c)
	}
	if h := headerOf(req); h != nil && h.Get("traceparent") != "" {
		return traceContext.Extract(ctx, propagation.HeaderCarrier(h))
	}
	return ctx
}

// metaOf is the _meta of a request's params; nil when it has no params
// (a notification may come without).
func metaOf(req mcp.Request) map[string]any {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p.GetMeta()
}

// metaCarrier writes trace context into the _meta of an MCP request.
type metaCarrier mcp.Meta

func (m metaCarrier) Get(key string) string {
	v, _ := m[key].(string)
	return v
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// httpSpan makes every request next serves an HTTP server span, a child of
// the caller's when its traceparent header names one. The span is named by
// the route that serves it ("POST /mcp/invoke"); its attributes are the
// method, the route, the status and, on a route of one conversation, the
// conversation: never the path, the query or a header.
func (s *Server) httpSpan(next http.Handler) http.Handler {
	if s.tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		noteTrace(ctx, span.SpanContext())
		s.nameRoute(span, r)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		if !span.IsRecording() {
			return
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(telemetry.HTTPMethodKey.String(r.Method), telemetry.HTTPStatusKey.Int(status))
		if status >= 500 {
			telemetry.Fail(span, strconv.Itoa(status))
		}
	})
}

// routed names the span of the request h serves by h's route, for routes
// served by a mux of their own (the upload API).
func (s *Server) routed(h http.HandlerFunc) http.HandlerFunc {
	if s.tracer == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		s.nameRoute(trace.SpanFromContext(r.Context()), r)
		h(w, r)
	}
}

// nameRoute names span by the route of r, once a mux has matched it.
func (s *Server) nameRoute(span trace.Span, r *http.Request) {
	if !span.IsRecording() || r.Pattern == "" {
		return
	}
	route := r.Pattern
	if _, path, ok := strings.Cut(route, " "); ok {
		route = path
	}
	span.SetName(r.Method + " " + route)
	span.SetAttributes(telemetry.HTTPRouteKey.String(route))
	if strings.HasPrefix(route, "/v1/conversations/{id}") {
		if conv := r.PathValue("id"); conv != "" {
			span.SetAttributes(telemetry.Conversation(conv, s.cfg.TraceConversationID))
		}
	}
}

// rpcIDs tells the MCP middleware the JSON-RPC id of the message a
// streamable HTTP POST carries (rpcIDHeader). The body, bounded already,
// is read here and given to the SDK whole.
func (s *Server) rpcIDs(next http.Handler) http.Handler {
	if s.tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(rpcIDHeader)
		if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxMCPBody+1))
		if err != nil {
			// The SDK reports the failure as it would have.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
			next.ServeHTTP(w, r)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		if id := messageID(body); id != "" {
			r.Header.Set(rpcIDHeader, id)
		}
		next.ServeHTTP(w, r)
	})
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// messageID is the id of a JSON-RPC request as the conventions write it
// (a string as it is, a number in its decimal form); "" for a batch, a
// notification or what is not JSON.
func messageID(msg []byte) string {
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &head) != nil || len(head.ID) == 0 {
		return ""
	}
	var str string
	if json.Unmarshal(head.ID, &str) == nil {
		return clip(str, 128)
	}
	var n int64
	if json.Unmarshal(head.ID, &n) == nil {
		return strconv.FormatInt(n, 10)
	}
	return ""
}

// idString writes a JSON-RPC id; "" for none.
func idString(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case string:
		return clip(v, 128)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// rpcIDTransport gives every request read over its connection the
// rpcIDHeader of its JSON-RPC id, for transports without HTTP (stdio).
type rpcIDTransport struct{ mcp.Transport }

func (t rpcIDTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return rpcIDConn{c}, nil
}

type rpcIDConn struct{ mcp.Connection }

func (c rpcIDConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Extra == nil {
		if id := idString(req.ID); id != "" {
			req.Extra = &mcp.RequestExtra{Header: http.Header{rpcIDHeader: {id}}}
		}
	}
	return msg, err
}

// noteTrace records the span of the HTTP request ctx belongs to, for its
// log line.
func noteTrace(ctx context.Context, sc trace.SpanContext) {
	if n, ok := ctx.Value(causesKey{}).(*causes); ok {
		n.mu.Lock()
		n.trace = sc
		n.mu.Unlock()
	}
}
