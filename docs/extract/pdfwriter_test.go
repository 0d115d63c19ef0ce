package extract

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
	"testing"
)

// testPDF builds small but valid PDF files for tests: numbered objects, a
// page tree, a correct cross-reference table and trailer. Content streams are
// written by the test, so every operator path can be exercised.
type testPDF struct {
	objects []string
	pages   []int
	// version is the header version, "1.4" unless set.
	version string
	// compress deflates content streams.
	compress bool
	// fonts is the resource dictionary's /Font entry.
	fonts string
	// xobjects is the resource dictionary's /XObject entry, if any.
	xobjects string
	// trailer adds entries to the trailer; XREF stands for the offset of the
	// cross-reference table itself.
	trailer string
}

// newTestPDF returns a builder whose font F1 is Helvetica without a Widths
// array, as simple generators write it.
func newTestPDF() *testPDF {
	w := &testPDF{version: "1.4"}
	helv := w.add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	w.fonts = fmt.Sprintf("<< /F1 %d 0 R >>", helv)
	return w
}

// add stores an object and returns its number.
func (w *testPDF) add(body string) int {
	w.objects = append(w.objects, body)
	return len(w.objects)
}

// stream stores a stream object with extra dictionary entries.
func (w *testPDF) stream(dict, data string, compress bool) int {
	if compress {
		var b bytes.Buffer
		zw := zlib.NewWriter(&b)
		zw.Write([]byte(data))
		zw.Close()
		return w.add(fmt.Sprintf("<< /Length %d /Filter /FlateDecode %s >>\nstream\n%s\nendstream", b.Len(), dict, b.String()))
	}
	return w.add(fmt.Sprintf("<< /Length %d %s >>\nstream\n%s\nendstream", len(data), dict, data))
}

// page adds a page with the given content stream.
func (w *testPDF) page(content string) {
	c := w.stream("", content, w.compress)
	w.pages = append(w.pages, w.add(fmt.Sprintf("<< /Type /Page /Parent PAGES /MediaBox [0 0 612 792] /Contents %d 0 R >>", c)))
}

// textPage adds a page that writes lines of Helvetica text top down.
func (w *testPDF) textPage(lines ...string) {
	w.page(textContent("F1", 12, lines...))
}

// textContent draws lines with one font, 14 points apart.
func textContent(font string, size float64, lines ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "BT /%s %g Tf 72 720 Td %g TL\n", font, size, size*1.2)
	for i, l := range lines {
		if i > 0 {
			b.WriteString("T* ")
		}
		fmt.Fprintf(&b, "(%s) Tj\n", pdfEscape(l))
	}
	b.WriteString("ET\n")
	return b.String()
}

func pdfEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`)
	return r.Replace(s)
}

// bytes writes the file: header, objects with their offsets recorded, the
// page tree, catalog, cross-reference table and trailer.
func (w *testPDF) bytes() []byte {
	var kids []string
	for _, p := range w.pages {
		kids = append(kids, fmt.Sprintf("%d 0 R", p))
	}
	resources := "/Font " + w.fonts
	if w.xobjects != "" {
		resources += " /XObject " + w.xobjects
	}
	pagesNum := len(w.objects) + 1
	objs := append([]string(nil), w.objects...)
	objs = append(objs, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d /Resources << %s >> >>",
		strings.Join(kids, " "), len(w.pages), resources))
	objs = append(objs, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pagesNum))
	root := len(objs)

	var b bytes.Buffer
	fmt.Fprintf(&b, "%%PDF-%s\n%%\xe2\xe3\xcf\xd3\n", w.version)
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		o = strings.ReplaceAll(o, "/Parent PAGES", fmt.Sprintf("/Parent %d 0 R", pagesNum))
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	extra := strings.ReplaceAll(w.trailer, "XREF", fmt.Sprint(xref))
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root %d 0 R %s >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, root, extra, xref)
	return b.Bytes()
}

// multiPagePDF is a three-page document whose pages hold distinct words.
func multiPagePDF(t testing.TB, compress bool) []byte {
	t.Helper()
	w := newTestPDF()
	w.compress = compress
	w.textPage("Alpha page one begins here.", "Second line of apples.")
	w.textPage("Bravo page two talks about bananas.")
	w.textPage("Charlie page three mentions cherries.", "The end.")
	return w.bytes()
}
