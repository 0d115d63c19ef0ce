package pdf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/extract/internal/safetext"
	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// corpusSource is a valid PDF using what the corruptions below should reach:
// plain and deflated content streams, a simple font with a Differences
// encoding, a composite font with a ToUnicode CMap, a form XObject, names
// and literal and hex strings.
func corpusSource(t testing.TB) []byte {
	t.Helper()
	w := pdftest.New()
	cmap := w.Stream("", toUnicodeCMap("<0000> <FFFF>", "2 beginbfchar\n<0011> <0048>\n<0012> <0069>\nendbfchar\n"), false)
	desc := w.Add("<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Corpus+Sans /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /DW 500 >>")
	t0 := w.Add(fmt.Sprintf("<< /Type /Font /Subtype /Type0 /BaseFont /Corpus+Sans /Encoding /Identity-H /DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>", desc, cmap))
	diff := w.Add("<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /Encoding << /Type /Encoding /Differences [65 /A.alt /fi /eacute] >> >>")
	form := w.Stream("/Type /XObject /Subtype /Form /BBox [0 0 612 792]", pdftest.TextContent("F1", 10, "Text inside a form."), true)
	w.Fonts = fmt.Sprintf("<< /F1 %d 0 R /T0 %d 0 R /F2 %d 0 R >>", pdftest.Helvetica, t0, diff)
	w.XObjects = fmt.Sprintf("<< /Fm1 %d 0 R >>", form)
	w.TextPage("A first page of plain words (with parentheses).", "Second line.")
	w.Compress = true
	w.Page("BT /T0 12 Tf 72 700 Td <00110012> Tj ET BT /F2 12 Tf 72 680 Td (ABC) Tj ET q /Fm1 Do Q")
	w.TextPage("Third page, deflated.")
	return w.Bytes()
}

// corruptions returns damaged copies of src: truncations, flipped bytes,
// and NUL, control and invalid UTF-8 bytes written over or inserted into
// its names and strings (inserting also breaks the cross-reference
// offsets).
func corruptions(src []byte, n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	junk := [][]byte{{0}, {0, 0xff}, {0xfe, 0xff, 0}, {0xc3, 0x28}, {0x1b, '[', '2', 'J'}, {'\n', 0x80}, []byte("\u202e"), {0xed, 0xa0, 0x80}}
	var targets []int // offsets of names and strings
	for i, c := range src {
		if c == '/' || c == '(' || c == '<' {
			targets = append(targets, i+1)
		}
	}
	var out [][]byte
	for step := len(src) / 64; len(out) < n/4; {
		cut := (len(out) + 1) * max(step, 1) % len(src)
		out = append(out, append([]byte(nil), src[:cut]...))
	}
	for len(out) < n {
		b := append([]byte(nil), src...)
		switch rng.IntN(3) {
		case 0:
			for k := 0; k < 1+rng.IntN(8); k++ {
				b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			}
		case 1:
			at, j := targets[rng.IntN(len(targets))], junk[rng.IntN(len(junk))]
			copy(b[at:], j)
		case 2:
			at, j := targets[rng.IntN(len(targets))], junk[rng.IntN(len(junk))]
			b = append(b[:at], append(append([]byte(nil), j...), src[at:]...)...)
		}
		out = append(out, b)
	}
	return out
}

// TestCorruptedPDFsGiveCleanResults extracts thousands of damaged PDFs:
// no panic may escape, every error message must be clean, and so must
// every text.
func TestCorruptedPDFsGiveCleanResults(t *testing.T) {
	src := corpusSource(t)
	mustExtractPDF(t, src)
	n := 3000
	if testing.Short() {
		n = 300
	}
	var failed, dirtyBeforeCleaning int
	for i, data := range corruptions(src, n) {
		doc, err := Extract(context.Background(), data, Options{})
		if err != nil {
			failed++
			checkMessage(t, i, err.Error())
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNoText) && !errors.Is(err, ErrEncrypted) && !errors.Is(err, ErrTooLarge) {
				t.Errorf("case %d: error of no known kind: %v", i, err)
			}
			if inner := errors.Unwrap(err); inner != nil && !isCleanMessage(inner.Error()) {
				dirtyBeforeCleaning++
			}
			continue
		}
		if !safetext.IsClean(doc.Text) {
			t.Errorf("case %d: text is not clean: %q", i, doc.Text)
		}
		checkDocument(t, doc)
	}
	t.Logf("%d of %d damaged files failed; %d of their raw messages needed cleaning", failed, n, dirtyBeforeCleaning)
	if failed == 0 || dirtyBeforeCleaning == 0 {
		t.Errorf("the corpus does not exercise error messages quoting file bytes (%d failures, %d dirty)", failed, dirtyBeforeCleaning)
	}
}

func checkMessage(t *testing.T, i int, msg string) {
	t.Helper()
	if !isCleanMessage(msg) {
		t.Errorf("case %d: error message is not clean: %q", i, msg)
	}
}

// isCleanMessage is the promise of Extract's error messages.
func isCleanMessage(msg string) bool {
	if !utf8.ValidString(msg) || len(msg) > safetext.MaxMessageBytes || strings.IndexByte(msg, 0) >= 0 {
		return false
	}
	return !strings.ContainsFunc(msg, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) })
}

// FuzzCorruptedPDF mutates the corpus source further with the fuzzer.
func FuzzCorruptedPDF(f *testing.F) {
	for _, c := range corruptions(corpusSource(f), 40) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Extract(context.Background(), data, Options{})
		if err != nil {
			checkMessage(t, 0, err.Error())
			return
		}
		if !safetext.IsClean(doc.Text) || bytes.IndexByte([]byte(doc.Text), 0) >= 0 {
			t.Fatalf("text is not clean: %q", doc.Text)
		}
		checkDocument(t, doc)
	})
}
