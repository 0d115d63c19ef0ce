// Package pdftest writes small but valid PDF files for tests: numbered
// objects, a page tree, a catalog, a cross-reference table whose offsets are
// the real ones, and a trailer. Tests write the content streams themselves,
// or use TextPage and Pages for plain lines of text, so the extractor's
// operator paths and the documents pipeline can be exercised without fixture
// files.
package pdftest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
)

// Helvetica is the object number of the font New adds as F1.
const Helvetica = 1

// Builder assembles a PDF file object by object. Objects are numbered from 1
// in the order they are added; the page tree and the catalog come last, when
// Bytes writes the file.
type Builder struct {
	objects []string
	pages   []int
	// Version is the header version, "1.4" unless set.
	Version string
	// Compress deflates the content streams of pages added afterwards.
	Compress bool
	// Fonts is the resource dictionary's /Font entry, shared by every page.
	Fonts string
	// XObjects is the resource dictionary's /XObject entry, if any.
	XObjects string
	// Trailer adds entries to the trailer; XREF stands for the offset of the
	// cross-reference table itself, so a test can make a /Prev chain loop.
	Trailer string
}

// New returns a builder whose font F1 (object Helvetica) is Helvetica
// without a Widths array, as simple generators write it: readers must fall
// back on the standard font's metrics.
func New() *Builder {
	w := &Builder{Version: "1.4"}
	helv := w.Add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	w.Fonts = fmt.Sprintf("<< /F1 %d 0 R >>", helv)
	return w
}

// Add stores an object body and returns its number. In a page's body,
// "/Parent PAGES" stands for the page tree, whose number is known only when
// Bytes runs.
func (w *Builder) Add(body string) int {
	w.objects = append(w.objects, body)
	return len(w.objects)
}

// Set replaces the body of object num, which Add has returned before; tests
// use it to swap the default font for another.
func (w *Builder) Set(num int, body string) {
	w.objects[num-1] = body
}

// Next returns the number the next Add will give, for an object that refers
// to itself.
func (w *Builder) Next() int {
	return len(w.objects) + 1
}

// Stream stores a stream object with extra dictionary entries dict and
// returns its number; compress deflates data with /FlateDecode.
func (w *Builder) Stream(dict, data string, compress bool) int {
	if compress {
		var b bytes.Buffer
		zw := zlib.NewWriter(&b)
		// Writes to a bytes.Buffer do not fail.
		zw.Write([]byte(data))
		zw.Close()
		return w.Add(fmt.Sprintf("<< /Length %d /Filter /FlateDecode %s >>\nstream\n%s\nendstream", b.Len(), dict, b.String()))
	}
	return w.Add(fmt.Sprintf("<< /Length %d %s >>\nstream\n%s\nendstream", len(data), dict, data))
}

// Page adds a US Letter page with the given content stream: the stream
// first, then the page object.
func (w *Builder) Page(content string) {
	c := w.Stream("", content, w.Compress)
	w.pages = append(w.pages, w.Add(fmt.Sprintf("<< /Type /Page /Parent PAGES /MediaBox [0 0 612 792] /Contents %d 0 R >>", c)))
}

// TextPage adds a page that writes lines of 12-point Helvetica text top
// down.
func (w *Builder) TextPage(lines ...string) {
	w.Page(TextContent("F1", 12, lines...))
}

// TextContent is a content stream drawing lines in one font from the top
// left margin down, 1.2 times the font size apart, as word processors set
// single-spaced text.
func TextContent(font string, size float64, lines ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "BT /%s %g Tf 72 720 Td %g TL\n", font, size, size*1.2)
	for i, l := range lines {
		if i > 0 {
			b.WriteString("T* ")
		}
		fmt.Fprintf(&b, "(%s) Tj\n", Escape(l))
	}
	b.WriteString("ET\n")
	return b.String()
}

// RunningPages returns a document like Pages whose every page also draws a
// running header line at its top and a running footer line at its bottom,
// in 9-point Helvetica, as word processors set them: header and footer
// return the line of page n, counted from 1 (a page number may be part of
// it). A nil function or an empty line draws nothing. Each page draws its
// header, then its body, then its footer.
func RunningPages(header, footer func(page int) string, pages ...[]string) []byte {
	w := New()
	for i, lines := range pages {
		var b strings.Builder
		if header != nil {
			if h := header(i + 1); h != "" {
				fmt.Fprintf(&b, "BT /F1 9 Tf 72 756 Td (%s) Tj ET\n", Escape(h))
			}
		}
		b.WriteString(TextContent("F1", 12, lines...))
		if footer != nil {
			if f := footer(i + 1); f != "" {
				fmt.Fprintf(&b, "BT /F1 9 Tf 72 36 Td (%s) Tj ET\n", Escape(f))
			}
		}
		w.Page(b.String())
	}
	return w.Bytes()
}

// escaper backslash-escapes the characters a literal string cannot hold as
// they are.
var escaper = strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`)

// Escape returns s fit to stand between the parentheses of a PDF literal
// string.
func Escape(s string) string {
	return escaper.Replace(s)
}

// Bytes writes the file: header, objects with their offsets recorded, the
// page tree, catalog, cross-reference table and trailer. The page tree
// carries the resources, which every page inherits.
func (w *Builder) Bytes() []byte {
	var kids []string
	for _, p := range w.pages {
		kids = append(kids, fmt.Sprintf("%d 0 R", p))
	}
	resources := "/Font " + w.Fonts
	if w.XObjects != "" {
		resources += " /XObject " + w.XObjects
	}
	pagesNum := len(w.objects) + 1
	objs := append([]string(nil), w.objects...)
	objs = append(objs, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d /Resources << %s >> >>",
		strings.Join(kids, " "), len(w.pages), resources))
	objs = append(objs, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pagesNum))
	root := len(objs)

	var b bytes.Buffer
	// The second line's bytes above 127 tell tools the file is binary.
	fmt.Fprintf(&b, "%%PDF-%s\n%%\xe2\xe3\xcf\xd3\n", w.Version)
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		o = strings.ReplaceAll(o, "/Parent PAGES", fmt.Sprintf("/Parent %d 0 R", pagesNum))
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	// Every entry is exactly 20 bytes, as the format requires: readers find
	// an object's entry by arithmetic, not by scanning.
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	extra := strings.ReplaceAll(w.Trailer, "XREF", fmt.Sprint(xref))
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root %d 0 R %s >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, root, extra, xref)
	return b.Bytes()
}

// Pages returns a PDF 1.4 document with one page per element of pages, each
// drawing its lines top down in Helvetica: what a simple report generator
// writes, so a reader needs no special case for it. Its objects are the
// font, a content stream and a page object per page, the page tree and the
// catalog.
func Pages(pages ...[]string) []byte {
	w := New()
	for _, lines := range pages {
		w.TextPage(lines...)
	}
	return w.Bytes()
}
