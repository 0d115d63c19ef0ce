// Package searxng is a typed client for the JSON API of a SearXNG metasearch
// instance. It knows HTTP and SearXNG, not MCP: callers translate its results
// and errors for their own protocol.
package searxng

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Defaults used by New.
const (
	// DefaultTimeout bounds one request unless WithTimeout says otherwise.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxBodyBytes caps an answer unless WithMaxBodyBytes says
	// otherwise; a page of SearXNG results is typically 10-50 KiB.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultUserAgent is sent unless WithUserAgent says otherwise.
	DefaultUserAgent = "mcpsearch-searxng-client/1"
)

// errorBodyBytes caps how much of an error answer is read to build a message.
const errorBodyBytes = 64 << 10

// Client queries one SearXNG instance. It is safe for concurrent use and
// reuses one *http.Client, so connections are kept alive between searches.
type Client struct {
	searchURL string
	healthURL string
	display   string // base URL with any password redacted, for messages
	// instance is the base URL without credentials, host and port its
	// server's: what a search's span names.
	instance string
	host     string
	port     int

	http      *http.Client
	timeout   time.Duration
	maxBody   int64
	userAgent string

	optErr error
}

// Option configures a Client in New.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with h instead of its own
// *http.Client. The per-request timeout of WithTimeout applies on top of h's.
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) {
		if h == nil {
			c.setOptErr(errors.New("searxng: WithHTTPClient: nil *http.Client"))
			return
		}
		c.http = h
	}
}

// WithTimeout bounds each request, from sending it to reading the whole
// answer, to d (default DefaultTimeout). d must be positive.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d <= 0 {
			c.setOptErr(fmt.Errorf("searxng: WithTimeout(%v): timeout must be positive", d))
			return
		}
		c.timeout = d
	}
}

// WithMaxBodyBytes caps the size of a search answer at n bytes (default
// DefaultMaxBodyBytes); a larger answer fails with ErrBadResponse. n must be
// positive.
func WithMaxBodyBytes(n int64) Option {
	return func(c *Client) {
		if n <= 0 {
			c.setOptErr(fmt.Errorf("searxng: WithMaxBodyBytes(%d): limit must be positive", n))
			return
		}
		c.maxBody = n
	}
}

// WithUserAgent sets the User-Agent header of every request (default
// DefaultUserAgent). ua must not be empty.
func WithUserAgent(ua string) Option {
	return func(c *Client) {
		if strings.TrimSpace(ua) == "" {
			c.setOptErr(errors.New("searxng: WithUserAgent: empty user agent"))
			return
		}
		c.userAgent = ua
	}
}

func (c *Client) setOptErr(err error) {
	if c.optErr == nil {
		c.optErr = err
	}
}

// New returns a Client for the SearXNG instance at baseURL, for example
// "http://localhost:8888" or "https://example.org/searxng/" when SearXNG is
// served under a path prefix. baseURL must be an absolute http or https URL
// with a host and without a query or fragment.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("searxng: base URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("searxng: base URL %q: scheme must be http or https", baseURL)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("searxng: base URL %q: no host", baseURL)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("searxng: base URL %q: must not have a query or fragment", baseURL)
	}
	// Normalise the path prefix to no trailing slash so that "/search" and
	// "/healthz" join the same way with or without one.
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""

	bare := *u
	bare.User = nil
	port, _ := strconv.Atoi(u.Port())
	if port == 0 {
		port = map[string]int{"http": 80, "https": 443}[u.Scheme]
	}
	c := &Client{
		searchURL: u.JoinPath("search").String(),
		healthURL: u.JoinPath("healthz").String(),
		display:   u.Redacted(),
		instance:  bare.String(),
		host:      u.Hostname(),
		port:      port,
		timeout:   DefaultTimeout,
		maxBody:   DefaultMaxBodyBytes,
		userAgent: DefaultUserAgent,
	}
	for _, opt := range opts {
		opt(c)
	}
	if c.optErr != nil {
		return nil, c.optErr
	}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Every request goes to one host: keep enough idle connections for
		// concurrent searches instead of the default two.
		t.MaxIdleConnsPerHost = 32
		c.http = &http.Client{Transport: t}
	}
	return c, nil
}

// BaseURL returns the instance's base URL as normalised by New (no trailing
// slash), with any password replaced by "xxxxx" so it is safe to log.
func (c *Client) BaseURL() string { return c.display }

// Request is one search.
type Request struct {
	// Query is the search text; it must not be blank.
	Query string
	// Categories restricts the search to SearXNG categories such as
	// "general", "news" or "it". Empty means the instance's default.
	Categories []string
	// Language is a language code such as "en" or "de-CH". Empty leaves the
	// parameter out; "auto" lets SearXNG detect it.
	Language string
	// TimeRange is "", "day", "week", "month" or "year".
	TimeRange string
	// Page is the result page; 0 and 1 both mean the first page.
	Page int
	// SafeSearch is 0 (off), 1 (moderate) or 2 (strict); nil leaves the
	// instance's default.
	SafeSearch *int
	// IncludeDomains restricts results to these domains and their
	// subdomains, for example "go.dev". The query SearXNG receives gets
	// "site:go.dev" (several domains: "site:a.org OR site:b.org", which the
	// engines that understand site: read as one alternative), and results
	// from other hosts are dropped, since not every engine honours site:.
	// Entries are normalised by NormalizeDomain; at most MaxDomains.
	IncludeDomains []string
	// ExcludeDomains drops results from these domains and their
	// subdomains; the query gets "-site:b.org" for each. At most
	// MaxDomains.
	ExcludeDomains []string
}

// validate checks what SearXNG would reject, so a bad call fails without a
// round trip and with a precise message.
func (r Request) validate() error {
	if strings.TrimSpace(r.Query) == "" {
		return errors.New("query is empty")
	}
	switch r.TimeRange {
	case "", "day", "week", "month", "year":
	default:
		return fmt.Errorf("time range %q is not one of day, week, month, year", r.TimeRange)
	}
	if r.Page < 0 {
		return fmt.Errorf("page %d is negative", r.Page)
	}
	if r.SafeSearch != nil && (*r.SafeSearch < 0 || *r.SafeSearch > 2) {
		return fmt.Errorf("safe search %d is not 0, 1 or 2", *r.SafeSearch)
	}
	for _, list := range []struct {
		name    string
		domains []string
	}{{"include", r.IncludeDomains}, {"exclude", r.ExcludeDomains}} {
		if len(list.domains) > MaxDomains {
			return fmt.Errorf("%d %s domains: at most %d are allowed", len(list.domains), list.name, MaxDomains)
		}
		for _, d := range list.domains {
			if _, err := NormalizeDomain(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// values encodes the request as SearXNG's query parameters.
func (r Request) values() url.Values {
	v := url.Values{"q": {r.query()}, "format": {"json"}}
	if cats := joinCategories(r.Categories); cats != "" {
		v.Set("categories", cats)
	}
	if r.Language != "" {
		v.Set("language", r.Language)
	}
	if r.TimeRange != "" {
		v.Set("time_range", r.TimeRange)
	}
	if r.Page > 1 {
		v.Set("pageno", strconv.Itoa(r.Page))
	}
	if r.SafeSearch != nil {
		v.Set("safesearch", strconv.Itoa(*r.SafeSearch))
	}
	return v
}

func joinCategories(cats []string) string {
	var b strings.Builder
	for _, c := range cats {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c)
	}
	return b.String()
}

// Search runs one search and returns SearXNG's answer. Errors are an
// *Error wrapping one of the package's sentinel errors (ErrUnreachable,
// ErrTimeout, ...) or the caller's context error when ctx was cancelled;
// an invalid request fails with ErrBadRequest before anything is sent.
// With domain restrictions, results outside them are dropped (see
// FilterDomains).
func (c *Client) Search(ctx context.Context, r Request) (out *Response, err error) {
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("searxng: %w: %v", ErrBadRequest, err)
	}
	ctx, span := telemetry.Start(ctx, "searxng search", trace.SpanKindClient)
	status := 0
	defer func() { c.endSpan(span, status, out, err) }()
	reqCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	resp, err := c.do(reqCtx, c.searchURL+"?"+r.values().Encode(), "application/json")
	if err != nil {
		return nil, c.transportError(ctx, reqCtx, err)
	}
	defer resp.Body.Close()
	status = resp.StatusCode

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, err := readLimited(resp.Body, errorBodyBytes)
		if err != nil && !errors.Is(err, errTooLarge) {
			return nil, c.transportError(ctx, reqCtx, err)
		}
		return nil, &Error{Instance: c.display, Err: newStatusError(resp.StatusCode, body)}
	}

	// A declared length over the cap fails before anything is read.
	body, err := []byte(nil), errTooLarge
	if resp.ContentLength <= c.maxBody {
		body, err = readLimited(resp.Body, c.maxBody)
	}
	if errors.Is(err, errTooLarge) {
		return nil, &Error{Instance: c.display, Err: fmt.Errorf("searxng: %w: answer larger than %d bytes", ErrBadResponse, c.maxBody)}
	}
	if err != nil {
		return nil, c.transportError(ctx, reqCtx, fmt.Errorf("reading answer: %w", err))
	}
	out, err = decodeResponse(body)
	if err != nil {
		return nil, &Error{Instance: c.display, Err: fmt.Errorf("searxng: %w: %v (Content-Type %q, body %q)",
			ErrBadResponse, err, resp.Header.Get("Content-Type"), excerpt(body))}
	}
	if out.Query == "" {
		out.Query = r.Query
	}
	if len(r.IncludeDomains) > 0 || len(r.ExcludeDomains) > 0 {
		out.Results = FilterDomains(out.Results, r.IncludeDomains, r.ExcludeDomains)
	}
	return out, nil
}

// endSpan ends the span of one search: the instance, the status it
// answered and the results it gave, or the class of its failure.
func (c *Client) endSpan(span trace.Span, status int, out *Response, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.InstanceKey.String(c.instance), telemetry.ServerAddress(c.host), telemetry.ServerPortKey.Int(c.port),
		telemetry.HTTPMethodKey.String(http.MethodGet))
	if status != 0 {
		span.SetAttributes(telemetry.HTTPStatusKey.Int(status))
	}
	if err != nil {
		telemetry.Fail(span, ErrorClass(err))
		return
	}
	span.SetAttributes(telemetry.ResultsKey.Int(len(out.Results)))
}

// Ping checks that the instance answers HTTP, for a readiness probe. It asks
// SearXNG's /healthz; any answer below 500 counts as reachable because older
// releases and some proxies do not serve that path, while a 5xx usually
// means a proxy could not reach SearXNG behind it.
func (c *Client) Ping(ctx context.Context) error {
	reqCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	resp, err := c.do(reqCtx, c.healthURL, "text/plain")
	if err != nil {
		return c.transportError(ctx, reqCtx, err)
	}
	defer resp.Body.Close()
	body, err := readLimited(resp.Body, errorBodyBytes)
	if err != nil && !errors.Is(err, errTooLarge) {
		return c.transportError(ctx, reqCtx, err)
	}
	if resp.StatusCode >= 500 {
		return &Error{Instance: c.display, Err: newStatusError(resp.StatusCode, body)}
	}
	return nil
}

func (c *Client) do(ctx context.Context, rawURL, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.userAgent)
	return c.http.Do(req)
}

// transportError classifies a failure to get an answer. ctx is the caller's
// context and reqCtx the one bounded by the client's timeout: the caller
// cancelling is not a SearXNG problem and is reported as such.
func (c *Client) transportError(ctx, reqCtx context.Context, err error) error {
	// url.Error repeats the full request URL, search terms included.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	e := &Error{Instance: c.display, Cause: err}
	var ne net.Error
	switch ctxErr := ctx.Err(); {
	case ctxErr != nil && errors.Is(ctxErr, context.DeadlineExceeded):
		e.Err = fmt.Errorf("searxng: %w: the call's time limit passed before the search service answered: %w", ErrTimeout, ctxErr)
	case ctxErr != nil:
		if cause := context.Cause(ctx); cause != nil && cause != ctxErr {
			e.Err = fmt.Errorf("searxng: %w (%v)", ctxErr, cause)
		} else {
			e.Err = fmt.Errorf("searxng: %w", ctxErr)
		}
	case reqCtx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		e.Err = fmt.Errorf("searxng: %w: no complete answer within %v", ErrTimeout, c.timeout)
	default:
		e.Err = fmt.Errorf("searxng: %w: %s", ErrUnreachable, networkWords(err))
	}
	return e
}

var errTooLarge = errors.New("body too large")

// readLimited reads at most limit bytes of r. When r holds more it returns
// what fits and errTooLarge.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return b, err
	}
	if int64(len(b)) > limit {
		return b[:limit], errTooLarge
	}
	return b, nil
}
