package crawl

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"time"
)

// itemKind says what a queued request is for.
type itemKind int

const (
	kindPage itemKind = iota
	kindRobots
	kindSitemap
	kindLLMs
)

// item is a request waiting in a host's queue.
type item struct {
	kind    itemKind
	u       *url.URL
	key     string // u.String()
	depth   int
	attempt int  // tries made so far, for a page answered 429 or 5xx
	again   bool // fetched before, held back as a duplicate, then released
	guessed bool // a sitemap no robots.txt or index named: /sitemap.xml
}

// host is the state of one scheme and authority: its robots.txt, its
// queue, and the politeness kept towards it.
type host struct {
	queue  []item
	robots *Robots
	// loaded is set once robots.txt is read (or found missing).
	loaded, loading bool
	active          int
	throttle        throttle
	delay           time.Duration // the least time between two starts: Options.Delay or Crawl-delay
	next            time.Time     // when the next request may start
	throttled       int           // pages in a row skipped after 429 or 5xx
	dead            string        // why the rest of the host is skipped
}

// outcome says how a request ended.
type outcome int

const (
	outOK outcome = iota
	outNotModified
	outGone
	outThrottled
	outSkipped
)

// result is a worker's report of one request, handled by the crawl's
// loop.
type result struct {
	it       item
	requests int

	// robots.txt
	robots *Robots

	// sitemaps and llms.txt
	sitemaps, pages []string
	more            int // sitemaps an index names past the most one file gives

	// pages
	out         outcome
	reason      Reason
	detail      string
	transient   bool          // a skip for a reason that may pass
	wait        time.Duration // for outThrottled
	took        time.Duration // until the answer's headers, or the failure
	good        bool          // a 2xx or 304 answer, which may speed the host up
	final       *url.URL
	contentType string
	body        []byte
	etag, lm    string
	hash        string
	links       []*url.URL
	canonical   *url.URL
	noindex     bool
	nofollow    bool
	noText      string // why a page without text is not handed over
}

// run is the state of one Crawl. Everything but the fields set in newRun
// is owned by the loop's goroutine; workers only read those and send
// results.
type run struct {
	c        *Crawler
	opts     Options
	ctx      context.Context
	cancel   context.CancelFunc
	start    *url.URL
	startKey string
	scope    scope
	known    map[string]Known
	emit     func(Page) error
	progress func(Stats)
	results  chan result

	hosts     map[string]*host
	order     []string // host keys in the order first seen
	inflight  int
	launched  int // pages requested, retries not counted
	queued    int // pages waiting in host queues
	seen      map[string]bool
	deep      map[string]bool // in scope but too deep, so far
	seenCap   int
	variants  map[string]int
	recorded  map[string]bool   // URLs pages were recorded under
	hashes    map[string]string // content hash -> URL it is recorded under
	kept      map[string]bool   // known URLs kept after a transient failure
	done      map[string]bool   // known URLs whose outcome is settled
	waiting   map[string][]item // pages of a known page's text, by that page
	sitemaps  int
	startFail string
	err       error
	sum       Summary
	lastProg  time.Time
}

func newRun(ctx context.Context, c *Crawler, start *url.URL, known map[string]Known, emit func(Page) error, progress func(Stats)) *run {
	ctx, cancel := context.WithCancel(ctx)
	maxInflight := max(c.opts.PerHost, 16)
	r := &run{
		c: c, opts: c.opts, ctx: ctx, cancel: cancel,
		start: start, startKey: start.String(), scope: newScope(c.opts.Scope, start),
		known: make(map[string]Known, len(known)), emit: emit, progress: progress,
		results:  make(chan result, maxInflight),
		hosts:    map[string]*host{},
		seen:     map[string]bool{},
		deep:     map[string]bool{},
		seenCap:  4*c.opts.MaxPages + 10000,
		variants: map[string]int{},
		recorded: map[string]bool{},
		hashes:   map[string]string{},
		kept:     map[string]bool{},
		done:     map[string]bool{},
		waiting:  map[string][]item{},
		sum:      Summary{Skipped: map[Reason]int{}},
	}
	for u, k := range known {
		if n, err := Normalize(u); err == nil {
			u = n
		}
		r.known[u] = k
		// A page of a known page's text is a duplicate of it, whichever
		// is reached first.
		if k.Hash != "" {
			if _, taken := r.hashes[k.Hash]; !taken {
				r.hashes[k.Hash] = u
			}
		}
	}
	return r
}

func (r *run) maxInflight() int { return cap(r.results) }

func (r *run) run() (Summary, error) {
	r.add(r.start, 0, true)
	for r.err == nil && r.ctx.Err() == nil {
		r.launch()
		if r.inflight == 0 && !r.pending() {
			if len(r.waiting) == 0 {
				break
			}
			// Known pages not reached did not keep their text: the pages
			// held back for them are fetched again.
			for u := range r.waiting {
				r.settle(u, false)
			}
			continue
		}
		r.wait()
	}
	// Let the workers still running finish: their requests end with the
	// context when it was cancelled.
	if r.err != nil || r.ctx.Err() != nil {
		r.cancel()
	}
	for r.inflight > 0 {
		r.handle(<-r.results)
	}
	stopped := r.err != nil || r.ctx.Err() != nil
	for _, key := range r.order {
		h := r.hosts[key]
		for _, it := range h.queue {
			if it.kind == kindPage && !stopped {
				r.sum.Limited = true
				r.skip(ReasonLimit, it.key, fmt.Sprintf("the crawl reached its limit of %d pages", r.opts.MaxPages))
			}
		}
		h.queue = nil
	}
	r.queued = 0
	for u := range r.recorded {
		r.sum.Reached = append(r.sum.Reached, u)
	}
	for u := range r.kept {
		if !r.recorded[u] {
			r.sum.Reached = append(r.sum.Reached, u)
		}
	}
	sort.Strings(r.sum.Reached)
	r.report(true)
	switch {
	case r.err != nil:
		return r.sum, r.err
	case r.ctx.Err() != nil:
		return r.sum, fmt.Errorf("crawl: %w", context.Cause(r.ctx))
	case r.startFail != "":
		return r.sum, fmt.Errorf("crawl %s: %w: %s", r.start.Redacted(), ErrUnavailable, r.startFail)
	}
	r.sum.whole = true
	return r.sum, nil
}

// hostOf returns the state of u's host, made on first use.
func (r *run) hostOf(u *url.URL) *host {
	key := hostKey(u)
	h, ok := r.hosts[key]
	if !ok {
		h = &host{delay: r.opts.Delay, throttle: newThrottle(r.opts.PerHost)}
		r.hosts[key] = h
		r.order = append(r.order, key)
	}
	return h
}

// add queues the page at u found depth links away, unless it was seen or
// is to be skipped. The start page passes Include and Exclude.
func (r *run) add(u *url.URL, depth int, isStart bool) {
	key := u.String()
	if r.seen[key] {
		return
	}
	if len(r.seen)+len(r.deep) >= r.seenCap {
		r.skip(ReasonLimit, key, "the crawl has seen too many URLs to follow more")
		return
	}
	inScope := r.scope.contains(u) && (isStart || r.included(u))
	if inScope && !skippedExts[extOf(u)] && depth > r.opts.MaxDepth {
		// Not marked seen: a shorter way to it may come later.
		if !r.deep[key] {
			r.deep[key] = true
			r.skip(ReasonDepth, key, fmt.Sprintf("more than %d links from the start page", r.opts.MaxDepth))
		}
		return
	}
	r.seen[key] = true
	if r.deep[key] {
		delete(r.deep, key)
		r.sum.Skipped[ReasonDepth]--
	}
	switch {
	case !r.scope.contains(u):
		r.skip(ReasonScope, key, "outside the crawl's scope")
	case !isStart && !r.included(u):
		r.skip(ReasonScope, key, "left out by the include or exclude patterns")
	case skippedExts[extOf(u)]:
		r.skip(ReasonType, key, "a "+extOf(u)+" file")
	case u.RawQuery != "" && r.variants[pathKey(u)] >= r.opts.MaxVariants:
		r.skip(ReasonVariants, key, fmt.Sprintf("more than %d query strings of %s", r.opts.MaxVariants, u.EscapedPath()))
	default:
		if u.RawQuery != "" {
			r.variants[pathKey(u)]++
		}
		h := r.hostOf(u)
		h.queue = append(h.queue, item{kind: kindPage, u: u, key: key, depth: depth})
		r.queued++
	}
}

// included applies Include and Exclude to u's path.
func (r *run) included(u *url.URL) bool {
	p := u.Path
	if len(r.c.include) > 0 && !matchAny(r.c.include, p) {
		return false
	}
	return !matchAny(r.c.exclude, p)
}

func (r *run) skip(reason Reason, u, detail string) {
	r.sum.Skipped[reason]++
	n := 0
	for _, s := range r.sum.Skips {
		if s.Reason == reason {
			n++
		}
	}
	if n < maxExamples {
		r.sum.Skips = append(r.sum.Skips, Skip{URL: u, Reason: reason, Detail: detail})
	}
}

// canRun reports whether the request at the front of h's queue may be
// sent, now or once the host's delay has passed: a page needs the page
// budget unless it is a retry.
func (r *run) canRun(h *host) bool {
	if len(h.queue) == 0 {
		return false
	}
	it := h.queue[0]
	return it.kind != kindPage || it.attempt > 0 || it.again || r.launched < r.opts.MaxPages
}

// pending reports whether a queued request can still be sent.
func (r *run) pending() bool {
	for _, h := range r.hosts {
		if r.canRun(h) {
			return true
		}
	}
	return false
}

// launch starts every request that may start now.
func (r *run) launch() {
	now := time.Now()
	for _, key := range r.order {
		h := r.hosts[key]
		for r.canRun(h) && h.active < h.throttle.limit() && r.inflight < r.maxInflight() {
			if !h.loaded {
				if !h.loading {
					h.loading = true
					u := &url.URL{Scheme: h.queue[0].u.Scheme, Host: h.queue[0].u.Host, Path: "/robots.txt"}
					r.start1(h, item{kind: kindRobots, u: u, key: u.String()}, now)
				}
				break
			}
			it := h.queue[0]
			if it.kind == kindPage {
				if reason, detail := r.refuse(h, it); reason != "" {
					h.queue = h.queue[1:]
					r.queued--
					r.skip(reason, it.key, detail)
					continue
				}
			} else if !h.robots.Allowed(requestPath(it.u)) {
				h.queue = h.queue[1:]
				continue
			}
			if now.Before(h.next) {
				break
			}
			h.queue = h.queue[1:]
			if it.kind == kindPage {
				r.queued--
				if it.attempt == 0 && !it.again {
					r.launched++
				}
			}
			r.start1(h, it, now)
		}
	}
}

// refuse says why a queued page is skipped without a request, if it is.
func (r *run) refuse(h *host, it item) (Reason, string) {
	switch {
	case r.recorded[it.key]:
		return ReasonDuplicate, "already recorded through a redirect or rel=canonical"
	case h.dead != "":
		r.keep(it)
		return ReasonError, h.dead
	case !h.robots.Allowed(requestPath(it.u)):
		if h.robots.disallowAll {
			r.keep(it)
			if it.key == r.startKey {
				r.startFail = "its robots.txt could not be fetched, which disallows the whole site"
			}
			return ReasonRobots, "robots.txt could not be fetched, which disallows the whole site"
		}
		r.settle(it.key, false)
		return ReasonRobots, "disallowed by robots.txt"
	}
	return "", ""
}

// keep keeps a known page that could not be checked for a reason that
// may pass, and follows its known links.
func (r *run) keep(it item) {
	k, ok := r.known[it.key]
	if !ok {
		return
	}
	r.kept[it.key] = true
	r.settle(it.key, true)
	r.addLinks(k.Links, it.depth+1)
}

// start1 sends one request in a worker.
func (r *run) start1(h *host, it item, now time.Time) {
	h.active++
	r.inflight++
	h.next = now.Add(h.delay)
	go func() { r.results <- r.work(it) }()
}

// wait blocks until a worker reports, a host's delay ends, or the crawl is
// cancelled.
func (r *run) wait() {
	var timer <-chan time.Time
	if at, ok := r.nextStart(); ok {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		timer = t.C
	}
	select {
	case res := <-r.results:
		r.handle(res)
	case <-timer:
	case <-r.ctx.Done():
	}
}

// nextStart returns when the earliest host waiting on its delay may send
// its next request.
func (r *run) nextStart() (time.Time, bool) {
	var at time.Time
	found := false
	if r.inflight >= r.maxInflight() {
		// Only a worker's report can free a slot.
		return at, false
	}
	for _, h := range r.hosts {
		if !r.canRun(h) || !h.loaded || h.active >= h.throttle.limit() {
			continue
		}
		if !found || h.next.Before(at) {
			at, found = h.next, true
		}
	}
	return at, found
}

// hostKey is the key of u's host in run.hosts.
func hostKey(u *url.URL) string { return u.Scheme + "://" + u.Host }

// handle takes a worker's result into the crawl's state.
func (r *run) handle(res result) {
	r.inflight--
	h := r.hosts[hostKey(res.it.u)]
	h.active--
	r.sum.Requests += res.requests
	switch res.it.kind {
	case kindRobots:
		r.robotsDone(h, res)
	case kindSitemap:
		left := res.more
		for _, s := range res.sitemaps {
			if !r.addDiscovery(kindSitemap, s, false) {
				left++
			}
		}
		r.addFound(res.it.u, res.pages)
		if res.detail != "" {
			r.skip(ReasonSitemap, res.it.key, res.detail)
		}
		if left > 0 {
			r.skip(ReasonSitemap, res.it.key, fmt.Sprintf("%d of the sitemaps it names were not read: a crawl reads at most %d", left, maxSitemaps))
		}
	case kindLLMs:
		r.addFound(res.it.u, res.pages)
	case kindPage:
		r.pageDone(h, res)
	}
	r.report(false)
}

func (r *run) robotsDone(h *host, res result) {
	h.robots, h.loaded, h.loading = res.robots, true, false
	if d := min(h.robots.Delay, MaxCrawlDelay); d > h.delay {
		// The delay counts from robots.txt's own request too.
		h.delay = d
		if at := time.Now().Add(d); at.After(h.next) {
			h.next = at
		}
	}
	if hostKey(res.it.u) != hostKey(r.start) {
		return
	}
	// The start host's sitemaps and llms.txt seed the crawl.
	sitemaps := h.robots.Sitemaps
	guessed := len(sitemaps) == 0
	if guessed {
		sitemaps = []string{root(r.start).ResolveReference(&url.URL{Path: "/sitemap.xml"}).String()}
	}
	left := 0
	for _, s := range sitemaps {
		if !r.addDiscovery(kindSitemap, s, guessed) {
			left++
		}
	}
	if left > 0 {
		r.skip(ReasonSitemap, hostKey(r.start)+"/robots.txt", fmt.Sprintf("%d of the sitemaps it names were not read: a crawl reads at most %d", left, maxSitemaps))
	}
	r.addDiscovery(kindLLMs, root(r.start).ResolveReference(&url.URL{Path: "/llms.txt"}).String(), false)
}

// addDiscovery queues a sitemap or llms.txt request. It reports false
// for a sitemap past the most a crawl reads.
func (r *run) addDiscovery(kind itemKind, raw string, guessed bool) bool {
	u, err := resolve(nil, raw)
	if err != nil {
		return true
	}
	key := u.String()
	if kind == kindSitemap {
		if r.seen["sitemap "+key] {
			return true
		}
		if r.sitemaps >= maxSitemaps {
			return false
		}
		r.sitemaps++
		r.seen["sitemap "+key] = true
	}
	h := r.hostOf(u)
	h.queue = append(h.queue, item{kind: kind, u: u, key: key, depth: 1, guessed: guessed})
	return true
}

// addFound queues the pages a sitemap or llms.txt lists, at depth 1.
func (r *run) addFound(base *url.URL, pages []string) {
	for _, p := range pages {
		if u, err := resolve(base, p); err == nil {
			r.add(u, 1, false)
		}
	}
}

func (r *run) pageDone(h *host, res result) {
	it := res.it
	k, isKnown := r.known[it.key]
	if res.took > 0 {
		if res.good {
			h.throttle.good(res.took)
		} else {
			h.throttle.bad(res.took)
		}
	}
	if res.out == outThrottled {
		h.throttle.refused()
		if it.attempt < r.opts.Retries && res.wait <= r.opts.MaxRetryWait && r.ctx.Err() == nil {
			// The whole host waits: 429 and 503 speak for the server.
			if at := time.Now().Add(res.wait); at.After(h.next) {
				h.next = at
			}
			it.attempt++
			h.queue = append([]item{it}, h.queue...)
			r.queued++
			return
		}
		if res.wait > r.opts.MaxRetryWait {
			res.detail += fmt.Sprintf("; it asked to wait %v, longer than %v", res.wait.Round(time.Second), r.opts.MaxRetryWait)
		} else if it.attempt > 0 {
			res.detail += fmt.Sprintf(" after %d tries", it.attempt+1)
		}
		h.throttled++
		if h.throttled >= maxThrottledPages && h.dead == "" {
			h.dead = fmt.Sprintf("the host refused %d pages in a row (%s)", h.throttled, res.detail)
		}
		res.out, res.reason, res.transient = outSkipped, ReasonError, true
	} else if res.out != outSkipped || res.reason != ReasonError {
		h.throttled = 0
	}
	if !it.again {
		r.sum.Fetched++
	}

	switch res.out {
	case outSkipped:
		r.skip(res.reason, it.key, res.detail)
		if res.transient {
			// A page that may be back next time is kept, and so are the
			// pages it led to.
			r.keep(it)
		} else {
			r.settle(it.key, false)
		}
		if it.key == r.startKey && res.transient && r.ctx.Err() == nil {
			r.startFail = res.detail
		}
	case outGone:
		r.settle(it.key, false)
		if !isKnown {
			r.skip(ReasonGone, it.key, res.detail)
			return
		}
		r.sum.Gone++
		r.send(Page{URL: it.key, Requested: it.key, Status: StatusGone, Depth: it.depth})
	case outNotModified:
		if r.recorded[it.key] {
			r.skip(ReasonDuplicate, it.key, "already recorded through a redirect or rel=canonical")
			return
		}
		r.recorded[it.key] = true
		r.settle(it.key, true)
		r.sum.NotModified++
		r.addLinks(k.Links, it.depth+1)
		r.send(Page{
			URL: it.key, Requested: it.key, Status: StatusUnchanged, Depth: it.depth,
			ETag: or(res.etag, k.ETag), LastModified: or(res.lm, k.LastModified), Hash: k.Hash, Links: k.Links,
		})
	case outOK:
		r.pageOK(res)
	}
}

// pageOK records a page answered with a body.
func (r *run) pageOK(res result) {
	it := res.it
	fkey := res.final.String()
	if fkey != it.key {
		if !r.scope.contains(res.final) {
			r.skip(ReasonScope, it.key, "redirected out of the crawl's scope to "+res.final.Redacted())
			return
		}
		r.seen[fkey] = true
	}
	key := fkey
	if c := res.canonical; c != nil && c.String() != fkey && r.scope.contains(c) && r.included(c) {
		if ch, ok := r.hosts[hostKey(c)]; !ok || ch.robots.Allowed(requestPath(c)) {
			key = c.String()
			r.seen[key] = true
		}
	}

	var links []string
	if !res.nofollow {
		inScope := map[string]bool{}
		for _, l := range res.links {
			r.add(l, it.depth+1, false)
			if s := l.String(); !inScope[s] && r.scope.contains(l) && r.included(l) {
				inScope[s] = true
				links = append(links, s)
			}
		}
	}
	var reason Reason
	var detail string
	switch {
	case r.recorded[key]:
		reason, detail = ReasonDuplicate, "the same page as "+key
	case res.noindex:
		reason, detail = ReasonRobots, "the page asks not to be indexed (noindex)"
	case key == r.startKey && !r.included(res.final):
		reason, detail = ReasonScope, "the start page is left out by the include or exclude patterns"
	case res.noText != "":
		reason, detail = ReasonType, res.noText
	}
	if reason != "" {
		r.skip(reason, it.key, detail)
		r.settle(it.key, false)
		return
	}
	if owner, ok := r.hashes[res.hash]; ok && owner != key {
		if _, known := r.known[owner]; known && !r.done[owner] {
			// The text was the known page owner's; whether it still is
			// is known once owner is reached.
			r.waiting[owner] = append(r.waiting[owner], it)
			return
		}
		r.skip(ReasonDuplicate, it.key, "the same text as "+owner)
		r.settle(it.key, false)
		return
	}
	if key != it.key {
		r.settle(it.key, false)
	}
	r.settle(key, r.known[key].Hash == res.hash)
	r.hashes[res.hash] = key
	r.recorded[key] = true

	p := Page{
		URL: key, Requested: it.key, Depth: it.depth, ContentType: res.contentType,
		ETag: res.etag, LastModified: res.lm, Hash: res.hash, Links: links,
	}
	switch k, ok := r.known[key]; {
	case !ok:
		p.Status, p.Body = StatusNew, res.body
	case k.Hash == res.hash:
		p.Status = StatusUnchanged
	default:
		p.Status, p.Body = StatusChanged, res.body
	}
	r.send(p)
}

// settle marks the known page u done. When it keeps its known text
// (unchanged, or kept after a failure that may pass), the pages of that
// text held back for it are duplicates; otherwise its known hash is
// released and they are queued again, to be fetched as pages of their
// own.
func (r *run) settle(u string, keeps bool) {
	k, known := r.known[u]
	if !known || r.done[u] {
		return
	}
	r.done[u] = true
	held := r.waiting[u]
	delete(r.waiting, u)
	if keeps {
		for _, it := range held {
			r.skip(ReasonDuplicate, it.key, "the same text as "+u)
		}
		return
	}
	if r.hashes[k.Hash] == u {
		delete(r.hashes, k.Hash)
	}
	for _, it := range held {
		it.again, it.attempt = true, 0
		h := r.hostOf(it.u)
		h.queue = append([]item{it}, h.queue...)
		r.queued++
	}
}

// addLinks queues the known links of a page whose body was not read.
func (r *run) addLinks(links []string, depth int) {
	for _, l := range links {
		if u, err := resolve(nil, l); err == nil {
			r.add(u, depth, false)
		}
	}
}

// send counts a page and hands it to emit.
func (r *run) send(p Page) {
	switch p.Status {
	case StatusNew:
		r.sum.New++
		r.sum.Emitted++
	case StatusChanged:
		r.sum.Changed++
		r.sum.Emitted++
	case StatusUnchanged:
		r.sum.Unchanged++
	}
	if r.err != nil || r.emit == nil || r.ctx.Err() != nil {
		return
	}
	if err := r.emit(p); err != nil {
		r.err = fmt.Errorf("crawl: %s: %w", p.URL, err)
		r.cancel()
	}
}

func (r *run) report(final bool) {
	if r.progress == nil {
		return
	}
	now := time.Now()
	if !final && now.Sub(r.lastProg) < progressEvery {
		return
	}
	r.lastProg = now
	skipped := 0
	for _, n := range r.sum.Skipped {
		skipped += n
	}
	r.progress(Stats{Fetched: r.sum.Fetched, Queued: r.queued, Skipped: skipped, Emitted: r.sum.Emitted, Unchanged: r.sum.Unchanged})
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// requestPath is the escaped path and query robots.txt rules match.
func requestPath(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}
