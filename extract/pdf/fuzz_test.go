package pdf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// FuzzExtractPDF feeds arbitrary bytes to the PDF extractor. Errors are
// expected; panics, hangs and malformed documents are not.
func FuzzExtractPDF(f *testing.F) {
	f.Add(multiPagePDF(f, false))
	f.Add(multiPagePDF(f, true))
	w := pdftest.New()
	w.Page("BT /F1 12 Tf 0 1 -1 0 300 100 Tm [(Rot) 40 (ated) -400 (text)] TJ ET BI /W 1 /H 1 ID \x00 EI q /X1 Do Q")
	f.Add(w.Bytes())
	valid := multiPagePDF(f, false)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte("%PDF-1.4\n%%EOF\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Extract(context.Background(), data, Options{})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNoText) && !errors.Is(err, ErrEncrypted) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		checkDocument(t, doc)
	})
}

// benchmarkPDF builds a document of pages of running text, deflated, with a
// Widths array, much like a word processor's output.
func benchmarkPDF(b *testing.B, pages int) []byte {
	b.Helper()
	w := pdftest.New()
	w.Compress = true
	widths := strings.TrimSpace(strings.Repeat("500 ", 224))
	w.Set(pdftest.Helvetica, fmt.Sprintf("<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /FirstChar 32 /LastChar 255 /Widths [%s] /Encoding /WinAnsiEncoding >>", widths))
	words := strings.Fields("the quick brown fox jumps over the lazy dog while extraction keeps every word apart and whole")
	for p := 0; p < pages; p++ {
		var c strings.Builder
		c.WriteString("BT /F1 10 Tf 72 740 Td 12 TL\n")
		for line := 0; line < 55; line++ {
			c.WriteString("[(")
			for k := 0; k < 12; k++ {
				word := words[(p+line+k)%len(words)]
				// Kern inside some words, as typesetters do.
				if k%3 == 0 && len(word) > 3 {
					fmt.Fprintf(&c, "%s) 25 (%s", word[:2], word[2:])
				} else {
					c.WriteString(word)
				}
				c.WriteString(" ")
			}
			c.WriteString(")] TJ T*\n")
		}
		c.WriteString("ET\n")
		w.Page(c.String())
	}
	return w.Bytes()
}

// BenchmarkExtractPDF reports pages per second on a generated 50-page
// document, and on every PDF in the -pdfdir folder when given.
func BenchmarkExtractPDF(b *testing.B) {
	type input struct {
		name string
		data []byte
	}
	inputs := []input{{"generated-50p", benchmarkPDF(b, 50)}}
	if *pdfDir != "" {
		files, _ := filepath.Glob(filepath.Join(*pdfDir, "*.pdf"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				b.Fatal(err)
			}
			inputs = append(inputs, input{filepath.Base(file), data})
		}
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			pages := 0
			for b.Loop() {
				doc, err := Extract(context.Background(), in.data, Options{})
				if err != nil {
					b.Fatal(err)
				}
				pages += len(doc.Pages)
			}
			b.ReportMetric(float64(pages)/b.Elapsed().Seconds(), "pages/s")
		})
	}
}
