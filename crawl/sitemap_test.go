package crawl

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/fetch"
)

// testSitemapBytes is the sitemap limit of TestSitemapNotReadWhole.
const testSitemapBytes = 11 << 20

// patientCrawler is newCrawler with time limits of minutes: a sitemap of
// megabytes is read in a blink, but not under the race detector on a loaded
// machine, and the limits must not cut it.
func patientCrawler(t *testing.T, opts Options) *Crawler {
	t.Helper()
	fc, err := fetch.New(fetch.Options{AllowHosts: []string{"127.0.0.1"}, CacheTTL: -1, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	opts.Timeout = 5 * time.Minute
	c, err := New(fc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pagesSite serves "/" (no links) and an HTML page at every /p<n>, with a
// robots.txt naming the sitemaps at paths.
func pagesSite(t *testing.T, sitemaps ...string) *site {
	s := newSite(t)
	var robots strings.Builder
	robots.WriteString("User-agent: *\nAllow: /\n")
	for _, p := range sitemaps {
		fmt.Fprintf(&robots, "Sitemap: %s\n", s.u(p))
	}
	s.put("/robots.txt", "text/plain", []byte(robots.String()))
	s.html("/", "Home", "Start.")
	s.handle("*", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/p") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><body><p>Page %s.</p></body></html>", r.URL.Path)
	})
	return s
}

// urlset returns a sitemap listing /p0 to /p<n-1> of s.
func urlset(s *site, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n")
	for i := range n {
		fmt.Fprintf(&b, "<url><loc>%s/p%d</loc></url>\n", s.URL, i)
	}
	b.WriteString("</urlset>\n")
	return b.Bytes()
}

// sitemapSkips returns the skips of a crawl for its sitemaps.
func sitemapSkips(sum Summary) []Skip {
	var out []Skip
	for _, sk := range sum.Skips {
		if sk.Reason == ReasonSitemap {
			out = append(out, sk)
		}
	}
	return out
}

// TestSitemapLimits: a sitemap of the protocol's 50,000 URLs is read whole
// (it is 3 MB, and would be read so up to 50 MB, past fetch_url's page
// limit); one URL more is reported, and the first 50,000 still count.
// Every URL read is fetched or skipped for the crawl's own limit.
func TestSitemapLimits(t *testing.T) {
	for _, tc := range []struct {
		urls  int
		skips int
	}{{maxSitemapURLs, 0}, {maxSitemapURLs + 1, 1}} {
		t.Run(fmt.Sprint(tc.urls), func(t *testing.T) {
			s := pagesSite(t, "/sitemap.xml")
			s.put("/sitemap.xml", "application/xml", urlset(s, tc.urls))
			got := runCrawl(t, patientCrawler(t, Options{MaxPages: 10, PerHost: 4}), s.u("/"), nil)
			if got.err != nil {
				t.Fatal(got.err)
			}
			skips := sitemapSkips(got.sum)
			if len(skips) != tc.skips || got.sum.Skipped[ReasonSitemap] != tc.skips {
				t.Fatalf("sitemap skips %+v", skips)
			}
			if tc.skips > 0 && !strings.Contains(skips[0].Detail, fmt.Sprintf("lists %d URLs, more than the protocol's 50000: the first 50000 were read", tc.urls)) {
				t.Errorf("detail %q", skips[0].Detail)
			}
			// The start page and the sitemap's first 50,000 pages.
			if n := got.sum.Fetched + got.sum.Skipped[ReasonLimit]; n != maxSitemapURLs+1 {
				t.Errorf("%d pages fetched or skipped for the crawl's limit, want %d (%+v)", n, maxSitemapURLs+1, got.sum.Skipped)
			}
		})
	}
}

// TestSitemapNotReadWhole: a sitemap larger than the limit, a gzip bomb,
// malformed XML and sitemaps that cannot be downloaded are each reported
// under ReasonSitemap, with why; the URLs read before the fault count.
func TestSitemapNotReadWhole(t *testing.T) {
	const head = `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`
	entry := func(s *site, path string) string { return "<url><loc>" + s.u(path) + "</loc></url>" }
	for _, tc := range []struct {
		name   string
		serve  func(s *site) http.HandlerFunc
		pages  []string // fetched besides /
		detail string
	}{
		{"larger than the limit", func(s *site) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/xml")
				w.Write([]byte(head + entry(s, "/p1") + entry(s, "/p2") + "<!--"))
				block := bytes.Repeat([]byte("x"), 64<<10)
				for range (testSitemapBytes >> 16) + 16 {
					if _, err := w.Write(block); err != nil {
						return
					}
				}
			}
		}, []string{"/p1", "/p2"}, "larger than 11 MB uncompressed, the protocol's limit: the 2 URLs of its first 11 MB were read"},
		{"gzip bomb", func(s *site) http.HandlerFunc {
			var gz bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
			zw.Write([]byte(head + entry(s, "/p3") + "<!--"))
			zeros := make([]byte, 1<<20)
			for range 2 * (testSitemapBytes >> 20) {
				zw.Write(zeros)
			}
			zw.Close()
			if gz.Len() > 2<<20 {
				t.Fatalf("the bomb is %d bytes compressed", gz.Len())
			}
			return func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/gzip")
				w.Write(gz.Bytes())
			}
		}, []string{"/p3"}, "larger than 11 MB uncompressed"},
		{"malformed XML", func(s *site) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/xml")
				w.Write([]byte(head + entry(s, "/p4") + entry(s, "/p5") + "<url><<loc>" + s.u("/p6") + "</loc></url></urlset>"))
			}
		}, []string{"/p4", "/p5"}, "malformed XML: line 1: expected element name after <: the 2 URLs before it were read"},
		{"server error", func(s *site) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }
		}, nil, "could not be read: HTTP 500 Internal Server Error"},
		{"not found", func(s *site) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }
		}, nil, "could not be read: HTTP 404 Not Found"},
		{"no answer", func(s *site) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
			}
		}, nil, "could not be read: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := pagesSite(t, "/map.xml")
			s.handle("/map.xml", tc.serve(s))
			// Reading 50 MB of XML takes a second, and half a minute under
			// the race detector: the test lowers the limit to 11 MB, still
			// above the client's page limit of 10 MiB, which sitemaps are
			// not held to.
			c := patientCrawler(t, Options{})
			c.sitemapBytes = testSitemapBytes
			got := runCrawl(t, c, s.u("/"), nil)
			if got.err != nil {
				t.Fatal(got.err)
			}
			skips := sitemapSkips(got.sum)
			if len(skips) != 1 || skips[0].URL != s.u("/map.xml") || !strings.Contains(skips[0].Detail, tc.detail) {
				t.Fatalf("sitemap skips %+v, want one saying %q", skips, tc.detail)
			}
			t.Logf("%s", skips[0].Detail)
			want := append([]string{"/"}, tc.pages...)
			if got := s.paths(got.urls(StatusNew)); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("pages %q, want %q", got, want)
			}
		})
	}
}

// TestGuessedSitemapMissing: a site whose robots.txt names no sitemap and
// that has no /sitemap.xml has nothing to report.
func TestGuessedSitemapMissing(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.")
	got := runCrawl(t, newCrawler(t, Options{}), s.u("/"), nil)
	if got.err != nil || got.sum.Skipped[ReasonSitemap] != 0 || s.hitsOf("/sitemap.xml") != 1 {
		t.Errorf("%v %+v", got.err, got.sum)
	}
}

// TestTooManySitemaps: an index naming more sitemaps than a crawl reads
// says how many were left.
func TestTooManySitemaps(t *testing.T) {
	s := pagesSite(t, "/index.xml")
	var b strings.Builder
	b.WriteString("<sitemapindex>")
	for i := range maxSitemaps + 5 {
		fmt.Fprintf(&b, "<sitemap><loc>%s/s%d.xml</loc></sitemap>", s.URL, i)
	}
	b.WriteString("</sitemapindex>")
	s.put("/index.xml", "application/xml", []byte(b.String()))
	for i := range maxSitemaps + 5 {
		s.put(fmt.Sprintf("/s%d.xml", i), "application/xml", []byte(fmt.Sprintf("<urlset><url><loc>%s/p%d</loc></url></urlset>", s.URL, i)))
	}
	got := runCrawl(t, newCrawler(t, Options{PerHost: 8}), s.u("/"), nil)
	skips := sitemapSkips(got.sum)
	if got.err != nil || len(skips) != 1 || !strings.Contains(skips[0].Detail, "6 of the sitemaps it names were not read: a crawl reads at most 50") {
		t.Fatalf("%v %+v", got.err, skips)
	}
	// The index is one of the 50: 49 of its sitemaps were read.
	if got.sum.Emitted != 1+maxSitemaps-1 {
		t.Errorf("%d pages", got.sum.Emitted)
	}
}
