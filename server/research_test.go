package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/internal/researchtest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
	"github.com/mcpsearch/mcpsearch/rerank"
	"github.com/mcpsearch/mcpsearch/research"
)

// researchHarness serves web_search and fetch_url reading the pages of
// loopback sites, with reading's time-out read.
func researchHarness(t *testing.T, read time.Duration, tweak func(*config.Config)) *harness {
	t.Helper()
	f, err := fetch.New(fetch.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	return newHarnessDeps(t, func(c *config.Config) {
		c.WebSearchReadTimeout = read
		if tweak != nil {
			tweak(c)
		}
	}, func(d *Deps) {
		d.Fetch = f
		d.Research = research.New(f, research.Options{Timeout: read, PerHost: 2})
	})
}

// results turns paths of sites into search results.
func results(urls ...string) []searxngtest.Result {
	out := make([]searxngtest.Result, len(urls))
	for i, u := range urls {
		out[i] = searxngtest.Result{URL: u, Title: "Result " + u[strings.LastIndex(u, "/")+1:], Content: "A snippet written to choose a link."}
	}
	return out
}

func TestWebSearchReads(t *testing.T) {
	site := researchtest.New(t)
	h := researchHarness(t, 8*time.Second, nil)
	for _, a := range researchtest.Answers {
		h.fake.SetResults(a.Question, results(site.URL+"/history.html", site.URL+"/install.html", site.URL+"/settings.html", site.URL+"/limits.html"))
		res := h.call(t, "web_search", map[string]any{"query": a.Question, "read": 4, "max_passages": 3})
		out := decode[WebSearchOutput](t, res)
		if len(out.Pages) != 4 || len(out.Results) != 4 {
			t.Fatalf("%q: %d pages and %d results, want 4 of each", a.Question, len(out.Pages), len(out.Results))
		}
		for _, p := range out.Pages {
			if p.Status != "read" || p.Chars == 0 {
				t.Fatalf("%q: page %+v not read", a.Question, p)
			}
		}
		if len(out.Passages) == 0 || !strings.Contains(out.Passages[0].Text, a.Phrase) || out.Passages[0].URL != site.URL+a.Page {
			t.Fatalf("%q: the first passage does not answer it: %+v", a.Question, out.Passages)
		}
		p := out.Passages[0]
		if out.Results[p.Result-1].URL != p.URL || p.Score != 1 || p.Title == "" {
			t.Errorf("%q: passage %+v does not name its result, score or title", a.Question, p)
		}
		for _, p := range out.Passages {
			// The site's furniture is never a passage.
			for _, nav := range []string{"Prev", "Copyright", "Installing\nSettings"} {
				if strings.Contains(p.Text, nav) {
					t.Errorf("%q: passage holds the site's furniture %q: %q", a.Question, nav, p.Text)
				}
			}
		}
		text := textOf(res)
		if !strings.Contains(text, "["+itoa(p.Result)+"] "+p.URL) || !strings.Contains(text, a.Phrase) {
			t.Errorf("%q: the text does not list the passage under its result number and URL:\n%s", a.Question, text)
		}
		if strings.Contains(text, "A snippet written to choose a link.") {
			t.Errorf("%q: the text repeats the snippets of pages it read:\n%s", a.Question, text)
		}
	}

	// A heading path names where a passage is.
	h.fake.SetResults("quill_cache_ttl", results(site.URL+"/settings.html"))
	out := decode[WebSearchOutput](t, h.call(t, "web_search", map[string]any{"query": "quill_cache_ttl", "read": 1}))
	if len(out.Passages) == 0 || out.Passages[0].Heading != "2. Settings > 2.2. Cache > quill_cache_ttl (interval)" {
		t.Errorf("heading path: %+v", out.Passages)
	}

	// read 0 leaves the answer as it was.
	out = decode[WebSearchOutput](t, h.call(t, "web_search", map[string]any{"query": "quill_cache_ttl"}))
	if out.Passages != nil || out.Pages != nil {
		t.Errorf("a search without read read pages: %+v", out)
	}
}

// TestWebSearchReadsAtOnce shows pages read in parallel: two sites of
// three slow pages each, read with two pages of a host at a time, are
// seen by the sites at once, never more than two on one of them.
func TestWebSearchReadsAtOnce(t *testing.T) {
	a, b := researchtest.New(t), researchtest.New(t)
	a.SetDelay(300 * time.Millisecond)
	b.SetDelay(300 * time.Millisecond)
	h := researchHarness(t, 30*time.Second, nil)
	q := "quill_max_sessions default"
	h.fake.SetResults(q, results(a.URL+"/settings.html", b.URL+"/settings.html", a.URL+"/install.html", b.URL+"/install.html",
		a.URL+"/limits.html", b.URL+"/limits.html"))
	out := decode[WebSearchOutput](t, h.call(t, "web_search", map[string]any{"query": q, "read": 6}))
	for _, p := range out.Pages {
		if p.Status != "read" {
			t.Fatalf("page %+v not read", p)
		}
	}
	if a.Peak() != 2 || b.Peak() != 2 {
		t.Errorf("each site saw at most %d and %d requests at once, want the per-host limit, 2", a.Peak(), b.Peak())
	}
	// The same article on both sites is one passage.
	if n := strings.Count(textOf(h.call(t, "web_search", map[string]any{"query": q, "read": 6})), "The default is 250 sessions"); n != 1 {
		t.Errorf("the same passage of two sites came %d times", n)
	}
	// Read again within fetch's cache lifetime: not fetched again.
	if hits := a.Hits("/settings.html"); hits != 1 {
		t.Errorf("a page read twice within the cache's lifetime was fetched %d times", hits)
	}
}

// TestWebSearchBadPages reads every kind of bad page beside a good one:
// each is failed with its reason, the call answers by its time-out, and the
// good page's passages still come back.
func TestWebSearchBadPages(t *testing.T) {
	site := researchtest.New(t)
	read := 2 * time.Second
	h := researchHarness(t, read, func(c *config.Config) { c.WebSearchMaxResults = 10 })
	q := "Which port does the Quillfeather daemon listen on?"
	bad := map[string]string{
		"/hang":      "time-out",
		"/endless":   "too large",
		"/missing":   "404 Not Found",
		"/broken":    "500 Internal Server Error",
		"/loop":      "too many redirects",
		"/huge":      "too large",
		"/image.png": "not a readable type (image/png)",
	}
	urls := []string{site.URL + "/install.html"}
	for path := range bad {
		urls = append(urls, site.URL+path)
	}
	h.fake.SetResults(q, results(urls...))
	start := time.Now()
	res := h.call(t, "web_search", map[string]any{"query": q, "read": len(urls)})
	took := time.Since(start)
	out := decode[WebSearchOutput](t, res)
	// Bounded by what a hang would take without the time-out: the fetch's
	// own 20 s.
	if took >= fetch.DefaultTimeout {
		t.Errorf("the call took %v: the pages held it past its time-out (%v)", took, read)
	}
	t.Logf("%d pages, %v", len(urls), took)
	for _, p := range out.Pages {
		path := strings.TrimPrefix(p.URL, site.URL)
		want, isBad := bad[path]
		switch {
		case !isBad && p.Status != "read":
			t.Errorf("the good page failed: %+v", p)
		case isBad && p.Status != "failed":
			t.Errorf("%s: status %s, want failed", path, p.Status)
		case isBad && !strings.HasPrefix(p.Reason, want):
			t.Errorf("%s: reason %q, want %q", path, p.Reason, want)
		}
	}
	if len(out.Passages) == 0 || !strings.Contains(out.Passages[0].Text, "listens on port 7311") {
		t.Errorf("the good page's passage is missing: %+v", out.Passages)
	}
	text := textOf(res)
	if !strings.Contains(text, "from 1 page read:") || !strings.Contains(text, "Not read:") || !strings.Contains(text, "/missing: 404 Not Found") {
		t.Errorf("the text does not list the pages not read and why:\n%s", text)
	}
}

func TestWebSearchReadArguments(t *testing.T) {
	h := researchHarness(t, time.Second, func(c *config.Config) { c.WebSearchReadMax = 4 })
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"query": "q", "read": 5}, "read"},
		{map[string]any{"query": "q", "read": -1}, "read"},
		{map[string]any{"query": "q", "read": "three"}, "read"},
		{map[string]any{"query": "q", "read": 2, "max_passages": 0}, "max_passages"},
		{map[string]any{"query": "q", "read": 2, "max_passages": 21}, "max_passages"},
		{map[string]any{"query": "q", "max_passages": 3}, "max_passages"},
	} {
		te := toolErr(t, h.call(t, "web_search", tc.args))
		if te.Code != CodeToolError || !strings.Contains(te.Message, "invalid arguments") || !strings.Contains(te.Message, tc.want) {
			t.Errorf("%v: %s %q, want an invalid-argument error naming %s", tc.args, te.Code, te.Message, tc.want)
		}
	}
	// Without page reading, read is refused in words.
	off := newHarness(t, nil)
	te := toolErr(t, off.call(t, "web_search", map[string]any{"query": "q", "read": 2}))
	if te.Code != CodeToolError || !strings.Contains(te.Message, "invalid arguments") || !strings.Contains(te.Message, "does not read pages") {
		t.Errorf("read on a server without fetch: %s %q", te.Code, te.Message)
	}
}

func TestFetchURLQuery(t *testing.T) {
	site := researchtest.New(t)
	h := researchHarness(t, 8*time.Second, nil)
	res := h.call(t, "fetch_url", map[string]any{"url": site.URL + "/settings.html", "query": "how long are cache entries kept", "max_passages": 2})
	out := decode[FetchURLOutput](t, res)
	if len(out.Passages) == 0 || len(out.Passages) > 2 || !strings.Contains(out.Passages[0].Text, "kept for 90 minutes") {
		t.Fatalf("passages %+v", out.Passages)
	}
	if out.Content != "" || out.Passages[0].Result != 0 || out.Passages[0].URL != site.URL+"/settings.html" || out.TotalLength == 0 {
		t.Errorf("output %+v", out)
	}
	text := textOf(res)
	if len(text) > 1500 || !strings.Contains(text, "2.2. Cache > quill_cache_ttl (interval)") {
		t.Errorf("text (%d bytes):\n%s", len(text), text)
	}
	// Within a section.
	out = decode[FetchURLOutput](t, h.call(t, "fetch_url", map[string]any{"url": site.URL + "/settings.html", "query": "default", "section": "Sessions"}))
	for _, p := range out.Passages {
		if strings.Contains(p.Heading, "Cache") {
			t.Errorf("a passage outside the section: %+v", p)
		}
	}
	// A PDF's passages are under their page.
	out = decode[FetchURLOutput](t, h.call(t, "fetch_url", map[string]any{"url": site.URL + "/notes.pdf", "query": "port"}))
	if len(out.Passages) == 0 || out.Passages[0].Heading != "page 2" {
		t.Errorf("PDF passages %+v", out.Passages)
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"url": site.URL + "/settings.html", "query": ""}, "query"},
		{map[string]any{"url": site.URL + "/settings.html", "query": "   "}, "query"},
		{map[string]any{"url": site.URL + "/settings.html", "query": strings.Repeat("x", 2001)}, "query"},
		{map[string]any{"url": site.URL + "/settings.html", "query": "q", "start_index": 10}, "start_index"},
		{map[string]any{"url": site.URL + "/settings.html", "max_passages": 2}, "max_passages"},
		{map[string]any{"url": site.URL + "/settings.html", "query": "q", "max_passages": 50}, "max_passages"},
	} {
		te := toolErr(t, h.call(t, "fetch_url", tc.args))
		if te.Code != CodeToolError || !strings.Contains(te.Message, "invalid arguments") || !strings.Contains(te.Message, tc.want) {
			t.Errorf("%v: %s %q, want an invalid-argument error naming %s", tc.args, te.Code, te.Message, tc.want)
		}
	}
}

// TestWebSearchAuditedWithoutText checks what the audit keeps of a search
// that read pages: its arguments, the pages read and where each passage
// came from, not the passages' text.
func TestWebSearchAuditedWithoutText(t *testing.T) {
	out := WebSearchOutput{Query: "q", Results: []WebResult{{URL: "https://a.example/1"}, {URL: "https://b.example/2"}},
		Pages:    []WebPage{{URL: "https://a.example/1", Status: "read", Chars: 900}, {URL: "https://b.example/2", Status: "failed", Reason: "time-out"}},
		Passages: []WebPassage{{URL: "https://a.example/1", Result: 1, Heading: "H", Text: "secret words of the page", Score: 1}}}
	b, err := json.Marshal(out.audited())
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if strings.Contains(s, "secret words") || !strings.Contains(s, `"pages_read":1`) || !strings.Contains(s, `"chars":24`) || !strings.Contains(s, "time-out") {
		t.Errorf("audited %s", s)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// standInReranker is a TEI-shaped reranker in the test: a text scores 1
// when it holds favourite, else 0; down answers 500. It records how many
// texts each request held.
type standInReranker struct {
	favourite string
	mu        sync.Mutex
	down      bool
	sizes     []int
}

func (s *standInReranker) serve(t *testing.T) *rerank.Client {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Query string   `json:"query"`
			Texts []string `json:"texts"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		down := s.down
		s.sizes = append(s.sizes, len(req.Texts))
		s.mu.Unlock()
		if down {
			http.Error(w, `{"error":"model not loaded"}`, http.StatusInternalServerError)
			return
		}
		type entry struct {
			Index int     `json:"index"`
			Score float64 `json:"score"`
		}
		var out []entry
		for i, tx := range req.Texts {
			score := 0.0
			if strings.Contains(tx, s.favourite) {
				score = 1
			}
			out = append(out, entry{i, score})
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(hs.Close)
	c, err := rerank.New(rerank.Options{URL: hs.URL + "/rerank"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSearchDocsReranked: with a reranker, search_docs's best candidates
// are reordered by it; when it fails, the fused order is kept and the
// result says so; /readyz reports it.
func TestSearchDocsReranked(t *testing.T) {
	sr := &standInReranker{favourite: "lighthouse"}
	rr := sr.serve(t)
	h := newDocsHarness(t, nil, func(d *Deps) { d.Reranker = rr })
	var doc strings.Builder
	for i := range 30 {
		fmt.Fprintf(&doc, "## Part %d\n\nThe harbour keeps boats of every size, part %d of the harbour guide.\n\n", i, i)
	}
	doc.WriteString("## Coast\n\nThe lighthouse stands at the end of the harbour wall.\n")
	resp := upload(t, h.http.URL, "conv-r", map[string][]byte{"guide.md": []byte(doc.String())}, nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: %s", resp.Status)
	}
	h.waitReady(t, "conv-r", 1)

	out := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"query": "harbour", "conversation_id": "conv-r", "top_k": 3}))
	if len(out.Chunks) != 3 || !strings.Contains(out.Chunks[0].Content, "lighthouse") || out.Chunks[0].Score != 1 || out.Note != "" {
		t.Fatalf("reranked search: %+v", out)
	}
	if n := sr.sizes[len(sr.sizes)-1]; n < 3 || n > research.RerankDepth {
		t.Errorf("the reranker was asked about %d passages, want top_k up to %d", n, research.RerankDepth)
	}

	sr.mu.Lock()
	sr.down = true
	sr.mu.Unlock()
	res := h.call(t, "search_docs", map[string]any{"query": "harbour", "conversation_id": "conv-r", "top_k": 3})
	out = decode[SearchDocsOutput](t, res)
	if len(out.Chunks) != 3 || !strings.Contains(out.Note, "reranker failed") || !strings.Contains(textOf(res), "Note: the reranker failed") {
		t.Errorf("with the reranker down: %+v", out)
	}
	checks := h.srv.dependencyChecks(t.Context(), true)
	if c := checks["reranker"]; c.Status != "degraded" || !strings.Contains(c.Error, "HTTP 500") {
		t.Errorf("readiness of a failing reranker: %+v", c)
	}
}
