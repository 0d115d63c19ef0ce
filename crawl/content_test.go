package crawl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/extract"
)

// docPage is a page of a documentation site: a navigation bar, a sidebar
// and a footer around the page's own text.
func docPage(title, text, nav string) []byte {
	return []byte(fmt.Sprintf(`<!DOCTYPE html><html><head><title>%s</title></head><body>
<header class="site-header"><a href="/">Widgets</a> NAVBAR-%s</header>
<div class="navheader"><a href="/prev">Prev</a> <a href="/">Up</a> <a href="/">Home</a> <a href="/next">Next</a></div>
<div class="layout"><aside class="sidebar"><ul><li><a href="/a">SIDEBAR-%s</a></li><li><a href="/b">Guide</a></li></ul></aside>
<main><h1>%s</h1><p>%s</p><p>%s</p></main></div>
<footer>FOOTER-%s Copyright Widget Corp.</footer></body></html>`, title, nav, nav, title, text, text, nav))
}

// TestMainContentStored: a crawl hands over what fetch_url reads of a
// page, its main content as Markdown, not the site's frame; and a page
// whose frame alone changed is unchanged.
func TestMainContentStored(t *testing.T) {
	s := newSite(t)
	text := "The widget cache keeps recent answers in memory, so that a second question is answered at once."
	s.put("/", "text/html", docPage("Widget manual", text, "v1"))
	c := newCrawler(t, Options{})
	first := runCrawl(t, c, s.u("/"), nil)
	p := first.pages[s.u("/")]
	if first.err != nil || p.Status != StatusNew {
		t.Fatalf("%v %+v", first.err, first.sum)
	}
	body := string(p.Body)
	for _, w := range []string{"NAVBAR", "Prev", "SIDEBAR", "FOOTER"} {
		if strings.Contains(body, w) {
			t.Errorf("the stored page keeps %s: %s", w, body)
		}
	}
	if p.ContentType != extract.MIMEMarkdown || !strings.HasPrefix(body, "# Widget manual\n") || !strings.Contains(body, "second question") {
		t.Errorf("the stored page lost its title or text: %s", body)
	}
	// The site's frame changes on every page when a page is added.
	s.put("/", "text/html", docPage("Widget manual", text, "v2"))
	second := runCrawl(t, c, s.u("/"), first.known())
	if p := second.pages[s.u("/")]; second.err != nil || p.Status != StatusUnchanged {
		t.Errorf("after a change of navigation: %v %s", second.err, p.Status)
	}
	s.put("/", "text/html", docPage("Widget manual", text+" It holds an hour of answers.", "v2"))
	third := runCrawl(t, c, s.u("/"), first.known())
	if p := third.pages[s.u("/")]; third.err != nil || p.Status != StatusChanged {
		t.Errorf("after a change of text: %v %s", third.err, p.Status)
	}
}
