package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/searxng"
)

// Error codes of the contract. A tool failure is a tool result with isError
// set whose text is {"error":{"code":...,"message":...,"retryable":...}}.
const (
	CodeToolError   = "TOOL_ERROR"
	CodeRateLimited = "RATE_LIMITED"
	CodeTimeout     = "TIMEOUT"
	CodeAuthError   = "AUTH_ERROR"
)

// ToolError is the contract's error body.
type ToolError struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Retryable    bool   `json:"retryable"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

func (e *ToolError) Error() string { return e.Code + ": " + e.Message }

// invalidArgs is returned by handlers for arguments a model must change;
// the message says what to send instead.
type invalidArgs struct{ msg string }

func (e *invalidArgs) Error() string { return e.msg }

func badArg(format string, args ...any) error {
	return &invalidArgs{msg: fmt.Sprintf(format, args...)}
}

// toolError maps any error a tool call produced to the contract's error.
// It is the one place where domain errors become error codes.
func toolError(ctx context.Context, err error) *ToolError {
	var te *ToolError
	var ia *invalidArgs
	switch {
	case errors.As(err, &te):
		return te
	case errors.Is(err, errForbiddenConversation):
		return &ToolError{Code: CodeAuthError, Message: err.Error()}
	case errors.As(err, &ia):
		return &ToolError{Code: CodeToolError, Message: "invalid arguments: " + ia.msg}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, searxng.ErrTimeout):
		return &ToolError{Code: CodeTimeout, Message: err.Error(), Retryable: true}
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return &ToolError{Code: CodeToolError, Message: "the call was cancelled", Retryable: true}
	case isSearchError(err):
		return &ToolError{Code: CodeToolError, Message: err.Error(), Retryable: searxng.Retryable(err)}
	}
	if te := docsError(err); te != nil {
		return te
	}
	return &ToolError{Code: CodeToolError, Message: err.Error()}
}

func isSearchError(err error) bool {
	for _, e := range []error{searxng.ErrUnreachable, searxng.ErrFormatDisabled, searxng.ErrRateLimited,
		searxng.ErrBadRequest, searxng.ErrStatus, searxng.ErrBadResponse} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// errorResult renders a ToolError as the tool result clients receive.
func errorResult(te *ToolError) *mcp.CallToolResult {
	body, _ := json.Marshal(struct {
		Error *ToolError `json:"error"`
	}{te})
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}, IsError: true}
	return res
}

func retryAfter(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > 0 && ms == 0 {
		ms = 1
	}
	return ms
}
