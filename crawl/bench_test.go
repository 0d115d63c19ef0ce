package crawl

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// benchSite serves a documentation site of 2,001 pages on loopback: a
// root linking to 40 sections of 49 pages each, every page with a
// navigation bar of 41 links, its neighbours, and about 3 KB of text of
// its own. With etags the pages answer conditional requests.
func benchSite(b *testing.B, etags bool) *site {
	b.Helper()
	s := newSite(b)
	words := strings.Fields("widget cache tuning replica index query vector chunk token embedding latency throughput " +
		"shard lease worker queue document section manual install upgrade release")
	text := func(seed int) string {
		var t strings.Builder
		for i := range 450 {
			t.WriteString(words[(seed*31+i*7+i*i)%len(words)])
			t.WriteByte(' ')
		}
		return t.String()
	}
	nav := []string{"/"}
	for sec := range 40 {
		nav = append(nav, fmt.Sprintf("/s%d/", sec))
	}
	add := func(path, title string, seed int, links ...string) {
		p := s.html(path, title, fmt.Sprintf("%s. %s", title, text(seed)), append(links, nav...)...)
		if etags {
			p.etag = fmt.Sprintf(`"%d"`, seed)
		}
	}
	add("/", "Manual", 0)
	for sec := range 40 {
		var pages []string
		for i := range 49 {
			pages = append(pages, fmt.Sprintf("/s%d/p%d", sec, i))
		}
		add(fmt.Sprintf("/s%d/", sec), fmt.Sprintf("Section %d", sec), 1+sec, pages...)
		for i, p := range pages {
			links := []string{}
			if i > 0 {
				links = append(links, pages[i-1])
			}
			if i+1 < len(pages) {
				links = append(links, pages[i+1])
			}
			add(p, fmt.Sprintf("Section %d page %d", sec, i), 100+sec*49+i, links...)
		}
	}
	return s
}

const benchPages = 2001

// BenchmarkCrawl crawls the 2,001-page site with the default number of
// requests at once and with 8 (a loopback host answers at once: the
// crawler never finds it slow), reporting pages per second.
func BenchmarkCrawl(b *testing.B) {
	for _, perHost := range []int{DefaultPerHost, 8} {
		b.Run(fmt.Sprintf("perhost=%d", perHost), func(b *testing.B) {
			s := benchSite(b, true)
			c := newCrawler(b, Options{MaxPages: 5000, PerHost: perHost})
			b.ReportAllocs()
			pages := 0
			for b.Loop() {
				sum, err := c.Crawl(context.Background(), s.u("/"), nil, func(Page) error { return nil }, nil)
				if err != nil || sum.New != benchPages {
					b.Fatalf("%v: %d pages", err, sum.New)
				}
				pages += sum.New
			}
			b.ReportMetric(float64(pages)/b.Elapsed().Seconds(), "pages/s")
		})
	}
}

// BenchmarkResyncUnchanged re-syncs the unchanged site: with ETags every
// page is answered 304 and no body is read; without validators every page
// is downloaded, its text extracted and hashed, and found unchanged.
func BenchmarkResyncUnchanged(b *testing.B) {
	for _, tc := range []struct {
		name  string
		etags bool
	}{{"etag", true}, {"hash", false}} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchSite(b, tc.etags)
			c := newCrawler(b, Options{MaxPages: 5000, PerHost: 2})
			first := runCrawl(b, c, s.u("/"), nil)
			if first.err != nil || first.sum.New != benchPages {
				b.Fatalf("%v: %d pages", first.err, first.sum.New)
			}
			known := first.known()
			b.ReportAllocs()
			pages := 0
			for b.Loop() {
				sum, err := c.Crawl(context.Background(), s.u("/"), known, func(p Page) error {
					if p.Body != nil {
						b.Fatalf("%s handed over with a body", p.URL)
					}
					return nil
				}, nil)
				if err != nil || sum.Unchanged != benchPages || sum.Emitted != 0 {
					b.Fatalf("%v: %+v", err, sum)
				}
				if tc.etags && sum.NotModified != benchPages {
					b.Fatalf("%d answered 304", sum.NotModified)
				}
				pages += sum.Unchanged
			}
			b.ReportMetric(float64(pages)/b.Elapsed().Seconds(), "pages/s")
		})
	}
}
