package docs

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// pageReport is a PDF of 8 pages under a running header and footer. Page 7
// ends with four short lines after a long passage, so that the chunk that
// holds them runs on into page 8.
func pageReport() []byte {
	var pages [][]string
	for n := 1; n <= 8; n++ {
		var lines []string
		count := 6
		if n == 7 {
			count = 8
		}
		for k := 1; k <= count; k++ {
			lines = append(lines, fmt.Sprintf("Reading %d of station %c was taken at the usual hour without trouble.", k, 'A'+n))
		}
		if n == 7 {
			lines = append(lines, "", "Kestrel note one.", "Kestrel note two.", "Kestrel note three.", "Kestrel note four.")
		}
		pages = append(pages, lines)
	}
	return pdftest.RunningPages(func(int) string { return "Hydrology Survey Annual Report" },
		func(n int) string { return fmt.Sprintf("Page %d of 8", n) }, pages...)
}

// TestChunkPageRanges ingests a PDF whose chunks run across page ends and
// whose pages carry a running header and footer: every chunk reports the
// pages of its first and last characters (as the extracted pages place
// them), the chunk holding the end of page 7 reports pages 7 to 8, no chunk
// holds the header or the footer, and every chunk's offsets select its
// content in the stored text. Search hits and passages carry the same
// ranges, and a chunk stored before the ranges existed reads as lying on
// its page_number.
func TestChunkPageRanges(t *testing.T) {
	t.Parallel()
	opts := chunk.Options{Size: 600, Overlap: 80}
	s, _ := newStore(t, IngestOptions{Chunk: opts})
	ctx := context.Background()
	data := pageReport()
	f, err := s.Ingest(ctx, "pages", "survey.pdf", "", data)
	if err != nil {
		t.Fatal(err)
	}
	if f.PageCount != 8 {
		t.Fatalf("%d pages, want 8", f.PageCount)
	}
	_, text, err := s.FileText(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := extract.Extract(ctx, extract.MIMEPDF, data)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Text != text {
		t.Fatal("the stored text is not the extracted text")
	}
	pageOf := func(pos int) int {
		for _, p := range doc.Pages {
			if p.Start <= pos && pos < p.End {
				return p.Number
			}
		}
		t.Fatalf("offset %d is on no page", pos)
		return 0
	}

	rows, err := s.Pool().Query(ctx, `SELECT id::text FROM chunks WHERE file_id = $1 ORDER BY ordinal`, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	runes := []rune(text)
	chunks := make([]Chunk, len(ids))
	spanning := -1
	for i, id := range ids {
		c, err := s.GetChunk(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		chunks[i] = c
		if got := string(runes[c.CharStart:c.CharEnd]); got != c.Content {
			t.Errorf("chunk %d: text[%d:%d] = %q, want its content %q", i, c.CharStart, c.CharEnd, got, c.Content)
		}
		if c.PageStart != pageOf(c.CharStart) || c.PageEnd != pageOf(c.CharEnd-1) || c.PageNumber != c.PageStart {
			t.Errorf("chunk %d [%d,%d) reports page %d, pages %d-%d; its text lies on pages %d-%d",
				i, c.CharStart, c.CharEnd, c.PageNumber, c.PageStart, c.PageEnd, pageOf(c.CharStart), pageOf(c.CharEnd-1))
		}
		if strings.Contains(c.Content, "Hydrology") || strings.Contains(c.Content, " of 8") {
			t.Errorf("chunk %d holds a running line: %q", i, c.Content)
		}
		if strings.Contains(c.Content, "Kestrel note four.") {
			spanning = i
		}
	}
	if spanning < 0 {
		t.Fatal("no chunk holds the end of page 7")
	}
	if c := chunks[spanning]; c.PageStart != 7 || c.PageEnd != 8 || !strings.Contains(c.Content, "station I") {
		t.Fatalf("the chunk holding the end of page 7 reports pages %d-%d: %q", c.PageStart, c.PageEnd, c.Content)
	}

	hits, err := s.Search(ctx, Query{Text: "Kestrel note four", ConversationID: "pages", TopK: 50, Mode: Keyword})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, h := range hits {
		if h.ChunkID == ids[spanning] {
			found = true
			if h.PageNumber != 7 || h.PageStart != 7 || h.PageEnd != 8 {
				t.Errorf("hit reports page %d, pages %d-%d; want 7, 7-8", h.PageNumber, h.PageStart, h.PageEnd)
			}
		}
	}
	if !found {
		t.Errorf("search found %d hits but not the chunk holding the end of page 7", len(hits))
	}

	p, err := s.Passage(ctx, ids[spanning], 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	first, last := chunks[max(0, spanning-1)], chunks[min(len(chunks)-1, spanning+1)]
	if p.PageStart != first.PageStart || p.PageEnd != last.PageEnd {
		t.Errorf("passage reports pages %d-%d, want %d-%d", p.PageStart, p.PageEnd, first.PageStart, last.PageEnd)
	}

	// A chunk stored before page ranges existed has neither column.
	if _, err := s.Pool().Exec(ctx, `UPDATE chunks SET page_start = NULL, page_end = NULL WHERE id = $1`, ids[spanning]); err != nil {
		t.Fatal(err)
	}
	old, err := s.GetChunk(ctx, ids[spanning])
	if err != nil {
		t.Fatal(err)
	}
	if old.PageNumber != 7 || old.PageStart != 7 || old.PageEnd != 7 {
		t.Errorf("a chunk without a stored range reports page %d, pages %d-%d; want 7, 7-7", old.PageNumber, old.PageStart, old.PageEnd)
	}
}
