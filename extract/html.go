package extract

import (
	"bytes"
	"context"
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/transform"

	"github.com/mcpsearch/mcpsearch/extract/internal/htmltext"
	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// extractHTML returns the visible text of an HTML document: the title, then
// the body with one paragraph per block element. Scripts, styles, templates,
// hidden elements and the rest of <head> are skipped; entities are decoded and
// runs of blank space collapse to one space. Each heading (h1 to h6) starts
// a span holding its heading path. The page is read token by token, its text
// bounded by the text limit as it is written.
func (l Limits) extractHTML(ctx context.Context, data []byte) (*Document, error) {
	page, err := htmltext.Read(ctx, htmlReader(data), htmltext.Options{MaxTextBytes: l.maxText(), WithTitle: true})
	if err != nil {
		return nil, err
	}
	doc := singleDocument(page.Text)
	doc.Spans = headingSpans(page.Headings, doc.Pages[0].End, nil)
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

// htmlReader returns the page data as UTF-8, honouring the encoding it
// declares (byte order mark or <meta charset>), such as Shift_JIS or
// KOI8-R, and otherwise decoding it like plain text. Valid UTF-8 is read
// in place, without a copy.
func htmlReader(data []byte) io.Reader {
	enc, name, _ := charset.DetermineEncoding(data, "text/html")
	switch name {
	case "utf-8", "windows-1252", "":
		// DetermineEncoding falls back to these by guessing; decodeBytes
		// guesses better for UTF-8 with a few damaged bytes.
		if b := bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")); utf8.Valid(b) {
			return bytes.NewReader(b)
		}
		return strings.NewReader(decodeBytes(data))
	}
	return transform.NewReader(bytes.NewReader(data), enc.NewDecoder())
}
