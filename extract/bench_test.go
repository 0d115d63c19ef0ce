package extract

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/mcpsearch/mcpsearch/extract/ocr"
)

// The benchmarks report the units the formats are measured in: pages of
// word-processing documents (as LibreOffice lays the contract out: the
// pages of its PDF export), slides, cells, and pages recognised by OCR.
//
//	go test -run '^$' -bench 'DOCX|PPTX|XLSX|OCR' -benchtime 5x ./extract/

// contractPages is the number of pages of the contract as laid out in
// contract.pdf, LibreOffice's export of the same document.
func contractPages(b *testing.B) int {
	doc, err := Extract(context.Background(), MIMEPDF, readFixture(b, "contract.pdf"))
	if err != nil {
		b.Fatal(err)
	}
	return len(doc.Pages)
}

// repeatBody returns a copy of the DOCX in data whose body holds its own
// body n times.
func repeatBody(b *testing.B, data []byte, n int) []byte {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			b.Fatal(err)
		}
		content, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			b.Fatal(err)
		}
		if f.Name == "word/document.xml" {
			s := string(content)
			start := strings.Index(s, "<w:body>") + len("<w:body>")
			end := strings.LastIndex(s, "<w:sectPr")
			if end < start {
				end = strings.LastIndex(s, "</w:body>")
			}
			content = []byte(s[:start] + strings.Repeat(s[start:end], n) + s[end:])
		}
		w, err := zw.Create(f.Name)
		if err != nil {
			b.Fatal(err)
		}
		w.Write(content)
	}
	zw.Close()
	return out.Bytes()
}

func BenchmarkDOCX(b *testing.B) {
	pages := contractPages(b)
	contract := readFixture(b, "contract.docx")
	for _, n := range []int{1, 100} {
		data := contract
		if n > 1 {
			data = repeatBody(b, contract, n)
		}
		b.Run(fmt.Sprintf("pages=%d", pages*n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Extract(context.Background(), MIMEDOCX, data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(pages*n*b.N)/b.Elapsed().Seconds(), "pages/s")
		})
	}
}

func BenchmarkPPTX(b *testing.B) {
	var slides []string
	var order []int
	notes := map[int]string{}
	for i := 0; i < 300; i++ {
		body := ""
		for j := 0; j < 5; j++ {
			body += para(fmt.Sprintf("Point %d of slide %d: crossings rose by eight percent against last year", j, i))
		}
		slides = append(slides, shape(`<p:ph type="title"/>`, para(fmt.Sprintf("Slide title %d", i)))+shape(`<p:ph idx="1"/>`, body))
		order = append(order, i)
		notes[i] = "Mention the crews and the fog delays."
	}
	big := pptxDoc(b, slides, order, notes)
	for _, tt := range []struct {
		name   string
		data   []byte
		slides int
	}{{"deck", readFixture(b, "deck.pptx"), 6}, {"generated", big, 300}} {
		b.Run(fmt.Sprintf("%s/slides=%d", tt.name, tt.slides), func(b *testing.B) {
			b.SetBytes(int64(len(tt.data)))
			for b.Loop() {
				if _, err := Extract(context.Background(), MIMEPPTX, tt.data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tt.slides*b.N)/b.Elapsed().Seconds(), "slides/s")
		})
	}
}

// workbook returns an XLSX of rows rows of cols cells, numbers, dates and
// words, written by excelize's stream writer.
func workbook(tb testing.TB, rows, cols int) []byte {
	f := excelize.NewFile()
	defer f.Close()
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		tb.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	words := []string{"harbour", "ferry", "library", "budget", "tide", "thrift", "samphire", "catalogue"}
	header := make([]any, cols)
	for c := range header {
		header[c] = fmt.Sprintf("Column %d", c+1)
	}
	sw.SetRow("A1", header)
	row := make([]any, cols)
	for i := 2; i <= rows+1; i++ {
		for c := range row {
			switch c % 3 {
			case 0:
				row[c] = r.IntN(100000)
			case 1:
				row[c] = r.Float64() * 1000
			default:
				row[c] = words[r.IntN(len(words))] + " " + words[r.IntN(len(words))]
			}
		}
		cell, _ := excelize.CoordinatesToCellName(1, i)
		if err := sw.SetRow(cell, row); err != nil {
			tb.Fatal(err)
		}
	}
	if err := sw.Flush(); err != nil {
		tb.Fatal(err)
	}
	buf, err := f.WriteToBuffer()
	if err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func BenchmarkXLSX(b *testing.B) {
	const rows, cols = 100000, 10
	data := workbook(b, rows, cols)
	l := Limits{MaxTextBytes: 256 << 20}
	b.Run(fmt.Sprintf("cells=%d", rows*cols), func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := l.Extract(context.Background(), MIMEXLSX, data); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(rows*cols*b.N)/b.Elapsed().Seconds(), "cells/s")
	})
}

func BenchmarkOCR(b *testing.B) {
	e := ocrEngine(b, ocr.Options{})
	data := readFixture(b, "scanned.pdf")
	l := Limits{OCR: e}
	b.Run("pages=2", func(b *testing.B) {
		for b.Loop() {
			doc, err := l.Extract(context.Background(), MIMEPDF, data)
			if err != nil || len(doc.OCR.Read) != 2 {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "pages/s")
	})
}

// BenchmarkHostile measures how fast the readers give up on documents built
// to cost: a sheet repeating a full row a million times, which must stop
// at the text limit rather than expand.
//
//	go test -run '^$' -bench Hostile ./extract/
func BenchmarkHostile(b *testing.B) {
	data := ods(b, fullSheet)
	l := Limits{MaxTextBytes: 4 << 20}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Extract(context.Background(), MIMEODS, data); err == nil {
			b.Fatal("a million repeated rows were accepted")
		}
	}
}
