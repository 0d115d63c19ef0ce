package searxng

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Sentinel errors. Every error of Search and Ping wraps exactly one of them
// (or the caller's context error), so callers test with errors.Is. A Pool
// that tried several instances returns their errors joined, so errors.Is
// matches each instance's.
var (
	// ErrUnreachable means no HTTP answer came back: connection refused,
	// DNS failure, TLS failure, connection lost mid-answer.
	ErrUnreachable = errors.New("searxng unreachable")
	// ErrTimeout means SearXNG did not answer in time: the client's timeout
	// or the caller's deadline passed.
	ErrTimeout = errors.New("searxng timed out")
	// ErrFormatDisabled means SearXNG answered 403, which it does when json
	// is not listed in search.formats of its settings.yml.
	ErrFormatDisabled = errors.New("searxng JSON format disabled")
	// ErrRateLimited means SearXNG answered 429, which its limiter
	// (server.limiter: true) does to clients it takes for bots.
	ErrRateLimited = errors.New("searxng rate limited the request")
	// ErrBadRequest means the request was invalid: SearXNG answered 400, or
	// the Request failed validation before it was sent.
	ErrBadRequest = errors.New("searxng rejected the request")
	// ErrStatus means SearXNG answered another non-2xx status.
	ErrStatus = errors.New("searxng answered an error status")
	// ErrBadResponse means the answer is not SearXNG JSON or exceeds the
	// size limit.
	ErrBadResponse = errors.New("unusable searxng answer")
)

// Error is the error of every Search and Ping of a Client that reached the
// point of talking to an instance. Its message says what happened in words
// a model or user can act on and never names the instance, whose address
// is internal: Instance and Cause carry that for logs.
type Error struct {
	// Instance is the instance's base URL, password redacted.
	Instance string
	// Err is the classified failure: it wraps one of the sentinel errors,
	// a *StatusError, or the caller's context error.
	Err error
	// Cause is the underlying transport error when there is one; its text
	// may name internal addresses and belongs in logs only.
	Cause error
}

// Error returns Err's message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// LogValue lets slog record the instance and cause with the message.
func (e *Error) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("msg", e.Err.Error()), slog.String("instance", e.Instance)}
	if e.Cause != nil {
		attrs = append(attrs, slog.String("cause", e.Cause.Error()))
	}
	return slog.GroupValue(attrs...)
}

// StatusError is the error for a non-2xx answer. It wraps ErrFormatDisabled
// (403), ErrRateLimited (429), ErrBadRequest (400) or ErrStatus (any other).
type StatusError struct {
	// StatusCode is the HTTP status SearXNG answered.
	StatusCode int
	// Detail is SearXNG's {"error": ...} message when it sent one, else the
	// page title or a short excerpt of the body.
	Detail string

	kind error
}

func newStatusError(code int, body []byte) *StatusError {
	e := &StatusError{StatusCode: code, Detail: errorDetail(body)}
	switch code {
	case http.StatusForbidden:
		e.kind = ErrFormatDisabled
	case http.StatusTooManyRequests:
		e.kind = ErrRateLimited
	case http.StatusBadRequest:
		e.kind = ErrBadRequest
	default:
		e.kind = ErrStatus
	}
	return e
}

// Error describes the failure and, where the fix lies in SearXNG's
// settings, says what to change.
func (e *StatusError) Error() string {
	status := fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	var hint string
	switch e.kind {
	case ErrFormatDisabled:
		hint = "add json to search.formats in SearXNG's settings.yml"
	case ErrRateLimited:
		hint = "SearXNG's limiter refused the request; for a private instance set server.limiter: false in settings.yml"
	default:
		hint = e.Detail
	}
	if hint == "" {
		return fmt.Sprintf("searxng: %v (%s)", e.kind, status)
	}
	return fmt.Sprintf("searxng: %v (%s): %s", e.kind, status, hint)
}

// Unwrap returns the sentinel error for the status.
func (e *StatusError) Unwrap() error { return e.kind }

// ErrorClass names the kind of err in one word, for logs, metrics labels
// and Pool's instance status: "unreachable", "timeout", "rate_limited",
// "format_disabled", "bad_request", "server_error" (5xx), "status" (another
// non-2xx answer), "bad_response", "canceled", or "other".
func ErrorClass(err error) string {
	var se *StatusError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, ErrUnreachable):
		return "unreachable"
	case errors.Is(err, ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, ErrFormatDisabled):
		return "format_disabled"
	case errors.Is(err, ErrBadRequest):
		return "bad_request"
	case errors.As(err, &se) && se.StatusCode >= 500:
		return "server_error"
	case errors.Is(err, ErrStatus):
		return "status"
	case errors.Is(err, ErrBadResponse):
		return "bad_response"
	}
	return "other"
}

// networkWords describes a transport failure without the addresses its
// text carries.
func networkWords(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "its host name was not found"
		}
		return "its host name could not be resolved"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to its host"
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr), errors.As(err, &recErr):
		return "TLS handshake failed"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed before the answer was complete"
	}
	return "network error"
}

// Retryable reports whether trying the same search again later may succeed:
// true when SearXNG was unreachable, timed out, rate limited the request or
// answered 5xx; false for a cancelled call, an invalid request, a disabled
// JSON format or an unusable answer, which a retry cannot fix.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrUnreachable) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrRateLimited) {
		return true
	}
	var se *StatusError
	return errors.As(err, &se) && se.StatusCode >= 500
}

// excerptRunes bounds the body text quoted in error messages.
const excerptRunes = 200

// errorDetail extracts the reason from an error answer: SearXNG's JSON
// {"error": ...}, else an HTML page's title, else the start of the body.
func errorDetail(body []byte) string {
	var e struct {
		Error any `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil {
		if s, ok := e.Error.(string); ok {
			return truncate(s)
		}
		b, _ := json.Marshal(e.Error)
		return truncate(string(b))
	}
	if t := htmlTitle(body); t != "" {
		return t
	}
	return excerpt(body)
}

func htmlTitle(body []byte) string {
	lower := bytes.ToLower(body)
	start := bytes.Index(lower, []byte("<title>"))
	if start < 0 {
		return ""
	}
	start += len("<title>")
	end := bytes.Index(lower[start:], []byte("</title>"))
	if end < 0 {
		return ""
	}
	return excerpt(body[start : start+end])
}

// excerpt returns the start of body on one line, for messages.
func excerpt(body []byte) string {
	// Only the start is shown: do not scan a multi-megabyte body for it.
	if len(body) > 4*excerptRunes {
		body = body[:4*excerptRunes]
	}
	return truncate(strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "\uFFFD")), " "))
}

func truncate(s string) string {
	if utf8.RuneCountInString(s) <= excerptRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == excerptRunes {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
