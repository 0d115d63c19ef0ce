// Package htmltext writes the visible text of a parsed HTML page, one
// paragraph per block element, and notes where its headings stand, for
// HTML files and for the chapters of e-books.
package htmltext

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Heading is a heading of the page: its level (1 for h1), its text, and
// the rune offset in the text where it starts.
type Heading struct {
	Level  int
	Title  string
	Offset int
}

// Text returns the visible text of the tree rooted at n: the body with one
// paragraph per block element, blank space collapsed as a browser does,
// <pre> kept as written; scripts, styles, templates, hidden elements and
// the rest of <head> are skipped. It also returns the headings h1 to h6.
func Text(n *html.Node) (string, []Heading) {
	var w writer
	w.walk(n)
	return w.finish()
}

// TextWithTitle is Text with the page's title written first, as its own
// paragraph, when it has one.
func TextWithTitle(n *html.Node) (string, []Heading) {
	var w writer
	if title := Title(n); title != "" {
		w.text(title)
		w.breakLine(2)
	}
	w.walk(n)
	return w.finish()
}

// finish returns the text without surrounding white space, and the
// headings with their offsets moved to match.
func (w *writer) finish() (string, []Heading) {
	s := w.b.String()
	body := strings.TrimLeftFunc(s, unicode.IsSpace)
	lead := utf8.RuneCountInString(s[:len(s)-len(body)])
	body = strings.TrimRightFunc(body, unicode.IsSpace)
	n := utf8.RuneCountInString(body)
	out := w.headings[:0]
	for _, h := range w.headings {
		h.Offset -= lead
		if h.Offset >= 0 && h.Offset < n {
			out = append(out, h)
		}
	}
	return body, out
}

// blockBreaks says how many newlines an element puts around its content: 2 for
// paragraph-like blocks (chunking prefers to cut there), 1 for line-like ones.
var blockBreaks = map[atom.Atom]int{
	atom.P: 2, atom.Div: 2, atom.Section: 2, atom.Article: 2, atom.Header: 2,
	atom.Footer: 2, atom.Nav: 2, atom.Aside: 2, atom.Main: 2, atom.H1: 2,
	atom.H2: 2, atom.H3: 2, atom.H4: 2, atom.H5: 2, atom.H6: 2, atom.Ul: 2,
	atom.Ol: 2, atom.Dl: 2, atom.Table: 2, atom.Blockquote: 2, atom.Pre: 2,
	atom.Figure: 2, atom.Form: 2, atom.Fieldset: 2, atom.Address: 2,
	atom.Details: 2, atom.Hr: 2, atom.Body: 2,
	atom.Br: 1, atom.Li: 1, atom.Dt: 1, atom.Dd: 1, atom.Tr: 1, atom.Caption: 1,
	atom.Figcaption: 1, atom.Summary: 1, atom.Option: 1, atom.Legend: 1,
}

// headingLevels gives the level of each heading element.
var headingLevels = map[atom.Atom]int{
	atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6,
}

// skipped lists elements whose content is never shown as text.
var skipped = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true,
	atom.Template: true, atom.Svg: true, atom.Math: true, atom.Iframe: true,
	atom.Object: true, atom.Canvas: true, atom.Select: true, atom.Datalist: true,
}

// Title returns the text of a parsed page's first <title> element,
// with its spaces collapsed; "" when the head has none.
func Title(n *html.Node) string {
	if n.Type == html.ElementNode && n.DataAtom == atom.Title {
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		return strings.Join(strings.Fields(b.String()), " ")
	}
	if n.Type == html.ElementNode && n.DataAtom == atom.Body {
		return ""
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := Title(c); t != "" {
			return t
		}
	}
	return ""
}

// writer collapses blank space the way a browser does, holding spaces and
// line breaks back until the next visible character decides whether they show.
type writer struct {
	b            strings.Builder
	runes        int
	pendingSpace bool
	pendingBreak int
	pre          int
	headings     []Heading
	// heading is the heading being written, whose offset is set by the
	// first visible character it holds.
	heading *Heading
}

func (w *writer) walk(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		if w.pre > 0 {
			w.preText(n.Data)
		} else {
			w.text(n.Data)
		}
		return
	case html.ElementNode:
		if skipped[n.DataAtom] || hidden(n) {
			return
		}
	case html.DocumentNode:
	default:
		return
	}
	brk := blockBreaks[n.DataAtom]
	w.breakLine(brk)
	if n.DataAtom == atom.Pre || n.DataAtom == atom.Textarea {
		w.pre++
		defer func() { w.pre-- }()
	}
	level, isHeading := headingLevels[n.DataAtom]
	if isHeading && w.heading == nil {
		w.heading = &Heading{Level: level, Offset: -1}
	} else {
		isHeading = false
	}
	start := w.b.Len()
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c)
	}
	if isHeading {
		h := *w.heading
		w.heading = nil
		if h.Offset >= 0 {
			h.Title = strings.Join(strings.Fields(w.b.String()[start:]), " ")
			w.headings = append(w.headings, h)
		}
	}
	switch n.DataAtom {
	case atom.Td, atom.Th:
		// Cells of a row stay on one line, kept apart.
		w.pendingSpace = true
	}
	w.breakLine(brk)
}

// hidden reports elements the page marks as not rendered.
func hidden(n *html.Node) bool {
	for _, a := range n.Attr {
		switch {
		case a.Key == "hidden":
			return true
		case a.Key == "aria-hidden" && strings.EqualFold(a.Val, "true"):
			return true
		case a.Key == "type" && n.DataAtom == atom.Input && strings.EqualFold(a.Val, "hidden"):
			return true
		}
	}
	return false
}

func (w *writer) breakLine(n int) {
	if n > w.pendingBreak {
		w.pendingBreak = n
	}
}

// flush writes the held-back separator before visible text.
func (w *writer) flush() {
	switch {
	case w.b.Len() == 0:
	case w.pendingBreak > 0:
		w.b.WriteString("\n\n"[:w.pendingBreak])
		w.runes += w.pendingBreak
	case w.pendingSpace:
		w.b.WriteByte(' ')
		w.runes++
	}
	w.pendingBreak = 0
	w.pendingSpace = false
	if w.heading != nil && w.heading.Offset < 0 {
		w.heading.Offset = w.runes
	}
}

func (w *writer) text(s string) {
	for _, r := range s {
		if r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r' {
			w.pendingSpace = true
			continue
		}
		w.flush()
		w.b.WriteRune(r)
		w.runes++
	}
}

func (w *writer) preText(s string) {
	if s == "" {
		return
	}
	w.flush()
	w.b.WriteString(s)
	w.runes += utf8.RuneCountInString(s)
}
