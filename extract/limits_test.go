package extract

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLocationBounds checks that what a location holds is bounded whatever
// a file holds: a heading of 100,000 characters is cut in its location (it
// is copied into every chunk under it) and kept whole in the text, and a
// document of more headings than the span limit fails saying so.
func TestLocationBounds(t *testing.T) {
	long := strings.Repeat("heading ", 12500)
	outline := `<w:pPr><w:outlineLvl w:val="0"/></w:pPr>`
	for name, c := range map[string]struct {
		mt   string
		data []byte
	}{
		"docx": {MIMEDOCX, docx(t, `<w:p>`+outline+r(long)+`</w:p>`+p(r("body")))},
		"html": {MIMEHTML, []byte("<h1>" + long + "</h1><p>body</p>")},
	} {
		doc := extractOK(t, c.mt, c.data)
		if !strings.Contains(doc.Text, strings.TrimSpace(long)) {
			t.Errorf("%s: the heading is not whole in the text", name)
		}
		for _, s := range doc.Spans {
			for _, h := range s.Location.Headings {
				if n := utf8.RuneCountInString(h); n > 200 {
					t.Errorf("%s: a location's heading of %d characters", name, n)
				}
			}
		}
	}
	_, err := Extract(context.Background(), MIMEHTML, []byte(strings.Repeat("<h2>x</h2>", 100001)))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 100000 headings, slides or blocks of rows (the limit of a document's parts)") {
		t.Errorf("100,001 headings: %v, want ErrTooLarge naming the limit", err)
	}
}
