package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/audit"
)

// toolMiddleware wraps every tools/call: rate limit, per-call timeout,
// panic recovery and mapping of every failure to the contract's error
// body. Adding a tool needs no change here.
func (s *Server) toolMiddleware(transport string, id identity) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return s.toolHandler(transport, id, next)
	}
}

func (s *Server) toolHandler(transport string, id identity, next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		s.active.Add(1)
		defer s.active.Add(-1)
		ctx = withIdentity(ctx, id)
		if method == "resources/list" && s.docsOn() {
			// Files are listed from the database, not registered one by one.
			return s.listFileResources(ctx, id)
		}
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || method != "tools/call" {
			return next(ctx, method, req)
		}
		tool := call.Params.Name
		start := s.now()
		res, err := s.callTool(ctx, tool, call.Params.Arguments, func(ctx context.Context) (mcp.Result, error) {
			return next(ctx, method, req)
		})
		took := time.Since(start)
		s.logCall(ctx, transport, call, res, err, took)
		s.audit(transport, id, call, res, err, start, took)
		return res, err
	}
}

func (s *Server) callTool(ctx context.Context, tool string, args json.RawMessage, next func(context.Context) (mcp.Result, error)) (res mcp.Result, err error) {
	timeout, known := s.timeoutFor(tool)
	if !known {
		// The SDK answers unknown tools with a JSON-RPC error naming the tool.
		return next(ctx)
	}
	if ok, wait := s.limits.allow(tool, s.now()); !ok {
		return errorResult(&ToolError{
			Code:         CodeRateLimited,
			Message:      fmt.Sprintf("rate limit of %s exceeded: retry in %s", tool, wait.Round(time.Millisecond)),
			Retryable:    true,
			RetryAfterMS: retryAfter(wait),
		}), nil
	}
	// A key limited to some conversations touches no data of others: any
	// tool argument named conversation_id is checked before the tool runs.
	if conv := conversationArg(args); conv != "" && !identityFrom(ctx).allows(conv) {
		return errorResult(toolError(ctx, errForbiddenConversation)), nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("tool panicked", "tool", tool, "panic", p, "stack", string(debug.Stack()))
			res, err = errorResult(&ToolError{Code: CodeToolError, Message: "internal error in " + tool + "; the server keeps running"}), nil
		}
	}()
	res, err = next(ctx)
	if err != nil {
		return res, err
	}
	ctr, ok := res.(*mcp.CallToolResult)
	if !ok || !ctr.IsError {
		return res, nil
	}
	cause := ctr.GetError()
	if cause == nil {
		cause = errors.New(textOf(ctr))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(cause, context.DeadlineExceeded) {
		cause = fmt.Errorf("%s did not finish within %s: %w", tool, timeout, context.DeadlineExceeded)
	}
	if isSchemaError(cause) {
		cause = badArg("%s (see the tool's inputSchema)", cause.Error())
	}
	return errorResult(toolError(ctx, cause)), nil
}

// conversationArg returns the conversation_id argument of a call, if any.
func conversationArg(args json.RawMessage) string {
	var a struct {
		ConversationID any `json:"conversation_id"`
	}
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	s, _ := a.ConversationID.(string)
	return strings.TrimSpace(s)
}

// isSchemaError recognises the SDK's own argument validation failures,
// which reach us as plain errors.
func isSchemaError(err error) bool {
	var ia *invalidArgs
	var te *ToolError
	if errors.As(err, &ia) || errors.As(err, &te) {
		return false
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	msg := err.Error()
	return errors.As(err, &syn) || errors.As(err, &typ) ||
		strings.Contains(msg, "validating \"arguments\"") || strings.Contains(msg, "unmarshal")
}

func textOf(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return "tool failed"
}

// errorCode reads the contract code back out of an error result, for logs
// and metrics.
func errorCode(r *mcp.CallToolResult) string {
	var body struct {
		Error ToolError `json:"error"`
	}
	if err := json.Unmarshal([]byte(textOf(r)), &body); err != nil {
		return CodeToolError
	}
	return body.Error.Code
}

func (s *Server) logCall(ctx context.Context, transport string, call *mcp.CallToolRequest, res mcp.Result, err error, took time.Duration) {
	attrs := []any{"tool", call.Params.Name, "ms", took.Milliseconds(), "transport", transport,
		"request_id", callRequestID(call)}
	if ss := call.Session; ss != nil && ss.ID() != "" {
		attrs = append(attrs, "session", ss.ID())
	}
	level := slog.LevelInfo
	r, _ := res.(*mcp.CallToolResult)
	outcome := "ok"
	switch {
	case err != nil:
		level = slog.LevelWarn
		outcome = "protocol_error"
		attrs = append(attrs, "outcome", outcome, "error", err.Error())
	case r != nil && r.IsError:
		level = slog.LevelWarn
		outcome = errorCode(r)
		attrs = append(attrs, "outcome", outcome, "error", textOf(r))
	default:
		attrs = append(attrs, "outcome", outcome)
	}
	s.metrics.observe(call.Params.Name, transport, outcome, took)
	s.log.Log(ctx, level, "tool call", attrs...)
}

// audit records one call, whatever its outcome.
func (s *Server) audit(transport string, id identity, call *mcp.CallToolRequest, res mcp.Result, err error, start time.Time, took time.Duration) {
	if s.deps.Audit == nil {
		return
	}
	e := audit.Entry{
		ToolName:       call.Params.Name,
		ConversationID: conversationArg(call.Params.Arguments),
		Arguments:      validJSON(call.Params.Arguments),
		LatencyMS:      int(took.Milliseconds()),
		Transport:      transport,
		APIKey:         id.name(),
		CreatedAt:      start,
	}
	if ss := call.Session; ss != nil {
		e.SessionID = ss.ID()
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
			e.ClientName, e.ClientVersion = p.ClientInfo.Name, p.ClientInfo.Version
		}
	}
	r, _ := res.(*mcp.CallToolResult)
	switch {
	case err != nil:
		e.ErrorCode, e.Error = "PROTOCOL_ERROR", err.Error()
	case r == nil:
	case r.IsError:
		e.ErrorCode, e.Error = errorCode(r), textOf(r)
	default:
		e.Result = resultJSON(r)
	}
	s.deps.Audit.Record(e)
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

// resultJSON is what the audit stores of a successful result: its
// structured content, or its text when it has none.
func resultJSON(r *mcp.CallToolResult) json.RawMessage {
	if r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			return b
		}
	}
	b, _ := json.Marshal(map[string]string{"text": textOf(r)})
	return b
}
