package crawl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Each bad site ends in a bounded crawl whose summary says why.

func TestRedirectLoopAtTheStart(t *testing.T) {
	s := newSite(t)
	s.handle("/", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/a", http.StatusMovedPermanently) })
	s.handle("/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/", http.StatusMovedPermanently) })
	got := runCrawl(t, newCrawler(t, Options{}), s.u("/"), nil)
	if got.err != nil || got.sum.Skipped[ReasonError] != 1 || got.sum.Fetched != 1 || len(got.pages) != 0 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
	if d := got.sum.Skips[0].Detail; !strings.Contains(d, "redirects") {
		t.Errorf("detail %q", d)
	}
	// The client follows 5 redirects: 6 requests for the page, plus
	// robots.txt, the sitemap and llms.txt.
	if req, _ := s.counts(); req > 9 {
		t.Errorf("%d requests", req)
	}
}

func TestEndlessQueryStrings(t *testing.T) {
	s := newSite(t)
	// Every page links to itself under two new query strings.
	s.handle("/cal", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		fmt.Fprintf(w, `<html><body><p>Page %s of an endless list.</p><a href="?n=%d">next</a> <a href="/cal?n=%d&sid=%d">again</a></body></html>`,
			r.URL.RawQuery, n+1, n+2, n)
	})
	got := runCrawl(t, newCrawler(t, Options{MaxDepth: 1000}), s.u("/cal"), nil)
	if got.err != nil || got.sum.Skipped[ReasonVariants] == 0 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
	// The start page and 50 query strings of /cal.
	if got.sum.Fetched != 1+DefaultMaxVariants || got.sum.Emitted != got.sum.Fetched {
		t.Errorf("fetched %d, emitted %d", got.sum.Fetched, got.sum.Emitted)
	}
}

// calendar serves /y/Y for 100 years, /y/Y/M for their months and
// /y/Y/M/D for their days: 37,300 pages.
func calendar(s *site) {
	s.handle("*", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, ".") {
			// robots.txt, sitemap.xml, llms.txt
			http.NotFound(w, r)
			return
		}
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		var b strings.Builder
		fmt.Fprintf(&b, "<html><body><p>Calendar %s</p>", r.URL.Path)
		switch {
		case r.URL.Path == "/":
			for y := 2000; y < 2100; y++ {
				fmt.Fprintf(&b, `<a href="/y/%d">%d</a>`, y, y)
			}
		case len(parts) == 2:
			for m := 1; m <= 12; m++ {
				fmt.Fprintf(&b, `<a href="%s/%d">%d</a>`, r.URL.Path, m, m)
			}
		case len(parts) == 3:
			for d := 1; d <= 30; d++ {
				fmt.Fprintf(&b, `<a href="%s/%d">%d</a>`, r.URL.Path, d, d)
			}
		}
		b.WriteString("</body></html>")
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(b.String()))
	})
}

func TestCalendarBoundedByMaxPages(t *testing.T) {
	s := newSite(t)
	calendar(s)
	got := runCrawl(t, newCrawler(t, Options{MaxPages: 300, PerHost: 4}), s.u("/"), nil)
	if got.err != nil || got.sum.Fetched != 300 || !got.sum.Limited || got.sum.Skipped[ReasonLimit] == 0 {
		t.Fatalf("%v fetched %d limited %v skipped %v", got.err, got.sum.Fetched, got.sum.Limited, got.sum.Skipped)
	}
	if req, _ := s.counts(); req > 300+3 {
		t.Errorf("%d requests for 300 pages", req)
	}
}

func TestCalendarBoundedByMaxDepth(t *testing.T) {
	s := newSite(t)
	calendar(s)
	got := runCrawl(t, newCrawler(t, Options{MaxPages: MaxPagesLimit, MaxDepth: 1, PerHost: 4}), s.u("/"), nil)
	// The root and its 100 years; the 1,200 months are one link too far.
	if got.err != nil || got.sum.Fetched != 101 || got.sum.Skipped[ReasonDepth] != 1200 || got.sum.Limited {
		t.Fatalf("%v fetched %d skipped %v", got.err, got.sum.Fetched, got.sum.Skipped)
	}
}

func TestOverSizePages(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/declared", "/endless")
	// One says its size, one streams without end.
	s.handle("/declared", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(200<<20))
		w.Write([]byte("<html>"))
	})
	s.handle("/endless", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		chunk := []byte(strings.Repeat("<p>more</p>", 1000))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	got := runCrawl(t, newCrawler(t, Options{MaxBytes: 256 << 10}), s.u("/"), nil)
	if got.err != nil || got.sum.Skipped[ReasonSize] != 2 || got.sum.Emitted != 1 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
}

func TestSlowHost(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/slow", "/fast")
	s.html("/fast", "Fast", "Answers at once.")
	s.handle("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	})
	start := time.Now()
	got := runCrawl(t, newCrawler(t, Options{Timeout: 300 * time.Millisecond}), s.u("/"), nil)
	if got.err != nil || got.sum.Skipped[ReasonError] != 1 || got.sum.Emitted != 2 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
	if d := got.sum.Skips[0].Detail; !strings.Contains(d, "time") {
		t.Errorf("detail %q", d)
	}
	// /slow answers after 30 s: a crawl that took as long waited for it
	// rather than timing it out.
	if el := time.Since(start); el >= 30*time.Second {
		t.Errorf("the crawl took %v", el)
	}

	// A slow start page: the site is unavailable, a re-sync removes
	// nothing.
	s.handle("/", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	known := map[string]Known{s.u("/"): {Hash: "h", Links: []string{s.u("/fast")}}, s.u("/fast"): {Hash: "f"}}
	got = runCrawl(t, newCrawler(t, Options{Timeout: 300 * time.Millisecond}), s.u("/"), known)
	if !errors.Is(got.err, ErrUnavailable) {
		t.Fatalf("slow start page: %v", got.err)
	}
	// The known links of the page that could not be read are followed.
	if len(got.sum.Removed(known)) != 0 || got.pages[s.u("/fast")].Status != StatusChanged {
		t.Errorf("removed %q, pages %v", got.sum.Removed(known), got.pages)
	}
}

func TestBusyHostBacksOff(t *testing.T) {
	s := newSite(t)
	links := []string{"/retry-after"}
	for i := range 6 {
		links = append(links, fmt.Sprintf("/busy%d", i))
	}
	s.html("/", "Home", "Start.", append(links, "/later")...)
	for i := range 6 {
		s.handle(fmt.Sprintf("/busy%d", i), func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})
	}
	// Busy once, asking for a second.
	busy := true
	s.handle("/retry-after", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		first := busy
		busy = false
		s.mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body><p>Served on the second try.</p></body></html>"))
	})
	s.handle("/later", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	c := newCrawler(t, Options{PerHost: 1, Retries: 2, RetryBase: 50 * time.Millisecond, MaxRetryWait: 5 * time.Second})
	got := runCrawl(t, c, s.u("/"), nil)
	if got.err != nil || got.pages[s.u("/retry-after")].Status != StatusNew {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
	// Retry-After was honoured.
	if ts := s.timesOf("/retry-after"); len(ts) != 2 || ts[1].Sub(ts[0]) < time.Second {
		t.Errorf("/retry-after requested at %v", ts)
	}
	// Three busy pages were tried 3 times each, with growing waits; then
	// the host was given up: the other busy pages and /later were not
	// requested.
	tried := 0
	for i := range 6 {
		ts := s.timesOf(fmt.Sprintf("/busy%d", i))
		switch len(ts) {
		case 0:
		case 3:
			tried++
			if ts[1].Sub(ts[0]) < 50*time.Millisecond || ts[2].Sub(ts[1]) < 100*time.Millisecond {
				t.Errorf("busy%d retried after %v and %v", i, ts[1].Sub(ts[0]), ts[2].Sub(ts[1]))
			}
		default:
			t.Errorf("busy%d requested %d times", i, len(ts))
		}
	}
	if tried != maxThrottledPages || got.sum.Skipped[ReasonError] != 7 {
		t.Errorf("%d busy pages tried; skipped %+v", tried, got.sum.Skips)
	}
	var gaveUp bool
	for _, sk := range got.sum.Skips {
		gaveUp = gaveUp || strings.Contains(sk.Detail, "in a row")
	}
	if !gaveUp {
		t.Errorf("no skip says the host was given up: %+v", got.sum.Skips)
	}
}

func TestRetryAfterBeyondTheCap(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/later")
	s.handle("/later", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	got := runCrawl(t, newCrawler(t, Options{}), s.u("/"), nil)
	if got.err != nil || got.sum.Skipped[ReasonError] != 1 || s.hitsOf("/later") != 1 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
	if d := got.sum.Skips[0].Detail; !strings.Contains(d, "asked to wait 1h0m0s") {
		t.Errorf("detail %q", d)
	}
}

func TestGonePages(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/missing", "/removed")
	s.handle("/removed", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) })
	got := runCrawl(t, newCrawler(t, Options{}), s.u("/"), nil)
	if got.err != nil || got.sum.Skipped[ReasonGone] != 2 || got.sum.Emitted != 1 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
}

func TestRobotsAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		robots  http.HandlerFunc
		fetched int
		err     error
	}{
		{"404 allows all", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, 2, nil},
		{"403 allows all", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) }, 2, nil},
		{"a redirect loop allows all", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/robots.txt", http.StatusFound) }, 2, nil},
		{"503 disallows all", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }, 0, ErrUnavailable},
		{"429 disallows all", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTooManyRequests) }, 0, ErrUnavailable},
		{"no answer disallows all", func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}, 0, ErrUnavailable},
		{"Disallow: / disallows all", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("User-agent: *\nDisallow: /\n"))
		}, 0, nil},
		{"a group for the crawler", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("User-agent: *\nDisallow: /\n\nUser-agent: mcpsearch-fetch\nDisallow: /page\n"))
		}, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t)
			s.handle("/robots.txt", tc.robots)
			s.html("/", "Home", "Start.", "/page")
			s.html("/page", "Page", "A page.")
			known := map[string]Known{s.u("/page"): {Hash: "x"}}
			got := runCrawl(t, newCrawler(t, Options{}), s.u("/"), known)
			if !errors.Is(got.err, tc.err) || got.sum.Fetched != tc.fetched {
				t.Errorf("%v, fetched %d; want %v, %d (%+v)", got.err, got.sum.Fetched, tc.err, tc.fetched, got.sum.Skips)
			}
			if tc.fetched == 0 && (s.hitsOf("/") != 0 || got.sum.Skipped[ReasonRobots] != 1) {
				t.Errorf("robots skips %+v", got.sum.Skips)
			}
			// An unreachable robots.txt removes nothing on a re-sync.
			if tc.err != nil && len(got.sum.Removed(known)) != 0 {
				t.Errorf("removed %q", got.sum.Removed(known))
			}
		})
	}
}

func TestCrawlDelayIsHonoured(t *testing.T) {
	s := newSite(t)
	s.put("/robots.txt", "text/plain", []byte("User-agent: *\nCrawl-delay: 0.2\n"))
	s.html("/", "Home", "Start.", "/a", "/b", "/c")
	for _, p := range []string{"/a", "/b", "/c"} {
		s.html(p, p, "Page "+p+".")
	}
	got := runCrawl(t, newCrawler(t, Options{PerHost: 4}), s.u("/"), nil)
	if got.err != nil || got.sum.Emitted != 4 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
	var all []time.Time
	for _, p := range []string{"/robots.txt", "/", "/a", "/b", "/c", "/sitemap.xml", "/llms.txt"} {
		all = append(all, s.timesOf(p)...)
	}
	sortTimes(all)
	// A crawler that ignores the delay sends these together, a millisecond
	// or so apart; one that honours it starts them 200 ms apart, and the
	// site sees them so give or take how late a loaded machine runs each
	// request's goroutine and the site's handler. Half the delay tells the
	// two apart.
	least := time.Duration(math.MaxInt64)
	for i := 1; i < len(all); i++ {
		gap := all[i].Sub(all[i-1])
		least = min(least, gap)
		if gap < 100*time.Millisecond {
			t.Errorf("requests %d and %d %v apart", i-1, i, gap)
		}
	}
	t.Logf("%d requests, the closest %v apart", len(all), least.Round(time.Millisecond))
}

func TestPerHostConcurrency(t *testing.T) {
	s := newSite(t)
	var links []string
	for i := range 12 {
		p := fmt.Sprintf("/p%d", i)
		links = append(links, p)
		s.handle(p, func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(20 * time.Millisecond)
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<html><body><p>Page %s.</p></body></html>", r.URL.Path)
		})
	}
	s.html("/", "Home", "Start.", links...)
	got := runCrawl(t, newCrawler(t, Options{PerHost: 2}), s.u("/"), nil)
	s.mu.Lock()
	most := s.max
	s.mu.Unlock()
	if got.err != nil || got.sum.Emitted != 13 || most > 2 {
		t.Errorf("%v emitted %d, at most %d requests at once", got.err, got.sum.Emitted, most)
	}
}

func TestCancelIsPrompt(t *testing.T) {
	s := newSite(t)
	var links []string
	for i := range 50 {
		links = append(links, fmt.Sprintf("/slow%d", i))
	}
	s.html("/", "Home", "Start.", links...)
	for _, l := range links {
		s.handle(l, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(20 * time.Second):
			}
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	c := newCrawler(t, Options{PerHost: 4, Timeout: time.Minute})
	var cancelled time.Time
	_, err := c.Crawl(ctx, s.u("/"), nil, func(p Page) error {
		// The start page is in: stop while its links hang.
		go func() {
			time.Sleep(100 * time.Millisecond)
			cancelled = time.Now()
			cancel()
		}()
		return nil
	}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	// The links answer after 20 s (the client's time-out is a minute):
	// returning sooner is the cancel's doing.
	if d := time.Since(cancelled); d >= 20*time.Second {
		t.Errorf("Crawl returned %v after the cancel", d)
	}
}

func TestEmitErrorStops(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/a", "/b")
	s.html("/a", "A", "A.")
	s.html("/b", "B", "B.")
	boom := errors.New("disk full")
	got, err := newCrawler(t, Options{}).Crawl(t.Context(), s.u("/"), nil, func(p Page) error { return boom }, nil)
	if !errors.Is(err, boom) || got.Emitted != 1 {
		t.Errorf("%v, %+v", err, got)
	}
}
