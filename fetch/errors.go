package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// Sentinel errors. Every error of Get and Download wraps one of them, an
// *HTTPStatusError, or the caller's context error, so callers test with
// errors.Is and errors.As.
var (
	// ErrInvalidURL means the URL cannot be fetched as written: it does not
	// parse, has no host, or its scheme (or a redirect's) is not http or
	// https.
	ErrInvalidURL = errors.New("invalid URL")
	// ErrBlocked means the URL's host, or an address it resolves to, is in
	// a range refused by default (loopback, private, link-local, metadata,
	// ...). The error is a *BlockedError naming the address and its class.
	ErrBlocked = errors.New("address not allowed")
	// ErrUnsupportedType means the page is of a media type that is not
	// converted to text: HTML, PDF, Office (DOCX, PPTX, XLSX), OpenDocument,
	// EPUB, CSV, RTF, plain text and Markdown are; images are not.
	ErrUnsupportedType = errors.New("unsupported content type")
	// ErrTooLarge means the body exceeds the configured size limit.
	ErrTooLarge = errors.New("page too large")
	// ErrTimeout means no complete answer came within the time limit.
	ErrTimeout = errors.New("fetch timed out")
	// ErrUnreachable means no HTTP answer came back: DNS failure, refused
	// or reset connection, TLS failure.
	ErrUnreachable = errors.New("site unreachable")
	// ErrTooManyRedirects means the redirect chain exceeds the limit.
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrUnreadable means the body could not be turned into text: a PDF
	// that is corrupt or holds no text, or HTML the converter rejects.
	ErrUnreadable = errors.New("page content unreadable")
)

// BlockedError reports a refused address. It wraps ErrBlocked.
type BlockedError struct {
	// Host is the URL's host as written (a name or an address).
	Host string
	// Addr is the refused address: the literal in the URL or the address
	// the name resolved to.
	Addr netip.Addr
	// Class names the range, for example "loopback" or "private (RFC 1918)".
	Class string
}

// Error says which address was refused, why, and how an operator can
// permit it; the text is meant to be shown to whoever asked for the page.
func (e *BlockedError) Error() string {
	what := e.Addr.String()
	if e.Host != "" && e.Host != what {
		what = fmt.Sprintf("%s (address %s)", e.Host, e.Addr)
	}
	return fmt.Sprintf("%v: %s is a %s address; pages on loopback, private, link-local and cloud metadata "+
		"addresses are not fetched unless the server's operator adds the host or its network to the fetch allow-list",
		ErrBlocked, what, e.Class)
}

// Unwrap returns ErrBlocked.
func (e *BlockedError) Unwrap() error { return ErrBlocked }

// HTTPStatusError reports an answer with a status outside 2xx (after
// redirects were followed).
type HTTPStatusError struct {
	// Status is the HTTP status code.
	Status int
	// URL is the address that answered it, after redirects.
	URL string
}

// Error names the status in words.
func (e *HTTPStatusError) Error() string {
	return fmt.Sprintf("%s answered HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
}

// Retryable reports whether trying the same fetch again later may succeed:
// true when the site was unreachable, timed out, or answered 5xx, 408
// (request timeout) or 429 (too many requests); false for other 4xx
// answers, refused addresses, unsupported types, oversized pages and
// cancelled calls, which a retry cannot fix.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrUnreachable) || errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var se *HTTPStatusError
	if errors.As(err, &se) {
		return se.Status >= 500 || se.Status == http.StatusTooManyRequests || se.Status == http.StatusRequestTimeout
	}
	return false
}

// failureKinds are the failures of reading a page, in the order Describe
// tells them apart: a class for spans and metrics, and words for a reader.
var failureKinds = []struct {
	err          error
	class, words string
}{
	{context.Canceled, "canceled", "cancelled"},
	{ErrTimeout, "timeout", "time-out"},
	{context.DeadlineExceeded, "timeout", "time-out"},
	{ErrUnreachable, "unreachable", "unreachable"},
	{ErrBlocked, "blocked", "refused address"},
	{ErrInvalidURL, "invalid_url", "invalid address"},
	{ErrTooManyRedirects, "too_many_redirects", "too many redirects"},
	{ErrTooLarge, "too_large", "too large"},
	{ErrUnsupportedType, "unsupported_type", "not a readable type"},
	{ErrUnreadable, "unreadable", "unreadable content"},
}

// Describe names the kind of a failure to read a page twice: class is one
// word for spans and metrics ("timeout", "404", "too_large", ...; "_OTHER"
// for an error of no known kind), words says it for a person or a model
// ("time-out", "404 Not Found", "too large (over 10485760 bytes)", "not a
// readable type (image/png)"; the error's text, cut, for one of no known
// kind).
func Describe(err error) (class, words string) {
	var se *HTTPStatusError
	if errors.As(err, &se) {
		return strconv.Itoa(se.Status), fmt.Sprintf("%d %s", se.Status, http.StatusText(se.Status))
	}
	for _, k := range failureKinds {
		if !errors.Is(err, k.err) {
			continue
		}
		words = k.words
		msg := err.Error()
		switch k.err {
		case ErrTooLarge:
			if _, limit, ok := strings.Cut(msg, "exceeds the limit of "); ok {
				words += " (over " + clipRunes(limit, 40) + ")"
			}
		case ErrUnsupportedType:
			if _, ct, ok := strings.Cut(msg, ErrUnsupportedType.Error()+": "); ok && ct != "" {
				ct, _, _ = strings.Cut(ct, ";")
				words += " (" + clipRunes(strings.TrimSpace(ct), 60) + ")"
			}
		}
		return k.class, words
	}
	return "_OTHER", clipRunes(err.Error(), 100)
}

func clipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
