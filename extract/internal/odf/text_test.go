package odf

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
	"github.com/mcpsearch/mcpsearch/extract/internal/xmlsafe"
)

// TestListCountersBounded checks that list numbers are kept only for the
// list styles the styles define: a body naming a million made-up styles
// must not make a million counters.
func TestListCountersBounded(t *testing.T) {
	st := newStyles()
	st.lists["Numbers"] = map[int]listLevel{1: {numbered: true, format: "1", start: 1}}
	var body strings.Builder
	body.WriteString(`<office:text xmlns:office="o" xmlns:text="t">`)
	for i := range 1000 {
		fmt.Fprintf(&body, `<text:list text:style-name="made-up-%d"><text:list-item><text:p>x</text:p></text:list-item></text:list>`, i)
	}
	body.WriteString(`<text:list text:style-name="Numbers"><text:list-item><text:p>a</text:p></text:list-item><text:list-item><text:p>b</text:p></text:list-item></text:list>`)
	body.WriteString(`</office:text>`)
	d := xmlsafe.NewDecoder(strings.NewReader(body.String()), "content.xml")
	d.Token()
	b := textdoc.NewBuilder(1 << 20)
	w := &textWalker{d: d, t: &ticker{ctx: context.Background()}, b: b, st: st, limit: 1 << 20}
	if err := w.run(); err != nil {
		t.Fatal(err)
	}
	if len(w.counters) != 1 {
		t.Errorf("%d list counters, want 1 (the style defined)", len(w.counters))
	}
	doc, err := b.Document()
	if err != nil || !strings.HasPrefix(doc.Text, "- x\n") || !strings.HasSuffix(doc.Text, "\n1 a\n2 b") {
		t.Errorf("the lists read %q ... %q, %v", doc.Text[:min(len(doc.Text), 20)], doc.Text[max(0, len(doc.Text)-20):], err)
	}
}
