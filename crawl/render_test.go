package crawl

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/render"
)

// shellPage is a single-page application's HTML: a title, a root element
// and a script that fills it.
const shellPage = `<!DOCTYPE html><html><head><title>Harbour</title><script src="/app.js"></script></head>
<body><noscript>You need to enable JavaScript to run this app.</noscript><div id="root"></div></body></html>`

// appScript builds the application's pages from the path: a heading, a
// paragraph and the links to the other pages, all written by the script.
const appScript = `
const pages = {
  "/": ["Harbour handbook", "Welcome aboard: the handbook of the harbour.", ["/tides", "/moorings"]],
  "/tides": ["Tides", "Ships drop anchor when the tide is low, and the harbour master rings the bell.", ["/"]],
  "/moorings": ["Moorings", "Each berth has two bollards and a ladder painted yellow.", ["/"]],
};
window.addEventListener("DOMContentLoaded", () => {
  const [title, text, links] = pages[location.pathname] || ["Lost", "No such page.", []];
  const root = document.getElementById("root");
  const h = document.createElement("h1"); h.textContent = title; root.append(h);
  const p = document.createElement("p"); p.textContent = text; root.append(p);
  for (const l of links) { const a = document.createElement("a"); a.href = l; a.textContent = l; root.append(a); }
});`

// appSite serves the application at every path of its pages, and a page
// of HTML of its own at /static.
func appSite(t *testing.T) *site {
	s := newSite(t)
	for _, p := range []string{"/", "/tides", "/moorings"} {
		s.put(p, "text/html; charset=utf-8", []byte(shellPage))
	}
	s.put("/app.js", "text/javascript", []byte(appScript))
	return s
}

// fakeRenderer renders every page as a page of text, and counts them.
type fakeRenderer struct {
	mu    sync.Mutex
	pages []string
}

func (f *fakeRenderer) Render(ctx context.Context, p render.Page) ([]byte, error) {
	f.mu.Lock()
	f.pages = append(f.pages, p.URL)
	f.mu.Unlock()
	return []byte(strings.Replace(string(p.Body), "</body>", "<p>The text the scripts wrote for "+p.URL+".</p></body>", 1)), nil
}

func TestRenderModes(t *testing.T) {
	for _, tc := range []struct {
		mode     RenderMode
		renderer bool
		rendered []string // paths rendered
		stored   []string
		skip     Reason
	}{
		{RenderAuto, true, []string{"/shell"}, []string{"/", "/shell"}, ""},
		{RenderAlways, true, []string{"/", "/shell"}, []string{"/", "/shell"}, ""},
		// Read as it is served, the shell has no text.
		{RenderNever, true, nil, []string{"/"}, ReasonType},
		{RenderAuto, false, nil, []string{"/"}, ReasonBrowser},
		{RenderNever, false, nil, []string{"/"}, ReasonType},
	} {
		t.Run(string(tc.mode)+map[bool]string{true: " with a browser", false: " without"}[tc.renderer], func(t *testing.T) {
			s := newSite(t)
			s.html("/", "Home", "A page of HTML with text of its own.", "/shell")
			s.put("/shell", "text/html", []byte(shellPage))
			f := &fakeRenderer{}
			opts := Options{Render: tc.mode}
			if tc.renderer {
				opts.Renderer = f
			}
			got := runCrawl(t, newCrawler(t, opts), s.u("/"), nil)
			if got.err != nil {
				t.Fatal(got.err)
			}
			if paths := s.paths(f.pages); !slices.Equal(paths, tc.rendered) {
				t.Errorf("rendered %q, want %q", paths, tc.rendered)
			}
			if paths := s.paths(got.urls(StatusNew)); !slices.Equal(paths, tc.stored) {
				t.Errorf("stored %q, want %q", paths, tc.stored)
			}
			if tc.skip != "" && got.sum.Skipped[tc.skip] != 1 {
				t.Errorf("skips %+v, want one for %s", got.sum.Skips, tc.skip)
			}
			if tc.skip == ReasonBrowser && got.sum.Skips[0].Detail != "needs a browser: install chromium" {
				t.Errorf("skip %+v", got.sum.Skips[0])
			}
			shell := string(got.pages[s.u("/shell")].Body)
			if rendered := strings.Contains(shell, "the scripts wrote"); len(shell) > 0 && rendered != (len(tc.rendered) > 0) {
				t.Errorf("/shell stored as %s", shell)
			}
		})
	}
	if _, err := New(client(t), Options{Render: "sometimes"}); err == nil || !strings.Contains(err.Error(), `render "sometimes" must be never, auto or always`) {
		t.Errorf("render sometimes: %v", err)
	}
}

// TestCrawlSinglePageApplication crawls, in a real headless Chromium, an
// application whose text and links exist only once its script has run:
// every page is found through links the script wrote, and stored with the
// text the script wrote.
func TestCrawlSinglePageApplication(t *testing.T) {
	path := render.Find()
	if path == "" {
		if os.Getenv("MCPSEARCH_REQUIRE_BROWSER") == "1" {
			t.Fatal("MCPSEARCH_REQUIRE_BROWSER=1 but no chromium is installed (Debian: apt-get install chromium)")
		}
		t.Skip("rendering needs Chromium (Debian: apt-get install chromium); set MCPSEARCH_REQUIRE_BROWSER=1 to make its absence a failure")
	}
	s := appSite(t)
	r := render.New(client(t), render.Options{Path: path, Timeout: time.Minute})
	defer r.Close()
	got := runCrawl(t, newCrawler(t, Options{Renderer: r, Timeout: time.Minute}), s.u("/"), nil)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if paths := s.paths(got.urls(StatusNew)); !slices.Equal(paths, []string{"/", "/moorings", "/tides"}) {
		t.Fatalf("pages %q (skips %+v)", paths, got.sum.Skips)
	}
	tides := string(got.pages[s.u("/tides")].Body)
	if !strings.Contains(tides, "the harbour master rings the bell") || strings.Contains(tides, "enable JavaScript") {
		t.Errorf("/tides stored as %s", tides)
	}
	// Each page was requested once by the crawler, which handed its body
	// to the browser; the script once by the browser per page.
	if n := s.hitsOf("/tides"); n != 1 {
		t.Errorf("/tides requested %d times", n)
	}
	if n := s.hitsOf("/app.js"); n != 3 {
		t.Errorf("/app.js requested %d times", n)
	}
}
