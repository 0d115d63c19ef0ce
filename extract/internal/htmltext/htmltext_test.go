package htmltext

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// testToken is the tokenizer's buffer in the tests: pages a few times
// larger test reading on past it.
const testToken = 4096

// readPage is Read of s with the title written first, the tokenizer's
// buffer bounded to testToken.
func readPage(t *testing.T, s string) *Page {
	t.Helper()
	p, err := read(context.Background(), strings.NewReader(s), Options{WithTitle: true}, testToken)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return p
}

// sameAsTree checks that Read gives the text and headings the tree of
// html.Parse gives.
func sameAsTree(t *testing.T, name, page string) {
	t.Helper()
	root, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	want, wantHeadings := treeText(root, true)
	got := readPage(t, page)
	if got.Text != want {
		t.Errorf("%s: text\n got %q\nwant %q", name, clip(got.Text), clip(want))
	}
	if len(got.Headings)+len(wantHeadings) > 0 && !reflect.DeepEqual(got.Headings, wantHeadings) {
		t.Errorf("%s: headings\n got %+v\nwant %+v", name, got.Headings, wantHeadings)
	}
	if title := Title(root); got.Title != title {
		t.Errorf("%s: title %q, want %q", name, got.Title, title)
	}
}

func clip(s string) string {
	if len(s) <= 400 {
		return s
	}
	return s[:200] + fmt.Sprintf(" ...(%d bytes)... ", len(s)-400) + s[len(s)-200:]
}

// TestReadMatchesTree holds the token reader to the text the tree of the
// same page gives, on well-formed pages and on the end tags pages leave
// out.
func TestReadMatchesTree(t *testing.T) {
	pages := map[string]string{
		"document": `<!DOCTYPE html><html><head><title> The  Title </title><meta charset="utf-8"><style>p{color:red}</style>
<script>var x = "<p>not text</p>";</script></head><body><h1>Main   heading</h1><p>First <b>bold</b> and <i>italic</i>.</p>
<ul><li>one</li><li>two</li></ul><div>Tom &amp; Jerry &lt;3 &eacute;t&eacute;</div></body></html>`,
		"no head or body":     `<title>T</title><p>a<p>b`,
		"unclosed paragraphs": `<p>one<p>two<div>three</div><p>four<h2>five</h2>six`,
		"unclosed items":      `<ul><li>a<li>b<ul><li>c<li>d</ul><li>e</ul><dl><dt>t<dd>d<dt>u<dd>e</dl>`,
		"unclosed cells":      `<table><tr><td>a<td>b<tr><td>c<th>d</table><p>after`,
		"table sections":      `<table><caption>Cap</caption><thead><tr><th>h1<th>h2<tbody><tr><td>1<td>2<tfoot><tr><td>f</table>`,
		"hidden": `<p>shown</p><div hidden><p>gone<p>gone too</div><p>back</p><span aria-hidden="true">gone <b>too</b></span>
<p hidden>gone<p>shown again<input type="hidden" value="x">end`,
		"skipped":         `<p>a</p><noscript>ns</noscript><template><p>t</p></template><svg><text>s</text><path/></svg><math><mi>x</mi></math><select><option>o</select><p>b`,
		"self-closing":    `<p>a<br/>b<svg/>c<div/>d</div>e`,
		"headings":        `<h1>One</h1><p>x</p><h2>Two <em>em</em></h2><h3></h3><h2>Three<h3>Four</h3></h2><p>y`,
		"heading in head": `<head><title>x</title></head><h1>  Spaced   out  </h1>`,
		"pre":             "<p>a</p><pre>\n  keep   this\n    indent\n</pre><p>b   c</p><textarea>\nt  x</textarea><listing>\nl</listing>",
		"entities":        `<p>&copy; &#169; &#xA9; &amp &notin; &lt;tag&gt;</p>`,
		"comments":        `<p>a<!-- <p>hidden</p> -->b<!---->c<!-->d<?php echo 1 ?>e</p>`,
		"end tags alone":  `</p>x</div>y</br>z</span>w`,
		"two titles":      `<head><title></title><title>Second</title><title>Third</title></head><body>text`,
		"title in body":   `<body><p>a</p><title>in body</title><p>b`,
		"text in head":    `<head><title>T</title>loose text<p>para`,
		"inline blocks":   `<span><div>block in span</div></span><a href="x"><p>para in link</p></a>`,
		"buttons":         `<p>a<button><p>in button</button>b`,
		"plaintext":       `<p>a<plaintext><p>all</p> text`,
		"xhtml": `<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>X</title></head>` +
			`<body><p>one</p><br/><p>two</p><![CDATA[cdata]]><p>three</p></body></html>`,
	}
	for name, page := range pages {
		sameAsTree(t, name, page)
	}
}

// TestReadLongTokens reads tokens longer than the tokenizer's buffer: a
// text run, raw text, a comment and tags are read on in pieces, and the
// page's text after them is all there.
func TestReadLongTokens(t *testing.T) {
	long := strings.Repeat("word ", 3*testToken/5)
	for name, page := range map[string]string{
		"text run":             "<p>" + long + "</p><p>after</p>",
		"preformatted":         "<pre>" + strings.Repeat("line  of\n", testToken/3) + "</pre><p>after</p>",
		"script":               "<p>before</p><script>" + strings.Repeat("var a = b < c;", testToken/5) + "</script><p>after</p>",
		"style":                "<style>" + strings.Repeat("p{}", testToken) + "</style><p>after</p>",
		"comment":              "<p>a</p><!--" + long + "--><p>after</p>",
		"bogus comment":        "<p>a</p><?" + long + "><p>after</p>",
		"textarea":             "<textarea>" + long + "</textarea><p>after</p>",
		"entity at the cut":    "<p>" + strings.Repeat("x", testToken-3) + "&amp;&eacute;&amp;" + strings.Repeat("y", 10) + "</p>",
		"tag start at the cut": "<p>" + strings.Repeat("x", testToken-1) + "<b>bold</b> and <i>i</i></p>",
		"end tag at the cut in a script": "<script>" + strings.Repeat("x", testToken-3) +
			"</script><p>after</p>",
	} {
		sameAsTree(t, name, page)
		rd := &reader{skip: -1, w: writer{limit: -1}, maxToken: testToken}
		if err := rd.run(context.Background(), strings.NewReader(page)); err != nil || rd.resumes == 0 {
			t.Errorf("%s: read on %d times (%v), want at least once", name, rd.resumes, err)
		}
	}
	// A title is kept to its first maxTitleBytes.
	p := readPage(t, "<title>"+long+"</title><p>after</p>")
	if want := strings.TrimSpace(long[:maxTitleBytes]); p.Title != want || p.Text != want+"\n\nafter" {
		t.Errorf("a long title: %q, text %q", clip(p.Title), clip(p.Text))
	}
	// A tag longer than the buffer keeps its name; its attributes are
	// dropped, and what follows it is read.
	for name, c := range map[string]struct{ page, want string }{
		"data URI":        {`<p>a<img src="data:image/png;base64,` + strings.Repeat("QUJD", testToken) + `" alt="x>y">b</p><p>c</p>`, "ab\n\nc"},
		"many attributes": {`<p>a</p><div ` + strings.Repeat("a ", testToken) + `>in div</div>after`, "a\n\nin div\n\nafter"},
		"unclosed quote":  {`<p>a<span title="` + strings.Repeat("q", 2*testToken) + `>not text</span>`, "a"},
		"long end tag":    {`<div>a</div ` + strings.Repeat("x ", testToken) + `>b`, "a\n\nb"},
	} {
		if got := readPage(t, c.page); got.Text != c.want {
			t.Errorf("%s: %q, want %q", name, clip(got.Text), c.want)
		}
	}
}

// TestReadBounds checks the bounds that keep a hostile page from holding
// memory: the text limit, the depth of open elements and the length of
// a heading's title.
func TestReadBounds(t *testing.T) {
	page := strings.Repeat("<p>xxxx</p>", 20000)
	_, err := Read(context.Background(), strings.NewReader(page), Options{MaxTextBytes: 1 << 16})
	if !errors.Is(err, textdoc.ErrTooLarge) || !strings.Contains(err.Error(), "text limit") {
		t.Errorf("past the text limit: %v, want ErrTooLarge naming the text limit", err)
	}
	p, err := Read(context.Background(), strings.NewReader(page), Options{MaxTextBytes: 1 << 20})
	if err != nil || len(p.Text) != 20000*6-2 {
		t.Errorf("within the text limit: %d bytes, %v", len(p.Text), err)
	}

	deep := strings.Repeat("<div>", 4*MaxDepth) + "inside" + strings.Repeat("</div>", 4*MaxDepth) + "<p>after"
	rd := &reader{skip: -1, w: writer{limit: -1}, maxToken: testToken}
	if err := rd.run(context.Background(), strings.NewReader(deep)); err != nil {
		t.Fatal(err)
	}
	if len(rd.stack) > MaxDepth {
		t.Errorf("%d elements open, want at most %d", len(rd.stack), MaxDepth)
	}
	if got := readPage(t, deep).Text; got != "inside\n\nafter" {
		t.Errorf("deep nesting: %q", clip(got))
	}
	hidden := `<div hidden>` + strings.Repeat("<span>", 4*MaxDepth) + "gone" + "</div>shown"
	if got := readPage(t, hidden).Text; got != "shown" {
		t.Errorf("deep hidden content: %q, want %q", clip(got), "shown")
	}

	unclosed := "<h1>" + strings.Repeat("long heading ", 2*maxTitleBytes/13)
	p = readPage(t, unclosed)
	if len(p.Headings) != 1 || len(p.Headings[0].Title) > maxTitleBytes || !strings.HasPrefix(p.Headings[0].Title, "long heading long") {
		t.Errorf("an unclosed heading's title: %d headings, the first %d bytes long", len(p.Headings), len(p.Headings[0].Title))
	}
}

// TestReadDropsControlCharacters checks that the text holds no control
// character but line feeds and tabs, as the text of every other format.
func TestReadDropsControlCharacters(t *testing.T) {
	if got := readPage(t, "<p>a\x01b\x7fc\td</p><pre>x\x02y\r\nz</pre>").Text; got != "abc d\n\nxy\nz" {
		t.Errorf("%q", got)
	}
}

// TestReadStopsWithContext checks that a page is not read on once ctx ends.
func TestReadStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, strings.NewReader("<p>x</p>"), Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with an ended context: %v", err)
	}
}

// BenchmarkRead reads pages of 8 MiB: small paragraphs, elements never
// closed, and a button holding elements that each look for a paragraph
// beyond it.
func BenchmarkRead(b *testing.B) {
	for _, c := range []struct{ name, unit string }{
		{"paragraphs", "<p>xxxx</p>"},
		{"unclosed", "<div><li><td>x"},
		{"scope", "<p><button>" + strings.Repeat("<div>", 600) + strings.Repeat("</p><div>", 1000)},
		{"hidden", "<div hidden>" + strings.Repeat("<span>", 600) + strings.Repeat("</i></span><b>", 1000)},
	} {
		page := strings.Repeat(c.unit, 8<<20/len(c.unit))
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			for b.Loop() {
				if _, err := Read(context.Background(), strings.NewReader(page), Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
