package crawl

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// docSite builds the site of TestCrawlAndResync: a robots.txt disallowing
// a folder and naming a sitemap, a sitemap naming a page no link reaches,
// an llms.txt naming a Markdown file, duplicate content under two URLs, a
// utm_ variant, a redirect loop, a redirect to an address the client
// refuses, a 404, an over-size page, a PDF link, an image and a link off
// the site.
func docSite(t *testing.T) *site {
	s := newSite(t)
	s.put("/robots.txt", "text/plain", []byte("User-agent: *\nDisallow: /private/\n\nSitemap: "+s.u("/sitemap.xml")+"\n"))
	s.put("/sitemap.xml", "application/xml", []byte(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>`+s.u("/")+`</loc></url><url><loc>`+s.u("/orphan")+`</loc></url>
<url><loc>`+s.u("/private/in-sitemap")+`</loc></url><url><loc>`+s.u("/guide")+`</loc></url></urlset>`))
	s.put("/llms.txt", "text/plain", []byte("# Widgets\n\n> The widget manual.\n\n## Docs\n\n- [Notes](/notes.md): release notes\n"))

	s.html("/", "Widgets", "The widget manual starts here.",
		"/guide", "/guide?utm_source=news&utm_medium=email", "/about#team", "/faq", "/private/secret",
		"/loop", "/leak", "/missing", "/big", "/paper.pdf", "/logo.png", "mailto:team@example.com",
		"https://elsewhere.example/page").etag = `"root-1"`
	guide := s.html("/guide", "Guide", "Install the widget, then tune its cache.", "/", "/guide-copy")
	guide.etag = `"guide-1"`
	s.put("/guide-copy", guide.contentType, guide.body).etag = `"copy-1"`
	s.html("/about", "About", "Widgets are made by a small team.", "/").lastModified = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	s.html("/faq", "FAQ", "Does the widget cache? Yes.", "/")
	s.html("/orphan", "Orphan", "No link leads here; the sitemap does.").etag = `"orphan-1"`
	s.html("/private/secret", "Secret", "Robots keep crawlers out.")
	s.html("/private/in-sitemap", "Secret too", "Robots keep crawlers out.")
	s.put("/paper.pdf", "application/pdf", pdftest.Pages([]string{"Widget caching, a paper."})).lastModified = time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC)
	s.put("/notes.md", "text/plain; charset=utf-8", []byte("# Release notes\n\n- 1.0: first widget\n")).etag = `"notes-1"`
	s.put("/big", "text/html", append([]byte("<!DOCTYPE html><html><body><p>"), bytes.Repeat([]byte("big "), 30<<10)...))
	s.put("/logo.png", "image/png", []byte("\x89PNG\r\n\x1a\n"))
	s.handle("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop2", http.StatusFound) })
	s.handle("/loop2", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	// 127.0.0.2 is loopback too, but only 127.0.0.1 is allow-listed: the
	// client refuses the redirect before connecting.
	s.handle("/leak", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(s.u("/secret"), "127.0.0.1", "127.0.0.2", 1), http.StatusFound)
	})
	return s
}

func TestCrawlAndResync(t *testing.T) {
	s := docSite(t)
	c := newCrawler(t, Options{MaxBytes: 64 << 10})

	first := runCrawl(t, c, s.u("/"), nil)
	if first.err != nil {
		t.Fatalf("crawl: %v", first.err)
	}
	want := []string{"/", "/about", "/faq", "/guide", "/notes.md", "/orphan", "/paper.pdf"}
	if got := s.paths(first.urls(StatusNew)); !slices.Equal(got, want) {
		t.Fatalf("pages handed over = %q, want %q", got, want)
	}
	if len(first.pages) != len(want) {
		t.Errorf("%d pages handed over, want %d", len(first.pages), len(want))
	}
	sum := first.sum
	for reason, n := range map[Reason]int{
		ReasonRobots: 2, ReasonScope: 1, ReasonType: 1, ReasonSize: 1, ReasonError: 2, ReasonDuplicate: 1, ReasonGone: 1,
	} {
		if sum.Skipped[reason] != n {
			t.Errorf("skipped for %s: %d, want %d (skips %+v)", reason, sum.Skipped[reason], n, sum.Skips)
		}
	}
	if len(sum.Skipped) != 7 || sum.Gone != 0 || sum.New != 7 || sum.Emitted != 7 || sum.Unchanged != 0 || sum.Limited {
		t.Errorf("summary %+v", sum)
	}
	// Fetched: the 7 pages, the duplicate, the redirect loop, the leak,
	// the 404 and the over-size page.
	if sum.Fetched != 12 {
		t.Errorf("fetched %d pages, want 12", sum.Fetched)
	}
	if got := s.paths(sum.Reached); !slices.Equal(got, want) {
		t.Errorf("reached %q, want %q", got, want)
	}
	for _, sk := range sum.Skips {
		path := strings.TrimPrefix(sk.URL, s.URL)
		switch {
		case path == "/loop" && !strings.Contains(sk.Detail, "redirects"),
			path == "/leak" && !strings.Contains(sk.Detail, "not allowed"),
			path == "/guide-copy" && (sk.Reason != ReasonDuplicate || !strings.Contains(sk.Detail, s.u("/guide"))):
			t.Errorf("skip %+v", sk)
		}
	}
	// Nothing robots.txt disallows, no image and no tracking variant was
	// requested.
	for _, uri := range []string{"/private/secret", "/private/in-sitemap", "/logo.png", "/guide?utm_medium=email&utm_source=news"} {
		if n := s.hitsOf(uri); n != 0 {
			t.Errorf("%s requested %d times", uri, n)
		}
	}
	if n := s.hitsOf("/guide"); n != 1 {
		t.Errorf("/guide requested %d times, want once", n)
	}
	pdf, md := first.pages[s.u("/paper.pdf")], first.pages[s.u("/notes.md")]
	if pdf.ContentType != extract.MIMEPDF || !bytes.HasPrefix(pdf.Body, []byte("%PDF-")) || pdf.FileName() != "paper.pdf" || pdf.Depth != 1 {
		t.Errorf("PDF page %q %q depth %d", pdf.ContentType, pdf.FileName(), pdf.Depth)
	}
	if md.ContentType != extract.MIMEMarkdown || md.Depth != 1 || md.ETag != `"notes-1"` {
		t.Errorf("Markdown page %+v", md)
	}
	if root := first.pages[s.u("/")]; !slices.Contains(root.Links, s.u("/guide")) || slices.Contains(root.Links, "https://elsewhere.example/page") ||
		root.ETag != `"root-1"` || root.Depth != 0 || root.ContentType != extract.MIMEMarkdown {
		t.Errorf("root page %+v", root)
	}
	if last := first.stats[len(first.stats)-1]; last.Fetched != sum.Fetched || last.Emitted != 7 || last.Queued != 0 || last.Skipped != 9 {
		t.Errorf("last progress %+v", last)
	}

	// Change two pages (one with Last-Modified, one without validators),
	// delete one, add one linked from a changed page.
	s.html("/about", "About", "Widgets are made by a bigger team now.", "/", "/new").lastModified = time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)
	s.html("/faq", "FAQ", "Does the widget cache? Yes, for an hour.", "/")
	s.remove("/orphan")
	s.html("/new", "New", "A new page about widget plugins.").etag = `"new-1"`
	s.resetCounts()

	known := first.known()
	second := runCrawl(t, c, s.u("/"), known)
	if second.err != nil {
		t.Fatalf("re-sync: %v", second.err)
	}
	sum = second.sum
	if sum.New != 1 || sum.Changed != 2 || sum.Gone != 1 || sum.Unchanged != 4 || sum.Emitted != 3 {
		t.Errorf("re-sync: new %d changed %d gone %d unchanged %d emitted %d; want 1 2 1 4 3", sum.New, sum.Changed, sum.Gone, sum.Unchanged, sum.Emitted)
	}
	for status, want := range map[Status][]string{
		StatusNew: {"/new"}, StatusChanged: {"/about", "/faq"}, StatusGone: {"/orphan"},
		StatusUnchanged: {"/", "/guide", "/notes.md", "/paper.pdf"},
	} {
		if got := s.paths(second.urls(status)); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", status, got, want)
		}
	}
	for u, p := range second.pages {
		hasBody := p.Body != nil
		if hasBody != (p.Status == StatusNew || p.Status == StatusChanged) {
			t.Errorf("%s (%s) handed over with a body: %v", u, p.Status, hasBody)
		}
	}
	// The unchanged pages with validators were answered 304; the one
	// without (none here: /faq changed) would be compared by hash.
	if _, nm := s.counts(); nm != 4 || sum.NotModified != 4 {
		t.Errorf("304 answers: server %d, summary %d; want 4", nm, sum.NotModified)
	}
	if got := s.paths(sum.Removed(known)); !slices.Equal(got, []string{"/orphan"}) {
		t.Errorf("removed %q, want [/orphan]", got)
	}
	if sum.Skipped[ReasonDuplicate] != 1 {
		t.Errorf("re-sync duplicates %d, want /guide-copy", sum.Skipped[ReasonDuplicate])
	}

	// A third crawl of the unchanged site hands no body over.
	known = second.known()
	for _, u := range sum.Removed(first.known()) {
		delete(known, u)
	}
	s.resetCounts()
	third := runCrawl(t, c, s.u("/"), known)
	if third.err != nil || third.sum.Emitted != 0 || third.sum.Unchanged != 7 || len(third.sum.Removed(known)) != 0 {
		t.Errorf("unchanged re-sync: %v, %+v", third.err, third.sum)
	}
	// /faq has no validators: its body is read and found unchanged by
	// hash; every other page is answered 304.
	if _, nm := s.counts(); nm != 6 {
		t.Errorf("304 answers %d, want 6", nm)
	}
}

// TestResyncDuplicateOfChangedPage: a page that had the same text as a
// known page is a page of its own once that page changes.
func TestResyncDuplicateOfChangedPage(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/a", "/b")
	a := s.html("/a", "Same", "The same text twice.")
	s.put("/b", a.contentType, a.body)
	c := newCrawler(t, Options{PerHost: 1})
	first := runCrawl(t, c, s.u("/"), nil)
	if got := s.paths(first.urls(StatusNew)); first.err != nil || !slices.Equal(got, []string{"/", "/a"}) {
		t.Fatalf("first crawl: %v %q", first.err, got)
	}
	s.html("/a", "Changed", "The text of a is new.")
	second := runCrawl(t, newCrawler(t, Options{PerHost: 2}), s.u("/"), first.known())
	if got := s.paths(second.urls(StatusNew)); second.err != nil || !slices.Equal(got, []string{"/b"}) {
		t.Errorf("re-sync new pages: %v %q, want [/b]", second.err, got)
	}
	if got := s.paths(second.urls(StatusChanged)); !slices.Equal(got, []string{"/a"}) {
		t.Errorf("re-sync changed pages: %q, want [/a]", got)
	}
	if second.sum.Skipped[ReasonDuplicate] != 0 {
		t.Errorf("duplicates %+v", second.sum.Skips)
	}
}

// TestResyncKeepsPagesBehindA304 checks that the pages an unchanged page
// leads to are still reached, from its known links.
func TestResyncKeepsPagesBehindA304(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/level1").etag = `"h"`
	s.html("/level1", "One", "First level.", "/level2").etag = `"1"`
	s.html("/level2", "Two", "Second level.")
	c := newCrawler(t, Options{})
	first := runCrawl(t, c, s.u("/"), nil)
	second := runCrawl(t, c, s.u("/"), first.known())
	if second.err != nil || second.sum.NotModified != 2 || second.sum.Unchanged != 3 || len(second.sum.Removed(first.known())) != 0 {
		t.Errorf("re-sync: %v %+v", second.err, second.sum)
	}
}

func TestCanonicalAndNoindex(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/article?print=1", "/hidden", "/pdf")
	s.put("/article", "text/html", []byte(`<html><head><link rel="canonical" href="/article"></head><body><p>The article.</p></body></html>`))
	s.put("/hidden", "text/html", []byte(`<html><head><meta name="robots" content="noindex"></head><body><p>Hidden.</p><a href="/behind">on</a></body></html>`))
	s.html("/behind", "Behind", "Reached through a noindex page.", "/article")
	s.handle("/pdf", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", `</paper.pdf>; rel="canonical"`)
		w.Header().Set("Content-Type", "application/pdf")
		w.Write(pdftest.Pages([]string{"Canonical paper."}))
	})
	// One request at a time: the print version is read before /behind
	// links to the canonical URL.
	c := newCrawler(t, Options{PerHost: 1})
	got := runCrawl(t, c, s.u("/"), nil)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if urls := s.paths(got.urls(StatusNew)); !slices.Equal(urls, []string{"/", "/article", "/behind", "/paper.pdf"}) {
		t.Errorf("pages %q", urls)
	}
	// A PDF names its canonical URL in a Link header.
	if p := got.pages[s.u("/paper.pdf")]; p.Requested != s.u("/pdf") || p.ContentType != extract.MIMEPDF {
		t.Errorf("PDF %+v", p)
	}
	if p := got.pages[s.u("/article")]; p.Requested != s.u("/article?print=1") {
		t.Errorf("article requested as %q", p.Requested)
	}
	// The canonical URL is recorded: the link to it is not fetched again.
	if n := s.hitsOf("/article"); n != 0 {
		t.Errorf("/article requested %d times", n)
	}
	if got.sum.Skipped[ReasonRobots] != 1 {
		t.Errorf("noindex not skipped: %+v", got.sum.Skips)
	}
}

func TestIncludeExclude(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/docs/a", "/docs/b.pdf", "/blog/post", "/docs/drafts/x")
	s.html("/docs/a", "A", "Doc a.")
	s.put("/docs/b.pdf", "application/pdf", pdftest.Pages([]string{"Doc b."}))
	s.html("/blog/post", "Post", "A post.")
	s.html("/docs/drafts/x", "Draft", "A draft.")
	c := newCrawler(t, Options{Include: []string{"/docs/**"}, Exclude: []string{"/docs/drafts/*"}})
	got := runCrawl(t, c, s.u("/"), nil)
	// The start page is read for its links, not kept.
	if urls := s.paths(got.urls(StatusNew)); got.err != nil || !slices.Equal(urls, []string{"/docs/a", "/docs/b.pdf"}) {
		t.Errorf("pages %v %q", got.err, urls)
	}
	if got.sum.Skipped[ReasonScope] != 3 || s.hitsOf("/blog/post") != 0 || s.hitsOf("/docs/drafts/x") != 0 {
		t.Errorf("scope skips %+v", got.sum.Skips)
	}
}

func TestSitemapIndexAndGzip(t *testing.T) {
	s := newSite(t)
	s.put("/robots.txt", "text/plain", []byte("User-agent: *\nAllow: /\nSitemap: "+s.u("/index.xml")+"\n"))
	s.put("/index.xml", "application/xml", []byte(`<sitemapindex><sitemap><loc>`+s.u("/a.xml.gz")+`</loc></sitemap><sitemap><loc>`+s.u("/b.txt")+`</loc></sitemap></sitemapindex>`))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`<urlset><url><loc>` + s.u("/from-gzip") + `</loc></url><url><loc>https://elsewhere.example/x</loc></url></urlset>`))
	zw.Close()
	s.put("/a.xml.gz", "application/gzip", gz.Bytes())
	s.put("/b.txt", "text/plain", []byte(s.u("/from-text")+"\n"))
	s.html("/", "Home", "Start.")
	s.html("/from-gzip", "Gzip", "Listed in a compressed sitemap.")
	s.html("/from-text", "Text", "Listed in a text sitemap.")
	got := runCrawl(t, newCrawler(t, Options{}), s.u("/"), nil)
	if urls := s.paths(got.urls(StatusNew)); got.err != nil || !slices.Equal(urls, []string{"/", "/from-gzip", "/from-text"}) {
		t.Errorf("pages %v %q", got.err, urls)
	}
	if s.hitsOf("/sitemap.xml") != 0 {
		t.Error("/sitemap.xml requested though robots.txt names the sitemaps")
	}
}

func TestTypeByContent(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/report.pdf", "/page.html", "/picture", "/styles")
	// A link named .pdf answered with a web page, a page named .html
	// holding a PDF, an image and a style sheet under names that say
	// nothing.
	s.put("/report.pdf", "text/html", []byte("<!DOCTYPE html><html><body><p>Not a PDF after all.</p></body></html>"))
	s.put("/page.html", "text/html", pdftest.Pages([]string{"A PDF after all."}))
	s.put("/picture", "text/html", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	s.put("/styles", "text/css", []byte("body { color: red }"))
	got := runCrawl(t, newCrawler(t, Options{}), s.u("/"), nil)
	// The page is read as HTML, and stored as its main content in Markdown.
	if got.pages[s.u("/report.pdf")].ContentType != extract.MIMEMarkdown || got.pages[s.u("/page.html")].ContentType != extract.MIMEPDF {
		t.Errorf("types: report.pdf %q, page.html %q", got.pages[s.u("/report.pdf")].ContentType, got.pages[s.u("/page.html")].ContentType)
	}
	if got.sum.Skipped[ReasonType] != 2 || got.sum.Emitted != 3 {
		t.Errorf("summary %+v", got.sum)
	}
}

func TestOptionsChecked(t *testing.T) {
	for _, opts := range []Options{
		{MaxPages: MaxPagesLimit + 1}, {MaxPages: -1}, {Scope: "site"}, {PerHost: -1}, {PerHost: MaxPerHost + 1}, {Delay: MaxDelay + time.Millisecond}, {Include: []string{"/***"}},
	} {
		if _, err := New(client(t), opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", opts, err)
		}
	}
	c, err := New(client(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := c.Options()
	if o.MaxPages != 500 || o.MaxDepth != 5 || o.Scope != ScopePrefix || o.PerHost != 4 || o.Delay != 0 || o.UserAgent != DefaultUserAgent {
		t.Errorf("defaults %+v", o)
	}
	if _, err := c.Crawl(t.Context(), "ftp://example.com/", nil, nil, nil); err == nil {
		t.Error("ftp start URL accepted")
	}
}

// TestShorterWayInReach: a page first found too deep is fetched when a
// shorter way to it turns up (here the sitemap, at depth 1).
func TestShorterWayInReach(t *testing.T) {
	s := newSite(t)
	s.put("/sitemap.xml", "application/xml", []byte(`<urlset><url><loc>`+s.u("/deep")+`</loc></url></urlset>`))
	s.html("/", "Home", "Start.", "/a")
	s.html("/a", "A", "One link away.", "/deep", "/deeper")
	s.html("/deep", "Deep", "Two links away, one by the sitemap.")
	s.html("/deeper", "Deeper", "Two links away.")
	got := runCrawl(t, newCrawler(t, Options{MaxDepth: 1}), s.u("/"), nil)
	if urls := s.paths(got.urls(StatusNew)); got.err != nil || !slices.Equal(urls, []string{"/", "/a", "/deep"}) {
		t.Errorf("pages %v %q", got.err, urls)
	}
	if got.sum.Skipped[ReasonDepth] != 1 || got.pages[s.u("/deep")].Depth != 1 {
		t.Errorf("depth skips %+v", got.sum.Skips)
	}
}
