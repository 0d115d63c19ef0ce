package extract

import (
	"fmt"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"

	"github.com/mcpsearch/mcpsearch/docs/extract/internal/htmltext"
	"github.com/mcpsearch/mcpsearch/docs/extract/internal/textdoc"
)

// extractHTML returns the visible text of an HTML document: the title, then
// the body with one paragraph per block element. Scripts, styles, templates,
// hidden elements and the rest of <head> are skipped; entities are decoded and
// runs of blank space collapse to one space. Each heading (h1 to h6) starts
// a span holding its heading path.
func extractHTML(data []byte) (*Document, error) {
	root, err := html.Parse(strings.NewReader(cleanText(decodeHTML(data))))
	if err != nil {
		// html.Parse only fails when its reader does; keep the contract anyway.
		return nil, fmt.Errorf("%w: html: %v", ErrCorrupt, err)
	}
	text, headings := htmltext.TextWithTitle(root)
	doc := singleDocument(text)
	doc.Spans = headingSpans(headings, runeCount(text), nil)
	return doc, nil
}

// headingSpans returns one span per heading, from the heading to the next,
// holding its heading path under the outer path prefix; the text before the
// first heading gets a span with prefix alone when prefix is not empty.
func headingSpans(headings []htmltext.Heading, end int, prefix []string) []Span {
	var spans []Span
	if len(prefix) > 0 && (len(headings) == 0 || headings[0].Offset > 0) {
		spans = append(spans, Span{Start: 0, Location: Location{Headings: prefix}})
	}
	var o textdoc.Outline
	for _, h := range headings {
		path := append(append([]string(nil), prefix...), o.Enter(h.Level, h.Title)...)
		if n := len(spans); n > 0 && spans[n-1].Start == h.Offset {
			spans = spans[:n-1]
		}
		spans = append(spans, Span{Start: h.Offset, Location: Location{Headings: path}})
	}
	for i := range spans {
		if i+1 < len(spans) {
			spans[i].End = spans[i+1].Start
		} else {
			spans[i].End = end
		}
	}
	return spans
}

// HTMLTitle returns the text of a parsed page's first <title> element,
// with its spaces collapsed; "" when the head has none.
func HTMLTitle(n *html.Node) string {
	return htmltext.Title(n)
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
