package interop

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// peakLimit is the most resident memory one upload may take the server to:
// its peak resident set (VmHWM), start-up included.
const peakLimit = 512 << 20

// memoryUploadLimit bounds how long one file of a memory case may take to
// settle.
const memoryUploadLimit = 3 * time.Minute

// memoryCase is a file near the default size limit built to make a reader
// hold much more than the file, and what it must come to.
type memoryCase struct {
	name, file, mime string
	make             func() []byte
	// status is "ready" or "failed"; reason, a failure's words.
	status, reason string
	// copies is how many variants of the file are uploaded at once (1 when
	// 0), to a server of workers upload workers (its default when 0).
	copies, workers int
	// slow marks the cases left out unless named or "all" is: files at
	// the text limit that become ready, whose chunks take a while to store.
	slow bool
}

// TestHostileUploadMemory uploads, through POST /v1/conversations/{id}/files,
// files of each format built to blow up its reader, each case to a fresh
// server process, waits until they are ready or failed and reads the
// process's peak resident set from /proc: it must stay within peakLimit.
// The server is built without the race detector, whose shadow memory would
// hide the figure. MCPSEARCH_MEMORY_CASES=html,epub-chapter runs the cases
// named, "all" every case, the slow ones included:
//
//	MCPSEARCH_MEMORY_CASES=all go test ./interop -run TestHostileUploadMemory -v
func TestHostileUploadMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc to read a process's peak memory")
	}
	t.Parallel()
	only := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("MCPSEARCH_MEMORY_CASES"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			only[n] = true
		}
	}
	bin := plainBinary(t)
	fake := searxngtest.New(t)
	cfg := baseConfig(fake.URL).with(
		"MCP_docs_enabled=true",
		"DATABASE_URL="+pgtest.NewDatabase(t),
		"MCP_docs_ocr_mode=off",
	)
	delete(cfg, "GORACE")
	for _, c := range memoryCases() {
		if len(only) > 0 && !only[c.name] && !only["all"] || len(only) == 0 && c.slow {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			data := c.make()
			made := time.Since(start)
			cfg := cfg
			if c.workers > 0 {
				cfg = cfg.with("MCP_docs_workers=" + strconv.Itoa(c.workers))
			}
			srv, err := tryStartBinary(bin, transportCase{name: "http", transport: "http"}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.stop(t) })
			api := apiClient{base: srv.base}
			start = time.Now()
			copies := max(c.copies, 1)
			ids := make([]string, copies)
			for i := range ids {
				variant := data
				if i > 0 {
					// Different bytes, so that the copy is not a duplicate.
					variant = append(data[:len(data):len(data)], fmt.Sprintf("\n<!-- %d -->", i)...)
				}
				ids[i] = api.upload(t, "memory-"+c.name, c.file, c.mime, variant).ID
			}
			files := make([]fileInfo, copies)
			for i, id := range ids {
				files[i] = waitSettledWithin(t, api, id, memoryUploadLimit)
			}
			took := time.Since(start)
			peak, err := processPeak(srv.cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			f := files[0]
			t.Logf("%s: %d × %.1f MiB file (made in %v): %s %q after %v, %d chunks, peak RSS %d MiB",
				c.name, copies, float64(len(data))/(1<<20), made.Round(time.Millisecond), f.Status, f.Error,
				took.Round(100*time.Millisecond), f.ChunkCount, peak>>20)
			if peak > peakLimit {
				t.Errorf("%s: peak RSS %d MiB, want at most %d MiB", c.name, peak>>20, peakLimit>>20)
			}
			for _, f := range files {
				if f.Status != c.status || !strings.Contains(f.Error, c.reason) {
					t.Errorf("%s: %s %q, want %s with a reason holding %q", c.name, f.Status, f.Error, c.status, c.reason)
				}
			}
		})
	}
}

// memoryCases are the files TestHostileUploadMemory uploads. Their large
// parts repeat a unit of about 1 MiB of varied words, deflated once, so
// that they are made in a moment even under the race detector.
func memoryCases() []memoryCase {
	const (
		size     = 48 << 20
		xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
		docxType = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
		pptxType = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
		odtType  = "application/vnd.oasis.opendocument.text"
		epubType = "application/epub+zip"
	)
	paragraphs := func() []byte { return repeatTo("<p>xxxx</p>", size) }
	words := func() []byte { return markup(size, "<p>", "</p>\n", 40).all() }
	return []memoryCase{
		// The page of the issue: 4.4 million tiny paragraphs, 27 MiB of
		// text, ready.
		{name: "html", file: "paragraphs.html", mime: "text/html", status: "ready", make: paragraphs},
		{name: "html-text", file: "words.html", mime: "text/html", status: "failed", reason: "text limit", make: words},
		{name: "html-tag", file: "tag.html", mime: "text/html", status: "ready",
			make: func() []byte {
				return append(append([]byte("<p>before</p><div"), attributes(size)...), "></div><p>after</p>"...)
			}},
		{name: "html-headings", file: "headings.html", mime: "text/html", status: "failed", reason: "limit of a document's parts",
			make: func() []byte { return markup(size, "<h2>", "</h2>", 1).all() }},
		{name: "html-copies", file: "words.html", mime: "text/html", status: "failed", reason: "text limit", make: words, copies: 4},
		{name: "html-copies-ready", file: "paragraphs.html", mime: "text/html", status: "ready", make: paragraphs, copies: 4, slow: true},
		{name: "txt", file: "words.txt", mime: "text/plain", status: "ready", slow: true,
			make: func() []byte { return markup(31<<20, "", "\n\n", 20).all() }},
		// A chapter of 60 MiB of short paragraphs of varied words, which
		// deflates only a few times: the zip bomb check does not stop it.
		{name: "epub-chapter", file: "chapter.epub", mime: epubType, status: "failed", reason: "text limit",
			make: func() []byte { return epubOf(markup(60<<20, "<p>", "</p>", 1)) }},
		{name: "epub-paragraphs", file: "paragraphs.epub", mime: epubType, status: "ready", slow: true,
			make: func() []byte { return epubOf(markup(26<<20, "<p>", "</p>", 1), markup(26<<20, "<p>", "</p>", 1)) }},
		{name: "xlsx-strings", file: "strings.xlsx", mime: xlsxType, status: "failed", reason: "limit of a workbook's strings",
			make: func() []byte { return xlsxStrings(200 << 20) }},
		{name: "xlsx-strings-2M", file: "strings.xlsx", mime: xlsxType, status: "ready", slow: true,
			make: func() []byte { return xlsxStrings(36 << 20) }},
		{name: "docx-body", file: "body.docx", mime: docxType, status: "failed", reason: "text limit",
			make: func() []byte { return docxOf(markup(100<<20, "<w:p><w:r><w:t>", "</w:t></w:r></w:p>", 8), repeated{}) }},
		{name: "docx-styles", file: "styles.docx", mime: docxType, status: "failed", reason: "limit of a part read whole",
			make: func() []byte {
				return docxOf(once("<w:p><w:r><w:t>text</w:t></w:r></w:p>"), markup(60<<20, `<w:style w:styleId="`, `"/>`, 1))
			}},
		{name: "pptx-slide", file: "slide.pptx", mime: pptxType, status: "failed", reason: "limit of a part read whole",
			make: func() []byte { return pptxOf(markup(60<<20, "<a:p><a:r><a:t>", "</a:t></a:r></a:p>", 1)) }},
		{name: "odt-body", file: "body.odt", mime: odtType, status: "failed", reason: "text limit",
			make: func() []byte { return odtOf(markup(100<<20, "<text:p>", "</text:p>", 8), repeated{}) }},
		{name: "odt-styles", file: "styles.odt", mime: odtType, status: "failed", reason: "limit of a part read whole",
			make: func() []byte {
				return odtOf(once("<text:p>text</text:p>"), markup(60<<20, `<style:style style:name="`, `"/>`, 1))
			}},
		{name: "csv", file: "rows.csv", mime: "text/csv", status: "failed", reason: "text limit",
			make: func() []byte { return markup(size, "", ",x,y\n", 6).all() }},
		{name: "csv-wide", file: "wide.csv", mime: "text/csv", status: "failed", reason: "column limit",
			make: func() []byte { return repeatTo("a,", size) }},
		{name: "rtf", file: "words.rtf", mime: "application/rtf", status: "failed", reason: "text limit",
			make: func() []byte { return rtfOf(markup(size-16, `{\pard `, `\par}`, 8)) }},
		{name: "rtf-paragraphs", file: "paragraphs.rtf", mime: "application/rtf", status: "ready", slow: true,
			make: func() []byte { return rtfOf(markup(size-16, `{\pard `, `\par}`, 1)) }},
		// 200 pages sharing one deflated content stream of 64 MiB of text.
		{name: "pdf-shared", file: "shared.pdf", mime: "application/pdf", status: "failed", reason: "stream limit",
			make: func() []byte { return sharedStreamPDF(200, 64<<20) }},
		{name: "pdf-text", file: "text.pdf", mime: "application/pdf", status: "failed", reason: "text limit",
			make: func() []byte { return textPDF(size - 6<<20) }},
	}
}

// attributes returns about n bytes of attributes, each of its own name.
func attributes(n int) []byte {
	b := make([]byte, 0, n+16)
	for i := 0; len(b) < n; i++ {
		b = append(b, " a"...)
		b = strconv.AppendInt(b, int64(i), 36)
	}
	return b
}

// rtfOf returns an RTF document of body.
func rtfOf(body repeated) []byte {
	return append(append([]byte(`{\rtf1\ansi `), body.all()...), '}')
}

// sharedStreamPDF returns a PDF of pages pages whose content is one
// deflated stream drawing text of about textBytes.
func sharedStreamPDF(pages, textBytes int) []byte {
	const line = "(the same words shown again and again on every page) Tj T*\n"
	unit := strings.Repeat(line, (1<<20)/len(line))
	text := repeated{unit: []byte(unit), times: textBytes / len(unit)}
	data := zlibOf([]byte("BT /F1 10 Tf 72 720 Td 12 TL\n"), text, []byte("ET\n"))
	w := pdftest.New()
	shared := w.Add(fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", len(data), data))
	for range pages {
		w.Page("")
		w.Set(w.Next()-1, fmt.Sprintf("<< /Type /Page /Parent PAGES /MediaBox [0 0 612 792] /Contents %d 0 R >>", shared))
	}
	return w.Bytes()
}

// textPDF returns a PDF of about size bytes of pages of text, their content
// streams not compressed.
func textPDF(size int) []byte {
	w := pdftest.New()
	lines := strings.Split(string(markup(4000, "", "\n", 12).all()), "\n")
	content := pdftest.TextContent("F1", 10, lines...)
	for n := 0; n < size; n += len(content) {
		w.Page(content)
	}
	return w.Bytes()
}

// repeatTo returns s repeated to n bytes at most.
func repeatTo(s string, n int) []byte {
	return bytes.Repeat([]byte(s), n/len(s))
}

// repeated is unit, times times.
type repeated struct {
	unit  []byte
	times int
}

// once is s, once.
func once(s string) repeated {
	return repeated{unit: []byte(s), times: 1}
}

// all returns the whole content.
func (r repeated) all() []byte {
	return bytes.Repeat(r.unit, r.times)
}

// markup returns about n bytes of elements: open, words (made up, from a
// vocabulary of a few thousand), close, again and again, with words words
// in each element; as a unit of about 1 MiB of whole elements, repeated.
func markup(n int, open, close string, words int) repeated {
	b := make([]byte, 0, min(n, 1<<20)+256)
	x := uint64(0x9e3779b97f4a7c15)
	for len(b) < min(n, 1<<20) {
		b = append(b, open...)
		for i := range words {
			if i > 0 {
				b = append(b, ' ')
			}
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			b = append(b, vocabulary[x%uint64(len(vocabulary))]...)
		}
		b = append(b, close...)
	}
	return repeated{unit: b, times: max(n/len(b), 1)}
}

// vocabulary is the made-up words of markup.
var vocabulary = func() []string {
	const letters = "etaoinshrdlcumwfgypbvkjxqz"
	words := make([]string, 4096)
	x := uint32(2463534242)
	for i := range words {
		var w []byte
		for range 3 + i%6 {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			w = append(w, letters[x%uint32(len(letters))%(10+uint32(i%16))])
		}
		words[i] = string(w)
	}
	return words
}()

// deflated returns the raw deflate stream of head, body and tail, and
// their length. The body's unit is deflated once, as a block that refers
// to nothing before it, and that block is repeated.
func deflated(head []byte, body repeated, tail []byte) ([]byte, int64) {
	block := func(data []byte, last bool) []byte {
		var b bytes.Buffer
		w, _ := flate.NewWriter(&b, flate.BestSpeed)
		w.Write(data)
		if last {
			w.Close()
		} else {
			w.Flush()
		}
		return b.Bytes()
	}
	out := block(head, false)
	unit := block(body.unit, false)
	for range body.times {
		out = append(out, unit...)
	}
	out = append(out, block(tail, true)...)
	return out, int64(len(head) + len(body.unit)*body.times + len(tail))
}

// zlibOf returns head, body and tail as a zlib stream.
func zlibOf(head []byte, body repeated, tail []byte) []byte {
	raw, _ := deflated(head, body, tail)
	sum := adler32.New()
	sum.Write(head)
	for range body.times {
		sum.Write(body.unit)
	}
	sum.Write(tail)
	return sum.Sum(append([]byte{0x78, 0x01}, raw...))
}

// entry is a file of a ZIP archive: head, body and tail.
type entry struct {
	name       string
	head, tail string
	body       repeated
}

// zipOf returns a ZIP file of the entries, name then content, deflated
// ("mimetype" stored).
func zipOf(entries ...string) []byte {
	parts := make([]entry, 0, len(entries)/2)
	for i := 0; i+1 < len(entries); i += 2 {
		parts = append(parts, entry{name: entries[i], head: entries[i+1]})
	}
	return zipParts(parts...)
}

// zipParts returns a ZIP file of the entries, deflated ("mimetype"
// stored).
func zipParts(entries ...entry) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, e := range entries {
		crc := crc32.Update(0, crc32.IEEETable, []byte(e.head))
		for range e.body.times {
			crc = crc32.Update(crc, crc32.IEEETable, e.body.unit)
		}
		crc = crc32.Update(crc, crc32.IEEETable, []byte(e.tail))
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, CRC32: crc}
		data, size := deflated([]byte(e.head), e.body, []byte(e.tail))
		if e.name == "mimetype" {
			h.Method, data = zip.Store, []byte(e.head)
		}
		h.CompressedSize64, h.UncompressedSize64 = uint64(len(data)), uint64(size)
		f, err := w.CreateRaw(h)
		if err != nil {
			panic(err)
		}
		f.Write(data)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// epubOf returns an e-book whose chapters hold the bodies.
func epubOf(bodies ...repeated) []byte {
	var manifest, spine strings.Builder
	entries := []entry{{name: "mimetype", head: "application/epub+zip"},
		{name: "META-INF/container.xml", head: `<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0"><rootfiles><rootfile full-path="content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>`}}
	for i, body := range bodies {
		name := fmt.Sprintf("c%d.xhtml", i)
		fmt.Fprintf(&manifest, `<item id="c%d" href="%s" media-type="application/xhtml+xml"/>`, i, name)
		fmt.Fprintf(&spine, `<itemref idref="c%d"/>`, i)
		entries = append(entries, entry{name: name, body: body,
			head: `<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Chapter</title></head><body>`, tail: `</body></html>`})
	}
	entries = append(entries, entry{name: "content.opf", head: `<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>` +
		manifest.String() + `</manifest><spine>` + spine.String() + `</spine></package>`})
	return zipParts(entries...)
}

const (
	relsNS      = `xmlns="http://schemas.openxmlformats.org/package/2006/relationships"`
	relType     = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
	wordNS      = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"`
	odfNS       = `xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"`
	sheetMLNS   = `xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	presentNS   = `xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	packageRels = `<Relationships ` + relsNS + `><Relationship Id="rId1" Type="` + relType + `officeDocument" Target="%s"/></Relationships>`
)

// docxOf returns a Word document of the body (WordprocessingML) and, when
// styles holds any, a styles part holding them.
func docxOf(body, styles repeated) []byte {
	entries := []entry{{name: "_rels/.rels", head: fmt.Sprintf(packageRels, "word/document.xml")},
		{name: "word/document.xml", head: `<w:document ` + wordNS + `><w:body>`, body: body, tail: `</w:body></w:document>`}}
	if styles.times > 0 {
		entries = append(entries,
			entry{name: "word/_rels/document.xml.rels", head: `<Relationships ` + relsNS + `><Relationship Id="rId1" Type="` + relType + `styles" Target="styles.xml"/></Relationships>`},
			entry{name: "word/styles.xml", head: `<w:styles ` + wordNS + `>`, body: styles, tail: `</w:styles>`})
	}
	return zipParts(entries...)
}

// pptxOf returns a deck of one slide holding paragraphs (DrawingML).
func pptxOf(paragraphs repeated) []byte {
	return zipParts(entry{name: "_rels/.rels", head: fmt.Sprintf(packageRels, "ppt/presentation.xml")},
		entry{name: "ppt/presentation.xml", head: `<p:presentation ` + presentNS + `><p:sldIdLst><p:sldId id="256" r:id="rId1"/></p:sldIdLst></p:presentation>`},
		entry{name: "ppt/_rels/presentation.xml.rels", head: `<Relationships ` + relsNS + `><Relationship Id="rId1" Type="` + relType + `slide" Target="slides/slide1.xml"/></Relationships>`},
		entry{name: "ppt/slides/slide1.xml", head: `<p:sld ` + presentNS + `><p:cSld><p:spTree><p:sp><p:txBody>`, body: paragraphs,
			tail: `</p:txBody></p:sp></p:spTree></p:cSld></p:sld>`})
}

// odtOf returns an OpenDocument text of the body and, when styles holds
// any, a styles part holding them.
func odtOf(body, styles repeated) []byte {
	entries := []entry{{name: "mimetype", head: "application/vnd.oasis.opendocument.text"},
		{name: "META-INF/manifest.xml", head: `<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/></manifest:manifest>`},
		{name: "content.xml", head: `<office:document-content ` + odfNS + `><office:body><office:text>`, body: body, tail: `</office:text></office:body></office:document-content>`}}
	if styles.times > 0 {
		entries = append(entries, entry{name: "styles.xml", head: `<office:document-styles ` + odfNS + `><office:styles>`, body: styles,
			tail: `</office:styles></office:document-styles>`})
	}
	return zipParts(entries...)
}

// xlsxStrings returns a workbook whose shared strings take about n bytes,
// of strings a few letters long, and whose one sheet uses the first two.
func xlsxStrings(n int) []byte {
	return zipParts(entry{name: "_rels/.rels", head: fmt.Sprintf(packageRels, "xl/workbook.xml")},
		entry{name: "xl/workbook.xml", head: `<workbook ` + sheetMLNS + `><sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>`},
		entry{name: "xl/_rels/workbook.xml.rels", head: `<Relationships ` + relsNS + `><Relationship Id="rId1" Type="` + relType + `worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="` + relType + `sharedStrings" Target="sharedStrings.xml"/></Relationships>`},
		entry{name: "xl/worksheets/sheet1.xml", head: `<worksheet ` + sheetMLNS + `><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row></sheetData></worksheet>`},
		entry{name: "xl/sharedStrings.xml", head: `<sst ` + sheetMLNS + `>`, body: markup(n, "<si><t>", "</t></si>", 1), tail: `</sst>`})
}

// waitSettledWithin polls GET /v1/files/{id} until the file is no longer
// processing, for at most limit, and returns it.
func waitSettledWithin(t *testing.T, api apiClient, id string, limit time.Duration) fileInfo {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		status, b := api.do(t, http.MethodGet, "/v1/files/"+id, "", nil)
		var f fileInfo
		if status != http.StatusOK || json.Unmarshal(b, &f) != nil {
			t.Fatalf("GET /v1/files/%s: %d %s", id, status, b)
		}
		if f.Status != "processing" {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("file %s still processing after %v: %+v", id, limit, f)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processPeak returns the peak resident set (VmHWM) of process pid, in
// bytes.
func processPeak(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// plainBinary returns the mcpsearch binary of the package, or one built
// without the race detector when the tests run with it.
func plainBinary(t *testing.T) string {
	t.Helper()
	if !raceBuild || os.Getenv("MCPSEARCH_INTEROP_BIN") != "" {
		return binPath
	}
	root, err := moduleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bin := filepath.Join(t.TempDir(), "mcpsearch")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mcpsearch")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -o %s ./cmd/mcpsearch: %v\n%s", bin, err, out)
	}
	t.Logf("built mcpsearch without -race in %v", time.Since(start).Round(time.Second))
	return bin
}
