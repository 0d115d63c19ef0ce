package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Error codes of the contract. A tool failure is a tool result with isError
// set whose text is {"error":{"code":...,"message":...,"retryable":...}};
// the HTTP routes answer the same body with the matching status.
const (
	CodeToolError   = "TOOL_ERROR"
	CodeRateLimited = "RATE_LIMITED"
	CodeTimeout     = "TIMEOUT"
	CodeAuthError   = "AUTH_ERROR"
)

// ToolError is the contract's error body. Status is the HTTP status the
// same failure answers with on the HTTP routes; it is not part of the body.
type ToolError struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Retryable    bool   `json:"retryable"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	Status       int    `json:"-"`
	// cause is the error a clean Message stands for, whose text names what
	// only the operator should see (database users, names, addresses): it
	// goes to the log once, never to the caller.
	cause error
	// challenge, when set, is the WWW-Authenticate of the refusal: where
	// to sign in and which scope is missing.
	challenge string
}

func (e *ToolError) Error() string { return e.Code + ": " + e.Message }

// invalidArgs is returned by handlers for arguments a model must change;
// the message says what to send instead.
type invalidArgs struct{ msg string }

func (e *invalidArgs) Error() string { return e.msg }

func badArg(format string, args ...any) error {
	return &invalidArgs{msg: fmt.Sprintf(format, args...)}
}

// errForbiddenConversation is returned when a scoped key or token names a
// conversation outside its scope.
var errForbiddenConversation = errors.New("this API key or access token may not access that conversation")

// errNoKey and errBadKey are the failures of the bearer key check.
var (
	errNoKey  = errors.New("missing API key: send Authorization: Bearer <key>")
	errBadKey = errors.New("invalid API key")
)

// rateLimited is a call refused by a token bucket, or, unchecked, refused
// because the shared buckets could not be read (MCP_rate_limit_on_db_failure
// closed).
type rateLimited struct {
	tool      string
	wait      time.Duration
	unchecked bool
	// playground marks a call of the web page's search playground, which
	// spends a budget of its own.
	playground bool
}

func (e *rateLimited) Error() string {
	if e.playground && !e.unchecked {
		return fmt.Sprintf("the search playground's limit (MCP_ui_search_per_minute) is spent: retry in %s", e.wait.Round(time.Second))
	}
	if e.unchecked {
		return fmt.Sprintf("the rate limit of %s cannot be checked right now: retry in %s", e.tool, e.wait.Round(time.Millisecond))
	}
	return fmt.Sprintf("rate limit of %s exceeded: retry in %s", e.tool, e.wait.Round(time.Millisecond))
}

// classify maps any error of a tool call or HTTP route to the contract's
// error: code, HTTP status, whether calling again may succeed, and the
// message for the caller. It is the one table of the server; MCP results,
// the upload API, auth failures and every other route use it. The failures
// of the tools' backends are declared with the tools (tool.failures).
func classify(ctx context.Context, err error) *ToolError {
	var (
		te  *ToolError
		ia  *invalidArgs
		rl  *rateLimited
		mbe *http.MaxBytesError
	)
	e := func(code string, status int, retryable bool, msg string) *ToolError {
		return &ToolError{Code: code, Status: status, Retryable: retryable, Message: msg}
	}
	switch {
	case errors.As(err, &te):
		if te.Status == 0 {
			c := *te
			c.Status = http.StatusInternalServerError
			return &c
		}
		return te
	case errors.As(err, &rl):
		t := e(CodeRateLimited, http.StatusTooManyRequests, true, rl.Error())
		t.RetryAfterMS = retryAfter(rl.wait)
		return t
	case errors.Is(err, errNoKey), errors.Is(err, errBadKey):
		return e(CodeAuthError, http.StatusUnauthorized, false, err.Error())
	case errors.Is(err, errForbiddenConversation):
		return e(CodeAuthError, http.StatusForbidden, false, errForbiddenConversation.Error())
	case errors.As(err, &ia):
		return e(CodeToolError, http.StatusBadRequest, false, "invalid arguments: "+ia.msg)
	case errors.As(err, &mbe):
		return e(CodeToolError, http.StatusRequestEntityTooLarge, false, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return e(CodeTimeout, http.StatusGatewayTimeout, true, err.Error())
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return e(CodeToolError, 499, true, "the call was cancelled")
	}
	for _, d := range catalogue() {
		for _, f := range d.errorCases() {
			if f.matches(err) {
				return f.toolError(err)
			}
		}
	}
	return e(CodeToolError, http.StatusInternalServerError, false, err.Error())
}

// failure maps one kind of a backend's errors to the contract: the errors
// it matches, the HTTP status, whether calling again may help, and what the
// caller reads.
type failure struct {
	// is lists the errors matched (errors.Is); as matches others, such as
	// typed errors.
	is []error
	as func(err error) bool
	// code is the contract's code; "" means TOOL_ERROR.
	code   string
	status int
	// retryable says whether the same call may succeed later (nil: never);
	// retryStatus, when set, is the status of a retryable one.
	retryable   func(err error) bool
	retryStatus int
	// prefix and suffix frame the error's text in the message.
	prefix, suffix string
	// clean, when set, is the whole message: the error's text names what
	// only the operator should see, and goes to the log instead.
	clean string
}

// always is the retryable of failures that may pass.
func always(error) bool { return true }

func (f failure) matches(err error) bool {
	for _, target := range f.is {
		if errors.Is(err, target) {
			return true
		}
	}
	return f.as != nil && f.as(err)
}

func (f failure) toolError(err error) *ToolError {
	te := &ToolError{Code: cmp.Or(f.code, CodeToolError), Status: f.status, Message: f.prefix + err.Error() + f.suffix}
	if f.retryable != nil && f.retryable(err) {
		te.Retryable = true
		te.Status = cmp.Or(f.retryStatus, f.status)
	}
	if f.clean != "" {
		te.Message, te.cause = f.clean, err
	}
	return te
}

// envelope is the contract's error body.
type envelope struct {
	Error *ToolError `json:"error"`
}

// errorBody is the text of an error result: the contract's JSON body.
func errorBody(te *ToolError) string {
	body, _ := json.Marshal(envelope{te})
	return string(body)
}

// statelessRevision is the first protocol revision without sessions, whose
// results carry a resultType.
const statelessRevision = "2026-07-28"

// newErrorResult renders a ToolError as the tool result MCP clients receive,
// for a call refused before the SDK handled it. Results of the 2026-07-28
// revision must say "resultType": "complete"; the SDK sets that field only
// on results it builds and offers no setter, so such a result is decoded
// from its JSON form.
func newErrorResult(req *mcp.CallToolRequest, te *ToolError) *mcp.CallToolResult {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: errorBody(te)}}, IsError: true}
	if req == nil || req.ProtocolVersion() < statelessRevision {
		return res
	}
	b, err := json.Marshal(res)
	if err != nil {
		return res
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return res
	}
	fields["resultType"] = json.RawMessage(`"complete"`)
	var out mcp.CallToolResult
	if b, err = json.Marshal(fields); err != nil || json.Unmarshal(b, &out) != nil {
		return res
	}
	return &out
}

// writeError answers an HTTP request with the contract's error body and
// the status of the error's class.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	te := classifyRequest(r, err)
	errorHeaders(w, te)
	writeJSON(w, te.Status, envelope{te})
}

// classifyRequest is classify for an HTTP route: the cause a clean message
// leaves out goes to the request's log line.
func classifyRequest(r *http.Request, err error) *ToolError {
	te := classify(r.Context(), err)
	noteCause(r.Context(), te.cause)
	return te
}

// errorHeaders sets the headers an error's class calls for: the
// credential to send, or when to call again.
func errorHeaders(w http.ResponseWriter, te *ToolError) {
	switch {
	case te.challenge != "":
		w.Header().Set("WWW-Authenticate", te.challenge)
	case te.Status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcpsearch", error="invalid_token"`)
	case te.RetryAfterMS > 0:
		w.Header().Set("Retry-After", strconv.FormatInt((te.RetryAfterMS+999)/1000, 10))
	case te.Retryable && te.Status == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "5")
	}
}

func retryAfter(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > 0 && ms == 0 {
		ms = 1
	}
	return ms
}
