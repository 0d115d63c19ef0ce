package fetch

import (
	"bytes"
	"testing"

	"github.com/mcpsearch/mcpsearch/extract"
)

// largePage returns an HTML page of about 1.2 MB: the body of a real
// manual page repeated, each copy under its own heading.
func largePage(b *testing.B) []byte {
	b.Helper()
	page := fixture(b, "zlib-how.html")
	start := bytes.Index(page, []byte("<body"))
	start += bytes.IndexByte(page[start:], '>') + 1
	body := page[start:bytes.Index(page, []byte("</body>"))]
	var out bytes.Buffer
	out.WriteString("<!DOCTYPE html><html><head><title>Large page</title></head><body><nav><a href=\"/\">Home</a></nav><article>")
	for i := range 40 {
		out.WriteString("<h2>Part ")
		out.WriteByte(byte('A' + i%26))
		out.WriteString("</h2>")
		out.Write(body)
	}
	out.WriteString("</article><footer>Footer</footer></body></html>")
	return out.Bytes()
}

// BenchmarkGet fetches and converts a large page from a local server with
// the cache off: download, main-content extraction and Markdown.
func BenchmarkGet(b *testing.B) {
	page := largePage(b)
	s := newSite(b)
	s.serve("/large.html", "text/html; charset=utf-8", page)
	c := newClient(b, Options{AllowPrivate: true, CacheTTL: -1})
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := c.Get(b.Context(), s.URL+"/large.html")
		if err != nil || len(d.Content) < len(page)/4 {
			b.Fatalf("Get: %v (%d characters)", err, len(d.Content))
		}
	}
}

// BenchmarkConvertHTML isolates the conversion: a typical manual page (30
// KB) and the large page.
func BenchmarkConvertHTML(b *testing.B) {
	for _, tc := range []struct {
		name string
		page []byte
	}{{"30KB", fixture(b, "zlib-how.html")}, {"1.2MB", largePage(b)}} {
		b.Run(tc.name, func(b *testing.B) {
			c := newClient(b, Options{})
			res := &Resource{URL: "https://example.org/p.html", FinalURL: "https://example.org/p.html",
				ContentType: extract.MIMEHTML, DeclaredType: "text/html", Body: tc.page}
			b.SetBytes(int64(len(tc.page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Convert(b.Context(), res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRaw converts the whole page without main-content extraction.
func BenchmarkRaw(b *testing.B) {
	page := largePage(b)
	c := newClient(b, Options{})
	res := &Resource{URL: "https://example.org/large.html", FinalURL: "https://example.org/large.html",
		ContentType: extract.MIMEHTML, DeclaredType: "text/html; charset=utf-8", Body: page}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := c.Convert(b.Context(), res)
		if err != nil {
			b.Fatal(err)
		}
		if d.Raw() == "" {
			b.Fatal("empty raw text")
		}
	}
}

// BenchmarkWindow pages through the converted page 8,000 characters at a
// time, as a model reading it to the end would.
func BenchmarkWindow(b *testing.B) {
	c := newClient(b, Options{})
	res := &Resource{URL: "https://example.org/l", FinalURL: "https://example.org/l", ContentType: extract.MIMEHTML, Body: largePage(b)}
	d, err := c.Convert(b.Context(), res)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	windows := 0
	for b.Loop() {
		start := 0
		windows = 0
		for {
			windows++
			_, next, _, truncated := Window(d.Content, start, 8000)
			if !truncated {
				break
			}
			start = next
		}
	}
	b.ReportMetric(float64(windows), "windows/op")
}
