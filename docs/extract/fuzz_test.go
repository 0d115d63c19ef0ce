package extract

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// FuzzExtractHTML checks that any input yields a well-formed document or
// ErrNoText.
func FuzzExtractHTML(f *testing.F) {
	f.Add([]byte("<html><head><title>T</title><script>x</script></head><body><p>a &amp; b</p><pre> x\n y</pre></body></html>"))
	f.Add([]byte("<table><tr><td>a<td>b</table><br><li>c"))
	f.Add([]byte("caf\xe9 \x00 <p hidden>x</p>"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Extract(context.Background(), MIMEHTML, data)
		if err != nil {
			if !errors.Is(err, ErrNoText) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		checkDocument(t, doc)
		if strings.Contains(doc.Text, "   ") && !strings.Contains(string(data), "pre") && !strings.Contains(string(data), "textarea") {
			t.Errorf("runs of spaces outside <pre>: %q", doc.Text)
		}
	})
}

// BenchmarkExtractHTML measures HTML text extraction throughput.
func BenchmarkExtractHTML(b *testing.B) {
	var doc strings.Builder
	doc.WriteString("<html><head><title>Bench</title><style>p{}</style></head><body>")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&doc, "<h2>Section %d</h2><p>Some <b>bold</b> text &amp; a <a href='#'>link</a> in paragraph %d.</p><ul><li>x</li><li>y</li></ul>\n", i, i)
	}
	doc.WriteString("</body></html>")
	data := []byte(doc.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Extract(context.Background(), MIMEHTML, data); err != nil {
			b.Fatal(err)
		}
	}
}
