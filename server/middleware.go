package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/telemetry"
)

// toolMiddleware wraps every tools/call of one MCP server: it decodes what
// the server needs to know of the call once (tool, caller, client), applies
// the caller's rate limit and the tool's timeout, and when the call is done
// logs, counts and audits it. Adding a tool needs no change here.
func (s *Server) toolMiddleware(transport string, id identity) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			s.active.Add(1)
			defer s.active.Add(-1)
			if s.tracer != nil {
				var span trace.Span
				ctx, span = s.startRequest(ctx, transport, method, req)
				defer func() { endRequest(span, res, err) }()
			}
			id := s.requestIdentity(transport, req, id)
			ctx = withIdentity(ctx, id)
			ctr, ok := req.(*mcp.CallToolRequest)
			if !ok || method != "tools/call" {
				return next(ctx, method, req)
			}
			c := s.newCall(transport, id, ctr)
			ctx = withCall(ctx, c)
			// The SDK applies schema defaults to the arguments decoded into
			// a map; "arguments": null decodes to a nil map, and writing a
			// default into it panics. Absent and null arguments mean none.
			if a := bytes.TrimSpace(ctr.Params.Arguments); len(a) == 0 || bytes.Equal(a, []byte("null")) {
				ctr.Params.Arguments = json.RawMessage("{}")
			}
			def, known := s.tools.lookup(ctr.Params.Name)
			if !known {
				// The SDK answers unknown tools with a JSON-RPC error naming
				// the tool; the call is still logged and audited.
				res, err := next(ctx, method, req)
				s.finish(ctx, c, err)
				return res, err
			}
			// The audit names the conversation a call targets even when
			// it is refused before its handler runs (rate limit, schema).
			c.setConversation(def.conversationOf(ctr.Params.Arguments))
			// The HTTP request's holder learns of the call first, so that
			// a refusal is answered as such (403 over REST).
			h := s.pendingHeaders(transport, ctr)
			if h != nil {
				h.set(c)
			}
			if te := toolAccess(id, requestHeader(req, h), def); te != nil {
				c.fail(te)
				s.finish(ctx, c, nil)
				return newErrorResult(ctr, te), nil
			}
			res, err = s.runCall(ctx, c, def, ctr, func(ctx context.Context) (mcp.Result, error) {
				return next(ctx, method, req)
			})
			s.finish(ctx, c, err)
			return res, err
		}
	}
}

// newCall gathers what is known of a call before it runs.
func (s *Server) newCall(transport string, id identity, req *mcp.CallToolRequest) *call {
	c := &call{
		Tool:      req.Params.Name,
		Transport: transport,
		Identity:  id,
		RequestID: callRequestID(req),
		Client:    clientOf(req),
		Start:     s.now(),
		Args:      req.Params.Arguments,
	}
	if ss := req.Session; ss != nil {
		c.Session = s.conns.of(ss)
	}
	return c
}

// runCall runs one call of a registered tool within its rate limit and
// timeout. Every failure, whether the SDK refused the arguments or the tool
// failed, ends as the contract's error result.
func (s *Server) runCall(ctx context.Context, c *call, def toolDef, req *mcp.CallToolRequest, next func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	if te := s.rateLimit(ctx, c); te != nil {
		c.fail(te)
		return newErrorResult(req, te), nil
	}
	ctx, cancel := context.WithTimeout(ctx, def.timeout)
	defer cancel()
	res, err := s.recovered(ctx, c, req, next)
	if err != nil {
		return res, err
	}
	ctr, ok := res.(*mcp.CallToolResult)
	if !ok || ctr == nil || !ctr.IsError {
		return res, nil
	}
	o := c.outcome()
	if o.failure == nil {
		// The typed handler records its failures; an error result without
		// one comes from the SDK, which refused the arguments before the
		// handler ran.
		te := classify(ctx, badArg("%s", s.refusedArgs(def, c.Args, ctr)))
		c.fail(te)
		o.failure = te
	}
	// The SDK's result is kept, with what it set for the request's protocol
	// revision; only its text becomes the contract's error body.
	ctr.Content = []mcp.Content{&mcp.TextContent{Text: errorBody(o.failure)}}
	return ctr, nil
}

// rateLimit takes the call's tokens; a refused call gets the contract's
// error. A call the shared store could not decide is counted and its cause
// logged.
func (s *Server) rateLimit(ctx context.Context, c *call) *ToolError {
	ctx, span := telemetry.Start(ctx, "rate limit", trace.SpanKindInternal)
	defer span.End()
	d, err := s.limits.take(ctx, c.Identity.bucket(), budgetOf(c))
	if span.IsRecording() {
		store := "memory"
		if s.deps.RateLimits != nil {
			store = "postgres"
		}
		span.SetAttributes(telemetry.RateLimitStoreKey.String(store), telemetry.RateLimitAllowedKey.Bool(err == nil && d.allowed),
			telemetry.RateLimitFallbackKey.Bool(d.fallback))
	}
	if err != nil {
		return classify(ctx, err)
	}
	if d.limited {
		c.setLimit(d.own)
	}
	if d.fallback {
		s.metrics.rateLimitFallbacks.WithLabelValues(c.Tool).Inc()
		if d.cause != nil {
			s.log.WarnContext(ctx, "rate limit store did not decide; calls are decided without it for a while",
				"tool", c.Tool, "on_db_failure", s.cfg.RateLimitOnDBFailure, "error", d.cause)
		}
	}
	if !d.allowed {
		return classify(ctx, &rateLimited{tool: c.Tool, wait: d.wait, unchecked: d.unchecked, playground: c.Transport == uiTransport})
	}
	return nil
}

// recovered runs next, turning a panic on the SDK's side of the call (schema
// defaults, validation, output checks) into the contract's internal error:
// a panic in the SDK's goroutine would otherwise end the process.
func (s *Server) recovered(ctx context.Context, c *call, req *mcp.CallToolRequest, next func(context.Context) (mcp.Result, error)) (res mcp.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.ErrorContext(ctx, "tool call panicked", "tool", c.Tool, "panic", p, "stack", string(debug.Stack()))
			te := &ToolError{Code: CodeToolError, Status: 500, Message: "internal error in " + c.Tool + "; the server keeps running"}
			c.fail(te)
			res, err = newErrorResult(req, te), nil
		}
	}()
	return next(ctx)
}

// refusedArgs says why the SDK refused a call's arguments, in the tool's
// words where the schema tells, else in the SDK's.
func (s *Server) refusedArgs(def toolDef, args json.RawMessage, res *mcp.CallToolResult) string {
	sc, _ := def.tool.InputSchema.(*jsonschema.Schema)
	if msg, ok := explainArgs(sc, args); ok {
		return msg
	}
	cause := res.GetError()
	if cause == nil {
		cause = errors.New(textOf(res))
	}
	return clip(cause.Error(), 300) + " (see the tool's inputSchema)"
}

// typed wraps a tool's handler: it records that the arguments were valid,
// checks the caller's scope over the conversation the input names, turns a
// panic into an error, maps any failure to the contract's error once, and
// holds a success to the result size limit.
func typed[In scoped, Out any](log *slog.Logger, defaultConv string, capped resultCap, h func(context.Context, In) (*mcp.CallToolResult, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out Out, err error) {
		ctx = withProgress(ctx, req)
		c := callFrom(ctx)
		c.setRan()
		if d, ok := any(&in).(defaultable); ok && defaultConv != "" {
			d.setDefaultConversation(defaultConv)
		}
		defer func() {
			if p := recover(); p != nil {
				log.ErrorContext(ctx, "tool panicked", "tool", c.Tool, "panic", p, "stack", string(debug.Stack()))
				err = &ToolError{Code: CodeToolError, Status: 500, Message: "internal error in " + c.Tool + "; the server keeps running"}
			}
			if err != nil {
				te := classify(ctx, timeoutCause(ctx, c.Tool, err))
				c.fail(te)
				// The middleware renders c's failure; the SDK only needs
				// to know the call failed.
				res, err = nil, te
			} else {
				capped.limit.capResult(capped.log, c.Tool, capped.more, res, out)
				c.succeed(out)
			}
		}()
		if sc := in.scope(); !sc.perResult && sc.conversation != "" {
			if err := allowConversation(ctx, sc.conversation); err != nil {
				return nil, out, err
			}
		}
		return h(ctx, in)
	}
}

// timeoutCause names the tool's deadline when the call's context ran out,
// whatever error the tool reported for it.
func timeoutCause(ctx context.Context, tool string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s did not finish in time: %w", tool, context.DeadlineExceeded)
	}
	return err
}

func textOf(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return "tool failed"
}

// finish logs, counts and audits a call once it has ended.
func (s *Server) finish(ctx context.Context, c *call, protoErr error) {
	took := s.now().Sub(c.Start)
	o := c.outcome()
	attrs := []any{"tool", c.Tool, "ms", took.Milliseconds(), "transport", c.Transport, "request_id", c.RequestID}
	if sub := c.Identity.subject(); sub != "" {
		attrs = append(attrs, "subject", sub)
	} else if key := c.Identity.keyName(); key != "" {
		attrs = append(attrs, "api_key", key)
	}
	if c.Session != "" {
		attrs = append(attrs, "session", c.Session)
	}
	level, code := slog.LevelInfo, "ok"
	switch {
	case protoErr != nil:
		level, code = slog.LevelWarn, "protocol_error"
		attrs = append(attrs, "error", protoErr.Error())
	case o.failure != nil:
		level, code = slog.LevelWarn, o.failure.Code
		attrs = append(attrs, "error", o.failure.Message)
		if o.failure.cause != nil {
			attrs = append(attrs, "cause", o.failure.cause.Error())
		}
	}
	attrs = append(attrs, "outcome", code)
	s.traceCall(ctx, c, o, code)
	s.metrics.observe(c.Tool, c.Transport, code, took)
	s.log.Log(ctx, level, "tool call", attrs...)
	if s.deps.Audit == nil {
		return
	}
	e := audit.Entry{
		ToolName:       c.Tool,
		ConversationID: o.conversation,
		Arguments:      validJSON(c.Args),
		LatencyMS:      int(took.Milliseconds()),
		Transport:      c.Transport,
		APIKey:         c.Identity.keyName(),
		Subject:        c.Identity.subject(),
		SessionID:      c.Session,
		ClientName:     c.Client.Name,
		ClientVersion:  c.Client.Version,
		JobID:          o.job,
		CreatedAt:      c.Start,
		Trace:          trace.SpanContextFromContext(ctx),
	}
	switch {
	case protoErr != nil:
		e.ErrorCode, e.Error = "PROTOCOL_ERROR", protoErr.Error()
	case o.failure != nil:
		body, _ := json.Marshal(envelope{o.failure})
		e.ErrorCode, e.Error = o.failure.Code, string(body)
	case o.result != nil:
		r := o.result
		if a, ok := r.(audited); ok {
			r = a.audited()
		}
		e.Result, _ = json.Marshal(r)
	}
	s.deps.Audit.Record(e)
}

// audited is a result that says what the audit keeps of it, when that is
// less than all of it (web pages' text a call returns, say).
type audited interface {
	audited() any
}

// validJSON returns raw if it is JSON, else raw as a JSON string, so a
// malformed call is still recorded.
func validJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || json.Valid(raw) {
		return raw
	}
	b, _ := json.Marshal(string(raw))
	return b
}

// clientOf names the client of a call: from the request's _meta (the
// 2026-07-28 revision sends it with every request) or else from the
// session's initialize.
func clientOf(req *mcp.CallToolRequest) clientInfo {
	if ci := req.ClientInfo(); ci != nil {
		return clientInfo{ci.Name, ci.Version}
	}
	return clientInfo{}
}
