package interop

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// makePDF writes a small, valid PDF 1.4 document with one page per element
// of pages, each drawing its lines top down in the standard Helvetica font:
// a catalog, a page tree, one font, a page and a content stream per page,
// and a cross-reference table whose offsets are the real ones. It is what a
// simple report generator writes, so the server reads it with no special
// case.
func makePDF(pages ...[]string) []byte {
	// Objects 1 to 3 are the catalog, the page tree and the font; page i
	// (from 0) is object 4+2i and its content stream 5+2i.
	var objects []string
	var kids []string
	for i := range pages {
		kids = append(kids, fmt.Sprintf("%d 0 R", 4+2*i))
	}
	objects = append(objects,
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
	)
	for i, lines := range pages {
		content := pdfText(lines)
		objects = append(objects,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		)
	}

	var b bytes.Buffer
	// The second line's bytes above 127 tell tools the file is binary.
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	// Every entry is exactly 20 bytes, as the format requires.
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, xref)
	return b.Bytes()
}

// pdfText is a content stream drawing lines in 11-point Helvetica, 15
// points apart, from the top left margin down.
func pdfText(lines []string) string {
	esc := strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`)
	var b strings.Builder
	b.WriteString("BT\n/F1 11 Tf\n15 TL\n72 740 Td\n")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("T*\n")
		}
		fmt.Fprintf(&b, "(%s) Tj\n", esc.Replace(l))
	}
	b.WriteString("ET")
	return b.String()
}

// TestMakePDF checks the generator's structure, so a failure of the
// documents tests points at the server rather than at a broken fixture.
func TestMakePDF(t *testing.T) {
	pdf := makePDF([]string{"first (page)"}, []string{`second \ page`})
	s := string(pdf)
	if !strings.HasPrefix(s, "%PDF-1.4\n") || !strings.HasSuffix(s, "%%EOF\n") {
		t.Fatalf("header or trailer missing:\n%s", s)
	}
	var xref int
	if _, err := fmt.Sscanf(s[strings.LastIndex(s, "startxref\n"):], "startxref\n%d", &xref); err != nil {
		t.Fatalf("startxref: %v", err)
	}
	if !strings.HasPrefix(s[xref:], "xref\n0 8\n") {
		t.Fatalf("startxref %d does not point at a table of 8 entries: %q", xref, s[xref:min(len(s), xref+20)])
	}
	// Each in-use entry must point at "N 0 obj".
	entries := strings.Split(strings.TrimSuffix(s[xref:strings.Index(s, "trailer")], "\n"), "\n")[2:]
	if len(entries) != 8 {
		t.Fatalf("%d cross-reference entries, want 8", len(entries))
	}
	for n, e := range entries[1:] {
		if len(e)+1 != 20 {
			t.Errorf("entry %d is %d bytes with its newline, want 20", n+1, len(e)+1)
		}
		var off int
		fmt.Sscanf(e, "%d", &off)
		if want := fmt.Sprintf("%d 0 obj\n", n+1); !strings.HasPrefix(s[off:], want) {
			t.Errorf("entry %d points at %q, want %q", n+1, s[off:min(len(s), off+12)], want)
		}
	}
	for _, want := range []string{`(first \(page\)) Tj`, `(second \\ page) Tj`, "/BaseFont /Helvetica", "/Count 2"} {
		if !strings.Contains(s, want) {
			t.Errorf("document lacks %q", want)
		}
	}
}
