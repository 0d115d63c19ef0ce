package docs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestFileChunks reads a file's chunks in their order, a page at a time,
// each with its place in the file's text.
func TestFileChunks(t *testing.T) {
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "## Section %d\n\nParagraph %d tells of harbours, quays and the cranes that stand on them, one by one.\n\n", i, i)
	}
	f, err := s.Ingest(ctx, "c1", "long.md", "text/markdown", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	_, text, err := s.FileText(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []Chunk
	for after := -1; ; {
		page, err := s.FileChunks(ctx, f, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].Ordinal
	}
	if len(got) != f.ChunkCount || len(got) < 4 {
		t.Fatalf("%d chunks read, the file has %d", len(got), f.ChunkCount)
	}
	runes := []rune(text)
	for i, c := range got {
		if c.Ordinal != i || c.FileID != f.ID || c.CharEnd <= c.CharStart || c.CharEnd > utf8.RuneCountInString(text) {
			t.Fatalf("chunk %d: %+v", i, c)
		}
		if !strings.Contains(string(runes[c.CharStart:c.CharEnd]), strings.TrimSpace(strings.Split(c.Content, "\n")[0])) {
			t.Errorf("chunk %d: text %q not at %d..%d", i, c.Content, c.CharStart, c.CharEnd)
		}
	}
	if _, err := s.FileChunks(ctx, f, -1, MaxFileChunks+1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a limit past %d: %v", MaxFileChunks, err)
	}
}
