// Package crawl walks a web site for its documents and tells, on a later
// crawl of the same site, which pages are new, changed, unchanged or gone.
// It knows HTTP, robots.txt, sitemaps, llms.txt and URLs; it stores
// nothing: every page found is handed to the caller, who keeps it and, for
// the next crawl, what it learnt of it (Known).
//
// # What is crawled
//
// A crawl starts at one URL (depth 0) and follows, breadth first, the
// links of its HTML pages (a, area, frame and iframe targets and meta
// refresh; links marked rel=nofollow are not followed), the URLs of the
// site's sitemaps (those the start host's robots.txt names in Sitemap
// lines, else /sitemap.xml; sitemap indexes and gzip-compressed sitemaps
// included) and the links of its /llms.txt. Pages found in a sitemap or in
// llms.txt are at depth 1, as if the start page linked to them. A sitemap
// is read within the sitemaps.org protocol's limits, 50,000 URLs and 50 MB
// uncompressed, not a page's size limit; one that is larger (a gzip bomb
// among them), malformed or that cannot be downloaded is reported under
// ReasonSitemap, and the URLs read before the fault still count. A crawl
// reads at most 50 sitemaps. A link is
// followed when it is in scope (Options.Scope, Include and Exclude), within
// Options.MaxDepth, allowed by robots.txt and not yet seen; the crawl
// fetches at most Options.MaxPages pages.
//
// Every URL is normalised first (see Normalize): fragments and tracking
// parameters go, query parameters are sorted. A page whose rel=canonical
// link (or Link header) names another URL in scope is recorded under that
// URL, and a redirect records a page under the URL it ends at. Pages of
// the same content (an HTML page's main content; the bytes, for other
// formats) are kept once, under the URL that had it first, or that had it
// in the previous crawl.
//
// What is kept of an HTML page is what fetch_url reads of it
// (fetch.MainContent): its main content as Markdown, without the site's
// navigation bars, headers, footers and sidebars repeated on every page.
//
// Links to PDFs and the other formats package extract reads are fetched
// and handed over like HTML pages; what a body is is decided by its
// content, then its declared type, then its name (a link named .pdf
// answered with a web page is a web page). Links whose names end in the
// extension of an image, audio, video, font, style sheet, script or
// archive are not requested.
//
// # Politeness and bad sites
//
// robots.txt is read per host and obeyed as RFC 9309 says (see
// ParseRobots): a 4xx answer allows everything, a 5xx answer or no answer
// disallows everything for the crawl.
//
// There is no fixed delay between two requests to a host: at most
// Options.PerHost run at once, fewer as the host's answers slow down (see
// throttle: the crawler aims at a number of requests in flight from the
// latency it measures, starting at one and never speeding up on error
// answers). A Crawl-delay in robots.txt, or Options.Delay, spaces the
// starts of two requests to the host by at least that much (the larger of
// the two; a Crawl-delay counts up to MaxCrawlDelay).
//
// A host answering 429 or 5xx is backed off: the page is tried again after
// the Retry-After the answer asks for (when not longer than
// Options.MaxRetryWait) or after an exponential wait, Options.Retries
// times, then skipped; after three pages in a row skipped so, the rest of
// the host is skipped too. Redirect loops end at the client's redirect
// limit; a page over Options.MaxBytes is skipped; a request gets
// Options.Timeout; a page linking to itself under endless query strings is
// bounded by Options.MaxVariants (query variants per path) and MaxPages.
// Every skipped URL is counted in the Summary under its Reason.
//
// # Re-syncing
//
// The caller passes what it knows of each page from the previous crawl
// (Known: validators, content hash, links). A known page is requested with
// If-None-Match and If-Modified-Since; a 304 answer, or a body of the same
// hash, makes it Unchanged and no body is handed over, so nothing is read
// or embedded again. A page answering 404 or 410 is Gone. Known pages the
// crawl does not reach are gone too: Summary.Removed lists them all.
package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/render"
)

// Client sends the crawler's requests. fetch.Client is one: through it
// every request and every redirect obeys fetch_url's address rules, size
// limit and timeout.
type Client interface {
	Do(ctx context.Context, req *http.Request) (*http.Response, error)
	// DoLimit is Do with a body limit of its own (none for 0), for
	// sitemaps, which may be larger than a page.
	DoLimit(ctx context.Context, req *http.Request, maxBody int64) (*http.Response, error)
}

// Defaults and bounds of Options.
const (
	DefaultMaxPages = 500
	// MaxPagesLimit is the most pages one crawl may fetch.
	MaxPagesLimit   = 20000
	DefaultMaxDepth = 5
	DefaultPerHost  = 4
	// MaxPerHost is the most requests to one host Options.PerHost may
	// allow at once.
	MaxPerHost = 16
	// MaxDelay is the longest Options.Delay.
	MaxDelay        = time.Minute
	DefaultTimeout  = 20 * time.Second
	DefaultMaxBytes = fetch.DefaultMaxBodyBytes
	// DefaultMaxVariants bounds the query strings of one path: a
	// calendar's ?month= or a page linking to itself with a counter.
	DefaultMaxVariants  = 50
	DefaultRetries      = 3
	DefaultRetryBase    = time.Second
	DefaultMaxRetryWait = time.Minute
	DefaultUserAgent    = fetch.DefaultUserAgent
	// MaxCrawlDelay caps the Crawl-delay a robots.txt can impose, so that
	// a crawl of MaxPages pages still ends.
	MaxCrawlDelay = time.Minute
	// maxThrottledPages is how many pages in a row a host may refuse (429,
	// 5xx after the retries) before the rest of it is skipped.
	maxThrottledPages = 3
	// maxExamples bounds Summary.Skips per reason.
	maxExamples = 10
	// progressEvery spaces the progress callbacks.
	progressEvery = 250 * time.Millisecond
)

// Options shape a crawl. The zero value is usable: zero fields take their
// defaults.
type Options struct {
	// MaxPages is the most pages fetched (default 500, at most
	// MaxPagesLimit); robots.txt, sitemaps and retries do not count.
	MaxPages int
	// MaxDepth is how many links away from the start page the crawl goes
	// (default 5); a negative value keeps to the start page.
	MaxDepth int
	// Scope says which URLs may be followed (default ScopePrefix).
	Scope Scope
	// Include, when not empty, keeps only the pages whose path matches one
	// of these patterns; Exclude drops the pages whose path matches one.
	// "*" matches within a path segment, "**" across segments, "?" one
	// character; a pattern matches the whole decoded path ("/docs/**"),
	// or the last segment when it holds no "/" ("*.pdf"). The start page
	// is fetched for its links even when they leave it out, and then not
	// handed over.
	Include, Exclude []string
	// PerHost is the most requests to one host that run at once (default
	// 4, at most MaxPerHost); fewer run while the host answers slowly.
	PerHost int
	// Delay, when positive, is the least time between the starts of two
	// requests to one host, at most MaxDelay; zero or a negative value
	// means none. A larger Crawl-delay in robots.txt wins.
	Delay time.Duration
	// Timeout bounds one request, its body included (default 20 s).
	Timeout time.Duration
	// MaxBytes is the largest body read (default 10 MiB); a larger page
	// is skipped with ReasonSize. The client's own limit applies too.
	MaxBytes int64
	// UserAgent is sent with every request (default DefaultUserAgent);
	// robots.txt is obeyed for its product token, the part before "/".
	UserAgent string
	// MaxVariants is how many query strings of one path are followed
	// (default 50).
	MaxVariants int
	// Retries is how many times a page answered 429 or 5xx is tried
	// again (default 3); a negative value means none.
	Retries int
	// RetryBase is the first wait before trying again when the answer
	// gives no Retry-After; it doubles with each try (default 1 s).
	RetryBase time.Duration
	// MaxRetryWait is the longest Retry-After honoured (default a
	// minute); a page asked to wait longer is skipped.
	MaxRetryWait time.Duration
	// Headers are sent with every request to the start URL's origin (its
	// scheme, host and port), for a private site: Authorization, Cookie,
	// an API key. They are never sent to another origin, a redirect's
	// included (the Client must see to that, as fetch.Client does), and
	// never written to a log or an error. At most MaxHeaderBytes, names
	// and values together; see CheckHeaders.
	Headers http.Header
	// Render says which HTML pages are rendered in a headless browser
	// before they are read (default RenderAuto).
	Render RenderMode
	// Renderer renders them (render.Renderer); nil means no browser: the
	// pages that need one are skipped with ReasonBrowser.
	Renderer Renderer
}

// RenderMode says which pages a crawl renders in a headless browser.
type RenderMode string

const (
	// RenderAuto, the default, renders a page whose HTML is a shell that
	// scripts fill: it has scripts and less than shellText bytes of text.
	RenderAuto RenderMode = "auto"
	// RenderNever reads every page as it is served.
	RenderNever RenderMode = "never"
	// RenderAlways renders every HTML page.
	RenderAlways RenderMode = "always"
)

// shellText is the most text a page built by scripts holds before they
// run: a title, a "please enable JavaScript" line.
const shellText = 200

// Renderer loads a page in a headless browser and returns the HTML its
// scripts built: render.Renderer, which sends the page's requests through
// fetch_url's address rules. It fails with an error wrapping
// render.ErrNoBrowser when no browser is installed.
type Renderer interface {
	Render(ctx context.Context, p render.Page) ([]byte, error)
}

// MaxHeaderBytes bounds Options.Headers, names and values together.
const MaxHeaderBytes = 8 << 10

// maxHeaders bounds the number of Options.Headers.
const maxHeaders = 32

// reservedHeaders are set by the crawler or its client, or belong to the
// connection: a crawl's headers may not replace them. User-Agent stays the
// server's own, for robots.txt is obeyed for it.
var reservedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
	"Proxy-Connection": true, "Proxy-Authorization": true, "Te": true, "Trailer": true, "Upgrade": true,
	"User-Agent": true, "Accept-Encoding": true, "If-None-Match": true, "If-Modified-Since": true, "Range": true,
}

// CheckHeaders reports request headers a crawl cannot send, wrapping
// ErrInvalidOptions with a message that names the header, never its
// value: a name that is not a header name, a value holding a line break or
// another control character, a header the crawler sets itself, more than
// 32 headers or more than MaxHeaderBytes.
func CheckHeaders(h http.Header) error {
	if len(h) > maxHeaders {
		return fmt.Errorf("%w: headers: %d headers, more than %d", ErrInvalidOptions, len(h), maxHeaders)
	}
	size := 0
	for name, values := range h {
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			return fmt.Errorf("%w: headers: %q is not a header name", ErrInvalidOptions, extract.CleanMessage(name))
		case reservedHeaders[http.CanonicalHeaderKey(name)]:
			return fmt.Errorf("%w: headers: %s is set by the crawler itself", ErrInvalidOptions, http.CanonicalHeaderKey(name))
		}
		for _, v := range values {
			if strings.ContainsAny(v, "\r\n") {
				return fmt.Errorf("%w: headers: the value of %s holds a line break", ErrInvalidOptions, name)
			}
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("%w: headers: the value of %s holds a control character", ErrInvalidOptions, name)
			}
			size += len(name) + len(v)
		}
	}
	if size > MaxHeaderBytes {
		return fmt.Errorf("%w: headers: %d bytes, more than %d (8 KB)", ErrInvalidOptions, size, MaxHeaderBytes)
	}
	return nil
}

// ErrInvalidOptions reports Options that cannot be used; the message says
// which field and why.
var ErrInvalidOptions = errors.New("invalid crawl options")

// ErrUnavailable reports a crawl that could not start: the start host's
// robots.txt could not be fetched (5xx or no answer, which disallows the
// whole site), or the start page failed for a reason that may pass (no
// answer, a timeout, 429 or 5xx after the retries). Crawl returns it with
// the Summary of what it did; a caller re-syncing removes nothing then.
var ErrUnavailable = errors.New("site unavailable")

// Status says what a crawl found of a page, against what the caller knew.
type Status string

const (
	// StatusNew is a page the caller did not know; Page.Body holds it.
	StatusNew Status = "new"
	// StatusChanged is a known page whose content hash differs; Page.Body
	// holds it.
	StatusChanged Status = "changed"
	// StatusUnchanged is a known page answered 304, or with a body of the
	// known hash; Page.Body is nil.
	StatusUnchanged Status = "unchanged"
	// StatusGone is a known page answered 404 or 410; Page.Body is nil.
	StatusGone Status = "gone"
)

// Reason says why a URL was skipped.
type Reason string

const (
	// ReasonRobots: robots.txt disallows it (or could not be fetched), or
	// the page asks not to be indexed (robots meta tag, X-Robots-Tag).
	ReasonRobots Reason = "robots"
	// ReasonScope: outside Options.Scope, left out by Include or Exclude,
	// or redirected out of scope.
	ReasonScope Reason = "scope"
	// ReasonType: not a format the readers know (an image, a script, a
	// feed, ...), or a page without text.
	ReasonType Reason = "type"
	// ReasonSize: the body exceeds the size limit.
	ReasonSize Reason = "size"
	// ReasonError: no answer, a timeout, too many redirects, an address
	// refused by the client, an HTTP error other than 404 and 410, or 429
	// and 5xx still after the retries.
	ReasonError Reason = "error"
	// ReasonDuplicate: the same text as a page already kept, or a URL
	// already recorded through a redirect or rel=canonical.
	ReasonDuplicate Reason = "duplicate"
	// ReasonDepth: more links away than Options.MaxDepth.
	ReasonDepth Reason = "depth"
	// ReasonLimit: Options.MaxPages was reached first, or the crawl had
	// seen too many URLs to remember more.
	ReasonLimit Reason = "limit"
	// ReasonVariants: more query strings of one path than
	// Options.MaxVariants.
	ReasonVariants Reason = "variants"
	// ReasonGone: a link to a page the crawl did not know answered 404 or
	// 410 (a known page so answered is StatusGone).
	ReasonGone Reason = "gone"
	// ReasonBrowser: a page that needs a browser to be read (Options.Render)
	// when none is installed: "needs a browser: install chromium".
	ReasonBrowser Reason = "browser"
	// ReasonSitemap: a sitemap not read whole: it could not be
	// downloaded, is malformed, larger than 50 MB uncompressed (a gzip
	// bomb among them) or lists more than 50,000 URLs, or the crawl had
	// read as many sitemaps as it reads. The URLs read before still count.
	ReasonSitemap Reason = "sitemap"
)

// Known is what the caller kept of a page from a previous crawl, from the
// Page it was handed then.
type Known struct {
	// ETag and LastModified are the page's validators, sent back as
	// If-None-Match and If-Modified-Since.
	ETag, LastModified string
	// Hash is Page.Hash: a body of this hash is unchanged.
	Hash string
	// Links is Page.Links: the pages a page answered 304 leads to, whose
	// body is not sent again.
	Links []string
}

// Page is a page the crawl reached, handed to the emit function of Crawl.
type Page struct {
	// URL is the normalised URL the page is recorded under: its canonical
	// URL when that is in scope, else the URL its redirects ended at.
	URL string
	// Requested is the normalised URL that was requested.
	Requested string
	Status    Status
	// Depth is how many links away from the start page it was found.
	Depth int
	// ContentType is how to read Body: one of the extract.MIME* types;
	// empty when there is no body.
	ContentType string
	// Body is what is stored of the page, for StatusNew and
	// StatusChanged; nil otherwise. Of an HTML page it is what fetch_url
	// reads: its main content as Markdown under its title (ContentType
	// extract.MIMEMarkdown), without the site's navigation, headers,
	// footers and sidebars. Other formats are handed over as they came.
	Body []byte
	// ETag and LastModified are the answer's validators, or the known ones
	// when a 304 answer repeats none.
	ETag, LastModified string
	// Hash identifies the page's content: the SHA-256 of Body, an HTML
	// page's main content (so that a page whose navigation alone changed
	// is unchanged), or the body of another format.
	Hash string
	// Links lists the normalised URLs in scope the page links to, for
	// Known.Links.
	Links []string
}

// FileName returns a name for the page's file, from the last segment of its
// URL with an extension telling its type: an HTML page, stored as
// Markdown, is "install.md" for /docs/install.html.
func (p Page) FileName() string {
	name := (&fetch.Resource{URL: p.URL, FinalURL: p.URL, ContentType: p.ContentType}).FileName()
	if p.ContentType != extract.MIMEMarkdown {
		return name
	}
	switch ext := strings.ToLower(path.Ext(name)); ext {
	case ".md", ".markdown", ".mdown", ".mkd":
		return name
	case ".html", ".htm", ".xhtml":
		name = strings.TrimSuffix(name, name[len(name)-len(ext):])
	}
	return name + ".md"
}

// Stats is a crawl's progress.
type Stats struct {
	// Fetched counts the pages fetched to an outcome so far.
	Fetched int `json:"fetched"`
	// Queued counts the pages waiting to be fetched.
	Queued int `json:"queued"`
	// Skipped counts the URLs skipped, every reason together.
	Skipped int `json:"skipped"`
	// Emitted counts the pages handed over with a body (new or changed).
	Emitted int `json:"emitted"`
	// Unchanged counts the known pages found unchanged.
	Unchanged int `json:"unchanged"`
}

// Skip is one skipped URL with its reason, for a job's summary.
type Skip struct {
	URL    string `json:"url"`
	Reason Reason `json:"reason"`
	Detail string `json:"detail"`
}

// Summary is what a crawl did. Its JSON form leaves Reached out: it is
// for Removed, and may be long.
type Summary struct {
	// Requests counts the HTTP requests made: pages, retries, robots.txt,
	// sitemaps and llms.txt (a chain of redirects counts once).
	Requests int `json:"requests"`
	// Fetched counts the pages fetched to an outcome, each once whatever
	// its retries: new, changed, unchanged, gone, duplicate, or skipped
	// after the request.
	Fetched int `json:"fetched"`
	// New, Changed, Unchanged and Gone count the pages handed over, by
	// Status; a page not known before answering 404 or 410 is skipped
	// with ReasonGone instead.
	New       int `json:"new"`
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
	Gone      int `json:"gone"`
	// Emitted counts the pages handed over with a body: New + Changed.
	Emitted int `json:"emitted"`
	// NotModified counts the 304 answers among the unchanged pages.
	NotModified int `json:"not_modified"`
	// Skipped counts the skipped URLs by reason.
	Skipped map[Reason]int `json:"skipped"`
	// Skips gives examples: the first skipped URLs of each reason, at most
	// ten a reason.
	Skips []Skip `json:"skips,omitempty"`
	// Reached lists, sorted, the URLs of the pages the crawl found in
	// place (new, changed, unchanged), and of known pages it could not
	// check for a reason that may pass (no answer, a timeout, 429 or 5xx).
	Reached []string `json:"-"`
	// Limited reports that MaxPages stopped the crawl with pages left.
	Limited bool `json:"limited"`
	// whole is set when Crawl returned no error: only then may Removed
	// name pages.
	whole bool
}

// Removed returns, sorted, the known URLs the crawl did not find in place:
// gone (404, 410), no longer reachable within the crawl's scope and
// limits, no longer allowed, or now a duplicate. After a crawl that
// returned an error (cancelled, or the site unavailable) it returns nil:
// what was not reached then may still be there.
func (s Summary) Removed(known map[string]Known) []string {
	if !s.whole {
		return nil
	}
	reached := make(map[string]bool, len(s.Reached))
	for _, u := range s.Reached {
		reached[u] = true
	}
	var out []string
	for u := range known {
		key := u
		if n, err := Normalize(u); err == nil {
			key = n
		}
		if !reached[key] {
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out
}

// Crawler crawls sites through a Client with fixed Options. It is safe
// for concurrent use: each Crawl is independent.
type Crawler struct {
	client  Client
	opts    Options
	include []glob
	exclude []glob
	token   string
	// sitemapBytes is the most a sitemap holds uncompressed:
	// maxSitemapBytes, lowered by tests.
	sitemapBytes int64
}

// New returns a Crawler sending its requests through client, after
// checking opts; errors wrap ErrInvalidOptions.
func New(client Client, opts Options) (*Crawler, error) {
	if client == nil {
		return nil, fmt.Errorf("crawl: %w: no client", ErrInvalidOptions)
	}
	switch {
	case opts.MaxPages < 0:
		return nil, fmt.Errorf("crawl: %w: max pages %d must be positive", ErrInvalidOptions, opts.MaxPages)
	case opts.MaxPages > MaxPagesLimit:
		return nil, fmt.Errorf("crawl: %w: max pages %d exceeds the limit of %d", ErrInvalidOptions, opts.MaxPages, MaxPagesLimit)
	case opts.PerHost < 0 || opts.PerHost > MaxPerHost:
		return nil, fmt.Errorf("crawl: %w: requests per host %d must be between 1 and %d", ErrInvalidOptions, opts.PerHost, MaxPerHost)
	case opts.Delay > MaxDelay:
		return nil, fmt.Errorf("crawl: %w: delay_ms %d is more than %d", ErrInvalidOptions, opts.Delay.Milliseconds(), MaxDelay.Milliseconds())
	case opts.Timeout < 0:
		return nil, fmt.Errorf("crawl: %w: timeout %v must be positive", ErrInvalidOptions, opts.Timeout)
	case opts.MaxBytes < 0:
		return nil, fmt.Errorf("crawl: %w: size limit %d must be positive", ErrInvalidOptions, opts.MaxBytes)
	case opts.MaxVariants < 0:
		return nil, fmt.Errorf("crawl: %w: query variants %d must be positive", ErrInvalidOptions, opts.MaxVariants)
	}
	switch opts.Render {
	case "":
		opts.Render = RenderAuto
	case RenderAuto, RenderNever, RenderAlways:
	default:
		return nil, fmt.Errorf("crawl: %w: render %q must be never, auto or always", ErrInvalidOptions, extract.CleanMessage(string(opts.Render)))
	}
	if err := CheckHeaders(opts.Headers); err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	opts.Headers = opts.Headers.Clone()
	switch opts.Scope {
	case "":
		opts.Scope = ScopePrefix
	case ScopePrefix, ScopeHost, ScopeDomain:
	default:
		return nil, fmt.Errorf("crawl: %w: scope %q must be prefix, host or domain", ErrInvalidOptions, opts.Scope)
	}
	if opts.MaxPages == 0 {
		opts.MaxPages = DefaultMaxPages
	}
	switch {
	case opts.MaxDepth == 0:
		opts.MaxDepth = DefaultMaxDepth
	case opts.MaxDepth < 0:
		opts.MaxDepth = 0
	}
	if opts.PerHost == 0 {
		opts.PerHost = DefaultPerHost
	}
	opts.Delay = max(opts.Delay, 0)
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.UserAgent = strings.TrimSpace(opts.UserAgent); opts.UserAgent == "" {
		opts.UserAgent = DefaultUserAgent
	}
	if opts.MaxVariants == 0 {
		opts.MaxVariants = DefaultMaxVariants
	}
	switch {
	case opts.Retries == 0:
		opts.Retries = DefaultRetries
	case opts.Retries < 0:
		opts.Retries = 0
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = DefaultRetryBase
	}
	if opts.MaxRetryWait <= 0 {
		opts.MaxRetryWait = DefaultMaxRetryWait
	}
	c := &Crawler{client: client, opts: opts, token: productToken(opts.UserAgent), sitemapBytes: maxSitemapBytes}
	var err error
	if c.include, err = parseGlobs(opts.Include); err != nil {
		return nil, fmt.Errorf("crawl: include: %w", err)
	}
	if c.exclude, err = parseGlobs(opts.Exclude); err != nil {
		return nil, fmt.Errorf("crawl: exclude: %w", err)
	}
	return c, nil
}

// Options returns the crawler's options with their defaults filled in.
func (c *Crawler) Options() Options { return c.opts }

// Crawl crawls the site at start and hands each page it reaches to emit,
// in the order the pages are done: new and changed pages with their body,
// unchanged known pages without (so their validators can be updated), and
// known pages answered 404 or 410 as gone. emit is never called
// concurrently; an error from it stops the crawl and is returned.
// progress, when not nil, is called at most every 250 ms and once at the
// end. known, which may be nil, holds what the caller kept of each page
// from a previous crawl, by URL; Crawl does not modify it.
//
// The returned Summary counts what was done, and lists the URLs reached
// for Removed. The error is nil after a whole crawl (skipped pages are
// not errors), wraps ErrUnavailable when the start host or page could not
// be fetched, fetch.ErrInvalidURL when start is not an http or https URL,
// or is ctx's error or emit's when they stopped it; the Summary then tells
// what was done before.
func (c *Crawler) Crawl(ctx context.Context, start string, known map[string]Known, emit func(Page) error, progress func(Stats)) (Summary, error) {
	su, err := resolve(nil, start)
	if err != nil {
		return Summary{}, fmt.Errorf("crawl: start URL: %w", err)
	}
	r := newRun(ctx, c, su, known, emit, progress)
	defer r.cancel()
	return r.run()
}
