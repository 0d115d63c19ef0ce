package docs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/extract/ocr"
	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// formatFile reads one of the documents extract's comparison tests
// use, made by pandoc and LibreOffice.
func formatFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "extract", "testdata", "formats", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestOfficeFilesAreCitedInTheirOwnTerms stores a deck, a workbook and a
// word-processing document, named so that only their content tells what
// they are, and checks that searches, chunks and passages say where each
// hit comes from: a slide and its title, a sheet and its cells, a heading
// path.
func TestOfficeFilesAreCitedInTheirOwnTerms(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	for _, c := range []struct {
		file, as, query string
		check           func(extract.Location) bool
		want            string
	}{
		{"deck.pptx", "deck.bin", "gearbox before winter", func(l extract.Location) bool {
			return l.SlideStart > 0 && l.SlideTitle != ""
		}, "a slide and its title"},
		{"budget.xlsx", "budget", "microfilm reader", func(l extract.Location) bool {
			return l.Sheet != "" && l.Cells != ""
		}, "a sheet and its cells"},
		{"contract.docx", "contract.data", "acceptance", func(l extract.Location) bool {
			return len(l.Headings) > 0
		}, "a heading path"},
	} {
		f, err := s.Ingest(ctx, "office", c.as, "application/octet-stream", formatFile(t, c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		hits, err := s.Search(ctx, Query{Text: c.query, ConversationID: "office", Mode: Keyword, TopK: 3})
		if err != nil {
			t.Fatal(err)
		}
		var hit *Hit
		for i := range hits {
			if hits[i].FileID == f.ID {
				hit = &hits[i]
				break
			}
		}
		if hit == nil {
			t.Errorf("%s (%s): %q found nothing in it: %+v", c.file, f.MIMEType, c.query, hits)
			continue
		}
		if !c.check(hit.Location) {
			t.Errorf("%s: hit located at %+v; want %s", c.file, hit.Location, c.want)
		}
		ch, err := s.GetChunk(ctx, hit.ChunkID)
		if err != nil || ch.Location.String() != hit.Location.String() {
			t.Errorf("%s: GetChunk located at %+v, %v; search said %+v", c.file, ch.Location, err, hit.Location)
		}
		p, err := s.Passage(ctx, hit.ChunkID, 1, 1)
		if err != nil || p.Location.String() == "" {
			t.Errorf("%s: Passage located at %+v, %v", c.file, p.Location, err)
		}
		t.Logf("%s: %q in %s", c.file, c.query, hit.Location)
	}

	// A PDF's chunks are located by their pages, as before.
	f, err := s.Ingest(ctx, "office", "contract.pdf", "", formatFile(t, "contract.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(ctx, Query{Text: "acceptance", ConversationID: "office", Mode: Keyword, TopK: MaxTopK})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.FileID == f.ID && (h.Location.PageStart != h.PageStart || h.Location.PageEnd != h.PageEnd || h.PageStart == 0) {
			t.Errorf("PDF hit located at %+v; its pages are %d-%d", h.Location, h.PageStart, h.PageEnd)
		}
	}

	// What cannot be read is refused saying what to do.
	for name, want := range map[string]string{
		"contract.doc": ".docx",
		"budget.xls":   ".xlsx",
	} {
		_, err := s.Ingest(ctx, "office", name, "", formatFile(t, name))
		if !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want it refused, saying to save it as %s", name, err, want)
		}
	}
	checkStats(t, s.Pool(), "office")
}

// TestPagesThatNeedOCR stores, with OCR turned off, a PDF whose second page
// is an image: the file is ready with the text it has, and its note says
// which page needs OCR and why; a PDF that is all images fails, its reason
// naming the pages.
func TestPagesThatNeedOCR(t *testing.T) {
	t.Parallel()
	off, err := ocr.New(ocr.Options{Mode: ocr.ModeOff})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newStore(t, IngestOptions{OCR: off})
	ctx := context.Background()
	w := pdftest.New()
	w.TextPage("The first page has a text layer with enough words to be read as it is.")
	w.Page("q 400 0 0 400 100 200 cm BI /W 1 /H 1 /BPC 8 /CS /G ID \xff EI Q")
	f, err := s.Ingest(ctx, "scans", "half-scanned.pdf", "", w.Bytes())
	if err != nil || f.Status != StatusReady || f.Note != "page 2 needs OCR: OCR is off" {
		t.Errorf("a PDF with a scanned page = %+v, %v; want ready, noting page 2", f, err)
	}
	if listed := mustList(t, s, "scans"); len(listed) != 1 || listed[0].Note != f.Note {
		t.Errorf("ListFiles = %+v; want the note", listed)
	}
	f, err = s.Ingest(ctx, "scans", "scan.pdf", "", formatFile(t, "scanned.pdf"))
	if !errors.Is(err, ErrProcessing) || f.Status != StatusFailed || f.Error != "no extractable text: pages 1-2 need OCR: OCR is off" {
		t.Errorf("a scan = %+v, %v; want it failed, naming the pages that need OCR", f, err)
	}
	// An image needs OCR to be read at all: refused at once.
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	if _, err := s.Ingest(ctx, "scans", "photo.png", "", png); !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), "OCR is off") {
		t.Errorf("an image without OCR = %v; want it refused, saying OCR is off", err)
	}
	checkStats(t, s.Pool(), "scans")
}
