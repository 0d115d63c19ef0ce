// Package research answers a question from web pages in one call: it reads
// the pages of a search's results at once, within one deadline, each through
// fetch's rules (addresses, redirects, size, types, cache); cuts their main
// content into passages of whole sentences under their heading paths with
// the documents' chunker; and returns the passages that best answer the
// question, ranked across every page read (BM25 with that set's statistics,
// fused with a semantic embedder's similarity, optionally reordered by a
// reranker), a few per page and each text once. It knows fetch, the chunker
// and the embedder, not MCP.
package research

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Defaults of Options.
const (
	DefaultTimeout = 8 * time.Second
	DefaultPerHost = 2
)

// Page statuses.
const (
	StatusRead   = "read"
	StatusFailed = "failed"
)

// Pages reads web pages as text (fetch.Client).
type Pages interface {
	Get(ctx context.Context, rawURL string) (*fetch.Document, error)
}

// Options configure a Reader. Zero fields take their defaults.
type Options struct {
	// Timeout bounds a whole Read: pages not read by then are reported as
	// failed with the reason "time-out", and the passages of the others
	// are returned (default DefaultTimeout).
	Timeout time.Duration
	// PerHost bounds the pages of one host read at once (default
	// DefaultPerHost), so that results from one site do not all hit it
	// together.
	PerHost int
	// Ranking chooses the passages.
	Ranking Ranking
	Log     *slog.Logger
}

// Reader reads pages and finds the passages that answer a question. It is
// safe for concurrent use.
type Reader struct {
	pages Pages
	opts  Options
}

// New returns a Reader of pages configured by opts.
func New(pages Pages, opts Options) *Reader {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.PerHost <= 0 {
		opts.PerHost = DefaultPerHost
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Reader{pages: pages, opts: opts}
}

// Timeout returns the bound of one Read.
func (r *Reader) Timeout() time.Duration { return r.opts.Timeout }

// Source is a page to read: a search result.
type Source struct {
	URL   string
	Title string
}

// Passage is a part of a page that answers the question.
type Passage struct {
	// URL and Title are those of the page (its search result's URL; the
	// page's own title, else the result's).
	URL   string
	Title string
	// Text is whole sentences of the page's main content, links reduced
	// to their text.
	Text string
	// Heading is the heading path of the section holding the passage,
	// joined by " > "; "" when the page has no heading above it. A PDF's
	// passages are under "page N".
	Heading string
	// Result is the 1-based number of the source the passage came from; 0
	// for a passage of Ask.
	Result int
	// Score is how well the passage matches, from 0 to 1: relative to the
	// best passage, or the reranker's relevance when one ordered them.
	Score float64
}

// Page is what became of one source.
type Page struct {
	URL string
	// Status is StatusRead or StatusFailed.
	Status string
	// Reason says in words why a page failed: "time-out", "404 Not
	// Found", "too large", "refused address", "not a readable type
	// (image/png)", ...; "" for a page read.
	Reason string
	// Chars is the length of the page's main content in characters.
	Chars int
	// Took is how long the page took to read (or to fail), from its
	// request's start; a page found in fetch's cache takes no time.
	Took time.Duration
}

// Answer is what a Read or an Ask found.
type Answer struct {
	// Passages are the best first.
	Passages []Passage
	// Pages are in the order of the sources.
	Pages []Page
	// Note says in one line what could not be used to rank (a failed
	// embedder or reranker); "" when nothing failed.
	Note string
}

// read is one page's outcome.
type read struct {
	i   int
	doc *fetch.Document
	err error
	// took is the page's own time; start when its request started.
	took  time.Duration
	start time.Time
}

// Read reads the sources at once and returns the max passages that best
// answer query, with what became of each source. It returns by the
// Reader's Timeout (or ctx's deadline, if sooner): pages not read by then
// are failed with the reason "time-out", the others still count. Read
// fails only when ctx is cancelled before it is done.
func (r *Reader) Read(ctx context.Context, query string, sources []Source, max int) (ans Answer, err error) {
	start := time.Now()
	// One parent for the pages read at once, each a "read page" of fetch's.
	ctx, span := telemetry.Start(ctx, "read pages", trace.SpanKindInternal)
	defer func() {
		if span.IsRecording() {
			read := 0
			for _, p := range ans.Pages {
				if p.Status == StatusRead {
					read++
				}
			}
			span.SetAttributes(telemetry.PagesKey.Int(len(sources)), telemetry.PagesReadKey.Int(read), telemetry.PassagesKey.Int(len(ans.Passages)))
			if err != nil {
				telemetry.Fail(span, "cancelled")
			}
		}
		span.End()
	}()
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	// The pages have the time-out but what ranking needs: cutting and
	// scoring take milliseconds, a remote embedder or reranker a request.
	readCtx, stopReading := context.WithTimeout(ctx, r.opts.Timeout-r.rankingReserve())
	defer stopReading()

	// Each host's pages wait in the order of the results, read by at most
	// PerHost workers: the first results of a site come first.
	done := make(chan read, len(sources))
	queues := map[string][]int{}
	var hosts []string
	for i, src := range sources {
		host := hostOf(src.URL)
		if _, ok := queues[host]; !ok {
			hosts = append(hosts, host)
		}
		queues[host] = append(queues[host], i)
	}
	for _, host := range hosts {
		q := make(chan int, len(queues[host]))
		for _, i := range queues[host] {
			q <- i
		}
		close(q)
		for range min(r.opts.PerHost, len(queues[host])) {
			go r.readQueue(readCtx, sources, q, done)
		}
	}

	pages := make([]Page, len(sources))
	got := make([]*fetch.Document, len(sources))
	for i, src := range sources {
		pages[i] = Page{URL: src.URL, Status: StatusFailed, Reason: "time-out"}
	}
	pending := len(sources)
wait:
	for pending > 0 {
		select {
		case rd := <-done:
			pending--
			p := &pages[rd.i]
			p.Took = rd.took
			if rd.err != nil {
				p.Reason = Reason(rd.err)
				r.opts.Log.Debug("research: page not read", "url", p.URL, "reason", p.Reason, "error", rd.err)
				continue
			}
			p.Status, p.Reason, p.Chars = StatusRead, "", utf8.RuneCountInString(rd.doc.Content)
			got[rd.i] = rd.doc
		case <-readCtx.Done():
			break wait
		}
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return Answer{}, err
	}
	if pending > 0 {
		// The pages still out took the whole time.
		for i := range pages {
			if pages[i].Status == StatusFailed && pages[i].Reason == "time-out" && pages[i].Took == 0 {
				pages[i].Took = time.Since(start)
			}
		}
	}

	best, note := r.passages(ctx, query, got, max)
	out := Answer{Pages: pages, Note: note, Passages: make([]Passage, 0, len(best))}
	for _, b := range best {
		d := got[b.page]
		title := strings.TrimSpace(d.Title)
		if title == "" {
			title = sources[b.page].Title
		}
		out.Passages = append(out.Passages, Passage{URL: sources[b.page].URL, Title: title, Text: b.shown(),
			Heading: b.heading, Result: b.page + 1, Score: round(b.score)})
	}
	return out, nil
}

// passages cuts the pages read into passages and ranks them, under a span
// of its own.
func (r *Reader) passages(ctx context.Context, query string, got []*fetch.Document, max int) ([]ranked, string) {
	ctx, span := telemetry.Start(ctx, "rank passages", trace.SpanKindInternal)
	defer span.End()
	var all []passage
	for i, d := range got {
		if d != nil {
			all = append(all, split(d.Content, d.Title, i)...)
		}
	}
	if span.IsRecording() {
		span.SetAttributes(telemetry.ChunksKey.Int(len(all)))
	}
	return r.opts.Ranking.rank(ctx, query, all, max)
}

// Ask returns the max passages of one page's content (Markdown, as fetch
// writes it) that best answer query.
func (r *Reader) Ask(ctx context.Context, query string, page Source, content string, max int) Answer {
	best, note := r.opts.Ranking.rank(ctx, query, split(content, page.Title, 0), max)
	out := Answer{Note: note, Passages: make([]Passage, 0, len(best))}
	for _, b := range best {
		out.Passages = append(out.Passages, Passage{URL: page.URL, Title: page.Title, Text: b.shown(), Heading: b.heading, Score: round(b.score)})
	}
	return out
}

// rankingReserve is the part of the time-out kept for ranking once the
// pages are read: a twentieth, and an eighth more when a remote model
// (a semantic embedder or a reranker) is asked.
func (r *Reader) rankingReserve() time.Duration {
	reserve := r.opts.Timeout / 20
	if r.opts.Ranking.Reranker != nil || r.opts.Ranking.embedder() != nil {
		reserve += r.opts.Timeout / 8
	}
	return reserve
}

// readQueue reads the pages of one host's queue in turn, and sends what
// became of each to done; once ctx ends, the pages left are sent as its
// error.
func (r *Reader) readQueue(ctx context.Context, sources []Source, q <-chan int, done chan<- read) {
	for i := range q {
		if err := ctx.Err(); err != nil {
			done <- read{i: i, err: err}
			continue
		}
		r.readOne(ctx, i, sources[i].URL, done)
	}
}

// readOne reads one page and sends what became of it to done. A panic
// while converting the page fails the page, not the process.
func (r *Reader) readOne(ctx context.Context, i int, rawURL string, done chan<- read) {
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			r.opts.Log.Error("research: reading a page panicked", "url", rawURL, "panic", v)
			done <- read{i: i, err: fmt.Errorf("%w: internal error while reading the page", fetch.ErrUnreadable), took: time.Since(start)}
		}
	}()
	doc, err := r.pages.Get(ctx, rawURL)
	done <- read{i: i, doc: doc, err: err, took: time.Since(start), start: start}
}

// hostOf names the host a URL's requests go to, for the per-host limit.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Host)
}

// Reason says in a few words why a page could not be read.
func Reason(err error) string {
	_, words := fetch.Describe(err)
	return words
}

func round(f float64) float64 {
	return float64(int(f*1000+0.5)) / 1000
}
