package extract

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/mcpsearch/mcpsearch/extract/ocr"
)

// The documents under testdata/formats were made by pandoc and LibreOffice
// from the sources in testdata/formats/src, and the reference texts in
// testdata/formats/ref by independent extractors (pandoc's plain writer,
// LibreOffice's PDF and CSV exports read by pdftotext), all by
// scripts/extract-fixtures.sh. These tests compare our text with theirs:
// recall and order say we miss nothing and keep the reading order;
// precision says we add nothing a reader does not see (a paragraph read
// twice, a field's code, hidden text, markup), which recall and order
// cannot tell.

const formatsDir = "testdata/formats"

// Thresholds on the reference's words.
const (
	// minRecall is the share of the reference's words our text must hold,
	// counted with multiplicity.
	minRecall = 0.99
	// minOrder is the share of the reference's words our text must hold
	// in the same order: the longest common subsequence of the two word
	// sequences over the reference's length.
	minOrder = 0.97
	// minPrecision is the share of our words the reference holds,
	// counted with multiplicity, once the labels we add by design
	// ("Slide 3:", "Sheet: Budget") are left out.
	minPrecision = 0.98
	// minOCRRecall is minRecall for a scan read through OCR.
	minOCRRecall = 0.95
	// minOCRPrecision is minPrecision for a scan: a misread word costs
	// precision as it costs recall.
	minOCRPrecision = 0.95
)

// words splits s into lower-cased words: maximal runs of letters and
// digits. Markup (Markdown's #, |, -, a table's rules) and punctuation are
// not words, so texts written differently compare by what they say.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// bagRecall returns the share of ref's words found in got, each word
// counted as often as it occurs in ref but at most as often as in got.
// bagRecall(got, ref) is the precision of got.
func bagRecall(ref, got []string) float64 {
	if len(ref) == 0 {
		return 1
	}
	have := map[string]int{}
	for _, w := range got {
		have[w]++
	}
	found := 0
	for _, w := range ref {
		if have[w] > 0 {
			have[w]--
			found++
		}
	}
	return float64(found) / float64(len(ref))
}

// orderRatio returns the length of the longest common subsequence of ref
// and got over the length of ref: 1 when got holds all of ref's words in
// ref's order, whatever else it holds between them.
func orderRatio(ref, got []string) float64 {
	if len(ref) == 0 {
		return 1
	}
	prev := make([]int, len(got)+1)
	cur := make([]int, len(got)+1)
	for i := 1; i <= len(ref); i++ {
		for j := 1; j <= len(got); j++ {
			switch {
			case ref[i-1] == got[j-1]:
				cur[j] = prev[j-1] + 1
			case prev[j] >= cur[j-1]:
				cur[j] = prev[j]
			default:
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return float64(prev[len(got)]) / float64(len(ref))
}

func TestMeasures(t *testing.T) {
	tests := []struct {
		ref, got                 string
		recall, order, precision float64
	}{
		{"a b c d", "a b c d", 1, 1, 1},
		{"a b c d", "# A | b, x c - d!", 1, 1, 0.8},
		{"a b c d", "d c b a", 1, 0.25, 1},
		{"a a b", "a b", 2.0 / 3, 2.0 / 3, 1},
		{"a b", "a b a b", 1, 1, 0.5},
		{"a b", "", 0, 0, 1},
		{"", "anything", 1, 1, 0},
	}
	for _, tt := range tests {
		ref, got := words(tt.ref), words(tt.got)
		if r := bagRecall(ref, got); r != tt.recall {
			t.Errorf("bagRecall(%q, %q) = %v, want %v", tt.ref, tt.got, r, tt.recall)
		}
		if o := orderRatio(ref, got); o != tt.order {
			t.Errorf("orderRatio(%q, %q) = %v, want %v", tt.ref, tt.got, o, tt.order)
		}
		if p := bagRecall(got, ref); p != tt.precision {
			t.Errorf("precision of %q against %q = %v, want %v", tt.got, tt.ref, p, tt.precision)
		}
	}
}

// readFixture returns the bytes of a fixture file.
func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(formatsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// extractFixture detects and extracts a fixture as an upload would be.
func extractFixture(t *testing.T, l Limits, name string) (string, *Document) {
	t.Helper()
	data := readFixture(t, name)
	mt, err := l.Detect(name, "", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("Detect(%s): %v", name, err)
	}
	doc, err := l.Extract(context.Background(), mt, data)
	if err != nil {
		t.Fatalf("Extract(%s as %s): %v", name, mt, err)
	}
	checkDocument(t, doc)
	checkSpans(t, doc)
	return mt, doc
}

// comparison is our text and a reference text to compare it with.
type comparison struct {
	what string
	// ref is the reference text; got is ours.
	ref, got string
	// whole, when set, is the reference precision is measured against,
	// where ref's extractor leaves out part of what the file says (a
	// deck's PDF export has no speaker notes and cuts text that overflows
	// a slide).
	whole string
	// ours, when set, is our text precision is measured on: got without
	// the labels we add by design or the parts no reference holds.
	ours string
	// recall, order and precision are the thresholds.
	recall, order, precision float64
}

// scores returns the recall, order and precision of c.
func (c comparison) scores() (recall, order, precision float64) {
	rw, gw := words(c.ref), words(c.got)
	whole, ours := rw, gw
	if c.whole != "" {
		whole = words(c.whole)
	}
	if c.ours != "" {
		ours = words(c.ours)
	}
	return bagRecall(rw, gw), orderRatio(rw, gw), bagRecall(ours, whole)
}

// check checks our text against the reference.
func (c comparison) check(t *testing.T) {
	t.Helper()
	rw, gw := words(c.ref), words(c.got)
	r, o, p := c.scores()
	t.Logf("%s: %d reference words, %d ours; recall %.4f, in order %.4f, precision %.4f", c.what, len(rw), len(gw), r, o, p)
	if len(rw) < 20 {
		t.Errorf("%s: the reference holds only %d words", c.what, len(rw))
	}
	if r < c.recall {
		t.Errorf("%s: recall %.4f below %.2f; reference words missing: %v", c.what, r, c.recall, missing(rw, gw, 30))
	}
	if o < c.order {
		t.Errorf("%s: words in order %.4f below %.2f", c.what, o, c.order)
	}
	if p < c.precision {
		whole, ours := c.whole, c.ours
		if whole == "" {
			whole = c.ref
		}
		if ours == "" {
			ours = c.got
		}
		t.Errorf("%s: precision %.4f below %.2f; words the reference lacks: %v", c.what, p, c.precision, missing(words(ours), words(whole), 30))
	}
}

// compareWords checks our text against a reference text with the
// thresholds of a document read from its text.
func compareWords(t *testing.T, what, ref, got string) {
	t.Helper()
	comparison{what: what, ref: ref, got: got, recall: minRecall, order: minOrder, precision: minPrecision}.check(t)
}

// missing lists up to n words of ref that got lacks.
func missing(ref, got []string, n int) []string {
	have := map[string]int{}
	for _, w := range got {
		have[w]++
	}
	var out []string
	for _, w := range ref {
		if have[w] > 0 {
			have[w]--
		} else if len(out) < n {
			out = append(out, w)
		}
	}
	return out
}

// heading is a heading of a document: its level (1 for the outermost
// under the title) and text.
type heading struct {
	level int
	text  string
}

// refHeadings reads a reference's Markdown heading lines.
func refHeadings(t *testing.T, name string) []heading {
	var out []heading
	for _, l := range strings.Split(strings.TrimSpace(string(readFixture(t, "ref/"+name))), "\n") {
		hashes := len(l) - len(strings.TrimLeft(l, "#"))
		if hashes > 0 {
			out = append(out, heading{hashes, strings.TrimSpace(l[hashes:])})
		}
	}
	return out
}

// ourHeadings returns the headings our spans give, in order: each span
// whose heading path is not its predecessor's names its last heading, at
// the depth of its path. The document's title, when it is the path's
// root, is left out, as references give it apart; so are the sections
// we add (notes, headers and footers).
func ourHeadings(doc *Document, title string) []heading {
	var out []heading
	var prev []string
	for _, s := range doc.Spans {
		path := s.Location.Headings
		if len(path) == 0 || slices.Equal(path, prev) {
			continue
		}
		prev = path
		if title != "" && path[0] == title {
			path = path[1:]
		}
		if len(path) == 0 || len(path) == 1 && (path[0] == "Notes" || path[0] == "Headers and footers") {
			continue
		}
		out = append(out, heading{len(path), path[len(path)-1]})
	}
	return out
}

// checkSpans checks that spans lie in the text, in order, without overlap.
func checkSpans(t testing.TB, doc *Document) {
	t.Helper()
	n := len([]rune(doc.Text))
	end := 0
	for i, s := range doc.Spans {
		if s.Start < end || s.End < s.Start || s.End > n {
			t.Fatalf("span %d [%d,%d) after %d in %d runes", i, s.Start, s.End, end, n)
		}
		end = s.End
	}
}

// wholeRef returns the reference text of a fixture with the title its
// extractor gives apart.
func wholeRef(t *testing.T, file string) string {
	t.Helper()
	return string(readFixture(t, "ref/"+file+".title")) + "\n" + string(readFixture(t, "ref/"+file+".txt"))
}

func TestCompareWordProcessing(t *testing.T) {
	const contractTitle = "Service Agreement for the Harbour Library Catalogue"
	tests := []struct {
		file, title string
		// whole is the fixture whose reference precision is measured
		// against, when not the file's own.
		whole string
	}{
		{"contract.docx", contractTitle, ""},    // pandoc
		{"contract-lo.docx", contractTitle, ""}, // LibreOffice
		{"contract.odt", contractTitle, ""},     // pandoc
		// pandoc; RTF has no title style. pandoc's RTF reader leaves out
		// the footnotes and the s of "Trust’s": the DOCX pandoc wrote
		// from the same source says what the file says.
		{"contract.rtf", "", "contract.docx"},
		{"book.epub", "A Short Guide to Tidal Gardens", ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, doc := extractFixture(t, Limits{}, tt.file)
			whole := tt.whole
			if whole == "" {
				whole = tt.file
			}
			comparison{what: tt.file, ref: string(readFixture(t, "ref/"+tt.file+".txt")), got: doc.Text,
				whole: wholeRef(t, whole), recall: minRecall, order: minOrder, precision: minPrecision}.check(t)
			want := refHeadings(t, tt.file+".headings")
			got := ourHeadings(doc, tt.title)
			if !slices.Equal(got, want) {
				t.Errorf("headings\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestComparePDF(t *testing.T) {
	_, doc := extractFixture(t, Limits{}, "contract.pdf")
	compareWords(t, "contract.pdf", string(readFixture(t, "ref/contract.pdf.txt")), doc.Text)
	if doc.Spans[0].Location.PageStart != 1 || doc.Spans[len(doc.Spans)-1].Location.PageEnd != len(doc.Pages) {
		t.Errorf("page spans %+v for %d pages", doc.Spans, len(doc.Pages))
	}
}

// slideLabel is the label we give a slide's heading.
var slideLabel = regexp.MustCompile(`(?m)^## Slide [0-9]+(: |$)`)

// slideContent returns a deck's text without what its PDF export cannot
// show: our slide labels, and the speaker notes, from a "Notes:" line to
// the next slide.
func slideContent(text string) string {
	var b strings.Builder
	notes := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case slideLabel.MatchString(l):
			notes = false
			l = slideLabel.ReplaceAllString(l, "")
		case l == "Notes:":
			notes = true
		}
		if !notes {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestCompareDecks(t *testing.T) {
	tests := []struct {
		file string
		// whole is the fixture whose reference precision is measured
		// against, when not the file's own.
		whole string
	}{
		{"deck.pptx", ""},
		{"deck.odp", ""},
		// Text that overflows a slide is cut from its PDF export: the DOCX
		// pandoc wrote from the same source says what the deck says.
		{"contract.pptx", "contract.docx"},
	}
	for _, tt := range tests {
		file := tt.file
		t.Run(file, func(t *testing.T) {
			_, doc := extractFixture(t, Limits{}, file)
			ref := string(readFixture(t, "ref/"+file+".txt"))
			whole := ref
			if tt.whole != "" {
				whole = wholeRef(t, tt.whole)
			}
			comparison{what: file, ref: ref, got: doc.Text, whole: whole, ours: slideContent(doc.Text),
				recall: minRecall, order: minOrder, precision: minPrecision}.check(t)
			want, err := strconv.Atoi(strings.TrimSpace(string(readFixture(t, "ref/"+file+".slides"))))
			if err != nil {
				t.Fatal(err)
			}
			slides := 0
			for i, s := range doc.Spans {
				if s.Location.SlideStart != s.Location.SlideEnd || s.Location.SlideStart != i+1 {
					t.Errorf("span %d is %+v, want slide %d", i, s.Location, i+1)
				}
				slides = max(slides, s.Location.SlideEnd)
			}
			if slides != want {
				t.Errorf("%d slides, the reference has %d", slides, want)
			}
		})
	}
}

func TestCompareWorkbooks(t *testing.T) {
	for _, file := range []string{"budget.xlsx", "budget.ods"} {
		t.Run(file, func(t *testing.T) {
			_, doc := extractFixture(t, Limits{}, file)
			refDir := filepath.Join("ref", file+".sheets")
			order := strings.Fields(string(readFixture(t, filepath.Join(refDir, "order"))))
			var sheets []string
			// text is a sheet's text; content is without its label and
			// the header row each of its spans but the first repeats.
			text, content := map[string]*strings.Builder{}, map[string]*strings.Builder{}
			header := ""
			runes := []rune(doc.Text)
			for _, s := range doc.Spans {
				name := s.Location.Sheet
				first := len(sheets) == 0 || sheets[len(sheets)-1] != name
				if first {
					sheets = append(sheets, name)
					text[name], content[name] = &strings.Builder{}, &strings.Builder{}
				}
				if s.Break != first {
					t.Errorf("sheet %s: span %+v has Break %v", name, s.Location, s.Break)
				}
				span := string(runes[s.Start:s.End])
				text[name].WriteString(span)
				if first {
					span = strings.TrimPrefix(span, "## Sheet: "+name+"\n\n")
					header, _, _ = strings.Cut(span, "\n|---")
				} else {
					span = strings.TrimPrefix(span, header)
				}
				content[name].WriteString(span + "\n")
			}
			if !slices.Equal(sheets, order) {
				t.Errorf("sheets %q, the workbook lists %q", sheets, order)
			}
			for _, name := range order {
				rows, err := csv.NewReader(bytes.NewReader(readFixture(t, filepath.Join(refDir, name+".csv")))).ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				var ref strings.Builder
				for _, r := range rows {
					ref.WriteString(strings.Join(r, " ") + "\n")
				}
				got, ours := "", ""
				if b := text[name]; b != nil {
					got, ours = b.String(), content[name].String()
				}
				comparison{what: file + " sheet " + name, ref: ref.String(), got: got, ours: ours,
					recall: minRecall, order: minOrder, precision: minPrecision}.check(t)
			}
		})
	}
}

// ocrEngine returns an OCR engine, skipping the test when tesseract or the
// renderer is missing unless MCPSEARCH_REQUIRE_OCR=1 (CI sets it, and
// installs them).
func ocrEngine(t testing.TB, opts ocr.Options) *ocr.Engine {
	t.Helper()
	e, err := ocr.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Available(context.Background(), true); err != nil {
		if os.Getenv("MCPSEARCH_REQUIRE_OCR") == "1" {
			t.Fatalf("OCR is required: %v", err)
		}
		t.Skipf("OCR is not available: %v", err)
	}
	return e
}

func TestCompareScannedPDF(t *testing.T) {
	e := ocrEngine(t, ocr.Options{})
	_, doc := extractFixture(t, Limits{OCR: e}, "scanned.pdf")
	comparison{what: "scanned.pdf through OCR", ref: string(readFixture(t, "ref/scanned.pdf.txt")), got: doc.Text,
		recall: minOCRRecall, precision: minOCRPrecision}.check(t)
	if !slices.Equal(doc.OCR.Read, []int{1, 2}) || len(doc.OCR.Needed) != 0 {
		t.Errorf("OCR report %+v, want pages 1 and 2 read", doc.OCR)
	}
	for _, s := range doc.Spans {
		if !s.Location.OCR || s.Location.PageStart == 0 {
			t.Errorf("span %+v is not a page marked OCR", s)
		}
	}
}

// TestPrecisionTraps reads a memo holding the traps a reader can fall into
// (a paragraph Word writes twice, a field's code, hidden text; and markup)
// and checks that precision, and precision only, tells a reading that fell
// into one from ours.
func TestPrecisionTraps(t *testing.T) {
	const (
		boxed  = "Volunteers who cover the Saturday morning desk will be offered a free lunch at the harbour cafe."
		hidden = "Draft: ask the treasurer whether the heating budget allows later Saturday closing before this goes out."
		last   = "Thank you all for your patience during the repairs to the roof this autumn."
	)
	paras := []string{
		"Winter opening hours",
		"This memo is for all branch staff of the Harbour Library.",
		"From the first of November the main library opens at ten in the morning and closes at six in the evening on weekdays. " +
			"On Saturdays it opens from nine until one. The reading room keeps its usual hours, because the heating there runs on " +
			"a separate circuit and costs little to keep on.",
		"The Pelham branch closes on Wednesdays for the whole winter. Readers who use it may return books at the main library " +
			"or through the drop box by the ferry office, which is emptied every morning.",
	}
	var body strings.Builder
	for _, s := range paras {
		body.WriteString(p(r(s)))
	}
	// A field: Word shows its result and keeps its code apart.
	body.WriteString(p(r("The full loan policy, with the fines for late returns, is on ") +
		`<w:r><w:fldChar w:fldCharType="begin"/></w:r>` +
		`<w:r><w:instrText xml:space="preserve"> HYPERLINK "https://harbour-library.example.org/policies/loans" \o "Loan policy and fines" </w:instrText></w:r>` +
		`<w:r><w:fldChar w:fldCharType="separate"/></w:r>` + r("the library website") +
		`<w:r><w:fldChar w:fldCharType="end"/></w:r>` + r(".")))
	// A text box: Word writes it twice, for readers of each version.
	box := func(pict string) string {
		return `<w:` + pict + `><w:txbxContent>` + p(r(boxed)) + `</w:txbxContent></w:` + pict + `>`
	}
	body.WriteString(p(r("Please tell the front desk by Friday if these hours do not suit you.") +
		`<w:r><mc:AlternateContent><mc:Choice Requires="wps">` + box("drawing") + `</mc:Choice>` +
		`<mc:Fallback>` + box("pict") + `</mc:Fallback></mc:AlternateContent></w:r>`))
	// Hidden text: a note for the author.
	body.WriteString(p(`<w:r><w:rPr><w:vanish/></w:rPr><w:t>` + hidden + `</w:t></w:r>`))
	body.WriteString(p(r(last)))
	memo := body.String()
	ref := strings.Join(paras, "\n\n") + "\n\nThe full loan policy, with the fines for late returns, is on the library website.\n\n" +
		"Please tell the front desk by Friday if these hours do not suit you.\n\n" + boxed + "\n\n" + last

	read := func(t *testing.T, body string) string {
		t.Helper()
		return extractOK(t, MIMEDOCX, wordDoc(t, body, nil)).Text
	}
	ours := read(t, memo)
	comparison{what: "memo", ref: ref, got: ours, recall: minRecall, order: minOrder, precision: minPrecision}.check(t)

	traps := []struct {
		name string
		// reading is what a reader that fell into the trap reads.
		reading func(t *testing.T) string
	}{
		{"paragraph given twice", func(t *testing.T) string {
			// Reading both versions of the text box.
			return read(t, strings.ReplaceAll(memo, "mc:Fallback>", "mc:Choice>"))
		}},
		{"field code", func(t *testing.T) string {
			// Reading the field's code as text, as if no field were there.
			return read(t, strings.NewReplacer("w:instrText", "w:t", `<w:fldChar w:fldCharType="begin"/>`, "",
				`<w:fldChar w:fldCharType="separate"/>`, "", `<w:fldChar w:fldCharType="end"/>`, "").Replace(memo))
		}},
		{"hidden text", func(t *testing.T) string {
			return read(t, strings.ReplaceAll(memo, "<w:vanish/>", ""))
		}},
		{"markup", func(t *testing.T) string {
			// Keeping a paragraph's source.
			return strings.Replace(ours, last, p(r(last)), 1)
		}},
	}
	for _, tt := range traps {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.reading(t)
			if got == ours {
				t.Fatalf("the reading that fell into the trap is ours:\n%s", got)
			}
			c := comparison{what: tt.name, ref: ref, got: got}
			recall, order, precision := c.scores()
			t.Logf("%s: recall %.4f, in order %.4f, precision %.4f", tt.name, recall, order, precision)
			if recall < minRecall || order < minOrder {
				t.Errorf("recall %.4f, order %.4f: the trap is one recall and order see", recall, order)
			}
			if precision >= minPrecision {
				t.Errorf("precision %.4f, not below %.2f: the comparison would not see the trap", precision, minPrecision)
			}
		})
	}
}
