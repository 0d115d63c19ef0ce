package crawl

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name  string
		steps func(th *throttle)
		want  int
	}{
		{"cautious at first", func(th *throttle) {}, 1},
		{"one more slot per good answer", func(th *throttle) { th.good(ms(5)); th.good(ms(5)) }, 3},
		{"up to the most", func(th *throttle) {
			for range 10 {
				th.good(ms(5))
			}
		}, 4},
		{"a host under the latency floor is never slow", func(th *throttle) {
			for _, d := range []int{1, 1, 1, 90} {
				th.good(ms(d))
			}
		}, 4},
		{"a host twice as slow as its best keeps its slots", func(th *throttle) {
			for _, d := range []int{200, 200, 200, 400, 400, 400, 400, 400, 400} {
				th.good(ms(d))
			}
		}, 4},
		{"eight times slower gets a quarter... at least one", func(th *throttle) {
			for _, d := range []int{200, 200, 200, 200} {
				th.good(ms(d))
			}
			for range 10 {
				th.good(ms(3200))
			}
		}, 1},
		{"four times slower gets half", func(th *throttle) {
			for _, d := range []int{200, 200, 200, 200} {
				th.good(ms(d))
			}
			for range 10 {
				th.good(ms(800))
			}
		}, 2},
		{"speeds up again", func(th *throttle) {
			for _, d := range []int{200, 200, 200, 200, 3200, 3200, 3200, 200, 200, 200, 200, 200, 200} {
				th.good(ms(d))
			}
		}, 4},
		{"fast errors do not speed a slow host up", func(th *throttle) {
			for _, d := range []int{50, 50, 50, 2000, 2000} {
				th.good(ms(d))
			}
			for range 20 {
				th.bad(ms(1))
			}
		}, 1},
		{"slow errors slow it down", func(th *throttle) {
			for range 4 {
				th.good(ms(50))
			}
			for range 5 {
				th.bad(ms(5000))
			}
		}, 1},
		{"429 halves the slots", func(th *throttle) {
			for range 4 {
				th.good(ms(5))
			}
			th.refused()
		}, 2},
		{"never below one", func(th *throttle) { th.refused(); th.refused() }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := newThrottle(4)
			tc.steps(&th)
			if got := th.limit(); got != tc.want {
				t.Errorf("limit %d, want %d (%+v)", got, tc.want, th)
			}
		})
	}
}

// latencySite serves "/" linking to /p0 ... /p<n-1>, each answered after
// the delay of its number.
func latencySite(t *testing.T, n int, delay func(i int) time.Duration, status func(i int) int) *site {
	s := newSite(t)
	var links []string
	for i := range n {
		links = append(links, fmt.Sprintf("/p%d", i))
	}
	s.html("/", "Home", "Start.", links...)
	s.handle("*", func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p"))
		if err != nil || i < 0 || i >= n {
			http.NotFound(w, r)
			return
		}
		time.Sleep(delay(i))
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status(i))
		fmt.Fprintf(w, "<html><body><p>Page %d of a host whose speed changes.</p></body></html>", i)
	})
	return s
}

// pageIn returns a filter of the paths /p<lo> to /p<hi-1>.
func pageIn(lo, hi int) func(string) bool {
	return func(path string) bool {
		i, err := strconv.Atoi(strings.TrimPrefix(path, "/p"))
		return err == nil && strings.HasPrefix(path, "/p") && i >= lo && i < hi
	}
}

// TestAdaptiveConcurrency crawls a host whose answers take 60 ms, then
// 400 ms, then 60 ms again, counting on the server's side the requests it
// answers at once: four while it is fast, one at a time once it has
// slowed, four again once it is fast again. It never sees more than
// PerHost.
func TestAdaptiveConcurrency(t *testing.T) {
	// Fast is 60 ms: long enough for four requests sent together to be
	// answered together on a loaded machine, short of the latency floor.
	delay := func(i int) time.Duration {
		if i >= 20 && i < 30 {
			return 400 * time.Millisecond
		}
		return 60 * time.Millisecond
	}
	s := latencySite(t, 50, delay, func(int) int { return http.StatusOK })
	c := newCrawler(t, Options{PerHost: 4})
	got := runCrawl(t, c, s.u("/"), nil)
	if got.err != nil || got.sum.Emitted != 51 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
	all := s.mostAtOnce(func(string) bool { return true })
	fast := s.mostAtOnce(pageIn(5, 20))
	// The first slow answers arrive while four slow requests are under
	// way; from the fifth slow page on the host has been measured.
	slow := s.mostAtOnce(pageIn(25, 30))
	again := s.mostAtOnce(pageIn(38, 50))
	t.Logf("at most %d at once: %d while fast, %d while slow, %d once fast again", all, fast, slow, again)
	if all > 4 {
		t.Errorf("the host saw %d requests at once, more than PerHost", all)
	}
	if fast != 4 || slow > 1 || again != 4 {
		t.Errorf("requests at once: %d while fast, %d while slow, %d once fast again; want 4, 1, 4", fast, slow, again)
	}
}

// TestSlowHostNeverOverrun: a host answering each page in 300 ms never
// sees more than PerHost requests at once.
func TestSlowHostNeverOverrun(t *testing.T) {
	s := latencySite(t, 16, func(int) time.Duration { return 300 * time.Millisecond }, func(int) int { return http.StatusOK })
	got := runCrawl(t, newCrawler(t, Options{PerHost: 3}), s.u("/"), nil)
	if got.err != nil || got.sum.Emitted != 17 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
	if most := s.mostAtOnce(func(string) bool { return true }); most > 3 {
		t.Errorf("%d requests at once, more than PerHost 3", most)
	}
}

// TestErrorAnswersDoNotSpeedUp: once a host has slowed, answers that are
// errors do not count as it being fast again, however quickly they come:
// 404s answered in 60 ms after pages answered in 400 ms still go one at a
// time. Counted as good answers they would go four at a time.
func TestErrorAnswersDoNotSpeedUp(t *testing.T) {
	delay := func(i int) time.Duration {
		if i < 6 {
			return 400 * time.Millisecond
		}
		return 60 * time.Millisecond
	}
	status := func(i int) int {
		if i < 6 {
			return http.StatusOK
		}
		return http.StatusNotFound
	}
	s := latencySite(t, 22, delay, status)
	got := runCrawl(t, newCrawler(t, Options{PerHost: 4}), s.u("/"), nil)
	if got.err != nil || got.sum.Skipped[ReasonGone] != 16 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
	if most := s.mostAtOnce(pageIn(10, 22)); most > 1 {
		t.Errorf("the error answers went %d at a time", most)
	}
}

// TestForcedDelay: Options.Delay spaces the requests to a host, as a
// Crawl-delay does.
func TestForcedDelay(t *testing.T) {
	s := newSite(t)
	s.html("/", "Home", "Start.", "/a", "/b", "/c")
	for _, p := range []string{"/a", "/b", "/c"} {
		s.html(p, p, "Page "+p+".")
	}
	got := runCrawl(t, newCrawler(t, Options{PerHost: 4, Delay: 200 * time.Millisecond}), s.u("/"), nil)
	if got.err != nil || got.sum.Emitted != 4 {
		t.Fatalf("%v %+v", got.err, got.sum)
	}
	var all []time.Time
	for _, p := range []string{"/robots.txt", "/", "/a", "/b", "/c", "/sitemap.xml", "/llms.txt"} {
		all = append(all, s.timesOf(p)...)
	}
	sortTimes(all)
	// As in TestCrawlDelayIsHonoured: half the delay tells requests sent
	// together from requests spaced by it.
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
