package server

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/internal/ttlcache"
	"github.com/mcpsearch/mcpsearch/rerank"
	"github.com/mcpsearch/mcpsearch/research"
	"github.com/mcpsearch/mcpsearch/searxng"
)

// maxQueryRunes bounds every query a tool accepts.
const maxQueryRunes = 2000

// searxngCategories are the categories SearXNG ships with.
var searxngCategories = []string{"general", "images", "videos", "news", "map", "music", "it", "science", "files", "social media"}

var timeRanges = []string{"day", "week", "month", "year"}

// WebSearchInput is the web_search tool's arguments.
type WebSearchInput struct {
	Query      string   `json:"query" jsonschema:"what to search the web for, as you would type it into a search engine (at most 2000 characters)"`
	MaxResults int      `json:"max_results,omitempty" jsonschema:"how many results to return, 1 to the server's limit (default 5)"`
	Language   string   `json:"language,omitempty" jsonschema:"language of the results as a code such as en, de or fr-CA; default auto"`
	Categories []string `json:"categories,omitempty" jsonschema:"SearXNG categories to search: general, news, science, it, images, videos, music, files, map, social media (default [general])"`
	TimeRange  string   `json:"time_range,omitempty" jsonschema:"only results from the last day, week, month or year"`
	Page       int      `json:"page,omitempty" jsonschema:"result page, from 1 (default 1)"`
	SafeSearch *int     `json:"safesearch,omitempty" jsonschema:"0 off, 1 moderate, 2 strict (default: the instance's setting)"`
	// Domains narrow the search; SearXNG receives them as site: operators
	// and results outside them are dropped.
	IncludeDomains []string `json:"include_domains,omitempty" jsonschema:"only results from these domains or their subdomains, e.g. [\"go.dev\", \"github.com\"]"`
	ExcludeDomains []string `json:"exclude_domains,omitempty" jsonschema:"no results from these domains or their subdomains"`
	// Read asks for the answer, not just the links: the first Read
	// results' pages are read at once and their passages that answer
	// the query returned.
	Read        int `json:"read,omitempty" jsonschema:"read the first N results' pages (after the domain filters) and return the passages of them that answer the query, best first, instead of snippets only: one call answers a factual question. 0 (default) returns results and snippets; 3 to 5 is a good value"`
	MaxPassages int `json:"max_passages,omitempty" jsonschema:"with read: the most passages to return, 1 to 20 (default 8)"`
}

// defaultMaxPassages is how many passages a call with read returns unless
// it says.
const defaultMaxPassages = 8

// maxPassages bounds max_passages.
const maxPassages = 20

// WebSearchOutput is the web_search tool's structured result.
type WebSearchOutput struct {
	Query               string               `json:"query"`
	Results             []WebResult          `json:"results"`
	Suggestions         []string             `json:"suggestions"`
	Answers             []WebAnswer          `json:"answers,omitempty"`
	Corrections         []string             `json:"corrections,omitempty"`
	Infoboxes           []WebInfobox         `json:"infoboxes,omitempty"`
	UnresponsiveEngines []UnresponsiveEngine `json:"unresponsive_engines,omitempty"`
	// Passages and Pages are there when the call asked to read.
	Passages []WebPassage `json:"passages,omitempty"`
	Pages    []WebPage    `json:"pages,omitempty"`
	// Note says in one line what could not be used to rank the passages.
	Note string `json:"note,omitempty"`
}

// WebPassage is a part of a page read that answers the query.
type WebPassage struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	// Text is whole sentences of the page's main content.
	Text string `json:"text"`
	// Heading is the heading path of the section holding it, joined by
	// " > "; empty when none.
	Heading string `json:"heading"`
	// Result is the 1-based number of the result the passage came from;
	// absent for fetch_url's passages.
	Result int `json:"result,omitempty"`
	// Score is 0 to 1: relative to the best passage, or the reranker's
	// relevance.
	Score float64 `json:"score"`
}

// WebPage is what became of a result page the call tried to read.
type WebPage struct {
	URL string `json:"url"`
	// Status is read or failed.
	Status string `json:"status"`
	// Reason says why a page failed: time-out, 404 Not Found, too large,
	// refused address, not a readable type, ...
	Reason string `json:"reason,omitempty"`
	// Chars is the length of the page's main content.
	Chars int `json:"chars"`
	// MS is how long the page took to read or fail.
	MS int64 `json:"ms"`
}

// WebResult is one search hit.
type WebResult struct {
	Title         string   `json:"title"`
	URL           string   `json:"url"`
	Content       string   `json:"content"`
	Engine        string   `json:"engine"`
	Engines       []string `json:"engines,omitempty"`
	PublishedDate string   `json:"published_date,omitempty"`
}

// WebAnswer is a direct answer some engines give.
type WebAnswer struct {
	Answer string `json:"answer"`
	URL    string `json:"url,omitempty"`
	Engine string `json:"engine,omitempty"`
}

// WebInfobox is a summary box about the query's subject.
type WebInfobox struct {
	Title   string `json:"title"`
	Content string `json:"content,omitempty"`
	URL     string `json:"url,omitempty"`
	Engine  string `json:"engine,omitempty"`
}

// UnresponsiveEngine tells why an engine gave nothing, so a model knows why
// results are thin.
type UnresponsiveEngine struct {
	Engine string `json:"engine"`
	Reason string `json:"reason"`
}

// scope: web_search touches no conversation.
func (WebSearchInput) scope() scope { return noConversation() }

// Researcher reads pages and finds their passages that answer a question
// (research.Reader).
type Researcher interface {
	Read(ctx context.Context, query string, sources []research.Source, max int) (research.Answer, error)
	Ask(ctx context.Context, query string, page research.Source, content string, max int) research.Answer
	Timeout() time.Duration
}

// Reranker orders texts by their relevance to a query (rerank.Client).
type Reranker interface {
	Rerank(ctx context.Context, query string, texts []string) ([]float64, error)
	Status() rerank.Status
}

// WebSearcher runs web searches (searxng.Client, searxng.Pool).
type WebSearcher interface {
	Search(ctx context.Context, r searxng.Request) (*searxng.Response, error)
	Ping(ctx context.Context) error
}

func webSearchTool() declared {
	return tool[webSearch, WebSearchInput, WebSearchOutput]{
		def: &mcp.Tool{
			Name:  "web_search",
			Title: "Web search",
			Description: "Search the web through the operator's SearXNG metasearch instance. " +
				"Use it for current events, facts you are unsure of, documentation and anything outside the conversation's files. " +
				"Returns numbered results with title, URL and snippet (plus direct answers, suggestions and engines that did not respond). " +
				"To get the answer itself in one call, set read (e.g. 5): the first results' pages are read at once and the passages that answer the query come back, " +
				"best first, each with its result number [n], URL and heading, instead of whole pages to fetch one by one. " +
				"Quote URLs from the results; do not invent them.",
			Annotations: &mcp.ToolAnnotations{Title: "Web search", ReadOnlyHint: true, OpenWorldHint: boolPtr(true), IdempotentHint: true},
		},
		handler:   newWebSearch,
		constrain: webSearch.constrain,
		run:       webSearch.search,
		more:      "ask for fewer results (max_results)",
		// A call that reads pages has the search's time and then the
		// pages'; the search alone is bounded by the SearXNG client.
		timeout:  func(c config.Config) time.Duration { return c.WebSearchTimeout + c.WebSearchReadTimeout },
		failures: searchFailures(),
		probe:    "searxng",
		ping:     webSearch.ping,
	}
}

// webSearch answers web_search: SearXNG behind a short cache.
type webSearch struct {
	searcher WebSearcher
	cache    *ttlcache.Cache[string, *searxng.Response]
	// lookups counts cache hits and misses.
	lookups    *prometheus.CounterVec
	maxResults int
	limit      resultLimit
	// reader reads result pages for calls with read; nil when the server
	// cannot fetch pages. readMax bounds read.
	reader  Researcher
	readMax int
}

func newWebSearch(e toolEnv) (webSearch, bool) {
	return webSearch{
		searcher:   e.deps.Search,
		cache:      ttlcache.New[string, *searxng.Response](e.cfg.WebSearchCacheSize, e.cfg.WebSearchCacheTTL),
		lookups:    e.metrics.cache,
		maxResults: e.cfg.WebSearchMaxResults,
		limit:      newResultLimit(e.cfg),
		reader:     e.deps.Research,
		readMax:    e.cfg.WebSearchReadMax,
	}, e.deps.Search != nil && e.cfg.WebSearchEnabled
}

// searchFailures are SearXNG's failures: a timeout, or an instance that
// could not answer (retryable) or answered something unusable.
func searchFailures() []failure {
	return []failure{
		{is: []error{searxng.ErrTimeout}, code: CodeTimeout, status: http.StatusGatewayTimeout, retryable: always},
		{is: []error{searxng.ErrUnreachable, searxng.ErrFormatDisabled, searxng.ErrRateLimited, searxng.ErrBadRequest, searxng.ErrStatus, searxng.ErrBadResponse},
			status: http.StatusBadGateway, retryable: searxng.Retryable, retryStatus: http.StatusServiceUnavailable},
	}
}

// constrain publishes web_search's limits; max_results depends on the
// operator's setting.
func (w webSearch) constrain(sc *jsonschema.Schema) {
	q := prop(sc, "query")
	q.MinLength, q.MaxLength = ptr(1), ptr(maxQueryRunes)
	m := prop(sc, "max_results")
	m.Minimum, m.Maximum = ptr(1.0), ptr(float64(w.maxResults))
	prop(sc, "language").MaxLength = ptr(16)
	c := prop(sc, "categories")
	c.Items.Enum = enum(searxngCategories...)[1:]
	c.MaxItems = ptr(len(searxngCategories))
	prop(sc, "time_range").Enum = enum(timeRanges...)
	p := prop(sc, "page")
	p.Minimum, p.Maximum = ptr(1.0), ptr(50.0)
	ss := prop(sc, "safesearch")
	ss.Minimum, ss.Maximum = ptr(0.0), ptr(2.0)
	for _, name := range []string{"include_domains", "exclude_domains"} {
		d := prop(sc, name)
		d.MaxItems = ptr(searxng.MaxDomains)
		d.Items.MinLength, d.Items.MaxLength = ptr(1), ptr(253)
	}
	r := prop(sc, "read")
	r.Minimum, r.Maximum = ptr(0.0), ptr(float64(w.readMax))
	mp := prop(sc, "max_passages")
	mp.Minimum, mp.Maximum = ptr(1.0), ptr(float64(maxPassages))
}

func (w webSearch) ping(ctx context.Context) error { return w.searcher.Ping(ctx) }

func (w webSearch) search(ctx context.Context, in WebSearchInput) (*mcp.CallToolResult, WebSearchOutput, error) {
	req, max, err := w.request(in)
	if err != nil {
		return nil, WebSearchOutput{}, err
	}
	key := cacheKey(req)
	resp, ok := w.cache.Get(key)
	if ok {
		w.lookups.WithLabelValues("hit").Inc()
	} else {
		w.lookups.WithLabelValues("miss").Inc()
		resp, err = w.searcher.Search(ctx, req)
		if err != nil {
			return nil, WebSearchOutput{}, fmt.Errorf("web search: %w", err)
		}
		w.cache.Put(key, resp)
	}
	out := webSearchOutput(req.Query, resp, max)
	if in.Read > 0 {
		if err := w.read(ctx, &out, in); err != nil {
			return nil, WebSearchOutput{}, err
		}
	}
	out, text := w.fit(out)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// read reads the pages of out's first in.Read results and adds the
// passages that answer the query, and what became of each page.
func (w webSearch) read(ctx context.Context, out *WebSearchOutput, in WebSearchInput) error {
	n := min(in.Read, len(out.Results))
	sources := make([]research.Source, n)
	for i, r := range out.Results[:n] {
		sources[i] = research.Source{URL: r.URL, Title: r.Title}
	}
	ans, err := w.reader.Read(ctx, out.Query, sources, cmp.Or(in.MaxPassages, defaultMaxPassages))
	if err != nil {
		return fmt.Errorf("web search: reading the results' pages: %w", err)
	}
	out.Passages, out.Pages, out.Note = webPassages(ans.Passages), make([]WebPage, len(ans.Pages)), ans.Note
	for i, p := range ans.Pages {
		out.Pages[i] = WebPage{URL: p.URL, Status: p.Status, Reason: p.Reason, Chars: p.Chars, MS: p.Took.Milliseconds()}
	}
	return nil
}

// audited is what the audit keeps of a search: the results' addresses,
// and with read the pages read and where each passage came from, not the
// passages' text (tens of kilobytes a call, all of it on the web).
func (o WebSearchOutput) audited() any {
	type passage struct {
		Result  int     `json:"result,omitempty"`
		URL     string  `json:"url"`
		Heading string  `json:"heading,omitempty"`
		Chars   int     `json:"chars"`
		Score   float64 `json:"score"`
	}
	a := struct {
		Query     string               `json:"query"`
		Results   []string             `json:"results"`
		PagesRead *int                 `json:"pages_read,omitempty"`
		Pages     []WebPage            `json:"pages,omitempty"`
		Passages  []passage            `json:"passages,omitempty"`
		Note      string               `json:"note,omitempty"`
		Answers   []WebAnswer          `json:"answers,omitempty"`
		Engines   []UnresponsiveEngine `json:"unresponsive_engines,omitempty"`
	}{Query: o.Query, Results: make([]string, len(o.Results)), Pages: o.Pages, Note: o.Note, Answers: o.Answers, Engines: o.UnresponsiveEngines}
	for i, r := range o.Results {
		a.Results[i] = r.URL
	}
	if o.Pages != nil {
		read := 0
		for _, p := range o.Pages {
			if p.Status == research.StatusRead {
				read++
			}
		}
		a.PagesRead = &read
	}
	for _, p := range o.Passages {
		a.Passages = append(a.Passages, passage{p.Result, p.URL, p.Heading, utf8.RuneCountInString(p.Text), p.Score})
	}
	return a
}

// webPassages converts the passages research found.
func webPassages(ps []research.Passage) []WebPassage {
	out := make([]WebPassage, len(ps))
	for i, p := range ps {
		out[i] = WebPassage{URL: p.URL, Title: p.Title, Text: p.Text, Heading: p.Heading, Result: p.Result, Score: p.Score}
	}
	return out
}

// fit keeps what of a search's answer fits the result size limit: the best
// results first, then the answers, infoboxes, corrections, suggestions and
// failed engines, each list cut at the first item that does not fit. The
// text says how many results were left out.
func (w webSearch) fit(all WebSearchOutput) (WebSearchOutput, string) {
	if text := webSearchText(all); w.limit.fits(text, all) {
		return all, text
	}
	out := WebSearchOutput{Query: all.Query, Results: []WebResult{}, Suggestions: []string{}, Note: all.Note}
	render := func() (string, any) { return webSearchText(out), out }
	// With read, the passages are the answer: kept first.
	out.Passages = all.Passages
	keepFitting(w.limit, &out.Passages, render)
	out.Pages = all.Pages
	keepFitting(w.limit, &out.Pages, render)
	out.Results = all.Results
	keepFitting(w.limit, &out.Results, render)
	out.Answers = all.Answers
	keepFitting(w.limit, &out.Answers, render)
	out.Infoboxes = all.Infoboxes
	keepFitting(w.limit, &out.Infoboxes, render)
	out.Corrections = all.Corrections
	keepFitting(w.limit, &out.Corrections, render)
	out.Suggestions = all.Suggestions
	keepFitting(w.limit, &out.Suggestions, render)
	out.UnresponsiveEngines = all.UnresponsiveEngines
	keepFitting(w.limit, &out.UnresponsiveEngines, render)
	text := webSearchText(out)
	if left := len(all.Passages) - len(out.Passages); left > 0 {
		text += "\n" + w.limit.note(fmt.Sprintf("%s left out; ask for fewer (max_passages)", plural(left, "more passage")))
	}
	if left := len(all.Results) - len(out.Results); left > 0 {
		text += "\n" + w.limit.note(fmt.Sprintf("%s left out; ask for fewer results (max_results)", plural(left, "more result")))
	}
	return out, text
}

// request turns in, whose ranges and enums the input schema has checked,
// into a SearXNG request.
func (w webSearch) request(in WebSearchInput) (searxng.Request, int, error) {
	q := strings.Join(strings.Fields(in.Query), " ")
	if q == "" {
		return searxng.Request{}, 0, badArg("query is blank: send the words to search for")
	}
	if strings.IndexFunc(q, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) >= 0 {
		return searxng.Request{}, 0, badArg("query holds a control character or invalid text: send plain words")
	}
	max := in.MaxResults
	if max == 0 {
		max = min(5, w.maxResults)
	}
	if in.Read > 0 {
		if w.reader == nil || w.readMax == 0 {
			return searxng.Request{}, 0, badArg("read: this server does not read pages (fetch_url or MCP_web_search_read_max is off): leave read out")
		}
		if in.Read > w.readMax {
			return searxng.Request{}, 0, badArg("read: %d is more than this server reads in one call (%d)", in.Read, w.readMax)
		}
		// The pages read are results: as many as asked to read.
		if max < in.Read {
			max = in.Read
		}
	} else if in.MaxPassages != 0 {
		return searxng.Request{}, 0, badArg("max_passages: passages come from pages read: set read too, or leave max_passages out")
	}
	cats := []string{"general"}
	if len(in.Categories) > 0 {
		cats = cats[:0]
		for _, c := range in.Categories {
			if !slices.Contains(cats, c) {
				cats = append(cats, c)
			}
		}
	}
	lang := strings.TrimSpace(in.Language)
	if strings.EqualFold(lang, "auto") {
		lang = ""
	}
	if strings.ContainsFunc(lang, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		return searxng.Request{}, 0, badArg("language %q is not a language code: send a code such as en, de or fr-CA, or auto", in.Language)
	}
	var domains [2][]string
	for i, list := range [][]string{in.IncludeDomains, in.ExcludeDomains} {
		for _, d := range list {
			n, err := searxng.NormalizeDomain(d)
			if err != nil {
				return searxng.Request{}, 0, badArg("%v: send domains such as go.dev or docs.python.org", err)
			}
			if !slices.Contains(domains[i], n) {
				domains[i] = append(domains[i], n)
			}
		}
	}
	return searxng.Request{Query: q, Categories: cats, Language: lang, TimeRange: in.TimeRange, Page: max0(in.Page), SafeSearch: in.SafeSearch,
		IncludeDomains: domains[0], ExcludeDomains: domains[1]}, max, nil
}

func max0(n int) int {
	if n <= 1 {
		return 0
	}
	return n
}

func cacheKey(r searxng.Request) string {
	cats := slices.Clone(r.Categories)
	slices.Sort(cats)
	ss := "-"
	if r.SafeSearch != nil {
		ss = fmt.Sprint(*r.SafeSearch)
	}
	inc, exc := slices.Sorted(slices.Values(r.IncludeDomains)), slices.Sorted(slices.Values(r.ExcludeDomains))
	return strings.Join([]string{strings.ToLower(r.Query), strings.Join(cats, ","), r.Language, r.TimeRange, fmt.Sprint(r.Page), ss,
		strings.Join(inc, ","), strings.Join(exc, ",")}, "\x00")
}

// webSearchOutput merges results that point at the same page and keeps the
// first max.
func webSearchOutput(query string, resp *searxng.Response, max int) WebSearchOutput {
	out := WebSearchOutput{Query: query, Results: []WebResult{}, Suggestions: []string{}}
	seen := map[string]int{}
	for _, r := range resp.Results {
		if r.URL == "" {
			continue
		}
		key := normalURL(r.URL)
		if i, dup := seen[key]; dup {
			merged := &out.Results[i]
			for _, e := range append([]string{r.Engine}, r.Engines...) {
				if e != "" && !slices.Contains(merged.Engines, e) {
					merged.Engines = append(merged.Engines, e)
				}
			}
			if len(r.Content) > len(merged.Content) {
				merged.Content = r.Content
			}
			continue
		}
		if len(out.Results) == max {
			continue
		}
		engines := slices.Clone(r.Engines)
		if r.Engine != "" && !slices.Contains(engines, r.Engine) {
			engines = append([]string{r.Engine}, engines...)
		}
		seen[key] = len(out.Results)
		out.Results = append(out.Results, WebResult{
			Title: strings.TrimSpace(r.Title), URL: r.URL, Content: strings.TrimSpace(r.Content),
			Engine: r.Engine, Engines: engines, PublishedDate: r.PublishedDate,
		})
	}
	out.Suggestions = append(out.Suggestions, resp.Suggestions...)
	for _, a := range resp.Answers {
		if a.Answer != "" {
			out.Answers = append(out.Answers, WebAnswer{Answer: a.Answer, URL: a.URL, Engine: a.Engine})
		}
	}
	out.Corrections = resp.Corrections
	for _, ib := range resp.Infoboxes {
		box := WebInfobox{Title: ib.Infobox, Content: ib.Content, URL: ib.ID, Engine: ib.Engine}
		if box.URL == "" && len(ib.URLs) > 0 {
			box.URL = ib.URLs[0].URL
		}
		out.Infoboxes = append(out.Infoboxes, box)
	}
	for _, u := range resp.UnresponsiveEngines {
		out.UnresponsiveEngines = append(out.UnresponsiveEngines, UnresponsiveEngine{Engine: u.Engine, Reason: u.Reason})
	}
	return out
}

// normalURL is the identity of a page for de-duplication: scheme and host
// case-folded, fragment and trailing slash dropped.
func normalURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return raw
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(strings.TrimPrefix(u.Host, "www."))
	u.Fragment = ""
	u.Path = strings.TrimSuffix(u.Path, "/")
	if u.Scheme == "http" {
		u.Scheme = "https"
	}
	return u.String()
}

// webSearchText renders out the way a model reads it best: numbered
// results, then answers, suggestions and the engines that failed.
func webSearchText(out WebSearchOutput) string {
	var b strings.Builder
	if len(out.Results) == 0 {
		fmt.Fprintf(&b, "No web results for %q.\n", out.Query)
	} else {
		fmt.Fprintf(&b, "Web results for %q:\n", out.Query)
	}
	read := map[string]bool{}
	for _, p := range out.Pages {
		read[p.URL] = p.Status == research.StatusRead
	}
	for i, r := range out.Results {
		fmt.Fprintf(&b, "\n%d. %s\n   %s\n", i+1, r.Title, r.URL)
		// A page read speaks through its passages.
		if r.Content != "" && !read[r.URL] {
			fmt.Fprintf(&b, "   %s\n", r.Content)
		}
	}
	if len(out.Pages) > 0 {
		read := 0
		for _, p := range out.Pages {
			if p.Status == research.StatusRead {
				read++
			}
		}
		if read == 0 {
			fmt.Fprintf(&b, "\nNone of the %s could be read (see below).\n", plural(len(out.Pages), "page"))
		} else {
			writePassages(&b, out.Passages, read)
		}
	}
	var failed []string
	for i, p := range out.Pages {
		if p.Status != research.StatusRead {
			failed = append(failed, fmt.Sprintf("[%d] %s: %s", i+1, p.URL, p.Reason))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(&b, "\nNot read:\n%s\n", strings.Join(failed, "\n"))
	}
	if out.Note != "" {
		fmt.Fprintf(&b, "\nNote: %s\n", out.Note)
	}
	for _, a := range out.Answers {
		fmt.Fprintf(&b, "\nAnswer: %s", a.Answer)
		if a.URL != "" {
			fmt.Fprintf(&b, " (%s)", a.URL)
		}
		b.WriteString("\n")
	}
	for _, ib := range out.Infoboxes {
		fmt.Fprintf(&b, "\nAbout %s: %s\n", ib.Title, ib.Content)
	}
	if len(out.Corrections) > 0 {
		fmt.Fprintf(&b, "\nDid you mean: %s\n", strings.Join(out.Corrections, "; "))
	}
	if len(out.Suggestions) > 0 {
		fmt.Fprintf(&b, "\nRelated searches: %s\n", strings.Join(out.Suggestions, "; "))
	}
	if len(out.UnresponsiveEngines) > 0 {
		parts := make([]string, len(out.UnresponsiveEngines))
		for i, u := range out.UnresponsiveEngines {
			parts[i] = u.Engine + " (" + u.Reason + ")"
		}
		fmt.Fprintf(&b, "\nEngines that did not respond: %s\n", strings.Join(parts, ", "))
	}
	return b.String()
}

// writePassages renders passages, each under its result number, URL and
// heading path; pages is how many pages the call read (0 for fetch_url's
// passages, which name no result).
func writePassages(b *strings.Builder, ps []WebPassage, pages int) {
	switch {
	case len(ps) > 0 && pages > 0:
		fmt.Fprintf(b, "\nPassages that answer it, best first, from %s read:\n", plural(pages, "page"))
	case len(ps) > 0:
		b.WriteString("\nPassages that answer it, best first:\n")
	case pages > 0:
		fmt.Fprintf(b, "\nNo passage of the %s read matches the query.\n", plural(pages, "page"))
	}
	for _, p := range ps {
		b.WriteString("\n")
		if p.Result > 0 {
			fmt.Fprintf(b, "[%d] ", p.Result)
		}
		b.WriteString(p.URL)
		if p.Heading != "" {
			fmt.Fprintf(b, " › %s", p.Heading)
		}
		fmt.Fprintf(b, "\n%s\n", p.Text)
	}
}
