package extract

import (
	"fmt"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// extractHTML returns the visible text of an HTML document: the title, then
// the body with one paragraph per block element. Scripts, styles, templates,
// hidden elements and the rest of <head> are skipped; entities are decoded and
// runs of blank space collapse to one space.
func extractHTML(data []byte) (*Document, error) {
	root, err := html.Parse(strings.NewReader(cleanText(decodeHTML(data))))
	if err != nil {
		// html.Parse only fails when its reader does; keep the contract anyway.
		return nil, fmt.Errorf("%w: html: %v", ErrCorrupt, err)
	}
	var w htmlWriter
	if title := HTMLTitle(root); title != "" {
		w.text(title)
		w.breakLine(2)
	}
	w.walk(root)
	return singleDocument(strings.TrimSpace(w.b.String())), nil
}

// decodeHTML honours the encoding a page declares (byte order mark or
// <meta charset>), such as Shift_JIS or KOI8-R, and otherwise decodes like
// plain text.
func decodeHTML(data []byte) string {
	enc, name, _ := charset.DetermineEncoding(data, "text/html")
	switch name {
	case "utf-8", "windows-1252", "":
		// DetermineEncoding falls back to these by guessing; decodeBytes
		// guesses better for UTF-8 with a few damaged bytes.
		return decodeBytes(data)
	}
	out, err := enc.NewDecoder().Bytes(data)
	if err != nil {
		return decodeBytes(data)
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
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

// skipped lists elements whose content is never shown as text.
var skipped = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true,
	atom.Template: true, atom.Svg: true, atom.Math: true, atom.Iframe: true,
	atom.Object: true, atom.Canvas: true, atom.Select: true, atom.Datalist: true,
}

// HTMLTitle returns the text of a parsed page's first <title> element,
// with its spaces collapsed; "" when the head has none.
func HTMLTitle(n *html.Node) string {
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
		if t := HTMLTitle(c); t != "" {
			return t
		}
	}
	return ""
}

// htmlWriter collapses blank space the way a browser does, holding spaces and
// line breaks back until the next visible character decides whether they show.
type htmlWriter struct {
	b            strings.Builder
	pendingSpace bool
	pendingBreak int
	pre          int
}

func (w *htmlWriter) walk(n *html.Node) {
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
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c)
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

func (w *htmlWriter) breakLine(n int) {
	if n > w.pendingBreak {
		w.pendingBreak = n
	}
}

// flush writes the held-back separator before visible text.
func (w *htmlWriter) flush() {
	switch {
	case w.b.Len() == 0:
	case w.pendingBreak > 0:
		w.b.WriteString("\n\n"[:w.pendingBreak])
	case w.pendingSpace:
		w.b.WriteByte(' ')
	}
	w.pendingBreak = 0
	w.pendingSpace = false
}

func (w *htmlWriter) text(s string) {
	for _, r := range s {
		if r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r' {
			w.pendingSpace = true
			continue
		}
		w.flush()
		w.b.WriteRune(r)
	}
}

func (w *htmlWriter) preText(s string) {
	if s == "" {
		return
	}
	w.flush()
	w.b.WriteString(s)
}
