package extract

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

// entry is a file of a ZIP archive built by makeZip. With raw set, data is
// already deflated and crc and size declare the inflated content.
type entry struct {
	name string
	data []byte
	raw  bool
	crc  uint32
	size uint64
}

// makeZip builds a ZIP archive of entries, the first one stored (as the
// "mimetype" entry of OpenDocument files must be) when it is "mimetype",
// and any of a few bytes stored too: a deflate writer per entry costs most
// of a minute under the race detector for an archive of 30,000 entries.
func makeZip(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, e := range entries {
		switch {
		case e.raw:
			f, err := w.CreateRaw(&zip.FileHeader{Name: e.name, Method: zip.Deflate, CRC32: e.crc,
				CompressedSize64: uint64(len(e.data)), UncompressedSize64: e.size})
			if err != nil {
				t.Fatal(err)
			}
			f.Write(e.data)
		case e.name == "mimetype" || len(e.data) <= 16:
			f, err := w.CreateRaw(&zip.FileHeader{Name: e.name, Method: zip.Store, CRC32: crc32.ChecksumIEEE(e.data),
				CompressedSize64: uint64(len(e.data)), UncompressedSize64: uint64(len(e.data))})
			if err != nil {
				t.Fatal(err)
			}
			f.Write(e.data)
		default:
			f, err := w.Create(e.name)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(e.data)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const contentTypesDOCX = `<?xml version="1.0" encoding="UTF-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
</Types>`

const packageRels = `<?xml version="1.0" encoding="UTF-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
</Relationships>`

// docx builds a Word document whose body is body (WordprocessingML inside
// <w:body>), with more entries if given.
func docx(t testing.TB, body string, more ...entry) []byte {
	doc := `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` + body + `</w:body></w:document>`
	return makeZip(t, append([]entry{
		{name: "[Content_Types].xml", data: []byte(contentTypesDOCX)},
		{name: "_rels/.rels", data: []byte(packageRels)},
		{name: "word/document.xml", data: []byte(doc)},
	}, more...)...)
}

// deflatedZeros returns the raw deflate stream of n MiB of zero bytes,
// built from one flushed block repeated, and the CRC-32 of the zeros.
func deflatedZeros(n int) ([]byte, uint32) {
	var block bytes.Buffer
	w, _ := flate.NewWriter(&block, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	w.Write(zeros)
	w.Flush()
	// Back-references within a block repeated after itself still point
	// at zeros, so the copies inflate to zeros.
	var out bytes.Buffer
	for i := 0; i < n; i++ {
		out.Write(block.Bytes())
	}
	var end bytes.Buffer
	fw, _ := flate.NewWriter(&end, flate.BestSpeed)
	fw.Close()
	out.Write(end.Bytes())
	return out.Bytes(), zerosCRC(int64(n) << 20)
}

// zerosCRC returns the CRC-32 (IEEE) of n zero bytes without reading them:
// under the race detector, hashing the gigabyte of a bomb takes most of a
// minute. Zeros only shift the CRC register, which is multiplying it by
// x^(8n) modulo the polynomial (bit-reflected, as the CRC is).
func zerosCRC(n int64) uint32 {
	const poly = 0xedb88320
	// mul multiplies two bit-reflected polynomials modulo poly; x^0 is 1<<31.
	mul := func(a, b uint32) uint32 {
		var p uint32
		for m := uint32(1) << 31; m != 0; m >>= 1 {
			if a&m != 0 {
				p ^= b
			}
			if b&1 != 0 {
				b = b>>1 ^ poly
			} else {
				b >>= 1
			}
		}
		return p
	}
	// x^(8n) by squaring: pow holds x^(2^k), starting at x^8.
	shift, pow := uint32(1)<<31, uint32(1)<<(31-8)
	for bits := n; bits > 0; bits >>= 1 {
		if bits&1 != 0 {
			shift = mul(shift, pow)
		}
		pow = mul(pow, pow)
	}
	return ^mul(shift, 0xffffffff)
}

func TestZerosCRC(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000, 1 << 20, 3<<20 + 5} {
		if got, want := zerosCRC(int64(n)), crc32.ChecksumIEEE(make([]byte, n)); got != want {
			t.Errorf("zerosCRC(%d) = %#x, want %#x", n, got, want)
		}
	}
}

// compoundFile builds a minimal Compound File Binary file (512-byte
// sectors: the header, one FAT sector, one directory sector) whose
// directory holds the root and the named streams, linked as the spec
// wants: the root's child is the first stream, each stream's right
// sibling the next.
func compoundFile(streams ...string) []byte {
	const free, end, fatSect = 0xffffffff, 0xfffffffe, 0xfffffffd
	b := make([]byte, 512*3)
	copy(b, "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1")
	le := binary.LittleEndian
	le.PutUint16(b[0x18:], 0x3e)
	le.PutUint16(b[0x1a:], 3)
	le.PutUint16(b[0x1c:], 0xfffe)
	le.PutUint16(b[0x1e:], 9)
	le.PutUint16(b[0x20:], 6)
	le.PutUint32(b[0x2c:], 1)
	le.PutUint32(b[0x30:], 1)
	le.PutUint32(b[0x38:], 4096)
	le.PutUint32(b[0x3c:], end)
	le.PutUint32(b[0x44:], end)
	for i := 0; i < 109; i++ {
		le.PutUint32(b[0x4c+4*i:], free)
	}
	le.PutUint32(b[0x4c:], 0)
	fat := b[512:1024]
	for i := 0; i < 128; i++ {
		le.PutUint32(fat[4*i:], free)
	}
	le.PutUint32(fat[0:], fatSect)
	le.PutUint32(fat[4:], end)
	dir := b[1024:]
	names := append([]string{"Root Entry"}, streams...)
	names = names[:min(len(names), 4)]
	for i, n := range names {
		e := dir[128*i:]
		u := utf16.Encode([]rune(n))
		for j, c := range u {
			le.PutUint16(e[2*j:], c)
		}
		le.PutUint16(e[64:], uint16(2*len(u)+2))
		e[66] = 2
		if i == 0 {
			e[66] = 5
		}
		le.PutUint32(e[68:], free)
		le.PutUint32(e[72:], free)
		le.PutUint32(e[76:], free)
		switch {
		case i == 0 && len(names) > 1:
			le.PutUint32(e[76:], 1)
		case i > 0 && i+1 < len(names):
			le.PutUint32(e[72:], uint32(i+1))
		}
		le.PutUint32(e[116:], end)
	}
	return b
}

func TestDetect(t *testing.T) {
	xlsx := readFixture(t, "budget.xlsx")
	addin := makeZip(t,
		entry{name: "[Content_Types].xml", data: []byte(`<Types><Override PartName="/xl/workbook.xml" ContentType="application/vnd.ms-excel.addin.macroEnabled.main+xml"/></Types>`)},
		entry{name: "xl/workbook.xml", data: []byte(`<workbook/>`)},
		entry{name: "xl/vbaProject.bin", data: []byte("macros")})
	tests := []struct {
		name, file string
		data       []byte
		want       string
		message    string
	}{
		{"docx", "contract.docx", readFixture(t, "contract.docx"), MIMEDOCX, ""},
		{"docx named text", "contract.txt", readFixture(t, "contract.docx"), MIMEDOCX, ""},
		{"workbook named docx", "budget.docx", xlsx, MIMEXLSX, ""},
		{"pptx", "deck", readFixture(t, "deck.pptx"), MIMEPPTX, ""},
		{"odp", "deck.odp", readFixture(t, "deck.odp"), MIMEODP, ""},
		{"ods", "budget.ods", readFixture(t, "budget.ods"), MIMEODS, ""},
		{"odt", "contract.odt", readFixture(t, "contract.odt"), MIMEODT, ""},
		{"epub", "book.epub", readFixture(t, "book.epub"), MIMEEPUB, ""},
		{"rtf", "contract.rtf", readFixture(t, "contract.rtf"), MIMERTF, ""},
		{"pdf", "contract.pdf", readFixture(t, "contract.pdf"), MIMEPDF, ""},
		{"markdown", "notes.md", []byte("# Notes\n\nText."), MIMEMarkdown, ""},
		{"legacy doc", "contract.doc", readFixture(t, "contract.doc"), "", "legacy Word 97-2003 document (.doc): save it as .docx"},
		{"legacy xls", "budget.xls", readFixture(t, "budget.xls"), "", "legacy Excel 97-2003 workbook (.xls): save it as .xlsx"},
		{"legacy ppt", "deck.ppt", compoundFile("PowerPoint Document", "Current User"), "", "legacy PowerPoint 97-2003 presentation (.ppt): save it as .pptx"},
		{"encrypted ooxml", "secret.docx", compoundFile("EncryptionInfo", "EncryptedPackage"), "", "password-protected Office document: open it, remove the password"},
		{"damaged compound file", "x.doc", []byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1garbage"), "", "legacy or password-protected Office document"},
		{"plain zip", "photos.zip", makeZip(t, entry{name: "a.jpg", data: []byte("x")}), "", "ZIP archive (not an Office, OpenDocument or EPUB file)"},
		{"excel add-in", "tools.xlam", addin, "", "Excel add-in (.xlam): it holds only macros"},
		{"truncated zip", "contract.docx", readFixture(t, "contract.docx")[:3000], "", "damaged ZIP archive or office document"},
		{"png without OCR", "scan.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), "", "PNG image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.file, "", bytes.NewReader(tt.data), int64(len(tt.data)))
			if tt.message != "" {
				if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tt.message) {
					t.Fatalf("Detect = %q, %v; want ErrUnsupported saying %q", got, err, tt.message)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Detect = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestExtractByContent checks that a container is read as what it holds,
// whatever type it was declared as, and that a compound file declared as
// an Office Open XML type gets the compound file's advice.
func TestExtractByContent(t *testing.T) {
	doc, err := Extract(context.Background(), MIMEDOCX, readFixture(t, "budget.xlsx"))
	if err != nil || len(doc.Spans) == 0 || doc.Spans[0].Location.Sheet != "Budget" {
		t.Fatalf("a workbook declared as DOCX: %v, %+v", err, doc)
	}
	_, err = Extract(context.Background(), MIMEDOCX, compoundFile("EncryptionInfo", "EncryptedPackage"))
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "password-protected") {
		t.Errorf("an encrypted document declared as DOCX: %v", err)
	}
	_, err = Extract(context.Background(), MIMEXLSX, readFixture(t, "budget.xls"))
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "save it as .xlsx") {
		t.Errorf("a legacy workbook declared as XLSX: %v", err)
	}
}

// hostile runs Extract on data with limits and checks that it fails with
// want and a message holding message, within a second and without
// allocating more than maxAlloc bytes.
func hostile(t *testing.T, l Limits, mt string, data []byte, want error, message string, maxAlloc uint64) {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := l.Extract(context.Background(), mt, data)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%v after %s, %d KiB allocated", err, took.Round(time.Millisecond), alloc>>10)
	if !errors.Is(err, want) || !strings.Contains(err.Error(), message) {
		t.Errorf("Extract = %v; want %v saying %q", err, want, message)
	}
	// Allocation is the bound checked here: it does not depend on how busy
	// the machine is. Speed lives in BenchmarkHostile.
	if alloc > maxAlloc {
		t.Errorf("allocated %d MiB, more than %d MiB", alloc>>20, maxAlloc>>20)
	}
}

func TestHostileArchives(t *testing.T) {
	bomb, crc := deflatedZeros(1024)
	lying, _ := deflatedZeros(64)
	many := make([]entry, 0, 30000)
	for i := 0; i < 30000; i++ {
		many = append(many, entry{name: fmt.Sprintf("word/media/f%d.xml", i), data: []byte("x")})
	}
	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">` +
		`<!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">]>` +
		`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&lol2;</w:t></w:r></w:p></w:body></w:document>`
	deep := strings.Repeat("<w:sdt><w:sdtContent>", 5000) + "<w:p><w:r><w:t>deep</w:t></w:r></w:p>" + strings.Repeat("</w:sdtContent></w:sdt>", 5000)
	tests := []struct {
		name    string
		data    []byte
		want    error
		message string
	}{
		{"zip bomb", makeZip(t,
			entry{name: "[Content_Types].xml", data: []byte(contentTypesDOCX)},
			entry{name: "_rels/.rels", data: []byte(packageRels)},
			entry{name: "word/document.xml", data: bomb, raw: true, crc: crc, size: 1 << 30}),
			ErrTooLarge, "word/document.xml inflates to 1073741824 bytes"},
		{"zip bomb under the size limits", makeZip(t,
			entry{name: "[Content_Types].xml", data: []byte(contentTypesDOCX)},
			entry{name: "_rels/.rels", data: []byte(packageRels)},
			entry{name: "word/document.xml", data: lying, raw: true, crc: zerosCRC(64 << 20), size: 64 << 20}),
			ErrTooLarge, "(a zip bomb?)"},
		{"zip bomb declaring a small size", makeZip(t,
			entry{name: "[Content_Types].xml", data: []byte(contentTypesDOCX)},
			entry{name: "_rels/.rels", data: []byte(packageRels)},
			entry{name: "word/document.xml", data: lying, raw: true, crc: 0, size: 100 << 10}),
			ErrCorrupt, "word/document.xml"},
		{"30,000 entries", docx(t, "<w:p/>", many...), ErrTooLarge, "30003 entries, more than the limit of 20000"},
		{"billion laughs", makeZip(t,
			entry{name: "[Content_Types].xml", data: []byte(contentTypesDOCX)},
			entry{name: "_rels/.rels", data: []byte(packageRels)},
			entry{name: "word/document.xml", data: []byte(laughs)}),
			ErrCorrupt, "declares XML entities"},
		{"deep nesting", docx(t, deep), ErrTooLarge, "nests elements deeper than 256 levels"},
		{"macros only", docx(t, "<w:p/>", entry{name: "word/vbaProject.bin", data: []byte("macros")}), ErrUnsupported, "holds only macros (VBA)"},
		{"no text", docx(t, "<w:p/>"), ErrNoText, "holds no text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hostile(t, Limits{}, MIMEDOCX, tt.data, tt.want, tt.message, 64<<20)
		})
	}
}

// ods builds an OpenDocument spreadsheet whose one sheet holds rows.
func ods(t testing.TB, rows string) []byte {
	content := `<?xml version="1.0" encoding="UTF-8"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:spreadsheet><table:table table:name="Data">` +
		rows + `</table:table></office:spreadsheet></office:body></office:document-content>`
	return makeZip(t,
		entry{name: "mimetype", data: []byte(MIMEODS)},
		entry{name: "content.xml", data: []byte(content)})
}

// fullSheet repeats a row of values a million times across every column.
const fullSheet = `<table:table-row table:number-rows-repeated="1048576"><table:table-cell table:number-columns-repeated="16384" office:value-type="float" office:value="1"><text:p>1</text:p></table:table-cell></table:table-row>`

func TestRepeatedRowsAndColumns(t *testing.T) {
	cell := func(v string) string {
		return `<table:table-cell office:value-type="string"><text:p>` + v + `</text:p></table:table-cell>`
	}
	empty := `<table:table-row table:number-rows-repeated="1048000"><table:table-cell table:number-columns-repeated="16384"/></table:table-row>`
	// Empty rows repeated a million times cost a counter: the row after
	// them is row 1,048,002.
	doc, err := Extract(context.Background(), MIMEODS, ods(t,
		"<table:table-row>"+cell("Name")+cell("Value")+"</table:table-row>"+empty+
			"<table:table-row>"+cell("last")+`<table:table-cell table:number-columns-repeated="3"/>`+cell("9")+"</table:table-row>"))
	if err != nil {
		t.Fatal(err)
	}
	if got := doc.Spans[0].Location; got.Sheet != "Data" || got.Cells != "A1:E1048002" {
		t.Errorf("location %+v, want sheet Data, A1:E1048002", got)
	}
	if !strings.Contains(doc.Text, "| last |  |  |  | 9 |") {
		t.Errorf("text %q lacks the last row with its empty cells", doc.Text)
	}

	// A row of values repeated a million times across every column ends
	// at the text limit, fast and within bounded memory.
	hostile(t, Limits{MaxTextBytes: 4 << 20}, MIMEODS, ods(t, fullSheet), ErrTooLarge, "exceeds 4194304 bytes (the text limit)", 256<<20)
}

// TestTextHeldBack checks that a paragraph or a cell larger than the text
// limit fails at the limit, not after the reader has gathered it whole.
func TestTextHeldBack(t *testing.T) {
	big := strings.Repeat("word ", 1<<20) // 5 MiB
	odt := `<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text><text:p>` +
		strings.Repeat("<text:span>"+big[:1<<16]+"</text:span>", 80) + `</text:p></office:text></office:body></office:document-content>`
	tests := []struct {
		name, mt string
		data     []byte
	}{
		{"docx paragraph", MIMEDOCX, docx(t, "<w:p>"+strings.Repeat("<w:r><w:t>"+big[:1<<16]+"</w:t></w:r>", 80)+"</w:p>")},
		{"docx table", MIMEDOCX, docx(t, "<w:tbl><w:tr>"+strings.Repeat("<w:tc><w:p><w:r><w:t>"+big[:1<<16]+"</w:t></w:r></w:p></w:tc>", 80)+"</w:tr></w:tbl>")},
		{"odt paragraph", MIMEODT, makeZip(t, entry{name: "mimetype", data: []byte(MIMEODT)}, entry{name: "content.xml", data: []byte(odt)})},
		{"ods row", MIMEODS, ods(t, `<table:table-row><table:table-cell table:number-columns-repeated="200"><text:p>`+big[:1<<16]+`</text:p></table:table-cell></table:table-row>`)},
		{"rtf paragraph", MIMERTF, []byte(`{\rtf1 ` + big + `}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hostile(t, Limits{MaxTextBytes: 1 << 20}, tt.mt, tt.data, ErrTooLarge, "exceeds 1048576 bytes (the text limit)", 48<<20)
		})
	}
}
