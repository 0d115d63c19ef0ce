package embed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Errors returned by the providers, wrapped with detail; test with errors.Is.
var (
	// ErrUnavailable means the provider could not be reached or was
	// overloaded or failing (network error, HTTP 408, 429 or 5xx). The
	// providers have already retried; trying again later may succeed.
	ErrUnavailable = errors.New("embedding provider unavailable")
	// ErrRejected means the provider refused the request itself (HTTP 4xx
	// such as a bad API key, an unknown model or an input that is too long).
	// Retrying the same request will not help.
	ErrRejected = errors.New("embedding request rejected")
	// ErrBadResponse means the provider answered with something that is not
	// a valid embedding response for the request: malformed JSON, the wrong
	// number of vectors, vectors of the wrong length or bad indices.
	ErrBadResponse = errors.New("bad embedding response")
	// ErrConfig means a provider configuration is incomplete or invalid.
	ErrConfig = errors.New("invalid embedding configuration")
)

// StatusError is a non-success HTTP answer from a provider. It unwraps to
// ErrUnavailable for statuses worth retrying and to ErrRejected otherwise.
type StatusError struct {
	// Provider is "openai" or "ollama".
	Provider string
	// StatusCode is the HTTP status code.
	StatusCode int
	// Message is the provider's error message, or the start of the body
	// when it has none.
	Message string
	// RetryAfter is the wait the provider asked for in its Retry-After
	// header, or 0.
	RetryAfter time.Duration
}

// Error describes the status and the provider's message.
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s: HTTP %d %s", e.Provider, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Unwrap classifies the status as ErrUnavailable or ErrRejected.
func (e *StatusError) Unwrap() error {
	if retryableStatus(e.StatusCode) {
		return ErrUnavailable
	}
	return ErrRejected
}

// Retryable reports whether err is a transient provider failure (see
// ErrUnavailable), so that the same request may succeed later. Context
// cancellation, rejected requests, bad responses and configuration errors are
// not retryable.
func Retryable(err error) bool {
	return errors.Is(err, ErrUnavailable)
}

// retryableStatus reports whether an HTTP status signals a transient failure.
// 501 and 505 are permanent answers about the request itself.
func retryableStatus(code int) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return true
	case code == http.StatusNotImplemented, code == http.StatusHTTPVersionNotSupported:
		return false
	default:
		return code >= 500 && code <= 599
	}
}

// errorClass names the class of an embedder's failure, for its span: the
// HTTP status a provider answered, or the kind of failure.
func errorClass(err error) string {
	var se *StatusError
	switch {
	case errors.As(err, &se):
		return strconv.Itoa(se.StatusCode)
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrRejected):
		return "rejected"
	case errors.Is(err, ErrBadResponse):
		return "bad_response"
	}
	return "_OTHER"
}
