package extract

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/mcpsearch/mcpsearch/docs/extract/ocr"
)

// The documents under testdata/formats were made by pandoc and LibreOffice
// from the sources in testdata/formats/src, and the reference texts in
// testdata/formats/ref by independent extractors (pandoc's plain writer,
// LibreOffice's PDF and CSV exports read by pdftotext), all by
// scripts/extract-fixtures.sh. These tests compare our text with theirs.

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
	// minOCRRecall is minRecall for a scan read through OCR.
	minOCRRecall = 0.95
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
		ref, got      string
		recall, order float64
	}{
		{"a b c d", "a b c d", 1, 1},
		{"a b c d", "# A | b, x c - d!", 1, 1},
		{"a b c d", "d c b a", 1, 0.25},
		{"a a b", "a b", 2.0 / 3, 2.0 / 3},
		{"a b", "", 0, 0},
		{"", "anything", 1, 1},
	}
	for _, tt := range tests {
		ref, got := words(tt.ref), words(tt.got)
		if r := bagRecall(ref, got); r != tt.recall {
			t.Errorf("bagRecall(%q, %q) = %v, want %v", tt.ref, tt.got, r, tt.recall)
		}
		if o := orderRatio(ref, got); o != tt.order {
			t.Errorf("orderRatio(%q, %q) = %v, want %v", tt.ref, tt.got, o, tt.order)
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

// compareWords checks our text against a reference text.
func compareWords(t *testing.T, what, ref, got string, recall, order float64) {
	t.Helper()
	rw, gw := words(ref), words(got)
	r, o := bagRecall(rw, gw), orderRatio(rw, gw)
	t.Logf("%s: %d reference words, %d ours; recall %.4f, in order %.4f", what, len(rw), len(gw), r, o)
	if len(rw) < 20 {
		t.Errorf("%s: the reference holds only %d words", what, len(rw))
	}
	if r < recall {
		t.Errorf("%s: recall %.4f below %.2f; reference words missing: %v", what, r, recall, missing(rw, gw, 30))
	}
	if o < order {
		t.Errorf("%s: words in order %.4f below %.2f", what, o, order)
	}
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

func TestCompareWordProcessing(t *testing.T) {
	const contractTitle = "Service Agreement for the Harbour Library Catalogue"
	tests := []struct {
		file, title string
	}{
		{"contract.docx", contractTitle},    // pandoc
		{"contract-lo.docx", contractTitle}, // LibreOffice
		{"contract.odt", contractTitle},     // pandoc
		{"contract.rtf", ""},                // pandoc; RTF has no title style
		{"book.epub", "A Short Guide to Tidal Gardens"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, doc := extractFixture(t, Limits{}, tt.file)
			compareWords(t, tt.file, string(readFixture(t, "ref/"+tt.file+".txt")), doc.Text, minRecall, minOrder)
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
	compareWords(t, "contract.pdf", string(readFixture(t, "ref/contract.pdf.txt")), doc.Text, minRecall, minOrder)
	if doc.Spans[0].Location.PageStart != 1 || doc.Spans[len(doc.Spans)-1].Location.PageEnd != len(doc.Pages) {
		t.Errorf("page spans %+v for %d pages", doc.Spans, len(doc.Pages))
	}
}

func TestCompareDecks(t *testing.T) {
	for _, file := range []string{"deck.pptx", "deck.odp", "contract.pptx"} {
		t.Run(file, func(t *testing.T) {
			_, doc := extractFixture(t, Limits{}, file)
			compareWords(t, file, string(readFixture(t, "ref/"+file+".txt")), doc.Text, minRecall, minOrder)
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
			text := map[string]*strings.Builder{}
			runes := []rune(doc.Text)
			for _, s := range doc.Spans {
				name := s.Location.Sheet
				first := len(sheets) == 0 || sheets[len(sheets)-1] != name
				if first {
					sheets = append(sheets, name)
					text[name] = &strings.Builder{}
				}
				if s.Break != first {
					t.Errorf("sheet %s: span %+v has Break %v", name, s.Location, s.Break)
				}
				text[name].WriteString(string(runes[s.Start:s.End]))
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
				got := ""
				if b := text[name]; b != nil {
					got = b.String()
				}
				compareWords(t, file+" sheet "+name, ref.String(), got, minRecall, minOrder)
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
	compareWords(t, "scanned.pdf through OCR", string(readFixture(t, "ref/scanned.pdf.txt")), doc.Text, minOCRRecall, 0)
	if !slices.Equal(doc.OCR.Read, []int{1, 2}) || len(doc.OCR.Needed) != 0 {
		t.Errorf("OCR report %+v, want pages 1 and 2 read", doc.OCR)
	}
	for _, s := range doc.Spans {
		if !s.Location.OCR || s.Location.PageStart == 0 {
			t.Errorf("span %+v is not a page marked OCR", s)
		}
	}
}
