// Package fetch reads web pages safely for a model: it downloads a URL with
// limits on size, time and redirects, refuses addresses on the server's own
// networks, and turns HTML, PDF, plain text and Markdown into text (HTML
// into Markdown of its main content). It knows HTTP, not MCP.
//
// # Address policy
//
// Only http and https URLs are fetched. Loopback, private (RFC 1918),
// carrier-grade NAT, link-local (which holds the cloud metadata endpoint
// 169.254.169.254), unique-local IPv6, unspecified, multicast and reserved
// addresses are refused, as are IPv6 forms that embed one of them
// (IPv4-mapped, NAT64, 6to4, Teredo). The check runs on the address each
// connection is actually opened to, inside the dialer, so a name that
// resolves to a public address when checked and to a private one when
// dialled (DNS rebinding) is still refused. Every redirect goes through the
// same dialer, and its scheme is checked before it is followed.
//
// Options.AllowHosts lists hosts and networks an operator wants reachable
// even though they are private, such as an intranet wiki.
//
// # Proxies
//
// With a proxy (Options.Proxy, or HTTP_PROXY, HTTPS_PROXY and NO_PROXY from
// the environment), the connection goes to the proxy, which resolves the
// page's host itself. The proxy's own address is not checked: the operator
// configured it. The page's host is checked before the request is sent
// when it is a literal address, and when it is a name this side can
// resolve; but the proxy resolves it again, so against DNS rebinding the
// proxy must enforce its own policy.
package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/internal/ttlcache"
)

// Defaults for the zero fields of Options.
const (
	DefaultTimeout       = 20 * time.Second
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultMaxBodyBytes fits nearly every HTML page and most papers; a
	// larger body fails with ErrTooLarge rather than being cut, because a
	// cut PDF cannot be read at all.
	DefaultMaxBodyBytes = 10 << 20
	DefaultMaxRedirects = 5
	DefaultUserAgent    = "mcpsearch-fetch/1"
	// DefaultCacheTTL keeps a page long enough for a model to page through
	// it with successive calls.
	DefaultCacheTTL  = 5 * time.Minute
	DefaultCacheSize = 16
)

// dialTimeout bounds establishing one TCP connection.
const dialTimeout = 10 * time.Second

// Options configure a Client. The zero value is usable: every zero field
// takes its default.
type Options struct {
	// Timeout bounds a whole fetch, from the request to the last byte of
	// the body and its conversion (default DefaultTimeout).
	Timeout time.Duration
	// HeaderTimeout bounds the wait for the response headers once the
	// request is sent (default DefaultHeaderTimeout).
	HeaderTimeout time.Duration
	// MaxBodyBytes caps the body read (default DefaultMaxBodyBytes); a
	// larger body fails with ErrTooLarge. The cap applies after
	// decompression.
	MaxBodyBytes int64
	// MaxRedirects is how many redirects are followed (default
	// DefaultMaxRedirects); a negative value follows none.
	MaxRedirects int
	// UserAgent is sent with every request (default DefaultUserAgent).
	UserAgent string
	// Proxy is the URL of a proxy used for every fetch, for example
	// "http://proxy.corp:3128" or "socks5://127.0.0.1:1080". Empty means
	// the environment's HTTP_PROXY, HTTPS_PROXY and NO_PROXY.
	Proxy string
	// AllowHosts lists hosts and networks that may be fetched even though
	// their addresses are refused by default: "wiki.corp.example",
	// "*.corp.example" (subdomains), "10.1.2.3" or "10.0.0.0/8".
	AllowHosts []string
	// AllowPrivate turns the address policy off entirely. It exists for
	// tests, which serve pages on loopback, and for deployments where
	// every reachable address is trusted.
	AllowPrivate bool
	// CacheTTL is how long a fetched page is reused for the same URL
	// (default DefaultCacheTTL); a negative value disables the cache.
	CacheTTL time.Duration
	// CacheSize bounds how many pages the cache holds (default
	// DefaultCacheSize).
	CacheSize int
}

// Client fetches pages. It is safe for concurrent use.
type Client struct {
	opts    Options
	allow   allowList
	http    *http.Client
	proxyFn func(*http.Request) (*url.URL, error)
	cache   *ttlcache.Cache[string, *Document]
	// lookup resolves a page's host for the check before a proxied
	// request; tests replace it.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)

	checked *net.Dialer // refuses blocked addresses as it connects
	plain   *net.Dialer // for proxies and allow-listed names

	mu      sync.Mutex
	proxies map[string]bool // host:port of every proxy the proxy function chose
}

// New returns a Client configured by opts.
func New(opts Options) (*Client, error) {
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.HeaderTimeout == 0 {
		opts.HeaderTimeout = DefaultHeaderTimeout
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxRedirects == 0 {
		opts.MaxRedirects = DefaultMaxRedirects
	}
	if opts.UserAgent = strings.TrimSpace(opts.UserAgent); opts.UserAgent == "" {
		opts.UserAgent = DefaultUserAgent
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	switch {
	case opts.Timeout < 0:
		return nil, fmt.Errorf("fetch: timeout %v must be positive", opts.Timeout)
	case opts.HeaderTimeout < 0:
		return nil, fmt.Errorf("fetch: header timeout %v must be positive", opts.HeaderTimeout)
	case opts.MaxBodyBytes < 0:
		return nil, fmt.Errorf("fetch: body limit %d must be positive", opts.MaxBodyBytes)
	}
	allow, err := parseAllowList(opts.AllowHosts)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}

	c := &Client{
		opts:    opts,
		allow:   allow,
		cache:   ttlcache.New[string, *Document](opts.CacheSize, max(opts.CacheTTL, 0)),
		proxies: map[string]bool{},
		lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
	}

	baseProxy := http.ProxyFromEnvironment
	if p := strings.TrimSpace(opts.Proxy); p != "" {
		pu, err := url.Parse(p)
		if err != nil || pu.Host == "" {
			return nil, fmt.Errorf("fetch: proxy %q is not a URL such as http://proxy:3128", p)
		}
		switch pu.Scheme {
		case "http", "https", "socks5", "socks5h":
		default:
			return nil, fmt.Errorf("fetch: proxy %q: scheme must be http, https or socks5", p)
		}
		baseProxy = http.ProxyURL(pu)
	}
	c.proxyFn = func(req *http.Request) (*url.URL, error) {
		u, err := baseProxy(req)
		if u != nil && err == nil {
			c.mu.Lock()
			c.proxies[canonicalAddr(u)] = true
			c.mu.Unlock()
		}
		return u, err
	}

	c.checked = &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second, Control: c.control}
	c.plain = &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                  c.proxyFn,
		DialContext:            c.dial,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    dialTimeout,
		ResponseHeaderTimeout:  opts.HeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        60 * time.Second,
		MaxResponseHeaderBytes: 256 << 10,
	}
	c.http = &http.Client{Transport: t, CheckRedirect: c.checkRedirect}
	return c, nil
}

// canonicalAddr is the host:port the transport dials for a proxy URL.
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "socks5", "socks5h":
			port = "1080"
		default:
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

func (c *Client) isProxy(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proxies[net.JoinHostPort(strings.ToLower(host), port)]
}

// dial opens connections for the transport. Connections to a proxy or to
// an allow-listed name are not checked; every other connection is checked
// on the address it is opened to (see control).
func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if c.opts.AllowPrivate || c.isProxy(addr) {
		return c.plain.DialContext(ctx, network, addr)
	}
	if _, err := netip.ParseAddr(host); err != nil && c.allow.allowsHost(host) {
		return c.plain.DialContext(ctx, network, addr)
	}
	conn, err := c.checked.DialContext(ctx, network, addr)
	var be *BlockedError
	if errors.As(err, &be) {
		return nil, &BlockedError{Host: host, Addr: be.Addr, Class: be.Class}
	}
	return conn, err
}

// control runs after the socket is created and before it connects, with
// the resolved address that is about to be dialled.
func (c *Client) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	return c.checkAddr("", ap.Addr())
}

// checkAddr returns a *BlockedError when ip may not be fetched.
func (c *Client) checkAddr(host string, ip netip.Addr) error {
	if c.opts.AllowPrivate || c.allow.allowsIP(ip) {
		return nil
	}
	if class := addressClass(ip); class != "" {
		return &BlockedError{Host: host, Addr: ip.Unmap(), Class: class}
	}
	return nil
}

// checkRequest vets a URL before a request for it is sent: the first one
// and every redirect.
func (c *Client) checkRequest(req *http.Request) error {
	u := req.URL
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: %s: only http and https URLs are fetched", ErrInvalidURL, schemeWords(u))
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%w: %q has no host", ErrInvalidURL, u.Redacted())
	}
	if c.opts.AllowPrivate {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return c.checkAddr(host, ip)
	}
	if c.allow.allowsHost(host) {
		return nil
	}
	// Without a proxy the dialer checks the address it connects to; with
	// one, resolve the name here as a best effort (see the package doc).
	if p, err := c.proxyFn(req); err != nil || p == nil {
		return nil
	}
	ips, err := c.lookup(req.Context(), host)
	if err != nil {
		// Names only the proxy can resolve are common behind a corporate
		// proxy; the proxy decides.
		return nil
	}
	for _, ip := range ips {
		if err := c.checkAddr(host, ip); err != nil {
			return err
		}
	}
	return nil
}

func schemeWords(u *url.URL) string {
	if u.Scheme == "" {
		return "the URL has no scheme"
	}
	return "the scheme is " + u.Scheme + ":"
}

func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > max(c.opts.MaxRedirects, 0) {
		return fmt.Errorf("%w: stopped after %d redirects", ErrTooManyRedirects, len(via)-1)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: redirected to a URL whose scheme is %s:, only http and https are fetched", ErrInvalidURL, req.URL.Scheme)
	}
	if !sameOrigin(req.URL, via[0].URL) {
		// The headers a caller sets (credentials of a private site,
		// conditional headers) are for the host it asked: a redirect
		// elsewhere, or to plain http, carries only these. Go's client
		// drops Authorization and Cookie alone, and keeps them for a
		// subdomain.
		for name := range req.Header {
			if !crossOriginHeaders[name] {
				req.Header.Del(name)
			}
		}
	}
	return c.checkRequest(req)
}

// crossOriginHeaders are the request headers kept on a redirect to
// another origin.
var crossOriginHeaders = map[string]bool{"User-Agent": true, "Accept": true, "Accept-Language": true}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && portOf(a) == portOf(b)
}

// portOf returns u's port, or its scheme's default.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// Resource is a fetched body before conversion, for storing the page as a
// file (ingest by URL).
type Resource struct {
	// URL is the URL asked for, normalised; FinalURL is where the body came
	// from after redirects.
	URL, FinalURL string
	// ContentType is the media type the body is read as: one of the
	// extract.MIME* types but the images.
	ContentType string
	// DeclaredType is the server's Content-Type header, parameters kept.
	DeclaredType string
	// Body is the body, at most Options.MaxBodyBytes long.
	Body []byte
}

// FileName returns a name for the resource taken from the last segment of
// its final URL's path, or the host when the path is empty, with an
// extension matching its content type when it has none.
func (r *Resource) FileName() string {
	ext := map[string]string{
		extract.MIMEHTML: ".html", extract.MIMEPDF: ".pdf",
		extract.MIMEText: ".txt", extract.MIMEMarkdown: ".md",
		extract.MIMECSV: ".csv", extract.MIMETSV: ".tsv", extract.MIMERTF: ".rtf",
		extract.MIMEDOCX: ".docx", extract.MIMEPPTX: ".pptx", extract.MIMEXLSX: ".xlsx",
		extract.MIMEODT: ".odt", extract.MIMEODP: ".odp", extract.MIMEODS: ".ods", extract.MIMEEPUB: ".epub",
	}[r.ContentType]
	u, err := url.Parse(r.FinalURL)
	if err != nil {
		return "page" + ext
	}
	seg := path.Base(u.Path)
	if seg == "/" || seg == "." || seg == "" {
		return u.Hostname() + ext
	}
	if s, err := url.PathUnescape(seg); err == nil {
		seg = s
	}
	// "index.php" served as HTML becomes "index.php.html" so that the
	// extension tells the type.
	if path.Ext(seg) == "" || r.ContentType == extract.MIMEHTML && !hasExt(seg, ".html", ".htm", ".xhtml") {
		seg += ext
	}
	return seg
}

func hasExt(name string, exts ...string) bool {
	e := strings.ToLower(path.Ext(name))
	for _, x := range exts {
		if e == x {
			return true
		}
	}
	return false
}

// parseURL checks rawURL before anything is sent.
func parseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: %s: only http and https URLs are fetched", ErrInvalidURL, schemeWords(u))
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%w: %q has no host", ErrInvalidURL, rawURL)
	}
	// The fragment names a place in the page, not a different page.
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// Download fetches rawURL and returns its body, without conversion and
// without the cache. It fails with ErrUnsupportedType before reading the
// body when the declared type is not one that can be converted.
func (c *Client) Download(ctx context.Context, rawURL string) (*Resource, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	return c.download(ctx, u)
}

// download runs one GET; ctx carries the fetch's deadline.
func (c *Client) download(ctx context.Context, u *url.URL) (res *Resource, err error) {
	ctx, span := startRequest(ctx, http.MethodGet, u)
	status := 0
	defer func() { endRequest(span, status, res, err) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w: %v", u.Redacted(), ErrInvalidURL, err)
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	req.Header.Set("Accept", accept)
	if err := c.checkRequest(req); err != nil {
		return nil, fmt.Errorf("fetch %s: %w", u.Redacted(), err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, u, err)
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	final := resp.Request.URL.String()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("fetch %s: %w", u.Redacted(), &HTTPStatusError{Status: resp.StatusCode, URL: resp.Request.URL.Redacted()})
	}
	declared := resp.Header.Get("Content-Type")
	// Refuse a type that cannot be converted before reading its body.
	if mt := mediaType(declared); mt != "" && !convertible(mt) && !octetStream(mt) {
		return nil, unsupported(u, mt)
	}
	if resp.ContentLength > c.opts.MaxBodyBytes {
		return nil, c.tooLarge(u)
	}
	body, err := readLimited(resp.Body, c.opts.MaxBodyBytes)
	if errors.Is(err, errBodyTooLarge) {
		return nil, c.tooLarge(u)
	}
	if err != nil {
		return nil, c.transportError(ctx, u, fmt.Errorf("reading body: %w", err))
	}
	ct, err := detectType(declared, resp.Request.URL.Path, body)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", u.Redacted(), err)
	}
	return &Resource{URL: u.String(), FinalURL: final, ContentType: ct, DeclaredType: declared, Body: body}, nil
}

func (c *Client) tooLarge(u *url.URL) error { return c.tooLargeThan(u, c.opts.MaxBodyBytes) }

func (c *Client) tooLargeThan(u *url.URL, limit int64) error {
	return fmt.Errorf("fetch %s: %w: the body exceeds the limit of %d bytes", u.Redacted(), ErrTooLarge, limit)
}

func unsupported(u *url.URL, what string) error {
	return fmt.Errorf("fetch %s: %w: %s; %s", u.Redacted(), ErrUnsupportedType, what, readable)
}

// transportError classifies a failure to get a complete answer.
func (c *Client) transportError(ctx context.Context, u *url.URL, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var be *BlockedError
	switch {
	case errors.As(err, &be):
		return fmt.Errorf("fetch %s: %w", u.Redacted(), be)
	case errors.Is(err, ErrInvalidURL), errors.Is(err, ErrTooManyRedirects):
		return fmt.Errorf("fetch %s: %w", u.Redacted(), err)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return fmt.Errorf("fetch %s: %w", u.Redacted(), context.Canceled)
	}
	var ne net.Error
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("fetch %s: %w: no complete answer within the time limit", u.Redacted(), ErrTimeout)
	}
	return fmt.Errorf("fetch %s: %w: %v", u.Redacted(), ErrUnreachable, err)
}

var errBodyTooLarge = errors.New("body too large")

// readLimited reads all of r up to limit bytes, failing with
// errBodyTooLarge when it holds more.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errBodyTooLarge
	}
	return b, nil
}

// mediaType returns the lower-cased media type of a Content-Type value.
func mediaType(declared string) string {
	mt, _, err := mime.ParseMediaType(declared)
	if err != nil {
		mt, _, _ = strings.Cut(declared, ";")
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// readable ends the message of an unsupported type.
const readable = "only HTML, PDF, Word, PowerPoint and Excel (DOCX, PPTX, XLSX), OpenDocument, EPUB, CSV, RTF, plain text and Markdown can be read"

func convertible(mt string) bool {
	switch mt {
	case "text/html", "application/xhtml+xml", "application/pdf", "application/x-pdf",
		"text/plain", "text/markdown", "text/x-markdown",
		extract.MIMECSV, extract.MIMETSV, "application/csv", extract.MIMERTF, "text/rtf",
		extract.MIMEDOCX, extract.MIMEPPTX, extract.MIMEXLSX, extract.MIMEODT, extract.MIMEODP, extract.MIMEODS, extract.MIMEEPUB,
		"application/zip", "application/x-zip-compressed":
		// ZIP is how some servers label office files; the content decides.
		return true
	}
	return strings.HasPrefix(mt, "application/vnd.openxmlformats-officedocument.") ||
		strings.HasPrefix(mt, "application/vnd.oasis.opendocument.") ||
		strings.HasPrefix(mt, "application/vnd.ms-") && strings.Contains(mt, "macroenabled")
}

// octetStream reports types that say nothing about the content, which is
// then sniffed.
func octetStream(mt string) bool {
	switch mt {
	case "application/octet-stream", "binary/octet-stream", "application/unknown", "application/binary":
		return true
	}
	return false
}

// detectType decides how the body is read: by its declared type, and by
// sniffing when the type is missing or says nothing. A PDF signature wins
// over any declaration.
func detectType(declared, urlPath string, body []byte) (string, error) {
	if bytes.HasPrefix(body, []byte("%PDF-")) {
		return extract.MIMEPDF, nil
	}
	switch mt := mediaType(declared); {
	case mt == "text/html", mt == "application/xhtml+xml":
		return extract.MIMEHTML, nil
	case mt == "application/pdf", mt == "application/x-pdf":
		return extract.MIMEPDF, nil
	case mt == "text/markdown", mt == "text/x-markdown":
		return extract.MIMEMarkdown, nil
	case mt == "text/plain":
		// Many servers send Markdown files as text/plain, and CSV too.
		switch {
		case hasExt(urlPath, ".md", ".markdown"):
			return extract.MIMEMarkdown, nil
		case hasExt(urlPath, ".csv"):
			return extract.MIMECSV, nil
		case hasExt(urlPath, ".tsv"):
			return extract.MIMETSV, nil
		}
		return extract.MIMEText, nil
	case mt != "" && !octetStream(mt) && !convertible(mt):
		return "", fmt.Errorf("%w: %s; %s", ErrUnsupportedType, mt, readable)
	}
	// Office files, e-books, CSV and RTF, and bodies that say nothing of
	// their type: their content decides, containers opened to tell a
	// Word document from a workbook.
	t, err := extract.Detect(path.Base(urlPath), declared, bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return "", fmt.Errorf("%w: %v; %s", ErrUnsupportedType, strings.TrimPrefix(err.Error(), extract.ErrUnsupported.Error()+": "), readable)
	}
	return t, nil
}
