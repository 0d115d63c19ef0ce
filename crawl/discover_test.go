package crawl

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := resolve(nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestScope(t *testing.T) {
	for _, tc := range []struct {
		kind  Scope
		start string
		in    []string
		out   []string
	}{
		{ScopePrefix, "https://example.com/docs/v2", []string{
			"https://example.com/docs/v2", "https://example.com/docs/v2/", "https://example.com/docs/v2/a/b", "http://example.com/docs/v2/x",
		}, []string{"https://example.com/docs/v2beta", "https://example.com/docs/", "https://www.example.com/docs/v2/a"}},
		{ScopePrefix, "https://example.com/docs/intro.html", []string{
			"https://example.com/docs/", "https://example.com/docs/other.html", "https://example.com/docs/a/b",
		}, []string{"https://example.com/", "https://example.com/docsx"}},
		{ScopePrefix, "https://example.com/", []string{"https://example.com/anything"}, []string{"https://example.com:8443/"}},
		{ScopeHost, "https://docs.example.com/a/", []string{"https://docs.example.com/", "http://docs.example.com/z"},
			[]string{"https://example.com/", "https://api.docs.example.com/"}},
		{ScopeDomain, "https://docs.example.co.uk/a/", []string{
			"https://example.co.uk/", "https://www.example.co.uk/x", "https://a.b.example.co.uk/",
		}, []string{"https://other.co.uk/", "https://example.com/", "https://notexample.co.uk/"}},
		{ScopeDomain, "http://127.0.0.1:8080/", []string{"http://127.0.0.1:8080/x"}, []string{"http://127.0.0.2:8080/"}},
	} {
		s := newScope(tc.kind, mustURL(t, tc.start))
		for _, u := range tc.in {
			if !s.contains(mustURL(t, u)) {
				t.Errorf("%s scope of %s: %s is out, want in", tc.kind, tc.start, u)
			}
		}
		for _, u := range tc.out {
			if s.contains(mustURL(t, u)) {
				t.Errorf("%s scope of %s: %s is in, want out", tc.kind, tc.start, u)
			}
		}
	}
}

func TestGlobs(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"/docs/**", []string{"/docs/", "/docs/a", "/docs/a/b/c.html"}, []string{"/doc", "/api/docs/a"}},
		{"/docs/*", []string{"/docs/a", "/docs/"}, []string{"/docs/a/b"}},
		{"*.pdf", []string{"/a.pdf", "/x/y/report.pdf"}, []string{"/a.pdf/x", "/a.pdfx"}},
		{"/v?/**", []string{"/v1/a", "/v2/"}, []string{"/v10/a", "/v/"}},
		{"**/changelog*", []string{"/changelog", "/a/b/changelog.html"}, []string{"/a/changelogs/x"}},
		{"/a.b/(x)+", []string{"/a.b/(x)+"}, []string{"/aXb/(x)+", "/a.b/xx"}},
	} {
		gs, err := parseGlobs([]string{tc.pattern})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range tc.match {
			if !matchAny(gs, p) {
				t.Errorf("%q does not match %q", tc.pattern, p)
			}
		}
		for _, p := range tc.miss {
			if matchAny(gs, p) {
				t.Errorf("%q matches %q", tc.pattern, p)
			}
		}
	}
	if _, err := parseGlobs([]string{"/a/***"}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("*** accepted: %v", err)
	}
}

func TestReadHTML(t *testing.T) {
	page := `<!DOCTYPE html><html><head><base href="/base/"><link rel="Canonical" href="/canon">
<meta name="robots" content="index, nofollow"><meta http-equiv="refresh" content="5; URL='/refreshed'"></head>
<body><a href="a.html">A</a> <a href="/edit" rel="nofollow">edit</a> <a href="b.html#x" rel="noopener">B</a>
<area href="/map"><iframe src="/frame"></iframe><a name="anchor">no href</a></body></html>`
	p := readHTML([]byte(page))
	if p.base != "/base/" || p.canonical != "/canon" || p.noindex || !p.nofollow {
		t.Errorf("base %q canonical %q noindex %v nofollow %v", p.base, p.canonical, p.noindex, p.nofollow)
	}
	if got := strings.Join(p.links, " "); got != "/refreshed a.html b.html#x /map /frame" {
		t.Errorf("links = %q", got)
	}
	if !robotsDirective("NONE", "noindex") || robotsDirective("googlebot: noindex", "noindex") || robotsDirective("noarchive", "noindex") {
		t.Error("robotsDirective")
	}
	h := http.Header{}
	h.Add("Link", `<https://example.com/style.css>; rel="preload", <https://example.com/paper>; rel="canonical"`)
	if got := linkCanonical(h); got != "https://example.com/paper" {
		t.Errorf("Link canonical = %q", got)
	}
}

func TestParseSitemap(t *testing.T) {
	urlset := `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc> https://example.com/a </loc><lastmod>2024-01-01</lastmod></url>
  <url><loc>https://example.com/b?x=1&amp;y=2</loc></url>
  <image:image><image:loc>https://example.com/pic.png</image:loc></image:image>
</urlset>`
	sm, err := parseSitemap(strings.NewReader(urlset), maxSitemapBytes)
	if err != nil || strings.Join(sm.pages, " ") != "https://example.com/a https://example.com/b?x=1&y=2" || len(sm.sitemaps) != 0 {
		t.Errorf("urlset: %v %q %q", err, sm.pages, sm.sitemaps)
	}
	index := `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>https://example.com/s1.xml</loc></sitemap><sitemap><loc>https://example.com/s2.xml.gz</loc></sitemap></sitemapindex>`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(index))
	zw.Close()
	sm, err = parseSitemap(bytes.NewReader(gz.Bytes()), maxSitemapBytes)
	if err != nil || strings.Join(sm.sitemaps, " ") != "https://example.com/s1.xml https://example.com/s2.xml.gz" || len(sm.pages) != 0 {
		t.Errorf("gzip index: %v %q %q", err, sm.pages, sm.sitemaps)
	}
	sm, err = parseSitemap(strings.NewReader("https://example.com/t1\n\nnot a url\nhttp://example.com/t2\r\n"), maxSitemapBytes)
	if err != nil || strings.Join(sm.pages, " ") != "https://example.com/t1 http://example.com/t2" {
		t.Errorf("text sitemap: %v %q", err, sm.pages)
	}
	// A gzip bomb stops at the limit (50 MB in a crawl), XML or text.
	for _, head := range []string{"<urlset><url><loc>https://example.com/x</loc></url><!--", "https://example.com/x\n"} {
		gz.Reset()
		zw = gzip.NewWriter(&gz)
		zw.Write([]byte(head))
		zw.Write(make([]byte, 2<<20))
		zw.Close()
		if gz.Len() > 10<<10 {
			t.Fatalf("the bomb is %d bytes compressed", gz.Len())
		}
		sm, err := parseSitemap(bytes.NewReader(gz.Bytes()), 1<<20)
		if !errors.Is(err, errSitemapTooLarge) || len(sm.pages) != 1 {
			t.Errorf("gzip bomb %.10q: %v, %q", head, err, sm.pages)
		}
	}
	// Malformed XML keeps what came before the fault.
	sm, err = parseSitemap(strings.NewReader(`<urlset><url><loc>https://example.com/a</loc></url><url><loc>https://example.com/b</loc></url><<oops`), maxSitemapBytes)
	if err == nil || !strings.Contains(err.Error(), "malformed XML") || len(sm.pages) != 2 {
		t.Errorf("malformed: %v %q", err, sm.pages)
	}
	if _, err := parseSitemap(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}), maxSitemapBytes); err == nil {
		t.Error("a broken gzip header read")
	}
}

func TestParseLLMs(t *testing.T) {
	doc := "# Project\n\n> Summary.\n\n## Docs\n\n- [Intro](https://example.com/intro.md): start here\n- [API](/api.md \"title\")\n- see <https://example.com/faq>\n\n## Optional\n- [Blog](blog/index.html)\n"
	if got := strings.Join(parseLLMs([]byte(doc)), " "); got != "https://example.com/intro.md /api.md https://example.com/faq blog/index.html" {
		t.Errorf("llms links = %q", got)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"120": 2 * time.Minute, "0": 0, "Wed, 01 Jan 2025 00:00:30 GMT": 30 * time.Second, "Tue, 31 Dec 2024 00:00:00 GMT": 0,
	} {
		d, ok := retryAfter(http.Header{"Retry-After": {v}}, now)
		if !ok || d != want {
			t.Errorf("Retry-After %q = %v %v, want %v", v, d, ok, want)
		}
	}
	for _, v := range []string{"", "-1", "soon", "12abc"} {
		if _, ok := retryAfter(http.Header{"Retry-After": {v}}, now); ok {
			t.Errorf("Retry-After %q accepted", v)
		}
	}
}

// TestContentType checks that the content decides what a body is, the
// declared type and the name only telling kinds of text apart.
func TestContentType(t *testing.T) {
	pdf := pdftest.Pages([]string{"hello"})
	html := []byte("<!DOCTYPE html><html><body><p>Hi</p></body></html>")
	for _, tc := range []struct {
		name, declared, path string
		body                 []byte
		want                 string
	}{
		{"a .pdf link answered with a web page", "text/html", "/report.pdf", html, extract.MIMEHTML},
		{"a .pdf link answered with a web page typed as PDF", "application/pdf", "/report.pdf", html, extract.MIMEHTML},
		{"a page typed HTML holding a PDF", "text/html", "/page.html", pdf, extract.MIMEPDF},
		{"a PDF without a type", "", "/download", pdf, extract.MIMEPDF},
		{"an HTML fragment typed HTML", "text/html; charset=utf-8", "/x", []byte("<p>fragment</p>"), extract.MIMEHTML},
		{"Markdown typed text/plain", "text/plain", "/notes.md", []byte("# Notes\n\ntext"), extract.MIMEMarkdown},
		{"Markdown typed text/markdown", "text/markdown", "/notes", []byte("# Notes"), extract.MIMEMarkdown},
		{"CSV", "text/csv", "/t", []byte("a,b\n1,2\n"), extract.MIMECSV},
		{"plain text", "text/plain", "/readme", []byte("just text"), extract.MIMEText},
	} {
		got, err := contentType(tc.declared, mustURL(t, "https://example.com"+tc.path), tc.body)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	for _, tc := range []struct {
		name, declared string
		body           []byte
	}{
		{"an image typed as HTML", "text/html", png},
		{"a style sheet", "text/css", []byte("body { color: red }")},
		{"JavaScript", "application/javascript", []byte("var x = 1;")},
		{"a feed", "application/rss+xml", []byte("<?xml version=\"1.0\"?><rss></rss>")},
		{"JSON", "application/json", []byte(`{"a": 1}`)},
		{"an empty body", "text/html", nil},
	} {
		if got, err := contentType(tc.declared, mustURL(t, "https://example.com/page.html"), tc.body); !errors.Is(err, errNotDocument) {
			t.Errorf("%s: %q, %v; want errNotDocument", tc.name, got, err)
		}
	}
}
