package crawl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/render"
)

// work sends one request and reads its answer. It runs in its own
// goroutine and touches only what newRun set.
func (r *run) work(it item) result {
	res := result{it: it, requests: 1}
	switch it.kind {
	case kindRobots:
		res.robots = r.fetchRobots(it.u)
	case kindSitemap:
		r.fetchSitemap(&res)
	case kindLLMs:
		body, err := r.get(it.u, r.opts.MaxBytes)
		if err == nil {
			res.pages = parseLLMs(body)
		}
	case kindPage:
		r.fetchPage(&res)
	}
	return res
}

// request builds a GET for u, with Options.Headers when u is of the
// start URL's origin.
func (r *run) request(ctx context.Context, u *url.URL) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if hostKey(u) == hostKey(r.start) {
		for name, values := range r.opts.Headers {
			req.Header[http.CanonicalHeaderKey(name)] = values
		}
	}
	req.Header.Set("User-Agent", r.opts.UserAgent)
	return req
}

// get fetches a sitemap or llms.txt: its body when the answer is 2xx and
// not longer than limit (the client's own limit applies too).
func (r *run) get(u *url.URL, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.Timeout)
	defer cancel()
	resp, err := r.c.client.Do(ctx, r.request(ctx, u))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return readAtMost(resp.Body, limit)
}

// fetchRobots reads a host's robots.txt (RFC 9309 §2.3.1): rules from a
// 2xx answer, no rules after a 4xx answer (429 aside) or too many
// redirects, everything disallowed after a 429, a 5xx or no answer.
func (r *run) fetchRobots(u *url.URL) *Robots {
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.Timeout)
	defer cancel()
	resp, err := r.c.client.Do(ctx, r.request(ctx, u))
	if err != nil {
		if errors.Is(err, fetch.ErrTooManyRedirects) {
			return &Robots{}
		}
		return &Robots{disallowAll: true}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxRobotsBytes+1))
		if err != nil && len(body) == 0 {
			return &Robots{disallowAll: true}
		}
		return ParseRobots(body, r.c.token)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return &Robots{disallowAll: true}
	default:
		return &Robots{}
	}
}

// fetchSitemap reads a sitemap into res as it arrives, within the
// protocol's limits (maxSitemapURLs URLs, maxSitemapBytes uncompressed)
// rather than a page's; res.detail says what could not be read and why.
// What was read before a failure is kept.
func (r *run) fetchSitemap(res *result) {
	it := res.it
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.Timeout)
	defer cancel()
	// The client's page limit does not apply: parseSitemap stops reading
	// at the protocol's limit, counted uncompressed.
	resp, err := r.c.client.DoLimit(ctx, r.request(ctx, it.u), 0)
	if err != nil {
		if r.ctx.Err() == nil {
			res.detail = "could not be read: " + clean(err)
		}
		return
	}
	defer resp.Body.Close()
	if s := resp.StatusCode; s < 200 || s > 299 {
		// A site without a sitemap answers 404 to the one guessed: there
		// is nothing to report.
		if !it.guessed || s != http.StatusNotFound && s != http.StatusGone {
			res.detail = fmt.Sprintf("could not be read: HTTP %d %s", s, http.StatusText(s))
		}
		return
	}
	sm, err := parseSitemap(resp.Body, r.c.sitemapBytes)
	res.pages, res.sitemaps, res.more = sm.pages, sm.sitemaps, sm.moreSitemaps
	read := len(sm.pages) + len(sm.sitemaps)
	switch {
	case errors.Is(err, errSitemapTooLarge):
		res.detail = fmt.Sprintf("larger than %d MB uncompressed, the protocol's limit: the %s of its first %d MB were read",
			r.c.sitemapBytes>>20, countURLs(read), r.c.sitemapBytes>>20)
	case err != nil && r.ctx.Err() != nil:
		// The crawl was stopped: not the sitemap's fault.
	case err != nil:
		res.detail = fmt.Sprintf("%s: the %s before it were read", clean(err), countURLs(read))
	case sm.morePages > 0:
		res.detail = fmt.Sprintf("lists %d URLs, more than the protocol's %d: the first %d were read",
			len(sm.pages)+sm.morePages, maxSitemapURLs, maxSitemapURLs)
	}
}

// countURLs says "1 URL", "2 URLs".
func countURLs(n int) string {
	if n == 1 {
		return "1 URL"
	}
	return fmt.Sprintf("%d URLs", n)
}

var errTooLarge = errors.New("too large")

// readAtMost reads all of body, failing with errTooLarge past limit bytes.
func readAtMost(body io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// fetchPage requests a page, conditionally when it is known, and reads
// what the crawl needs of it into res.
func (r *run) fetchPage(res *result) {
	it := res.it
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.Timeout)
	defer cancel()
	req := r.request(ctx, it.u)
	k, isKnown := r.known[it.key]
	conditional := isKnown && (k.ETag != "" || k.LastModified != "")
	if isKnown {
		if k.ETag != "" {
			req.Header.Set("If-None-Match", k.ETag)
		}
		if k.LastModified != "" {
			req.Header.Set("If-Modified-Since", k.LastModified)
		}
	}
	skip := func(reason Reason, transient bool, format string, args ...any) {
		res.out, res.reason, res.transient, res.detail = outSkipped, reason, transient, fmt.Sprintf(format, args...)
	}
	began := time.Now()
	resp, err := r.c.client.Do(ctx, req)
	res.took = time.Since(began)
	if err != nil {
		switch {
		case errors.Is(err, fetch.ErrTooLarge):
			skip(ReasonSize, false, "larger than the size limit")
		case r.ctx.Err() != nil:
			skip(ReasonError, true, "the crawl was stopped")
		default:
			skip(ReasonError, fetch.Retryable(err) || errors.Is(err, context.DeadlineExceeded), "%s", clean(err))
		}
		return
	}
	defer resp.Body.Close()
	res.good = resp.StatusCode >= 200 && resp.StatusCode <= 299 || resp.StatusCode == http.StatusNotModified
	res.etag, res.lm = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	switch s := resp.StatusCode; {
	case s == http.StatusNotModified && conditional:
		res.out = outNotModified
		return
	case s == http.StatusNotFound || s == http.StatusGone:
		res.out, res.detail = outGone, fmt.Sprintf("HTTP %d %s", s, http.StatusText(s))
		return
	case s == http.StatusTooManyRequests || s >= 500:
		res.out, res.detail = outThrottled, fmt.Sprintf("HTTP %d %s", s, http.StatusText(s))
		if d, ok := retryAfter(resp.Header, time.Now()); ok {
			res.wait = d
		} else {
			res.wait = r.opts.RetryBase << it.attempt
		}
		return
	case s < 200 || s > 299:
		skip(ReasonError, false, "HTTP %d %s", s, http.StatusText(s))
		return
	}
	declared := resp.Header.Get("Content-Type")
	if mt := mediaType(declared); skippedDeclared(mt) {
		skip(ReasonType, false, "%s", mt)
		return
	}
	if resp.ContentLength > r.opts.MaxBytes {
		skip(ReasonSize, false, "%d bytes, more than the limit of %d", resp.ContentLength, r.opts.MaxBytes)
		return
	}
	body, err := readAtMost(resp.Body, r.opts.MaxBytes)
	switch {
	case errors.Is(err, errTooLarge) || errors.Is(err, fetch.ErrTooLarge):
		skip(ReasonSize, false, "more than the size limit of %d bytes", r.opts.MaxBytes)
		return
	case err != nil && r.ctx.Err() != nil:
		skip(ReasonError, true, "the crawl was stopped")
		return
	case err != nil:
		skip(ReasonError, true, "%s", clean(err))
		return
	}
	final, err := normalize(resp.Request.URL)
	if err != nil {
		final = it.u
	}
	res.final = final
	ct, err := contentType(declared, final, body)
	if err != nil {
		skip(ReasonType, false, "%s", clean(err))
		return
	}
	res.contentType, res.body = ct, body
	res.noindex = headerDirective(resp.Header, "noindex")
	res.nofollow = headerDirective(resp.Header, "nofollow")
	canonical := linkCanonical(resp.Header)
	sum := sha256.Sum256(body)
	if ct == extract.MIMEHTML {
		hp := readHTML(body)
		if r.opts.Render == RenderAlways || r.opts.Render == RenderAuto && hp.isShell() {
			page, err := r.render(final, body, declared)
			switch {
			case errors.Is(err, render.ErrNoBrowser):
				skip(ReasonBrowser, false, "%s", render.ErrNoBrowser.Error())
				return
			case err != nil && r.ctx.Err() != nil:
				skip(ReasonError, true, "the crawl was stopped")
				return
			case err != nil:
				skip(ReasonError, true, "rendering the page: %s", clean(err))
				return
			}
			body, declared = page, "text/html; charset=utf-8"
			hp = readHTML(body)
		}
		base := final
		if hp.base != "" {
			if b, err := resolve(final, hp.base); err == nil {
				base = b
			}
		}
		res.links = resolveAll(base, hp.links)
		res.noindex = res.noindex || hp.noindex
		res.nofollow = res.nofollow || hp.nofollow
		if hp.canonical != "" {
			canonical = hp.canonical
		}
		// The main content is stored, as fetch_url reads it, and
		// identifies the page: a page whose navigation alone changed is
		// unchanged.
		md, err := mainContent(ctx, body, declared, final)
		switch {
		case err != nil && r.ctx.Err() != nil:
			skip(ReasonError, true, "the crawl was stopped")
			return
		case err != nil:
			res.noText = clean(err)
		case md == "":
			// Its links are still followed: a page of links only leads
			// somewhere.
			res.noText = "the page has no text"
		default:
			res.body, res.contentType = []byte(md), extract.MIMEMarkdown
			sum = sha256.Sum256(res.body)
		}
	}
	if canonical != "" {
		if c, err := resolve(final, canonical); err == nil {
			res.canonical = c
		}
	}
	res.hash = hex.EncodeToString(sum[:])
	res.out = outOK
}

// render renders the page at u, whose body was read already, in the
// headless browser; the request headers go with the page's own origin's
// requests, as the crawler's do.
func (r *run) render(u *url.URL, body []byte, declared string) ([]byte, error) {
	if r.opts.Renderer == nil {
		return nil, render.ErrNoBrowser
	}
	p := render.Page{URL: u.String(), Body: body, ContentType: declared}
	if hostKey(u) == hostKey(r.start) {
		p.Headers = r.opts.Headers
	}
	return r.opts.Renderer.Render(r.ctx, p)
}

// clean returns an error's message on one line.
func clean(err error) string {
	return extract.CleanMessage(err.Error())
}

// errorf wraps kind with a formatted detail.
func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}
