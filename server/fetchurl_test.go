package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/internal/pdftest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
	"github.com/mcpsearch/mcpsearch/searxng"
)

// pages serves the fetch fixtures: a real HTML page, a long page, a PDF, a
// binary file and a redirect to a private address.
func pages(t *testing.T) *httptest.Server {
	t.Helper()
	html, err := os.ReadFile(filepath.Join("..", "fetch", "testdata", "zlib-how.html"))
	if err != nil {
		t.Fatal(err)
	}
	var long strings.Builder
	long.WriteString("<html><head><title>Long</title></head><body><main><h1>Long page</h1>")
	for i := range 400 {
		fmt.Fprintf(&long, "<h2>Part %d</h2><p>Paragraph %d of the long page, with enough words to fill the window.</p>", i, i)
	}
	long.WriteString("</main></body></html>")
	b := pdftest.New()
	b.TextPage("First page of the report.")
	b.TextPage("Second page says the budget is 42.")
	pdf := b.Bytes()
	mux := http.NewServeMux()
	mux.HandleFunc("/zlib", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(html)
	})
	mux.HandleFunc("/long", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, long.String())
	})
	mux.HandleFunc("/report.pdf", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		w.Write(pdf)
	})
	mux.HandleFunc("/image.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n"))
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

func fetchHarness(t *testing.T, opts fetch.Options) *harness {
	t.Helper()
	f, err := fetch.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return newHarnessDeps(t, nil, func(d *Deps) { d.Fetch = f })
}

func TestFetchURL(t *testing.T) {
	site := pages(t)
	h := fetchHarness(t, fetch.Options{AllowPrivate: true})

	out := decode[FetchURLOutput](t, h.call(t, "fetch_url", map[string]any{"url": site.URL + "/zlib"}))
	if out.Title == "" || out.FinalURL != site.URL+"/zlib" || out.ContentType != "text/html" || !strings.Contains(out.Content, "inflate") {
		t.Errorf("HTML page: title %q final %q type %q content %.200q", out.Title, out.FinalURL, out.ContentType, out.Content)
	}

	// A long page comes in windows that join up to the whole.
	var whole strings.Builder
	start, calls := 0, 0
	for {
		res := h.call(t, "fetch_url", map[string]any{"url": site.URL + "/long", "max_length": 2000, "start_index": start})
		part := decode[FetchURLOutput](t, res)
		whole.WriteString(part.Content)
		calls++
		if part.NextStartIndex == nil {
			if part.Truncated || !strings.Contains(textOf(res), "End of page") {
				t.Errorf("last part: truncated %v, text ends %q", part.Truncated, textOf(res)[max(0, len(textOf(res))-60):])
			}
			break
		}
		if !part.Truncated || !strings.Contains(textOf(res), fmt.Sprintf("start_index %d", *part.NextStartIndex)) {
			t.Fatalf("part at %d does not say how to read on: %q", start, textOf(res)[max(0, len(textOf(res))-120):])
		}
		start = *part.NextStartIndex
		if calls > 200 {
			t.Fatal("paging does not end")
		}
	}
	for _, want := range []string{"Part 0", "Part 399"} {
		if !strings.Contains(whole.String(), want) {
			t.Errorf("paged text lacks %q", want)
		}
	}

	sec := decode[FetchURLOutput](t, h.call(t, "fetch_url", map[string]any{"url": site.URL + "/long", "section": "part 7"}))
	if !strings.Contains(sec.Content, "Paragraph 7 ") || strings.Contains(sec.Content, "Paragraph 8 ") {
		t.Errorf("section part 7: %.300q", sec.Content)
	}

	pdf := decode[FetchURLOutput](t, h.call(t, "fetch_url", map[string]any{"url": site.URL + "/report.pdf"}))
	if pdf.ContentType != "application/pdf" || !strings.Contains(pdf.Content, "page 2") || !strings.Contains(pdf.Content, "budget is 42") {
		t.Errorf("PDF: type %q content %q", pdf.ContentType, pdf.Content)
	}
}

func TestFetchURLErrors(t *testing.T) {
	site := pages(t)
	open := fetchHarness(t, fetch.Options{AllowPrivate: true})
	guarded := fetchHarness(t, fetch.Options{})
	tests := []struct {
		name      string
		h         *harness
		url       string
		want      string
		retryable bool
	}{
		{"other type", open, site.URL + "/image.png", "image/png", false},
		{"not found", open, site.URL + "/missing", "404", false},
		{"not http", open, "ftp://example.com/file", "invalid", false},
		{"loopback refused", guarded, site.URL + "/zlib", "loopback", false},
		{"metadata refused", guarded, "http://169.254.169.254/latest/meta-data/", "link-local", false},
		{"section missing", open, site.URL + "/zlib", "no heading", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{"url": tt.url}
			if tt.name == "section missing" {
				args["section"] = "no such heading anywhere"
			}
			te := toolErr(t, tt.h.call(t, "fetch_url", args))
			if te.Code != CodeToolError || te.Retryable != tt.retryable || !strings.Contains(strings.ToLower(te.Message), tt.want) {
				t.Errorf("got %+v, want TOOL_ERROR retryable=%v mentioning %q", te, tt.retryable, tt.want)
			}
		})
	}
	// A redirect to the metadata address is refused even though the first
	// host is allowed.
	f, err := fetch.New(fetch.Options{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessDeps(t, nil, func(d *Deps) { d.Fetch = f })
	te := toolErr(t, h.call(t, "fetch_url", map[string]any{"url": site.URL + "/to-metadata"}))
	if !strings.Contains(te.Message, "169.254.169.254") {
		t.Errorf("redirect to the metadata address: %+v", te)
	}
}

func TestWebSearchDomains(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.WebSearchCacheTTL = 0 })
	out := decode[WebSearchOutput](t, h.call(t, "web_search", map[string]any{"query": "generics",
		"include_domains": []string{"Example.com"}, "exclude_domains": []string{"bad.example.com"}}))
	q := h.fake.LastQuery().Get("q")
	if !strings.Contains(q, "site:example.com") || !strings.Contains(q, "-site:bad.example.com") {
		t.Errorf("SearXNG got q=%q, want site: operators", q)
	}
	if len(out.Results) == 0 {
		t.Fatal("no results within the domains")
	}
	for _, r := range out.Results {
		if !strings.Contains(r.URL, "example.com") || strings.Contains(r.URL, "bad.example.com") {
			t.Errorf("result %s outside the domains", r.URL)
		}
	}
	te := toolErr(t, h.call(t, "web_search", map[string]any{"query": "x", "include_domains": []string{"not a domain"}}))
	if !strings.Contains(te.Message, "invalid arguments") {
		t.Errorf("bad domain: %+v", te)
	}
}

// TestWebSearchFailover: with two instances, a dead first one is skipped
// within the call, and readiness lists both.
func TestWebSearchFailover(t *testing.T) {
	fakes := searxngtest.NewN(t, 2)
	fakes[0].Close()
	pool, err := searxng.NewPool(searxngtest.URLs(fakes), searxng.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.SearXNGURL = strings.Join(searxngtest.URLs(fakes), ",")
	cfg.Transports = []string{"http"}
	srv := New(cfg, Deps{Search: pool}, slog.New(slog.DiscardHandler), "test")
	cs := connect(t, srv.MCP("stdio"))
	h := &harness{srv: srv, fake: fakes[1], session: cs}
	out := decode[WebSearchOutput](t, h.call(t, "web_search", map[string]any{"query": "failover"}))
	if len(out.Results) == 0 || fakes[1].Requests() == 0 {
		t.Fatalf("no results through the second instance: %+v", out)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	resp, err := http.Get(hs.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Checks map[string]check }
	json.NewDecoder(resp.Body).Decode(&body)
	if n := len(body.Checks["searxng"].Instances); n != 2 {
		t.Errorf("readiness lists %d SearXNG instances, want 2: %+v", n, body.Checks["searxng"])
	}
	metrics := scrapeMetrics(t, hs.URL)
	if !strings.Contains(metrics, `mcpsearch_searxng_instance_healthy{instance="`+fakes[0].URL+`"} 0`) {
		t.Errorf("metrics do not show the dead instance skipped")
	}
}
