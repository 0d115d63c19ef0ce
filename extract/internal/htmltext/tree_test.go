package htmltext

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// treeText is the text and headings of the tree rooted at n as this
// package wrote them when it walked the tree that html.Parse builds: the
// reference Read is held to.
func treeText(n *html.Node, withTitle bool) (string, []Heading) {
	var w treeWriter
	if title := Title(n); withTitle && title != "" {
		w.text(title)
		w.breakLine(2)
	}
	w.walk(n)
	return w.finish()
}

// finish returns the text without surrounding white space, and the
// headings with their offsets moved to match.
func (w *treeWriter) finish() (string, []Heading) {
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

// treeSkipped lists elements whose content is never shown as text.
var treeSkipped = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true,
	atom.Template: true, atom.Svg: true, atom.Math: true, atom.Iframe: true,
	atom.Object: true, atom.Canvas: true, atom.Select: true, atom.Datalist: true,
}

// treeWriter collapses blank space the way a browser does, holding spaces and
// line breaks back until the next visible character decides whether they show.
type treeWriter struct {
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

func (w *treeWriter) walk(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		if w.pre > 0 {
			w.preText(n.Data)
		} else {
			w.text(n.Data)
		}
		return
	case html.ElementNode:
		if treeSkipped[n.DataAtom] || treeHidden(n) {
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

// treeHidden reports elements the page marks as not rendered.
func treeHidden(n *html.Node) bool {
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

func (w *treeWriter) breakLine(n int) {
	if n > w.pendingBreak {
		w.pendingBreak = n
	}
}

// flush writes the held-back separator before visible text.
func (w *treeWriter) flush() {
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

func (w *treeWriter) text(s string) {
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

func (w *treeWriter) preText(s string) {
	if s == "" {
		return
	}
	w.flush()
	w.b.WriteString(s)
	w.runes += utf8.RuneCountInString(s)
}
