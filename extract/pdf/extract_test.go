package pdf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// checkDocument verifies the invariants every Document must hold: valid
// UTF-8 without NUL, and pages that tile the text in order.
func checkDocument(t testing.TB, doc *Document) {
	t.Helper()
	if !utf8.ValidString(doc.Text) {
		t.Fatalf("text is not valid UTF-8: %q", doc.Text)
	}
	if strings.IndexByte(doc.Text, 0) >= 0 {
		t.Fatalf("text holds a NUL byte")
	}
	if len(doc.Pages) == 0 {
		t.Fatalf("document has no pages")
	}
	n := utf8.RuneCountInString(doc.Text)
	pos := 0
	for i, p := range doc.Pages {
		if p.Start != pos || p.End < p.Start {
			t.Fatalf("page %d span [%d,%d) does not continue at %d", i, p.Start, p.End, pos)
		}
		pos = p.End
	}
	if pos != n {
		t.Fatalf("pages end at %d, text has %d runes", pos, n)
	}
}

// pageText returns the text of the page numbered num.
func pageText(t testing.TB, doc *Document, num int) string {
	t.Helper()
	runes := []rune(doc.Text)
	for _, p := range doc.Pages {
		if p.Number == num {
			return string(runes[p.Start:p.End])
		}
	}
	t.Fatalf("no page %d in %+v", num, doc.Pages)
	return ""
}

func mustExtractPDF(t testing.TB, data []byte) *Document {
	t.Helper()
	doc, err := Extract(context.Background(), data, Options{})
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	checkDocument(t, doc)
	return doc
}

// multiPagePDF is a three-page document whose pages hold distinct words.
func multiPagePDF(t testing.TB, compress bool) []byte {
	t.Helper()
	w := pdftest.New()
	w.Compress = compress
	w.TextPage("Alpha page one begins here.", "Second line of apples.")
	w.TextPage("Bravo page two talks about bananas.")
	w.TextPage("Charlie page three mentions cherries.", "The end.")
	return w.Bytes()
}

func TestPDFMultiPage(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("compress=%v", compress), func(t *testing.T) {
			doc := mustExtractPDF(t, multiPagePDF(t, compress))
			if len(doc.Pages) != 3 {
				t.Fatalf("got %d pages, want 3", len(doc.Pages))
			}
			want := map[int][]string{
				1: {"Alpha page one begins here.", "Second line of apples."},
				2: {"Bravo page two talks about bananas."},
				3: {"Charlie page three mentions cherries.", "The end."},
			}
			others := map[int][]string{1: {"Bravo", "Charlie"}, 2: {"Alpha", "Charlie"}, 3: {"Alpha", "Bravo"}}
			for num, lines := range want {
				text := pageText(t, doc, num)
				for _, l := range lines {
					if !strings.Contains(text, l) {
						t.Errorf("page %d = %q, want it to contain %q", num, text, l)
					}
				}
				for _, o := range others[num] {
					if strings.Contains(text, o) {
						t.Errorf("page %d = %q holds %q from another page", num, text, o)
					}
				}
			}
			if !strings.Contains(pageText(t, doc, 1), "here.\nSecond") {
				t.Errorf("lines of page 1 are not separated by a newline: %q", pageText(t, doc, 1))
			}
		})
	}
}

// TestPDFWordGaps checks that spaces come from glyph positions: words placed
// apart get a space, kerning inside a word does not.
func TestPDFWordGaps(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{
			name:    "kerning inside words, wide gap between them",
			content: "BT /F1 12 Tf 72 700 Td [(W) 80 (orld) -300 (wide) 30 (ly)] TJ ET",
			want:    "World widely",
		},
		{
			name: "words placed one by one without space characters",
			// "Hello" is 2.668 em wide in Helvetica: 32.0 points at 12 pt.
			content: "BT /F1 12 Tf 72 700 Td (Hello) Tj 35 0 Td (there) Tj ET",
			want:    "Hello there",
		},
		{
			name:    "glyphs drawn one by one with their own positions",
			content: "BT /F1 12 Tf 72 700 Td (a) Tj 6.672 0 Td (b) Tj 6.672 0 Td (c) Tj ET",
			want:    "abc",
		},
		{
			name:    "word spacing widens real spaces",
			content: "BT /F1 12 Tf 2 Tw 72 700 Td (spaced out words) Tj ET",
			want:    "spaced out words",
		},
		{
			name:    "text rotated by 90 degrees",
			content: "BT /F1 12 Tf 0 1 -1 0 300 100 Tm [(Rot) 40 (ated) -400 (text)] TJ ET",
			want:    "Rotated text",
		},
		{
			name:    "superscript stays on its line",
			content: "BT /F1 12 Tf 72 700 Td (E = mc) Tj /F1 8 Tf 5 Ts (2) Tj 0 Ts /F1 12 Tf ( holds) Tj ET",
			want:    "E = mc2 holds",
		},
		{
			name:    "a blank line after a wide vertical gap",
			content: "BT /F1 12 Tf 72 700 Td 14 TL (one) Tj T* (two) Tj 0 -40 Td (three) Tj ET",
			want:    "one\ntwo\n\nthree",
		},
		{
			name:    "a hyphenated word joins across lines",
			content: "BT /F1 12 Tf 72 700 Td 14 TL (a hyphen-) Tj T* (ated word) Tj ET",
			want:    "a hyphenated word",
		},
		{
			name:    "ligature glyphs are spelled out",
			content: "BT /F1 12 Tf 72 700 Td (e\\002cient \\001le) Tj ET",
			want:    "efficient file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := pdftest.New()
			// F1 maps codes 1 and 2 to the fi ligatures, as TeX fonts do.
			w.Set(pdftest.Helvetica, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Type /Encoding /BaseEncoding /WinAnsiEncoding /Differences [1 /fi /ffi] >> >>")
			w.Page(tt.content)
			doc := mustExtractPDF(t, w.Bytes())
			if doc.Text != tt.want {
				t.Errorf("text = %q, want %q", doc.Text, tt.want)
			}
		})
	}
}

// toUnicodeCMap is a ToUnicode CMap in the form producers write it.
func toUnicodeCMap(space string, body string) string {
	return `/CIDInit /ProcSet findresource begin
12 dict begin
begincmap
/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def
/CMapName /Adobe-Identity-UCS def
/CMapType 2 def
1 begincodespacerange
` + space + `
endcodespacerange
` + body + `
endcmap
CMapName currentdict /CMap defineresource pop
end
end`
}

// TestPDFCompositeFont reads two-byte Identity-H codes through a ToUnicode
// CMap with bfchar and bfrange entries, and CID widths from a W array.
func TestPDFCompositeFont(t *testing.T) {
	w := pdftest.New()
	cmap := w.Stream("", toUnicodeCMap("<0000> <FFFF>", `2 beginbfchar
<0001> <03A9>
<0002> <0020>
endbfchar
1 beginbfrange
<0010> <0029> <0061>
endbfrange`), true)
	desc := w.Add("<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Test /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /DW 500 /W [1 [700 250]] >>")
	t0 := w.Add(fmt.Sprintf("<< /Type /Font /Subtype /Type0 /BaseFont /Test /Encoding /Identity-H /DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>", desc, cmap))
	w.Fonts = fmt.Sprintf("<< /F1 1 0 R /T0 %d 0 R >>", t0)
	hex := func(s string) string {
		var b strings.Builder
		b.WriteByte('<')
		for _, r := range s {
			switch {
			case r == ' ':
				b.WriteString("0002")
			case r == 'Ω':
				b.WriteString("0001")
			default:
				fmt.Fprintf(&b, "%04X", 0x10+int(r-'a'))
			}
		}
		b.WriteByte('>')
		return b.String()
	}
	w.Page(fmt.Sprintf("BT /T0 11 Tf 72 700 Td %s Tj 0 -14 Td [%s -600 %s] TJ ET", hex("greek letter Ω"), hex("omega"), hex("ends")))
	doc := mustExtractPDF(t, w.Bytes())
	if want := "greek letter Ω\nomega ends"; doc.Text != want {
		t.Errorf("text = %q, want %q", doc.Text, want)
	}
}

// TestPDFNoSpuriousOmega guards against a fault of reading pages through the
// PDF package's Content method: it decodes a made-up newline glyph (code 10)
// after every TJ array through the font, and fonts in TeX's OT1 layout map
// code 10 to Ω, so "Ω" appeared at the end of text runs. Here code 10 maps to
// Ω as in those fonts; Ω must appear only where the page really shows code 10.
func TestPDFNoSpuriousOmega(t *testing.T) {
	w := pdftest.New()
	cmap := w.Stream("", toUnicodeCMap("<00> <FF>", `1 beginbfchar
<0A> <03A9>
endbfchar
1 beginbfrange
<20> <7E> <0020>
endbfrange`), false)
	widths := strings.TrimSpace(strings.Repeat("500 ", 256))
	f2 := w.Add(fmt.Sprintf("<< /Type /Font /Subtype /Type1 /BaseFont /ABCDEF+CMR10 /FirstChar 0 /LastChar 255 /Widths [%s] /ToUnicode %d 0 R >>", widths, cmap))
	w.Fonts = fmt.Sprintf("<< /F1 1 0 R /F2 %d 0 R >>", f2)
	w.Page("BT /F2 10 Tf 72 700 Td [(Ker) -50 (ned) -400 (run)] TJ 0 -12 Td [(second run)] TJ 0 -12 Td (the letter \\012 is shown) Tj ET")
	doc := mustExtractPDF(t, w.Bytes())
	if want := "Kerned run\nsecond run\nthe letter Ω is shown"; doc.Text != want {
		t.Errorf("text = %q, want %q", doc.Text, want)
	}
}

func TestPDFFormAndInlineImage(t *testing.T) {
	w := pdftest.New()
	form := w.Stream("/Type /XObject /Subtype /Form /BBox [0 0 612 792]", "BT /F1 12 Tf 72 600 Td (Text inside a form) Tj ET", false)
	w.XObjects = fmt.Sprintf("<< /X1 %d 0 R >>", form)
	// The image data holds bytes that read as PDF syntax: a string opener, a
	// dictionary opener and an "EI" that is not delimited.
	image := "BI /W 4 /H 4 /CS /G /BPC 8 ID \x00((<<\xffEIx\x80\x81)\x00\x01\x02\x03\x04\x05\x06 EI\n"
	w.Page("BT /F1 12 Tf 72 700 Td (Before the image) Tj ET\n" + image +
		"BT /F1 12 Tf 72 680 Td (After the image) Tj ET\nq 1 0 0 1 0 0 cm /X1 Do Q\n")
	doc := mustExtractPDF(t, w.Bytes())
	if want := "Before the image\nAfter the image\n\nText inside a form"; doc.Text != want {
		t.Errorf("text = %q, want %q", doc.Text, want)
	}
}

// TestPDFBrokenPage points one page's content at the wrong object, which
// makes the PDF package panic while reading it: that page comes out empty and
// the others are kept with their numbers.
func TestPDFBrokenPage(t *testing.T) {
	data := multiPagePDF(t, false)
	// Objects: 1 font, then content and page per page; page 2's content is 4.
	data = repointXref(t, data, 4, 1)
	doc := mustExtractPDF(t, data)
	if len(doc.Pages) != 3 {
		t.Fatalf("got %d pages, want 3", len(doc.Pages))
	}
	if got := pageText(t, doc, 2); got != "" {
		t.Errorf("broken page 2 = %q, want empty", got)
	}
	if got := pageText(t, doc, 3); !strings.Contains(got, "Charlie") {
		t.Errorf("page 3 = %q, want its text", got)
	}
}

// repointXref makes the cross-reference entry of object num give the offset
// of object other; entries have a fixed width, so nothing else moves.
func repointXref(t *testing.T, data []byte, num, other int) []byte {
	t.Helper()
	off := bytes.Index(data, []byte(fmt.Sprintf("\n%d 0 obj", other))) + 1
	xref := bytes.Index(data, []byte("xref\n0 "))
	lines := bytes.SplitAfter(data[xref:], []byte("\n"))
	entry := lines[2+num]
	fixed := []byte(fmt.Sprintf("%010d 00000 n \n", off))
	if len(entry) != len(fixed) {
		t.Fatalf("unexpected xref entry %q", entry)
	}
	out := append([]byte(nil), data...)
	at := xref
	for _, l := range lines[:2+num] {
		at += len(l)
	}
	copy(out[at:], fixed)
	return out
}

func TestPDFErrors(t *testing.T) {
	valid := multiPagePDF(t, true)
	graphics := pdftest.New()
	graphics.Page("0 0 m 100 100 l S 10 10 50 50 re f")
	graphics.Page("q 100 0 0 100 0 0 cm BI /W 2 /H 2 /CS /G /BPC 8 ID \x01\x02\x03\x04 EI Q")
	unmapped := pdftest.New()
	desc := unmapped.Add("<< /Type /Font /Subtype /CIDFontType2 /BaseFont /NoMap /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> >>")
	t0 := unmapped.Add(fmt.Sprintf("<< /Type /Font /Subtype /Type0 /BaseFont /NoMap /Encoding /Identity-H /DescendantFonts [%d 0 R] >>", desc))
	unmapped.Fonts = fmt.Sprintf("<< /T0 %d 0 R >>", t0)
	unmapped.Page("BT /T0 12 Tf 72 700 Td <00110012> Tj ET")
	tests := []struct {
		name    string
		data    []byte
		want    error
		message string
	}{
		{"glyphs without a character mapping", unmapped.Bytes(), ErrNoText, "map none"},
		{"empty file", nil, ErrNoText, "empty file"},
		{"not a PDF", []byte("hello, this is not a PDF"), ErrCorrupt, "no %PDF- header"},
		{"corrupt bytes", append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte{0x8f, 0x00, '(', 'x'}, 500)...), ErrCorrupt, ""},
		{"truncated", valid[:len(valid)/2], ErrCorrupt, ""},
		{"graphics only", graphics.Bytes(), ErrNoText, "no extractable text (scanned PDF?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Extract(context.Background(), tt.data, Options{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Extract = %v, %v; want error %v", doc, err, tt.want)
			}
			if tt.message != "" && !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q does not say %q", err, tt.message)
			}
		})
	}
}

// TestPDFHostileStructure feeds files whose cross-reference numbers would
// make the PDF package loop forever or allocate without bound; they must be
// refused, and quickly.
func TestPDFHostileStructure(t *testing.T) {
	build := func(edit func(w *pdftest.Builder)) []byte {
		w := pdftest.New()
		w.TextPage("Some text.")
		edit(w)
		return w.Bytes()
	}
	tests := map[string][]byte{
		"Prev chain loops":      build(func(w *pdftest.Builder) { w.Trailer = "/Prev XREF" }),
		"Prev outside the file": build(func(w *pdftest.Builder) { w.Trailer = "/Prev 999999999999" }),
		"object stream extends itself": build(func(w *pdftest.Builder) {
			n := w.Next()
			w.Add(fmt.Sprintf("<< /Type /ObjStm /N 1 /First 4 /Extends %d 0 R /Length 6 >>\nstream\n1 0 1 \nendstream", n))
		}),
		"object stream with a fabricated count": build(func(w *pdftest.Builder) {
			w.Add("<< /Type /ObjStm /N 99999999999 /First 4 /Length 6 >>\nstream\n1 0 1 \nendstream")
		}),
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Extract(context.Background(), data, Options{}); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Extract error = %v, want ErrCorrupt", err)
			}
		})
	}
	huge := regexp.MustCompile(`/Size \d+`).ReplaceAllString(string(multiPagePDF(t, false)), "/Size 99999999999")
	if _, err := Extract(context.Background(), []byte(huge), Options{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("huge /Size: error = %v, want ErrCorrupt", err)
	}
}

// TestPDFRepairs covers files the PDF package would refuse as they are.
func TestPDFRepairs(t *testing.T) {
	v2 := pdftest.New()
	v2.Version = "2.0"
	v2.TextPage("Version two document.")
	trailing := append(multiPagePDF(t, false), bytes.Repeat([]byte("garbage after the end\n"), 20)...)
	for name, data := range map[string][]byte{"PDF 2.0 header": v2.Bytes(), "bytes after %%EOF": trailing} {
		t.Run(name, func(t *testing.T) {
			doc := mustExtractPDF(t, data)
			if doc.Text == "" {
				t.Errorf("no text")
			}
		})
	}
}

// countingContext reports cancellation once Err has been asked a given number
// of times, to cancel at a known point of the work.
type countingContext struct {
	context.Context
	calls atomic.Int64
	after int64
}

func (c *countingContext) Err() error {
	if c.calls.Add(1) > c.after {
		return context.Canceled
	}
	return nil
}

func TestPDFCancellation(t *testing.T) {
	data := multiPagePDF(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Extract(ctx, data, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err = %v", err)
	}
	// Extract asks once before starting and once before each page; stop
	// before the second page.
	cc := &countingContext{Context: context.Background(), after: 2}
	if doc, err := Extract(cc, data, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled between pages: doc = %v, err = %v", doc, err)
	}
}

func TestPDFEmptyPagesKeepNumbers(t *testing.T) {
	w := pdftest.New()
	w.TextPage("First.")
	w.Page("")
	w.TextPage("Third.")
	doc := mustExtractPDF(t, w.Bytes())
	if len(doc.Pages) != 3 || pageText(t, doc, 2) != "" || !strings.HasPrefix(pageText(t, doc, 3), "Third.") {
		t.Errorf("pages = %+v, text %q", doc.Pages, doc.Text)
	}
}
