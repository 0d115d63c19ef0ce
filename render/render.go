// Package render loads web pages in a headless Chromium, for the pages whose
// text a script builds: a single-page application's HTML is a shell that
// holds nothing to read until its scripts have run.
//
// The browser never reaches the network on its own. Every request a page
// makes, the page's own, its scripts', its style sheets' and its API
// calls', is paused (the DevTools protocol's Fetch domain) and sent through
// the Client instead, fetch.Client: the addresses fetch_url would refuse
// stay out of reach, checked where the connection is opened, every
// redirect included; only GET and HEAD are sent (a crawler reads, it does
// not post forms), and each answer is bounded in size. The browser is
// started with a proxy that does not exist, so that a request the Fetch
// domain does not see (a WebSocket, a service worker's) fails rather than
// going out.
//
// One Chromium serves the whole process: it starts at the first page and
// stops after a minute without one, Options.MaxPages pages render at once,
// and each gets Options.Timeout.
package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// ErrNoBrowser reports that no Chromium is installed; its message is what
// a crawl reports of the pages that need one.
var ErrNoBrowser = errors.New("needs a browser: install chromium")

// Client sends the requests of the pages rendered: fetch.Client, with
// fetch_url's address rules.
type Client interface {
	Do(ctx context.Context, req *http.Request) (*http.Response, error)
}

// Defaults of Options.
const (
	DefaultMaxPages = 2
	DefaultTimeout  = 30 * time.Second
	DefaultMaxBytes = 10 << 20
	DefaultIdle     = time.Minute
)

// settle is how long a page's text must stay the same, once it has loaded,
// for its scripts to be deemed done; settleMax bounds the wait.
const (
	settle    = 500 * time.Millisecond
	settleMax = 5 * time.Second
	pollEvery = 100 * time.Millisecond
)

// Options configure a Renderer. The zero value is usable.
type Options struct {
	// Path is the browser to run; empty looks for chromium,
	// chromium-browser, google-chrome and google-chrome-stable on the PATH.
	Path string
	// MaxPages is how many pages render at once (default 2).
	MaxPages int
	// Timeout bounds the rendering of one page (default 30 s).
	Timeout time.Duration
	// MaxBytes bounds each answer a page loads (default 10 MiB).
	MaxBytes int64
	// Idle is how long the browser runs without a page before it stops
	// (default a minute).
	Idle time.Duration
	// Log receives the browser's start and stop; nil discards them.
	Log *slog.Logger
}

// Page is a page to render.
type Page struct {
	// URL is the page's address.
	URL string
	// Body and ContentType, when Body is not nil, answer the page's own
	// request: the crawler has read it already.
	Body        []byte
	ContentType string
	// Headers are sent with the requests to the page's origin (its scheme,
	// host and port), never to another.
	Headers http.Header
}

// Renderer renders pages in a headless Chromium. It is safe for concurrent
// use.
type Renderer struct {
	client Client
	opts   Options
	path   string
	slots  chan struct{}

	mu      sync.Mutex
	browser context.Context // nil while no browser runs
	stop    context.CancelFunc
	busy    int
	idle    *time.Timer
}

// Find returns the path of the Chromium on the PATH, or "".
func Find() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// New returns a Renderer loading pages through client. It starts no
// browser: the first page does.
func New(client Client, opts Options) *Renderer {
	if opts.MaxPages <= 0 {
		opts.MaxPages = DefaultMaxPages
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Idle <= 0 {
		opts.Idle = DefaultIdle
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	path := opts.Path
	if path == "" {
		path = Find()
	}
	return &Renderer{client: client, opts: opts, path: path, slots: make(chan struct{}, opts.MaxPages)}
}

// Available reports whether a browser was found.
func (r *Renderer) Available() bool { return r.path != "" }

// Close stops the browser, if it runs. Pages being rendered fail.
func (r *Renderer) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

func (r *Renderer) stopLocked() {
	if r.stop != nil {
		r.stop()
		r.opts.Log.Info("render: browser stopped")
	}
	r.browser, r.stop = nil, nil
	if r.idle != nil {
		r.idle.Stop()
		r.idle = nil
	}
}

// acquire returns the running browser's context, starting it if need be,
// and counts a page using it.
func (r *Renderer) acquire() (context.Context, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idle != nil {
		r.idle.Stop()
		r.idle = nil
	}
	if r.browser != nil && r.browser.Err() == nil {
		r.busy++
		return r.browser, nil
	}
	r.stopLocked()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(r.path),
		chromedp.DisableGPU,
		// Nothing leaves the browser but through the paused requests: a
		// request they do not see goes to a proxy that is not there, the
		// loopback ones too (Chromium sends those direct otherwise).
		chromedp.ProxyServer("http://255.255.255.255:1"),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("dns-prefetch-disable", true),
		chromedp.Flag("disable-component-update", true),
		// Frames of other sites render in the page's process, where their
		// requests are paused as the page's are.
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,IsolateOrigins,site-per-process"),
		chromedp.Flag("disable-site-isolation-trials", true),
		chromedp.WindowSize(1280, 1024),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to run its sandbox as root, as in a container.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// The first run starts the browser, which lives as long as bctx.
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		return nil, fmt.Errorf("render: start %s: %w", r.path, err)
	}
	r.opts.Log.Info("render: browser started", "path", r.path)
	r.browser = bctx
	r.stop = func() { cancelBrowser(); cancelAlloc() }
	r.busy++
	return bctx, nil
}

// release counts a page done; the last one starts the idle timer.
func (r *Renderer) release(browser context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.busy--
	if r.busy > 0 || r.browser != browser {
		return
	}
	r.idle = time.AfterFunc(r.opts.Idle, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.busy == 0 && r.browser == browser {
			r.stopLocked()
		}
	})
}

// Render loads the page, lets its scripts run until its text stops
// changing, and returns the HTML of the document they built. It fails with
// ErrNoBrowser when no browser is installed, and with ctx's error, or a
// time-out after Options.Timeout.
func (r *Renderer) Render(ctx context.Context, p Page) ([]byte, error) {
	if r.path == "" {
		return nil, ErrNoBrowser
	}
	origin, err := url.Parse(p.URL)
	if err != nil || origin.Scheme != "http" && origin.Scheme != "https" {
		return nil, fmt.Errorf("render: %q is not an http or https URL", p.URL)
	}
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.slots }()
	browser, err := r.acquire()
	if err != nil {
		return nil, err
	}
	defer r.release(browser)

	tab, closeTab := chromedp.NewContext(browser)
	defer closeTab()
	// The first run opens the tab, which lives as long as tab; the page's
	// time limit and the caller's context bound what follows.
	if err := chromedp.Do(tab); err != nil {
		return nil, fmt.Errorf("render: open a tab: %w", err)
	}
	tctx, cancel := context.WithTimeout(tab, r.opts.Timeout)
	defer cancel()
	stopWith := context.AfterFunc(ctx, cancel)
	defer stopWith()

	paused := chromedp.Events(tctx, fetch.RequestPaused)
	if _, err := chromedp.Call(tctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}}); err != nil {
		return nil, r.fail(ctx, tctx, err)
	}
	var served sync.Once
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			own := false
			if ev.ResourceType == network.ResourceTypeDocument && p.Body != nil {
				if u, err := url.Parse(ev.Request.URL); err == nil && u.String() == origin.String() {
					served.Do(func() { own = true })
				}
			}
			go r.answer(tctx, ev, p, origin, own)
		}
	}()
	if err := chromedp.Do(tctx, chromedp.Navigate(p.URL)); err != nil {
		return nil, r.fail(ctx, tctx, err)
	}
	if err := waitSettled(tctx); err != nil {
		return nil, r.fail(ctx, tctx, err)
	}
	doc, err := chromedp.Run(tctx, chromedp.Evaluate[string](`"<!DOCTYPE html>" + document.documentElement.outerHTML`))
	if err != nil {
		return nil, r.fail(ctx, tctx, err)
	}
	return []byte(doc), nil
}

// fail words a rendering's failure: the caller's cancel, the page's time
// limit, or the browser's error.
func (r *Renderer) fail(ctx, tctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("render: the page did not load within %v", r.opts.Timeout)
	}
	return fmt.Errorf("render: %w", err)
}

// waitSettled waits until the page's text has stayed the same for settle,
// or for settleMax.
func waitSettled(ctx context.Context) error {
	deadline := time.Now().Add(settleMax)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.body ? document.body.innerText.length : 0`))
		if err != nil {
			return err
		}
		if n != last {
			last, since = n, time.Now()
		} else if n > 0 && time.Since(since) >= settle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
	return nil
}

// hopHeaders are the answer's headers not handed to the browser: the body
// it gets is whole and decoded.
var hopHeaders = map[string]bool{
	"Content-Length": true, "Content-Encoding": true, "Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
}

// answer answers one paused request: through the Client for an http or
// https GET or HEAD, with the page's body for the page's own request,
// refused otherwise.
func (r *Renderer) answer(ctx context.Context, ev fetch.EventRequestPaused, p Page, origin *url.URL, own bool) {
	refuse := func(reason network.ErrorReason) {
		_, _ = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: reason})
	}
	fulfil := func(status int, h http.Header, body []byte) {
		var headers []*fetch.HeaderEntry
		for name, values := range h {
			if hopHeaders[http.CanonicalHeaderKey(name)] {
				continue
			}
			for _, v := range values {
				headers = append(headers, &fetch.HeaderEntry{Name: name, Value: v})
			}
		}
		_, _ = chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
			RequestID: ev.RequestID, ResponseCode: int64(status), ResponseHeaders: headers, Body: body})
	}
	if own {
		h := http.Header{}
		h.Set("Content-Type", p.ContentType)
		fulfil(http.StatusOK, h, p.Body)
		return
	}
	u, err := url.Parse(ev.Request.URL)
	switch {
	case err != nil || u.Scheme != "http" && u.Scheme != "https":
		refuse(network.ErrorReasonBlockedByClient)
		return
	case ev.Request.Method != http.MethodGet && ev.Request.Method != http.MethodHead:
		// A crawler reads; it does not post forms or call APIs that
		// change things.
		refuse(network.ErrorReasonBlockedByClient)
		return
	}
	req, err := http.NewRequestWithContext(ctx, ev.Request.Method, u.String(), nil)
	if err != nil {
		refuse(network.ErrorReasonFailed)
		return
	}
	for name, v := range ev.Request.Headers {
		if s, ok := v.(string); ok && !hopHeaders[http.CanonicalHeaderKey(name)] {
			req.Header.Set(name, s)
		}
	}
	if sameOrigin(u, origin) {
		for name, values := range p.Headers {
			req.Header[http.CanonicalHeaderKey(name)] = values
		}
	}
	resp, err := r.client.Do(ctx, req)
	if err != nil {
		refuse(network.ErrorReasonBlockedByClient)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, r.opts.MaxBytes+1))
	if err != nil || int64(len(body)) > r.opts.MaxBytes {
		refuse(network.ErrorReasonFailed)
		return
	}
	fulfil(resp.StatusCode, resp.Header, body)
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}
