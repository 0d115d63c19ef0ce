package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// checkFuzzResult checks what Extract returned for fuzzed input: a
// well-formed document, or an error of one of the package's kinds with a
// clean message that is not a recovered panic.
func checkFuzzResult(t *testing.T, doc *Document, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrNoText) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("unexpected error: %v", err)
		}
		if strings.Contains(err.Error(), "internal error while reading the file") {
			t.Fatalf("a reader panicked: %v", err)
		}
		if CleanMessage(err.Error()) != err.Error() {
			t.Fatalf("error message is not clean: %q", err)
		}
		return
	}
	checkDocument(t, doc)
	checkSpans(t, doc)
}

// fuzzLimits keep fuzzed inputs small in memory.
var fuzzLimits = Limits{MaxTextBytes: 1 << 20, MaxInflatedBytes: 16 << 20}

// FuzzContainer feeds arbitrary bytes to the ZIP-based readers, seeded
// with every container fixture.
func FuzzContainer(f *testing.F) {
	for _, name := range []string{"contract.docx", "contract-lo.docx", "deck.pptx", "budget.xlsx", "contract.odt", "deck.odp", "budget.ods", "book.epub"} {
		data, err := os.ReadFile(filepath.Join(formatsDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mt, err := fuzzLimits.Detect("upload", "", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		doc, err := fuzzLimits.Extract(context.Background(), mt, data)
		checkFuzzResult(t, doc, err)
	})
}

// FuzzDOCXBody feeds arbitrary WordprocessingML, as a document's body, to
// the DOCX reader.
func FuzzDOCXBody(f *testing.F) {
	f.Add(`<w:p><w:pPr><w:pStyle w:val="Heading1"/><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>Title</w:t></w:r></w:p>`)
	f.Add(`<w:p><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText>PAGE</w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>1</w:t></w:r><w:ins><w:r><w:t>x</w:t></w:r></w:ins><w:del><w:r><w:delText>y</w:delText></w:r></w:del></w:p>`)
	f.Add(`<w:tbl><w:tr><w:tc><w:p><w:r><w:t>a</w:t></w:r></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>b</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r></w:p></w:tc></w:tr></w:tbl></w:tc></w:tr></w:tbl>`)
	f.Add(`<w:p><w:r><w:t>a</w:t><w:drawing><w:txbxContent><w:p><w:r><w:t>in box</w:t></w:r></w:p><w:tbl><w:tr><w:tc><w:p/></w:tc></w:tr></w:tbl></w:txbxContent></w:drawing></w:r></w:p>`)
	f.Fuzz(func(t *testing.T, body string) {
		doc, err := fuzzLimits.Extract(context.Background(), MIMEDOCX, docx(t, body))
		checkFuzzResult(t, doc, err)
	})
}

// FuzzPPTXSlide feeds an arbitrary shape tree, as a slide's, to the PPTX
// reader.
func FuzzPPTXSlide(f *testing.F) {
	f.Add(shape(`<p:ph type="title"/>`, para("Title")) + shape("", `<a:p><a:pPr lvl="9"><a:buAutoNum/></a:pPr><a:r><a:t>x</a:t></a:r></a:p>`))
	f.Add(`<p:grpSp><p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tr><a:tc hMerge="1"/><a:tc><a:txBody><a:p><a:r><a:t>c</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame></p:grpSp>`)
	f.Fuzz(func(t *testing.T, tree string) {
		doc, err := fuzzLimits.Extract(context.Background(), MIMEPPTX, pptxDoc(t, []string{tree}, []int{0}, map[int]string{0: "notes"}))
		checkFuzzResult(t, doc, err)
	})
}

// FuzzODFBody feeds an arbitrary office:body to the OpenDocument reader,
// as text, spreadsheet and presentation.
func FuzzODFBody(f *testing.F) {
	f.Add(`<office:text><text:h text:outline-level="99">H</text:h><text:list><text:list-item><text:p>a<text:note><text:note-body><text:p>n</text:p></text:note-body></text:note></text:p></text:list-item></text:list></office:text>`)
	f.Add(`<office:spreadsheet><table:table table:name="S"><table:table-row table:number-rows-repeated="99999999"><table:table-cell table:number-columns-repeated="99999" office:value="1"/></table:table-row></table:table></office:spreadsheet>`)
	f.Add(`<office:presentation><draw:page><draw:frame presentation:class="title"><draw:text-box><text:p>T</text:p></draw:text-box></draw:frame><presentation:notes><draw:frame><draw:text-box><text:p>n</text:p></draw:text-box></draw:frame></presentation:notes></draw:page></office:presentation>`)
	f.Fuzz(func(t *testing.T, body string) {
		content := `<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"><office:body>` +
			body + `</office:body></office:document-content>`
		data := makeZip(t, entry{name: "mimetype", data: []byte(MIMEODT)}, entry{name: "content.xml", data: []byte(content)})
		doc, err := (Limits{MaxTextBytes: 1 << 20, MaxInflatedBytes: 16 << 20}).Extract(context.Background(), MIMEODT, data)
		checkFuzzResult(t, doc, err)
	})
}

// FuzzEPUBChapter feeds an arbitrary chapter and table of contents to the
// EPUB reader.
func FuzzEPUBChapter(f *testing.F) {
	f.Add(`<h1>One</h1><p>Text</p><h3>Deep</h3><h2>Up</h2>`, `<nav epub:type="toc"><ol><li><a href="c.xhtml#x">One</a></li></ol></nav>`)
	f.Fuzz(func(t *testing.T, chapter, nav string) {
		data := makeZip(t,
			entry{name: "mimetype", data: []byte(MIMEEPUB)},
			entry{name: "META-INF/container.xml", data: []byte(`<container><rootfiles><rootfile full-path="content.opf"/></rootfiles></container>`)},
			entry{name: "content.opf", data: []byte(`<package><manifest><item id="c" href="c.xhtml" media-type="application/xhtml+xml"/><item id="n" href="nav.xhtml" properties="nav" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c"/><itemref idref="c"/></spine></package>`)},
			entry{name: "nav.xhtml", data: []byte(`<html xmlns:epub="http://www.idpf.org/2007/ops"><body>` + nav + `</body></html>`)},
			entry{name: "c.xhtml", data: []byte(`<html><body>` + chapter + `</body></html>`)})
		doc, err := fuzzLimits.Extract(context.Background(), MIMEEPUB, data)
		checkFuzzResult(t, doc, err)
	})
}

// FuzzXLSXSheet feeds an arbitrary sheet to the XLSX reader.
func FuzzXLSXSheet(f *testing.F) {
	f.Add(`<sheetData><row r="1"><c r="A1" t="s"><v>0</v></c><c r="C1" t="inlineStr"><is><t>x</t></is></c></row><row r="1048576"><c r="XFD1048576"><v>1e308</v></c></row></sheetData>`)
	f.Add(`<sheetData><row><c t="d"><v>2021-03-01</v></c><c s="1"><v>45000</v></c></row></sheetData>`)
	f.Fuzz(func(t *testing.T, sheet string) {
		data := makeZip(t,
			entry{name: "[Content_Types].xml", data: []byte(`<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>`)},
			entry{name: "_rels/.rels", data: []byte(`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`)},
			entry{name: "xl/workbook.xml", data: []byte(`<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>`)},
			entry{name: "xl/_rels/workbook.xml.rels", data: []byte(`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>`)},
			entry{name: "xl/sharedStrings.xml", data: []byte(`<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><si><t>shared</t></si></sst>`)},
			entry{name: "xl/worksheets/sheet1.xml", data: []byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">` + sheet + `</worksheet>`)})
		doc, err := fuzzLimits.Extract(context.Background(), MIMEXLSX, data)
		checkFuzzResult(t, doc, err)
	})
}

// FuzzDelimited feeds arbitrary text to the CSV and TSV readers.
func FuzzDelimited(f *testing.F) {
	f.Add([]byte("a,b\n1,\"2\n3\"\n\"unterminated"))
	f.Add([]byte("x;y\n;;;\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mt := range []string{MIMECSV, MIMETSV} {
			doc, err := fuzzLimits.Extract(context.Background(), mt, data)
			checkFuzzResult(t, doc, err)
		}
	})
}

// FuzzRTF feeds arbitrary bytes to the RTF reader.
func FuzzRTF(f *testing.F) {
	data, err := os.ReadFile(filepath.Join(formatsDir, "contract.rtf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{\rtf1{\stylesheet{\s1\outlinelevel0 heading 1;}}\s1 Head\par\u-10179\u-8704 ?\'ff\bin99999 x{\footnote{\footnote n}}\trowd\cell\row}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := fuzzLimits.Extract(context.Background(), MIMERTF, data)
		checkFuzzResult(t, doc, err)
	})
}

// FuzzDetect checks that detection of arbitrary bytes (compound files and
// ZIP directories included) gives a type or an unsupported file, never
// another error or a panic.
func FuzzDetect(f *testing.F) {
	f.Add([]byte(compoundFile("EncryptionInfo", "EncryptedPackage")), "x.docx")
	f.Add(makeZip(f, entry{name: "mimetype", data: []byte(MIMEODS)}), "x")
	f.Add([]byte("PK\x05\x06"+strings.Repeat("\x00", 18)), "x.zip")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		mt, err := fuzzLimits.Detect(name, "", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Detect error %v", err)
			}
			return
		}
		if !slices.Contains(Types(), mt) {
			t.Fatalf("Detect = %q", mt)
		}
	})
}
