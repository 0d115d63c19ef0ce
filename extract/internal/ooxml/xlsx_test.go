package ooxml

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// book returns a workbook of one sheet whose cells A1 and B1 show the
// first two shared strings of sst, with more entries if given (name, then
// declared size: their content is never read).
func book(t *testing.T, sst string, more ...any) *archive.Archive {
	t.Helper()
	const ns = `xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	const rels = `xmlns="http://schemas.openxmlformats.org/package/2006/relationships"`
	const typ = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, e := range [][2]string{
		{"_rels/.rels", `<Relationships ` + rels + `><Relationship Id="rId1" Type="` + typ + `officeDocument" Target="xl/workbook.xml"/></Relationships>`},
		{"xl/workbook.xml", `<workbook ` + ns + `><sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>`},
		{"xl/_rels/workbook.xml.rels", `<Relationships ` + rels + `><Relationship Id="rId1" Type="` + typ + `worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="` + typ + `sharedStrings" Target="sharedStrings.xml"/><Relationship Id="rId3" Type="` + typ + `styles" Target="styles.xml"/></Relationships>`},
		{"xl/worksheets/sheet1.xml", `<worksheet ` + ns + `><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row></sheetData></worksheet>`},
		{"xl/sharedStrings.xml", `<sst ` + ns + `>` + sst + `</sst>`},
	} {
		f, err := w.CreateHeader(&zip.FileHeader{Name: e[0], Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(e[1]))
	}
	for i := 0; i+1 < len(more); i += 2 {
		// A deflated empty stream that declares size bytes.
		if _, err := w.CreateRaw(&zip.FileHeader{Name: more[i].(string), Method: zip.Deflate,
			CompressedSize64: 2, UncompressedSize64: uint64(more[i+1].(int))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := archive.Open(bytes.NewReader(b.Bytes()), int64(b.Len()), archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestXLSXLimits checks the limits of what excelize is handed: the shared
// strings counted, parts read whole bounded from their declared sizes, and
// parts that hold no cell (images, charts) never read.
func TestXLSXLimits(t *testing.T) {
	defer func(n int) { stringLimit = n }(stringLimit)
	stringLimit = 1000
	opts := textdoc.Options{MaxTextBytes: 1 << 20, ChunkSize: 1000}
	strs := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "<x:si><x:t>s%d</x:t></x:si>", i)
		}
		return b.String()
	}
	for _, c := range []struct {
		name    string
		a       *archive.Archive
		message string
	}{
		{"strings at the limit", book(t, strs(1000)), ""},
		{"strings past it", book(t, strs(1001)), "more than 1000 strings (the limit of a workbook's strings)"},
		{"styles too large to read whole", book(t, strs(2), "xl/styles.xml", maxWholePart+1), "more than the 16777216 of a workbook part read whole"},
		{"an image past the archive's limits, never read", book(t, strs(2), "xl/media/image1.png", 1<<30), ""},
	} {
		doc, err := ReadXLSX(context.Background(), c.a, opts)
		switch {
		case c.message == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.message == "" && !strings.Contains(doc.Text, "| s0 | s1 |"):
			t.Errorf("%s: %q", c.name, doc.Text)
		case c.message != "" && (!errors.Is(err, textdoc.ErrTooLarge) || !strings.Contains(err.Error(), c.message)):
			t.Errorf("%s: %v, want ErrTooLarge saying %q", c.name, err, c.message)
		}
	}
}
