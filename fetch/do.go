package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Do sends req, a GET or HEAD request the caller shaped (conditional
// headers such as If-None-Match and If-Modified-Since, an Accept of its
// own), under the same rules as Download: the URL and every redirect are
// checked against the address policy before anything is sent to them,
// Options.MaxRedirects bounds the redirects, and Options.Timeout bounds the
// whole exchange, the reading of the body included. The fragment of the
// URL is dropped; User-Agent and Accept are set when req has none.
//
// Unlike Download, Do returns every answer the server gives, whatever its
// status (304 Not Modified, 404, 429 with its Retry-After header, ...), and
// the body unread. A 2xx answer whose Content-Length exceeds
// Options.MaxBodyBytes fails at once with ErrTooLarge; otherwise reading
// more than Options.MaxBodyBytes bytes of the body fails with an error
// wrapping ErrTooLarge, and a read cut by the time limit fails with
// ErrTimeout. The cache is not used. The caller closes the body, which
// releases the time limit's resources.
//
// Errors wrap the package's sentinels (ErrInvalidURL, ErrBlocked,
// ErrTooManyRedirects, ErrTimeout, ErrUnreachable, ErrTooLarge) or the
// caller's context error.
func (c *Client) Do(ctx context.Context, req *http.Request) (*http.Response, error) {
	return c.DoLimit(ctx, req, c.opts.MaxBodyBytes)
}

// DoLimit is Do with a body limit of its own, maxBody bytes instead of
// Options.MaxBodyBytes, for the files that a protocol allows to be larger
// than a page (a sitemap may hold 50 MB). A maxBody of 0 or less sets no
// limit: the caller stops reading where it wants, and the time limit still
// bounds the exchange.
func (c *Client) DoLimit(ctx context.Context, req *http.Request, maxBody int64) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return nil, fmt.Errorf("fetch: %w: only GET and HEAD requests are sent, not %s", ErrInvalidURL, req.Method)
	}
	if req.URL == nil {
		return nil, fmt.Errorf("fetch: %w: the request has no URL", ErrInvalidURL)
	}
	u, err := parseURL(req.URL.String())
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	// The span ends when the body is closed, with the bytes read.
	ctx, span := startRequest(ctx, req.Method, u)
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	req = req.Clone(ctx)
	req.URL, req.Host = u, ""
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", c.opts.UserAgent)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", accept)
	}
	if err := c.checkRequest(req); err != nil {
		cancel()
		err = fmt.Errorf("fetch %s: %w", u.Redacted(), err)
		endRequest(span, 0, nil, err)
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		err = c.transportError(ctx, u, err)
		endRequest(span, 0, nil, err)
		return nil, err
	}
	if maxBody <= 0 {
		maxBody = math.MaxInt64
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 && resp.ContentLength > maxBody {
		resp.Body.Close()
		cancel()
		err = c.tooLargeThan(u, maxBody)
		endRequest(span, resp.StatusCode, nil, err)
		return nil, err
	}
	if span.IsRecording() {
		span.SetAttributes(telemetry.HTTPStatusKey.Int(resp.StatusCode))
	}
	resp.Body = &boundedBody{body: resp.Body, left: maxBody, limit: maxBody, ctx: ctx, cancel: cancel, c: c, u: u, span: span}
	return resp, nil
}

// accept is the Accept header of Download, and of Do when the caller sets
// none: the formats that are read, HTML first.
var accept = "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,application/pdf;q=0.8," +
	extract.MIMEDOCX + ";q=0.8," + extract.MIMEPPTX + ";q=0.8," + extract.MIMEXLSX + ";q=0.8," + extract.MIMEEPUB + ";q=0.8,text/csv;q=0.8,*/*;q=0.1"

// boundedBody is the body Do returns: it fails past the size limit, turns
// read failures into the package's errors, and ends the time limit when
// closed.
type boundedBody struct {
	body   io.ReadCloser
	left   int64
	limit  int64
	ctx    context.Context
	cancel context.CancelFunc
	c      *Client
	u      *url.URL
	err    error
	// span is the request's, ended by Close.
	span trace.Span
	read int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left <= 0 {
		// At the limit: one more byte means the body is larger.
		var one [1]byte
		n, err := b.body.Read(one[:])
		if n > 0 {
			b.err = b.c.tooLargeThan(b.u, b.limit)
			return 0, b.err
		}
		if err != nil {
			return 0, b.fail(err)
		}
		return 0, nil
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	b.read += int64(n)
	if err != nil {
		return n, b.fail(err)
	}
	return n, nil
}

// fail keeps io.EOF as it is and classifies any other error once.
func (b *boundedBody) fail(err error) error {
	if errors.Is(err, io.EOF) {
		return err
	}
	b.err = b.c.transportError(b.ctx, b.u, fmt.Errorf("reading body: %w", err))
	return b.err
}

func (b *boundedBody) Close() error {
	err := b.body.Close()
	b.cancel()
	if b.span.IsRecording() {
		b.span.SetAttributes(telemetry.HTTPBodySizeKey.Int64(b.read))
		if b.err != nil {
			telemetry.Fail(b.span, errorClass(b.err))
		}
	}
	b.span.End()
	return err
}
