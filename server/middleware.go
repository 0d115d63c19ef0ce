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
)

// toolMiddleware wraps every tools/call: rate limit, per-call timeout,
// panic recovery and mapping of every failure to the contract's error
// body. Adding a tool needs no change here.
func (s *Server) toolMiddleware(transport string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return s.toolHandler(transport, next)
	}
}

func (s *Server) toolHandler(transport string, next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || method != "tools/call" {
			return next(ctx, method, req)
		}
		tool := call.Params.Name
		start := s.now()
		res, err := s.callTool(ctx, tool, func(ctx context.Context) (mcp.Result, error) {
			return next(ctx, method, req)
		})
		s.logCall(ctx, transport, call, res, err, time.Since(start))
		return res, err
	}
}

func (s *Server) callTool(ctx context.Context, tool string, next func(context.Context) (mcp.Result, error)) (res mcp.Result, err error) {
	if _, known := s.timeouts[tool]; !known {
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
	ctx, cancel := context.WithTimeout(ctx, s.timeoutFor(tool))
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
		cause = fmt.Errorf("%s did not finish within %s: %w", tool, s.timeoutFor(tool), context.DeadlineExceeded)
	}
	if isSchemaError(cause) {
		cause = badArg("%s (see the tool's inputSchema)", cause.Error())
	}
	return errorResult(toolError(ctx, cause)), nil
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
	attrs := []any{"tool", call.Params.Name, "ms", took.Milliseconds(), "transport", transport}
	if ss := call.Session; ss != nil && ss.ID() != "" {
		attrs = append(attrs, "session", ss.ID())
	}
	level := slog.LevelInfo
	r, _ := res.(*mcp.CallToolResult)
	switch {
	case err != nil:
		level = slog.LevelWarn
		attrs = append(attrs, "outcome", "protocol_error", "error", err.Error())
	case r != nil && r.IsError:
		level = slog.LevelWarn
		attrs = append(attrs, "outcome", errorCode(r), "error", textOf(r))
	default:
		attrs = append(attrs, "outcome", "ok")
	}
	s.log.Log(ctx, level, "tool call", attrs...)
}
