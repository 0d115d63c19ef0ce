package extract

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

const wNS = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"`

// wordDoc builds a Word document from the body of document.xml and its
// other parts, with the relationships the parts need.
func wordDoc(t testing.TB, body string, parts map[string]string) []byte {
	t.Helper()
	rels := `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">`
	types := map[string]string{"styles": "styles.xml", "numbering": "numbering.xml", "footnotes": "footnotes.xml",
		"endnotes": "endnotes.xml", "header": "header1.xml", "footer": "footer1.xml"}
	entries := []entry{
		{name: "[Content_Types].xml", data: []byte(contentTypesDOCX)},
		{name: "_rels/.rels", data: []byte(packageRels)},
		{name: "word/document.xml", data: []byte(`<?xml version="1.0"?><w:document ` + wNS + `><w:body>` + body + `</w:body></w:document>`)},
	}
	i := 0
	for kind, file := range types {
		for name, xml := range parts {
			if name == file || kind == "header" && strings.HasPrefix(name, "header") || kind == "footer" && strings.HasPrefix(name, "footer") {
				i++
				rels += `<Relationship Id="rId` + string(rune('A'+i)) + `" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/` + kind + `" Target="` + name + `"/>`
				entries = append(entries, entry{name: "word/" + name, data: []byte(`<?xml version="1.0"?>` + strings.Replace(xml, ">", " "+wNS+">", 1))})
			}
		}
	}
	entries = append(entries, entry{name: "word/_rels/document.xml.rels", data: []byte(rels + `</Relationships>`)})
	return makeZip(t, entries...)
}

func p(runs string) string { return "<w:p>" + runs + "</w:p>" }
func r(text string) string { return `<w:r><w:t xml:space="preserve">` + text + `</w:t></w:r>` }
func styled(style, runs string) string {
	return `<w:p><w:pPr><w:pStyle w:val="` + style + `"/></w:pPr>` + runs + `</w:p>`
}

func extractOK(t *testing.T, mt string, data []byte) *Document {
	t.Helper()
	doc, err := Extract(context.Background(), mt, data)
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	checkDocument(t, doc)
	checkSpans(t, doc)
	return doc
}

func TestDOCX(t *testing.T) {
	styles := `<w:styles>
<w:style w:type="paragraph" w:default="1" w:styleId="Standard"><w:name w:val="Normal"/></w:style>
<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="Überschrift 1"/><w:pPr><w:outlineLvl w:val="0"/></w:pPr></w:style>
<w:style w:type="paragraph" w:styleId="Kop2"><w:name w:val="heading 2"/></w:style>
<w:style w:type="paragraph" w:styleId="Mine"><w:name w:val="My heading"/><w:basedOn w:val="Kop2"/></w:style>
<w:style w:type="paragraph" w:styleId="Doctitle"><w:name w:val="Title"/></w:style>
</w:styles>`
	numbering := `<w:numbering>
<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/></w:lvl><w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/></w:lvl></w:abstractNum>
<w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/></w:lvl></w:abstractNum>
<w:num w:numId="5"><w:abstractNumId w:val="0"/></w:num><w:num w:numId="6"><w:abstractNumId w:val="1"/></w:num>
</w:numbering>`
	item := func(num, lvl, text string) string {
		return `<w:p><w:pPr><w:numPr><w:ilvl w:val="` + lvl + `"/><w:numId w:val="` + num + `"/></w:numPr></w:pPr>` + r(text) + `</w:p>`
	}
	body := styled("Doctitle", r("Contract")) +
		styled("berschrift1", r("Scope")) +
		p(r("Kept ")+`<w:ins w:id="1"><w:r><w:t>inserted </w:t></w:r></w:ins><w:del w:id="2"><w:r><w:delText>deleted </w:delText></w:r></w:del>`+
			`<w:moveFrom><w:r><w:t>moved away </w:t></w:r></w:moveFrom>`+r("text")+`<w:r><w:rPr><w:vanish/></w:rPr><w:t>hidden</w:t></w:r>`+r(".")) +
		p(r("Page ")+`<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGE \* MERGEFORMAT </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r>`+r("7")+`<w:r><w:fldChar w:fldCharType="end"/></w:r>`+
			r(" and a ")+`<w:hyperlink r:id="rX">`+r("link text")+`</w:hyperlink>`+r(" with a note")+`<w:r><w:footnoteReference w:id="3"/></w:r>`+r(" and another")+`<w:r><w:endnoteReference w:id="4"/></w:r>`) +
		p(r("Anchor")+`<w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><w:txbxContent>`+p(r("In the box"))+`</w:txbxContent></w:drawing></mc:Choice><mc:Fallback><w:pict><w:txbxContent>`+p(r("In the box"))+`</w:txbxContent></w:pict></mc:Fallback></mc:AlternateContent></w:r>`) +
		styled("Kop2", r("Details")) +
		item("5", "0", "first") + item("5", "1", "sub") + item("5", "1", "sub two") + item("5", "0", "second") + item("6", "0", "bullet") +
		`<w:tbl><w:tr><w:tc>` + p(r("Name")) + `</w:tc><w:tc>` + p(r("Value")) + `</w:tc></w:tr><w:tr><w:tc>` + p(r("a|b")) + `</w:tc><w:tc><w:tbl><w:tr><w:tc>` + p(r("x")) + `</w:tc><w:tc>` + p(r("y")) + `</w:tc></w:tr></w:tbl></w:tc></w:tr></w:tbl>` +
		styled("Mine", r("Custom")) + p(r("Last words.")) +
		`<w:p><w:pPr><w:pStyle w:val="berschrift1"/><w:outlineLvl w:val="9"/></w:pPr>` + r("Not a heading") + `</w:p>` +
		`<w:sectPr><w:headerReference r:id="rA"/></w:sectPr>`
	parts := map[string]string{
		"styles.xml":    styles,
		"numbering.xml": numbering,
		"footnotes.xml": `<w:footnotes><w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote><w:footnote w:id="3">` + p(`<w:r><w:footnoteRef/></w:r>`+r(" The footnote.")) + `</w:footnote></w:footnotes>`,
		"endnotes.xml":  `<w:endnotes><w:endnote w:id="4">` + p(r("The endnote.")) + `</w:endnote></w:endnotes>`,
		"header1.xml":   `<w:hdr>` + p(r("ACME Confidential")) + `</w:hdr>`,
		"header2.xml":   `<w:hdr>` + p(r("ACME Confidential")) + `</w:hdr>`,
		"footer1.xml":   `<w:ftr>` + p(`<w:fldSimple w:instr="PAGE">`+r("3")+`</w:fldSimple>`) + `</w:ftr>`,
	}
	doc := extractOK(t, MIMEDOCX, wordDoc(t, body, parts))
	want := `# Contract

# Scope

Kept inserted text.

Page 7 and a link text with a note[1] and another[2]

Anchor

In the box

## Details

1. first
  a. sub
  b. sub two
2. second
- bullet

| Name | Value |
|---|---|
| a\|b | x \| y |

## Custom

Last words.

Not a heading

[1] The footnote.

[2] The endnote.

ACME Confidential`
	if doc.Text != want {
		t.Errorf("text:\n%s\nwant:\n%s", doc.Text, want)
	}
	var paths []string
	for _, s := range doc.Spans {
		paths = append(paths, s.Location.String())
	}
	wantPaths := []string{"Contract", "Contract > Scope", "Contract > Scope > Details", "Contract > Scope > Custom", "Notes", "Headers and footers"}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("spans %q, want %q", paths, wantPaths)
	}
}

// pptx builds a presentation whose slides are listed in presentation.xml
// in the order of order (part names slide1.xml, slide2.xml, ...).
func pptxDoc(t testing.TB, slides []string, order []int, notes map[int]string) []byte {
	t.Helper()
	const pNS = `xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	rels := `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">`
	list := ""
	entries := []entry{
		{name: "[Content_Types].xml", data: []byte(`<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/ppt/presentation.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"/></Types>`)},
		{name: "_rels/.rels", data: []byte(`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="ppt/presentation.xml"/></Relationships>`)},
	}
	for i, s := range slides {
		n := strconv.Itoa(i + 1)
		rels += `<Relationship Id="rId` + n + `" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide` + n + `.xml"/>`
		entries = append(entries, entry{name: "ppt/slides/slide" + n + ".xml", data: []byte(`<p:sld ` + pNS + `><p:cSld><p:spTree>` + s + `</p:spTree></p:cSld></p:sld>`)})
		if text, ok := notes[i]; ok {
			entries = append(entries,
				entry{name: "ppt/slides/_rels/slide" + n + ".xml.rels", data: []byte(`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/notesSlide" Target="../notesSlides/notesSlide` + n + `.xml"/></Relationships>`)},
				entry{name: "ppt/notesSlides/notesSlide" + n + ".xml", data: []byte(`<p:notes ` + pNS + `><p:cSld><p:spTree>` +
					`<p:sp><p:nvSpPr><p:nvPr><p:ph type="sldImg"/></p:nvPr></p:nvSpPr></p:sp>` +
					`<p:sp><p:nvSpPr><p:nvPr><p:ph type="body" idx="1"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:r><a:t>` + text + `</a:t></a:r></a:p></p:txBody></p:sp>` +
					`<p:sp><p:nvSpPr><p:nvPr><p:ph type="sldNum" idx="5"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:r><a:t>4</a:t></a:r></a:p></p:txBody></p:sp>` +
					`</p:spTree></p:cSld></p:notes>`)})
		}
	}
	for _, i := range order {
		list += `<p:sldId id="` + strconv.Itoa(256+i) + `" r:id="rId` + strconv.Itoa(i+1) + `"/>`
	}
	entries = append(entries,
		entry{name: "ppt/presentation.xml", data: []byte(`<p:presentation ` + pNS + `><p:sldIdLst>` + list + `</p:sldIdLst></p:presentation>`)},
		entry{name: "ppt/_rels/presentation.xml.rels", data: []byte(rels + `</Relationships>`)})
	return makeZip(t, entries...)
}

func shape(ph, paras string) string {
	nv := `<p:nvPr/>`
	if ph != "" {
		nv = `<p:nvPr>` + ph + `</p:nvPr>`
	}
	return `<p:sp><p:nvSpPr>` + nv + `</p:nvSpPr><p:txBody>` + paras + `</p:txBody></p:sp>`
}

func para(text string) string { return `<a:p><a:r><a:t>` + text + `</a:t></a:r></a:p>` }

func TestPPTX(t *testing.T) {
	slides := []string{
		shape(`<p:ph type="title"/>`, para("Second in order")) + shape(`<p:ph idx="1"/>`, para("point one")+`<a:p><a:pPr lvl="1"/><a:r><a:t>point two</a:t></a:r></a:p>`) +
			shape(`<p:ph type="sldNum"/>`, para("9")),
		shape(`<p:ph type="ctrTitle"/>`, para("First in order")) + shape(`<p:ph type="subTitle"/>`, para("A subtitle")) +
			`<p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tr><a:tc><a:txBody>` + para("Route") + `</a:txBody></a:tc><a:tc><a:txBody>` + para("Load") + `</a:txBody></a:tc></a:tr>` +
			`<a:tr><a:tc><a:txBody>` + para("Pelham") + `</a:txBody></a:tc><a:tc><a:txBody>` + para("71") + `</a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>`,
		`<p:grpSp>` + shape("", `<a:p><a:pPr><a:buAutoNum type="arabicPeriod"/></a:pPr><a:r><a:t>one</a:t></a:r></a:p><a:p><a:pPr><a:buAutoNum type="arabicPeriod"/></a:pPr><a:r><a:t>two</a:t></a:r></a:p>`) + `</p:grpSp>`,
	}
	doc := extractOK(t, MIMEPPTX, pptxDoc(t, slides, []int{1, 0, 2}, map[int]string{0: "Say this aloud."}))
	want := `## Slide 1: First in order

A subtitle

| Route | Load |
|---|---|
| Pelham | 71 |

## Slide 2: Second in order

- point one
  - point two

Notes:

Say this aloud.

## Slide 3

1. one
2. two`
	if doc.Text != want {
		t.Errorf("text:\n%s\nwant:\n%s", doc.Text, want)
	}
	var locs []string
	for _, s := range doc.Spans {
		locs = append(locs, s.Location.String())
	}
	if want := []string{"slide 1 (First in order)", "slide 2 (Second in order)", "slide 3"}; !slices.Equal(locs, want) {
		t.Errorf("spans %q, want %q", locs, want)
	}
}

func TestXLSX(t *testing.T) {
	f := excelize.NewFile()
	defer f.Close()
	f.SetSheetName("Sheet1", "Staff")
	f.SetSheetRow("Staff", "B2", &[]any{"Name", "Started", "Rate"})
	date, _ := f.NewStyle(&excelize.Style{NumFmt: 14})
	pct, _ := f.NewStyle(&excelize.Style{NumFmt: 10})
	for i := 0; i < 40; i++ {
		row := i + 3
		cell, _ := excelize.CoordinatesToCellName(2, row)
		f.SetSheetRow("Staff", cell, &[]any{"Person " + string(rune('A'+i%26)), time.Date(2021, 3, 1+i, 0, 0, 0, 0, time.UTC), 0.25})
		dcell, _ := excelize.CoordinatesToCellName(3, row)
		pcell, _ := excelize.CoordinatesToCellName(4, row)
		f.SetCellStyle("Staff", dcell, dcell, date)
		f.SetCellStyle("Staff", pcell, pcell, pct)
	}
	f.NewSheet("Empty")
	f.NewSheet("Totals")
	f.SetCellFormula("Totals", "A1", "1+1")
	f.SetCellValue("Totals", "A1", 2)
	f.SetCellValue("Totals", "B1", "two")
	buf, err := f.WriteToBuffer()
	if err != nil {
		t.Fatal(err)
	}
	doc := extractOK(t, MIMEXLSX, buf.Bytes())
	if !strings.Contains(doc.Text, "| Person A | 03-01-21 | 25.00% |") {
		t.Errorf("dates and percentages are not formatted:\n%s", doc.Text)
	}
	var locs []string
	for _, s := range doc.Spans {
		locs = append(locs, s.Location.String())
		if !strings.Contains(doc.Text[runeOffset(doc.Text, s.Start):runeOffset(doc.Text, s.End)], "| Name | Started | Rate |") && s.Location.Sheet == "Staff" {
			t.Errorf("block %s lacks the header row", s.Location)
		}
	}
	if len(locs) < 3 || locs[0] != "sheet Staff, B2:D"+locs[0][len("sheet Staff, B2:D"):] || locs[len(locs)-1] != "sheet Totals, A1:B1" {
		t.Errorf("spans %q", locs)
	}
	if !strings.HasSuffix(locs[len(locs)-2], "D42") {
		t.Errorf("the last block of Staff ends at %q, want row 42", locs[len(locs)-2])
	}
}

func TestODT(t *testing.T) {
	content := `<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/">
<office:automatic-styles><text:list-style style:name="L1"><text:list-level-style-number text:level="1" style:num-format="1" style:num-suffix="."/><text:list-level-style-bullet text:level="2"/></text:list-style>
<style:style style:name="P1" style:family="paragraph" style:parent-style-name="Title"/></office:automatic-styles>
<office:body><office:text>
<text:tracked-changes><text:changed-region text:id="c1"><text:deletion><text:p>deleted words</text:p></text:deletion></text:changed-region></text:tracked-changes>
<text:sequence-decls><text:sequence-decl text:name="Figure"/></text:sequence-decls>
<text:p text:style-name="P1">Handbook</text:p>
<text:h text:outline-level="1">Start</text:h>
<text:p>Two<text:s text:c="3"/>spaces<text:tab/>tab<text:change text:change-id="c1"/> and a note<text:note text:note-class="footnote"><text:note-citation>1</text:note-citation><text:note-body><text:p>Note text.</text:p></text:note-body></text:note>.<office:annotation><dc:creator>x</dc:creator><text:p>a comment</text:p></office:annotation></text:p>
<text:list text:style-name="L1"><text:list-item><text:p>first</text:p><text:list><text:list-item><text:p>inner</text:p></text:list-item></text:list></text:list-item><text:list-item><text:p>second</text:p></text:list-item></text:list>
<text:h text:outline-level="2">Sub</text:h>
<text:p>Anchor<draw:frame><draw:text-box><text:p>Framed</text:p></draw:text-box></draw:frame></text:p>
<table:table><table:table-column table:number-columns-repeated="2"/><table:table-row><table:table-cell><text:p>k</text:p></table:table-cell><table:table-cell><text:p>v</text:p></table:table-cell></table:table-row></table:table>
</office:text></office:body></office:document-content>`
	styles := `<?xml version="1.0"?><office:document-styles xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0"><office:master-styles><style:master-page style:name="Standard"><style:header><text:p>Running head</text:p></style:header><style:footer><text:p><text:page-number>1</text:page-number></text:p></style:footer></style:master-page></office:master-styles></office:document-styles>`
	doc := extractOK(t, MIMEODT, makeZip(t,
		entry{name: "mimetype", data: []byte(MIMEODT)},
		entry{name: "content.xml", data: []byte(content)},
		entry{name: "styles.xml", data: []byte(styles)}))
	want := "# Handbook\n\n# Start\n\nTwo   spaces\ttab and a note[1].\n\n1. first\n  - inner\n2. second\n\n## Sub\n\nAnchor\n\nFramed\n\n| k | v |\n|---|---|\n\n[1] Note text.\n\nRunning head"
	if doc.Text != want {
		t.Errorf("text:\n%q\nwant:\n%q", doc.Text, want)
	}
	if got := doc.Spans[2].Location.String(); got != "Handbook > Start > Sub" {
		t.Errorf("third span at %q", got)
	}
}

func TestEPUB(t *testing.T) {
	chapter := func(title, body string) []byte {
		return []byte(`<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>` + title + `</title></head><body>` + body + `</body></html>`)
	}
	opf := `<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata/><manifest>
<item id="c2" href="text/two.xhtml" media-type="application/xhtml+xml"/>
<item id="c1" href="text/one.xhtml" media-type="application/xhtml+xml"/>
<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
<item id="img" href="cover.jpg" media-type="image/jpeg"/>
</manifest><spine><itemref idref="c1"/><itemref idref="img"/><itemref idref="c2"/></spine></package>`
	nav := `<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><body><nav epub:type="toc"><ol><li><a href="text/one.xhtml">Chapter One</a></li><li><a href="text/two.xhtml#start">Chapter Two</a></li></ol></nav></body></html>`
	book := func(more ...entry) []byte {
		return makeZip(t, append([]entry{
			{name: "mimetype", data: []byte(MIMEEPUB)},
			{name: "META-INF/container.xml", data: []byte(`<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>`)},
			{name: "OEBPS/content.opf", data: []byte(opf)},
			{name: "OEBPS/nav.xhtml", data: []byte(nav)},
			{name: "OEBPS/text/one.xhtml", data: chapter("one", "<p>The first words.</p><h2>Part</h2><p>More.</p>")},
			{name: "OEBPS/text/two.xhtml", data: chapter("two", "<h1>Chapter Two</h1><p>Second chapter.</p>")},
		}, more...)...)
	}
	doc := extractOK(t, MIMEEPUB, book())
	if want := "# Chapter One\n\nThe first words.\n\nPart\n\nMore.\n\nChapter Two\n\nSecond chapter."; doc.Text != want {
		t.Errorf("text %q, want %q", doc.Text, want)
	}
	var locs []string
	for _, s := range doc.Spans {
		locs = append(locs, s.Location.String())
	}
	if want := []string{"Chapter One", "Chapter One > Part", "Chapter Two"}; !slices.Equal(locs, want) {
		t.Errorf("spans %q, want %q", locs, want)
	}
	drm := entry{name: "META-INF/encryption.xml", data: []byte(`<encryption><EncryptedData><EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/><CipherData><CipherReference URI="OEBPS/text/one.xhtml"/></CipherData></EncryptedData></encryption>`)}
	if _, err := Extract(context.Background(), MIMEEPUB, book(drm)); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "DRM-protected") {
		t.Errorf("DRM: %v", err)
	}
	fonts := entry{name: "META-INF/encryption.xml", data: []byte(`<encryption><EncryptedData><EncryptionMethod Algorithm="http://www.idpf.org/2008/embedding"/><CipherData><CipherReference URI="OEBPS/font.otf"/></CipherData></EncryptedData></encryption>`)}
	if _, err := Extract(context.Background(), MIMEEPUB, book(fonts)); err != nil {
		t.Errorf("obfuscated fonts: %v", err)
	}
}

func TestDelimited(t *testing.T) {
	tests := []struct {
		name, mt, in, want string
	}{
		{"csv", MIMECSV, "a,b\n1,\"two, quoted\nlines\"\n", "| a | b |\n|---|---|\n| 1 | two, quoted lines |"},
		{"semicolons", MIMECSV, "name;amount\nx;1,5\n", "| name | amount |\n|---|---|\n| x | 1,5 |"},
		{"tsv", MIMETSV, "k\tv\nq\t\n\nr\ts\n", "| k | v |\n|---|---|\n| q |  |\n| r | s |"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := extractOK(t, tt.mt, []byte(tt.in))
			if doc.Text != tt.want {
				t.Errorf("text %q, want %q", doc.Text, tt.want)
			}
			if doc.Spans[0].Location.String() != "cells "+doc.Spans[0].Location.Cells || !doc.Spans[0].Break {
				t.Errorf("span %+v", doc.Spans[0])
			}
		})
	}
}

func TestRTF(t *testing.T) {
	in := `{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Times;}}{\colortbl;\red0\green0\blue0;}` +
		`{\stylesheet{\s0 Normal;}{\s2\outlinelevel1 heading 2;}}{\*\generator Writer}{\info{\title Hidden title}}` +
		`{\pard\outlinelevel0 Caf\'e9 menu\par}` +
		`{\pard Unicode: \u8364\'80 and {\uc2\u8220\'93\'94quoted\u8221\'94\'94} done.\par}` +
		`{\pard\s2 Second level\par}` +
		`{\pard Text{\v hidden} shown{\footnote\pard\plain {\chftn} A note.}\line next line{\*\unknown skipped}\par}` +
		`{\pard {\pict\pngblip 89504e47} after picture {\object{\*\objdata 0102}{\result shown result}}\par}` +
		`{\pard binary{\bin3 }{x} end\par}` +
		`\trowd\cellx1000\cellx2000{\pard\intbl a\cell b\cell}\row\trowd\cellx1000\cellx2000{\pard\intbl c\cell d\cell}\row` +
		`{\pard After the table.\par}}`
	doc := extractOK(t, MIMERTF, []byte(in))
	want := "# Café menu\n\nUnicode: € and “quoted” done.\n\n## Second level\n\nText shown[1]\nnext line\n\nafter picture shown result\n\nbinary end\n\n| a | b |\n|---|---|\n| c | d |\n\nAfter the table.\n\n[1] A note."
	if doc.Text != want {
		t.Errorf("text:\n%q\nwant:\n%q", doc.Text, want)
	}
	if got := doc.Spans[1].Location.String(); got != "Café menu > Second level" {
		t.Errorf("second span at %q", got)
	}
	deep := strings.Repeat("{", 10000) + "x" + strings.Repeat("}", 10000)
	if _, err := Extract(context.Background(), MIMERTF, []byte(`{\rtf1 `+deep+`}`)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("deep groups: %v", err)
	}
}

func TestHTMLHeadings(t *testing.T) {
	doc := extractOK(t, MIMEHTML, []byte(`<html><head><title>Page</title></head><body><p>Intro.</p><h1>Guide</h1><p>a</p><h2>Install</h2><p>b</p><h2>Use</h2><p>c</p><h1>Other</h1></body></html>`))
	var locs []string
	for _, s := range doc.Spans {
		locs = append(locs, s.Location.String())
	}
	if want := []string{"Guide", "Guide > Install", "Guide > Use", "Other"}; !slices.Equal(locs, want) {
		t.Errorf("spans %q, want %q", locs, want)
	}
	if got := doc.Text[runeOffset(doc.Text, doc.Spans[1].Start):]; !strings.HasPrefix(got, "Install\n\nb") {
		t.Errorf("the second span starts at %q", got)
	}
}

func TestMarkdownHeadings(t *testing.T) {
	md := "Intro.\n\n# Guide\n\na é\n\n## Install ##\n\n```sh\n# not a heading\n```\n\n    # indented code\n\n## Use\n\nc\n\n#hashtag\n\n# Other\n"
	doc := extractOK(t, MIMEMarkdown, []byte(md))
	if doc.Text != md {
		t.Errorf("the text changed: %q", doc.Text)
	}
	var locs []string
	for _, s := range doc.Spans {
		locs = append(locs, s.Location.String())
	}
	if want := []string{"Guide", "Guide > Install", "Guide > Use", "Other"}; !slices.Equal(locs, want) {
		t.Errorf("spans %q, want %q", locs, want)
	}
	if got := doc.Text[runeOffset(doc.Text, doc.Spans[1].Start):]; !strings.HasPrefix(got, "## Install ##\n") {
		t.Errorf("the second span starts at %q", got)
	}
	if last := doc.Spans[len(doc.Spans)-1]; last.End != doc.Pages[0].End {
		t.Errorf("the last span ends at %d, the text at %d", last.End, doc.Pages[0].End)
	}
}
