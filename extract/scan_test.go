package extract

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/extract/ocr"
	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// imagePagePDF returns a PDF whose first page holds text and whose second
// page paints only an image: a document with one scanned page.
func imagePagePDF() []byte {
	w := pdftest.New()
	w.TextPage("The first page has a text layer with enough words to be read as it is.")
	w.Page("q 400 0 0 400 100 200 cm BI /W 1 /H 1 /BPC 8 /CS /G ID \xff EI Q")
	return w.Bytes()
}

func offEngine(t *testing.T) *ocr.Engine {
	e, err := ocr.New(ocr.Options{Mode: ocr.ModeOff})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestScansWithoutOCR checks what a document needing OCR gives when OCR
// does not run: the text it has and the pages that need OCR, or, with no
// text at all, an error naming them and why.
func TestScansWithoutOCR(t *testing.T) {
	missing, err := ocr.New(ocr.Options{Tesseract: filepath.Join(t.TempDir(), "tesseract")})
	if err != nil {
		t.Fatal(err)
	}
	scan := readFixture(t, "scanned.pdf")
	tests := []struct {
		name   string
		engine *ocr.Engine
		reason string
	}{
		{"off", offEngine(t), "OCR is off"},
		{"no tesseract", missing, "the tesseract program is not installed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Limits{OCR: tt.engine}
			_, err := l.Extract(context.Background(), MIMEPDF, scan)
			var need *NeedsOCRError
			if !errors.As(err, &need) || !errors.Is(err, ErrNoText) || !slices.Equal(need.Pages, []int{1, 2}) ||
				!strings.Contains(err.Error(), "no extractable text: pages 1-2 need OCR: "+tt.reason) {
				t.Errorf("scanned PDF: %v", err)
			}
			doc, err := l.Extract(context.Background(), MIMEPDF, imagePagePDF())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(doc.OCR.Needed, []int{2}) || len(doc.OCR.Read) != 0 ||
				!strings.HasPrefix(doc.OCR.Note(), "page 2 needs OCR: "+tt.reason) || !strings.Contains(doc.Text, "first page has a text layer") {
				t.Errorf("document with a scanned page: OCR %+v (%q), text %q", doc.OCR, doc.OCR.Note(), doc.Text)
			}
			png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
			if mt, err := l.Detect("scan.png", "", bytes.NewReader(png), int64(len(png))); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Detect(PNG) = %q, %v; want unsupported without OCR", mt, err)
			}
			if _, err := l.Extract(context.Background(), MIMEPNG, png); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("Extract(PNG) = %v", err)
			}
		})
	}
	// Without an engine, a scan fails as it always has.
	if _, err := Extract(context.Background(), MIMEPDF, scan); !errors.Is(err, ErrNoText) || !strings.Contains(err.Error(), "(scanned PDF?)") {
		t.Errorf("scanned PDF without an engine: %v", err)
	}
	doc, err := Extract(context.Background(), MIMEPDF, imagePagePDF())
	if err != nil || !slices.Equal(doc.OCR.Needed, []int{2}) || doc.OCR.Reason != "OCR is off" {
		t.Errorf("document with a scanned page without an engine: %+v, %v", doc, err)
	}
}

func TestPageList(t *testing.T) {
	for _, tt := range []struct {
		pages []int
		want  string
	}{{nil, ""}, {[]int{4}, "page 4"}, {[]int{1, 2, 3, 7}, "pages 1-3, 7"}, {[]int{2, 4, 5}, "pages 2, 4-5"}} {
		if got := PageList(tt.pages); got != tt.want {
			t.Errorf("PageList(%v) = %q, want %q", tt.pages, got, tt.want)
		}
	}
}

// TestOCRPages recognises only the pages that need it, up to the page
// limit, and marks what came from OCR.
func TestOCRPages(t *testing.T) {
	e := ocrEngine(t, ocr.Options{DPI: 150})
	l := Limits{OCR: e}
	doc, err := l.Extract(context.Background(), MIMEPDF, imagePagePDF())
	if err != nil {
		t.Fatal(err)
	}
	// The image is blank: OCR reads page 2 and finds nothing to add.
	if !slices.Equal(doc.OCR.Read, []int{2}) || len(doc.OCR.Needed) != 0 || len(doc.Spans) != 1 || doc.Spans[0].Location.OCR {
		t.Errorf("OCR %+v, spans %+v", doc.OCR, doc.Spans)
	}

	capped := ocrEngine(t, ocr.Options{DPI: 150, MaxPages: 1})
	doc, err = (Limits{OCR: capped}).Extract(context.Background(), MIMEPDF, readFixture(t, "scanned.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(doc.OCR.Read, []int{1}) || !slices.Equal(doc.OCR.Needed, []int{2}) ||
		doc.OCR.Note() != "page 2 needs OCR: OCR reads at most 1 pages of a document (the OCR page limit)" {
		t.Errorf("capped OCR: %+v", doc.OCR)
	}
	if len(doc.Pages) != 2 || len(doc.Spans) != 1 || doc.Spans[0].Location.String() != "page 1 (OCR)" || !strings.Contains(doc.Text, "Harbour Library Trust") {
		t.Errorf("capped OCR: pages %+v, spans %+v", doc.Pages, doc.Spans)
	}

	// Force reads every page, the text layer replaced.
	force := ocrEngine(t, ocr.Options{DPI: 150, Mode: ocr.ModeForce})
	doc, err = (Limits{OCR: force}).Extract(context.Background(), MIMEPDF, pdftest.Pages([]string{"Forty thousand books and maps"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(doc.OCR.Read, []int{1}) || !doc.Spans[0].Location.OCR || !strings.Contains(strings.ToLower(doc.Text), "thousand books") {
		t.Errorf("forced OCR: %+v, %q", doc.OCR, doc.Text)
	}
}

// TestOCRImages reads PNG and TIFF uploads through OCR.
func TestOCRImages(t *testing.T) {
	e := ocrEngine(t, ocr.Options{})
	l := Limits{OCR: e}
	for _, format := range []string{"-png", "-tiff"} {
		t.Run(format, func(t *testing.T) {
			// A TIFF needs a seekable output: pdftoppm writes a file.
			out := filepath.Join(t.TempDir(), "page")
			if err := exec.Command("pdftoppm", "-r", "150", "-gray", format, "-singlefile", "-f", "1", "-l", "1", filepath.Join(formatsDir, "contract.pdf"), out).Run(); err != nil {
				t.Fatal(err)
			}
			matches, _ := filepath.Glob(out + ".*")
			if len(matches) != 1 {
				t.Fatalf("pdftoppm wrote %v", matches)
			}
			img, err := os.ReadFile(matches[0])
			if err != nil {
				t.Fatal(err)
			}
			mt, err := l.Detect("page"+format, "", bytes.NewReader(img), int64(len(img)))
			if err != nil || !strings.HasPrefix(mt, "image/") {
				t.Fatalf("Detect = %q, %v", mt, err)
			}
			doc, err := l.Extract(context.Background(), mt, img)
			if err != nil {
				t.Fatal(err)
			}
			checkDocument(t, doc)
			if !strings.Contains(doc.Text, "Harbour Library Trust") || len(doc.Pages) != 1 || doc.Pages[0].Number != 1 ||
				!slices.Equal(doc.OCR.Read, []int{1}) || doc.Spans[0].Location.String() != "page 1 (OCR)" {
				t.Errorf("image: pages %+v, spans %+v, OCR %+v, text %q", doc.Pages, doc.Spans, doc.OCR, doc.Text)
			}
		})
	}
}
