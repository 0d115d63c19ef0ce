package crawl

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/extract"
)

// manualDir is where Debian's postgresql-doc-15 package installs
// PostgreSQL 15's HTML manual (1,167 pages); MCPSEARCH_PG_MANUAL names
// another copy.
const manualDir = "/usr/share/doc/postgresql-doc-15/html"

// manual serves a real documentation site from loopback, as a static
// server does (Last-Modified, no ETag), or skips the test when it is not
// installed.
func manual(tb testing.TB) (*httptest.Server, string) {
	tb.Helper()
	dir := os.Getenv("MCPSEARCH_PG_MANUAL")
	if dir == "" {
		dir = manualDir
	}
	if _, err := os.Stat(filepath.Join(dir, "index.html")); err != nil {
		tb.Skipf("PostgreSQL's HTML manual is not installed (Debian: apt-get install postgresql-doc-15; or set MCPSEARCH_PG_MANUAL to its folder): %v", err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	tb.Cleanup(srv.Close)
	return srv, dir
}

// navWords are the words of the manual's navigation bars ("Prev Up
// Chapter 1. Getting Started Home Next" above each page, "Prev Up Next"
// and "Home" below).
var navWords = regexp.MustCompile(`\b(Prev|Up|Home|Next)\b`)

// holdsNavigation reports whether a chunk holds a line of a navigation
// bar: two of its words on one line.
func holdsNavigation(text string) bool {
	for _, line := range strings.Split(text, "\n") {
		seen := map[string]bool{}
		for _, w := range navWords.FindAllString(line, -1) {
			seen[w] = true
		}
		if len(seen) >= 2 {
			return true
		}
	}
	return false
}

// navShare chunks a page of type mimeType as the documents store does and
// counts its chunks, and those holding navigation.
func navShare(mimeType string, body []byte) (chunks, nav int) {
	doc, err := extract.Extract(context.Background(), mimeType, body)
	if err != nil {
		return 0, 0
	}
	for _, c := range chunk.Split(doc, chunk.DefaultOptions()) {
		chunks++
		if holdsNavigation(c.Content) {
			nav++
		}
	}
	return chunks, nav
}

// navCount is what measureManual counts: pages, and chunks with those
// holding navigation text, as served and as stored.
type navCount struct {
	pages, before, beforeNav, after, afterNav int
	examples                                  []string
}

func share(n, of int) float64 { return 100 * float64(n) / float64(max(of, 1)) }

func (n navCount) String() string {
	return fmt.Sprintf("%d pages: chunks holding navigation as served %d of %d (%.1f%%), as stored %d of %d (%.1f%%)",
		n.pages, n.beforeNav, n.before, share(n.beforeNav, n.before), n.afterNav, n.after, share(n.afterNav, n.after))
}

// measureManual crawls PostgreSQL 15's HTML manual from loopback with
// the default politeness, up to maxPages pages, and counts the chunks
// holding navigation text in the pages as served and as the crawl hands
// them over to be stored (their main content).
func measureManual(tb testing.TB, maxPages int) (navCount, Summary, time.Duration) {
	srv, dir := manual(tb)
	c, err := New(client(tb), Options{MaxPages: maxPages})
	if err != nil {
		tb.Fatal(err)
	}
	// The pages are measured after the crawl, which they would slow.
	stored := map[string][]byte{}
	start := time.Now()
	sum, err := c.Crawl(context.Background(), srv.URL+"/index.html", nil, func(p Page) error {
		if p.ContentType == extract.MIMEMarkdown {
			stored[p.URL] = p.Body
		}
		return nil
	}, nil)
	took := time.Since(start)
	if err != nil {
		tb.Fatal(err)
	}
	var n navCount
	for _, u := range slices.Sorted(maps.Keys(stored)) {
		pu, err := url.Parse(u)
		if err != nil {
			tb.Fatal(err)
		}
		path := pu.Path
		if strings.HasSuffix(path, "/") {
			// The file server answers index.html as its folder.
			path += "index.html"
		}
		raw, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
		if err != nil {
			tb.Fatal(err)
		}
		n.pages++
		c, nav := navShare(extract.MIMEHTML, raw)
		n.before, n.beforeNav = n.before+c, n.beforeNav+nav
		c, nav = navShare(extract.MIMEMarkdown, stored[u])
		n.after, n.afterNav = n.after+c, n.afterNav+nav
		if nav > 0 && len(n.examples) < 10 {
			n.examples = append(n.examples, path)
		}
	}
	return n, sum, took
}

// TestManualMainContent crawls a part of PostgreSQL 15's HTML manual (its
// first 300 pages: all of it takes minutes under the race detector) and
// checks that the pages stored keep no navigation: every page of the
// manual begins and ends with a "Prev / Up / Home / Next" bar.
func TestManualMainContent(t *testing.T) {
	n, _, _ := measureManual(t, 300)
	t.Logf("%s; e.g. %q", n, n.examples)
	if n.pages < 290 || share(n.beforeNav, n.before) < 10 {
		t.Errorf("%s: not the manual's pages", n)
	}
	if share(n.afterNav, n.after) > 0.5 {
		t.Errorf("%.1f%% of the chunks stored hold navigation, e.g. in %q", share(n.afterNav, n.after), n.examples)
	}
}

// BenchmarkCrawlManual crawls the whole of PostgreSQL 15's HTML manual
// (1,167 pages) from loopback with the default politeness (4 requests at
// once, no fixed delay), storing nothing, and reports pages per second and
// (of the crawl alone) and the share of chunks holding navigation text as
// served and as stored:
//
//	go test -run XXX -bench CrawlManual -benchtime 1x ./crawl
func BenchmarkCrawlManual(b *testing.B) {
	var n navCount
	pages := 0
	var took time.Duration
	for b.Loop() {
		var sum Summary
		var d time.Duration
		n, sum, d = measureManual(b, 2000)
		pages += sum.Emitted
		took += d
	}
	b.ReportMetric(float64(pages)/took.Seconds(), "pages/s")
	b.ReportMetric(share(n.beforeNav, n.before), "%nav-served")
	b.ReportMetric(share(n.afterNav, n.after), "%nav-stored")
	b.Logf("%s", n)
}
