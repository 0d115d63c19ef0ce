package htmlmd

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

func convertPage(t testing.TB, page string, opts Options) *Page {
	t.Helper()
	p, err := ConvertBytes(context.Background(), []byte(page), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConvertMarkdown(t *testing.T) {
	base, _ := url.Parse("https://docs.example/guide/page.html")
	for _, tc := range []struct {
		name, html string
		want       string
	}{
		{"headings and paragraphs", `<h1>Title</h1><p>One  two
			three.</p><h3>Sub</h3><p>Four.</p>`, "# Title\n\nOne two three.\n\n### Sub\n\nFour."},
		{"links resolved, anchors dropped", `<p>See <a href="../ref.html#x">the reference</a> and <a id="top" href="#top"></a>more.</p>`,
			"See [the reference](https://docs.example/ref.html#x) and more."},
		{"emphasis and code", `<p>Use <code>max_connections</code> with <strong>care</strong>, <em>always</em>.</p>`,
			"Use `max_connections` with **care**, *always*."},
		{"empty emphasis dropped", `<p>a<b> </b>b</p>`, "a b"},
		{"lists", `<ul><li>one</li><li>two<ul><li>inner</li></ul></li></ul><ol><li>first</li><li><p>second</p></li></ol>`,
			"- one\n- two\n  - inner\n\n1. first\n2. second"},
		{"unclosed items", `<ul><li>a<li>b</ul><p>after`, "- a\n- b\n\nafter"},
		{"code block", "<p>Run:</p><pre><code>make run\n  make test</code></pre><p>Done.</p>", "Run:\n\n```\nmake run\n  make test\n```\n\nDone."},
		{"table", `<table><tr><th>Name</th><th>Limit</th></tr><tr><td>size</td><td><p>64 MB</p></td></tr><tr><td>a|b</td><td>1</td></tr></table>`,
			"| Name | Limit |\n|---|---|\n| size | 64 MB |\n| a\\|b | 1 |"},
		{"nested table flattened", `<table><tr><td>outer</td><td><table><tr><td>in</td><td>ner</td></tr></table></td></tr></table>`,
			"| outer | in ner |\n|---|---|"},
		{"definition list", `<dl><dt><code>port</code> (<code>integer</code>)</dt><dd><p>The port; 5432 by default.</p></dd></dl>`,
			"`port` (`integer`)\n\nThe port; 5432 by default."},
		{"blockquote", `<blockquote><p>Quoted.</p></blockquote>`, "> Quoted."},
		{"dropped elements", `<p>keep</p><script>no()</script><style>.x{}</style><div hidden>no</div><p style="display: none">no</p><span aria-hidden="true">no</span><img src="a.png" alt="no"><button>no</button>`,
			"keep"},
		{"entities", `<p>a &lt;b&gt; &amp; c&nbsp;d</p>`, "a <b> & c\u00a0d"},
		{"text that looks like Markdown", `<p># not a heading</p><p>| not | a row</p><p>&gt; no quote</p><p>` + "```" + `x</p>`,
			"\\# not a heading\n\n\\| not | a row\n\n\\> no quote\n\n\\```x"},
		{"a table in a hidden part of a table", `<table><tr><td>a<div hidden><table><tr><td>x</td></tr></table></div></td><td>b</td></tr></table><p>after</p>`,
			"| a | b |\n|---|---|\n\nafter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := convertPage(t, "<html><body>"+tc.html+"</body></html>", Options{Base: base}).Markdown
			if got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestConvertMainContent checks what the main content drops: furniture by
// element, role, class and id, and navigation bars no element marks; and
// that <main> or the one <article> is all of it when the page has one.
func TestConvertMainContent(t *testing.T) {
	page := `<html><head><title> The  Page </title></head><body>
<div class="navheader"><table><tr><td><a href="p.html">Prev</a></td><td><a href="u.html">Up</a></td></tr></table></div>
<header><a href="/">Site</a> NAV-HEADER</header>
<nav>NAV-ELEMENT</nav>
<div id="sidebar">SIDEBAR</div>
<div role="navigation">ROLE-NAV</div>
<div class="site-footer">FOOTER-CLASS</div>
<p>Next: <a href="n.html">Next page</a>, Previous: <a href="p.html">Previous page</a>, Up: <a href="u.html">Top</a></p>
<div class="body"><h1>Content</h1><p>The text to read, with <a href="x.html">one link</a> in it.</p>
<p>See <a href="a.html">A</a> and <a href="b.html">B</a> for the whole story of how this works and why.</p></div>
<aside>ASIDE</aside><footer>FOOTER</footer></body></html>`
	p := convertPage(t, page, Options{Main: true})
	if p.Title != "The Page" {
		t.Errorf("title %q", p.Title)
	}
	for _, gone := range []string{"Prev", "NAV-HEADER", "NAV-ELEMENT", "SIDEBAR", "ROLE-NAV", "FOOTER", "ASIDE", "Next page"} {
		if strings.Contains(p.Markdown, gone) {
			t.Errorf("main content keeps %q:\n%s", gone, p.Markdown)
		}
	}
	for _, kept := range []string{"# Content", "The text to read, with [one link](x.html) in it.", "See [A](a.html) and [B](b.html) for the whole story"} {
		if !strings.Contains(p.Markdown, kept) {
			t.Errorf("main content lacks %q:\n%s", kept, p.Markdown)
		}
	}
	// The whole page keeps the furniture but scripts and hidden parts.
	whole := convertPage(t, page, Options{}).Markdown
	for _, kept := range []string{"NAV-HEADER", "SIDEBAR", "FOOTER", "Next page"} {
		if !strings.Contains(whole, kept) {
			t.Errorf("the whole page lacks %q", kept)
		}
	}

	for _, tc := range []struct{ name, page, want string }{
		{"a sidebar cell holding a table", `<body><table><tr><td class="sidebar"><table><tr><td><a href="/">Home</a></td></tr></table></td><td><h1>Setup</h1><p>Run it.</p></td></tr></table></body>`,
			"# Setup\n\nRun it."},
		{"a layout table", `<body><table><tr><td>Logo</td><td><h2>Title</h2><p>One.</p><table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table></td></tr></table></body>`,
			"Logo\n\n## Title\n\nOne.\n\n| k | v |\n|---|---|\n| a | 1 |"},
		{"a theme's wrappers named nav around role main", `<body><div class="wy-grid-for-nav"><nav class="wy-nav-side"><a href="a">Install</a></nav>` +
			`<section class="wy-nav-content-wrap"><div class="wy-nav-content"><div role="main"><h1>Install</h1><p>Run the installer.</p></div></div></section></div></body>`,
			"# Install\n\nRun the installer."},
		{"main named only in a script", `<body><script>var s = "<main>";</script><nav>MENU</nav><p>The text.</p></body>`, "The text."},
		{"role main named only in the text", `<body><nav>MENU</nav><p>Use role="main" on the content.</p></body>`, `Use role="main" on the content.`},
		{"main element", `<body><p>OUTSIDE</p><main><p>inside</p></main><p>OUTSIDE</p></body>`, "inside"},
		{"role main", `<body><p>OUTSIDE</p><div role='main'><p>inside</p></div></body>`, "inside"},
		{"one article", `<body><p>OUTSIDE</p><article><header><h1>T</h1></header><p>inside</p></article></body>`, "# T\n\ninside"},
		{"several articles are the page", `<body><p>intro</p><article>one</article><article>two</article></body>`, "intro\n\none\n\ntwo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := convertPage(t, tc.page, Options{Main: true}).Markdown; got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestConvertHostile feeds pages that could cost more than one pass: deep
// nesting, a million unclosed elements, end tags of nothing; each is read
// in a bounded number of open elements.
func TestConvertHostile(t *testing.T) {
	for _, page := range []string{
		strings.Repeat("<div>", 100000) + "deep" + strings.Repeat("</div>", 100000),
		strings.Repeat("<li><b><i>", 30000) + "x",
		strings.Repeat("</p></table></li>", 30000) + "<p>text</p>",
		"<table>" + strings.Repeat("<tr><td>c", 20000),
		"<pre>" + strings.Repeat("code\n", 1000),
	} {
		p := convertPage(t, page, Options{Main: true})
		if !utf8.ValidString(p.Markdown) {
			t.Error("invalid UTF-8 out")
		}
	}
	c := &converter{}
	for range 10 * MaxDepth {
		c.stack = append(c.stack, element{})
		if len(c.stack) > MaxDepth {
			c.pop()
		}
	}
	if p := convertPage(t, strings.Repeat("<span>", 5*MaxDepth)+"x", Options{}); p.Markdown != "x" {
		t.Errorf("deep spans: %q", p.Markdown)
	}
}

// TestConvertGrowth: pages built to make their Markdown much larger than
// themselves (one wide row then many narrow ones, nesting repeated on every
// line) stay within MaxGrowth of their size, or fail with ErrTooLarge.
func TestConvertGrowth(t *testing.T) {
	for _, page := range []string{
		"<table><tr>" + strings.Repeat("<td>c", 2000) + strings.Repeat("<tr><td>x", 20000) + "</table>",
		strings.Repeat("<blockquote>", 500) + strings.Repeat("<br>x", 20000),
		strings.Repeat("<ul><li>", 500) + strings.Repeat("<li>x", 20000),
		"<p>" + strings.Repeat("[", 200000) + "](](</p>",
		strings.Repeat(`<a href="a">x</a>`, 50000),
	} {
		p, err := ConvertBytes(context.Background(), []byte(page), Options{Main: true, Base: &url.URL{Scheme: "https", Host: "docs.example", Path: "/a/very/long/path/to/make/links/grow/"}})
		switch {
		case errors.Is(err, ErrTooLarge):
		case err != nil:
			t.Fatal(err)
		case len(p.Markdown) > MaxGrowth*len(page)+64<<10:
			t.Errorf("%d bytes of Markdown from %d of HTML", len(p.Markdown), len(page))
		}
	}
}

func TestConvertTitle(t *testing.T) {
	p := convertPage(t, `<body><svg><title>icon</title></svg><h1>Heading</h1></body>`, Options{})
	if p.Title != "" {
		t.Errorf("an SVG's title became the page's: %q", p.Title)
	}
}

func TestConvertCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ConvertBytes(ctx, []byte(strings.Repeat("<p>x</p>", 10000)), Options{}); err == nil {
		t.Error("a cancelled conversion succeeded")
	}
}

func FuzzConvert(f *testing.F) {
	f.Add("<h1>a</h1><p>b <a href=x>c</a></p><table><tr><td>d</table><pre>e</pre>", true)
	f.Add("<ul><li><p>x<li>y</ul><dl><dt>t<dd>d</dl>", false)
	f.Add(`<table><tr><td class="sidebar"><table><tr><td>n</td></tr></table></td><td>c</td></tr></table>`, true)
	f.Add(`<table><tr><td>a<div hidden><table><tr><td>x</td></tr></table></div></td></tr></table>`, false)
	f.Add(`<script>"<main>"</script><div role='main'><blockquote><blockquote><p># h</p></blockquote></blockquote></div>`, true)
	f.Fuzz(func(t *testing.T, page string, main bool) {
		p, err := ConvertBytes(context.Background(), []byte(page), Options{Main: main})
		if errors.Is(err, ErrTooLarge) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(p.Markdown) {
			t.Fatalf("invalid UTF-8 from %q", page)
		}
		if len(p.Markdown) > MaxGrowth*len(page)+64<<10 {
			t.Fatalf("%d bytes of Markdown from %d of HTML", len(p.Markdown), len(page))
		}
	})
}

// BenchmarkConvert reads the manual pages of fetch's fixtures, main content
// and whole page.
func BenchmarkConvert(b *testing.B) {
	page, err := os.ReadFile("../../fetch/testdata/zlib-how.html")
	if err != nil {
		b.Fatal(err)
	}
	for _, main := range []bool{true, false} {
		name := "whole"
		if main {
			name = "main"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ConvertBytes(context.Background(), page, Options{Main: main}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
