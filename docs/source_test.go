package docs

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestSourceURLIsKeptAndShown(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	const conv, src = "src", "https://example.com/guide/backups.html"
	fetched, err := s.IngestUpload(ctx, Upload{ConversationID: conv, FileName: "backups.html", Source: " " + src + " ",
		Data: []byte("<html><body><p>" + prose(11, 300) + " zeppelin backups</p></body></html>")})
	if err != nil {
		t.Fatal(err)
	}
	uploaded, err := s.Ingest(ctx, conv, "notes.txt", "", []byte(prose(12, 300)))
	if err != nil {
		t.Fatal(err)
	}
	if fetched.Source != src || uploaded.Source != "" {
		t.Fatalf("sources = %q and %q; want %q and none", fetched.Source, uploaded.Source, src)
	}

	got, err := s.GetFile(ctx, fetched.ID)
	if err != nil || got.Source != src {
		t.Errorf("GetFile = %q, %v; want source %q", got.Source, err, src)
	}
	files, err := s.ListFiles(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	recent, err := s.RecentFiles(ctx, []string{conv}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for name, list := range map[string][]File{"ListFiles": files, "RecentFiles": recent} {
		if len(list) != 2 {
			t.Fatalf("%s: %d files, want 2", name, len(list))
		}
		for _, f := range list {
			if want := map[string]string{fetched.ID: src, uploaded.ID: ""}[f.ID]; f.Source != want {
				t.Errorf("%s: file %s has source %q, want %q", name, f.FileName, f.Source, want)
			}
		}
	}
	hits, err := s.Search(ctx, Query{Text: "zeppelin backups", ConversationID: conv, Mode: Keyword, TopK: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 {
		t.Fatal("no hits")
	}
	for _, h := range hits {
		want := map[string]string{fetched.ID: src, uploaded.ID: ""}[h.FileID]
		if h.Source != want {
			t.Errorf("hit in %s has source %q, want %q", h.FileName, h.Source, want)
		}
		c, err := s.GetChunk(ctx, h.ChunkID)
		if err != nil || c.Source != want {
			t.Errorf("GetChunk = %q, %v; want source %q", c.Source, err, want)
		}
		p, err := s.Passage(ctx, h.ChunkID, 1, 1)
		if err != nil || p.Source != want {
			t.Errorf("Passage = %q, %v; want source %q", p.Source, err, want)
		}
	}

	for name, bad := range map[string]string{
		"too long":     "https://example.com/" + strings.Repeat("a", MaxSourceLen),
		"control":      "https://example.com/\x00",
		"invalid utf8": "https://example.com/\xff",
	} {
		_, err := s.IngestUpload(ctx, Upload{ConversationID: conv, FileName: "x.txt", Source: bad, Data: []byte("some text")})
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s source: %v; want ErrInvalidArgument", name, err)
		}
	}
}
