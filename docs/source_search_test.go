package docs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// addSource records a source of conversation conv holding files, as
// package sources records a site crawled: its row, and one page per file.
func addSource(t *testing.T, s *testStore, conv, root string, files ...File) string {
	t.Helper()
	ctx := context.Background()
	id := uuid.NewString()
	if _, err := s.Pool().Exec(ctx, `INSERT INTO sources (conversation_id, id, kind, root) VALUES ($1, $2, 'site', $3)`, conv, id, root); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO source_pages (conversation_id, source_id, url, file_id) VALUES ($1, $2, $3, $4)`,
			conv, id, fmt.Sprintf("%s/page-%d.html", root, i), f.ID); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// TestSearchOneSource searches a conversation holding three manuals, one
// of them at a time: every mode returns chunks of that manual's files only;
// the keyword and vector rankings are those of the whole conversation
// restricted to them (a file two sources share is found through both), and
// so is the vector ranking through the HNSW index, for a source too large
// to rank exactly. A source of another conversation, an unknown one and an
// id that is not a UUID are refused, naming source_id; a source without
// ready files has no hits.
func TestSearchOneSource(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, url, emb, IngestOptions{Chunk: chunk.Options{Size: 300, Overlap: 0}})
	ctx := context.Background()
	const conv = "three-manuals"
	manuals := map[string][]File{}
	for m, name := range []string{"postgres", "nginx", "kernel"} {
		for i := range 3 {
			text := fmt.Sprintf("%s manual, chapter %d. %s", name, i, prose(uint64(100*m+i), 400))
			f, err := s.Ingest(ctx, conv, fmt.Sprintf("%s-%d.txt", name, i), "", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			manuals[name] = append(manuals[name], f)
		}
	}
	upload, err := s.Ingest(ctx, conv, "notes.txt", "", []byte(prose(999, 400)))
	if err != nil {
		t.Fatal(err)
	}
	// The kernel manual shares its first file with the nginx one.
	shared := manuals["nginx"][0]
	sources := map[string]string{}
	for name, files := range manuals {
		if name == "kernel" {
			files = append(files, shared)
		}
		sources[name] = addSource(t, s, conv, "https://"+name+".example", files...)
	}
	of := func(name string) map[string]bool {
		in := map[string]bool{}
		for _, f := range manuals[name] {
			in[f.ID] = true
		}
		if name == "kernel" {
			in[shared.ID] = true
		}
		return in
	}

	queries := []string{"server cluster replica", "kernel process thread signal", "garden river harbor bridge", "nginx manual chapter"}
	check := func(t *testing.T, s *testStore, mode Mode, name string) {
		t.Helper()
		in := of(name)
		for _, q := range queries {
			all, err := s.Search(ctx, Query{Text: q, ConversationID: conv, Mode: mode, TopK: MaxTopK, Threshold: new(0.0)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Search(ctx, Query{Text: q, ConversationID: conv, Mode: mode, TopK: MaxTopK, Threshold: new(0.0), SourceID: " " + sources[name] + " "})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Errorf("%s search of %q in source %s found nothing", mode, q, name)
			}
			for _, h := range got {
				if !in[h.FileID] {
					t.Errorf("%s search of %q in source %s found a chunk of %s, not one of its files", mode, q, name, h.FileName)
				}
			}
			if mode == Hybrid {
				// Fusion weighs each list's ranks, which change when
				// the lists are restricted: the files are what counts.
				continue
			}
			var want []string
			for _, h := range all {
				if in[h.FileID] {
					want = append(want, h.ChunkID)
				}
			}
			var ids []string
			for _, h := range got {
				ids = append(ids, h.ChunkID)
			}
			// The whole conversation's list is cut at MaxTopK: compare
			// what it holds.
			if n := min(len(ids), len(want)); !slices.Equal(ids[:n], want[:n]) || (len(all) < MaxTopK && len(ids) != len(want)) {
				t.Errorf("%s search of %q in source %s:\n got %v\nwant %v", mode, q, name, ids, want)
			}
		}
	}
	for _, mode := range Modes() {
		for _, name := range []string{"postgres", "nginx", "kernel"} {
			check(t, s, mode, name)
		}
	}
	t.Run("through the index", func(t *testing.T) {
		if built, err := s.BuildIndex(ctx, IndexPolicy{}, true); err != nil || !built {
			t.Fatalf("BuildIndex = %v, %v", built, err)
		}
		// Every source is larger than a few chunks: ranked through the
		// index, filtered to its files.
		for _, exact := range []bool{false, true} {
			// Without iterative scans (pgvector before 0.8) a short
			// answer falls back to an exact ranking of the source.
			indexed := openStoreWith(t, url, emb, Options{exactChunks: 4}, IngestOptions{})
			indexed.forceExactFallback = exact
			for _, name := range []string{"postgres", "kernel"} {
				check(t, indexed, Vector, name)
			}
		}
	})

	for name, id := range map[string]string{
		"of another conversation": addSource(t, s, "elsewhere", "https://elsewhere.example", upload),
		"unknown":                 uuid.NewString(),
		"not a uuid":              "postgres-manual",
		"control characters":      "\x00\u202e",
	} {
		_, err := s.Search(ctx, Query{Text: "server", ConversationID: conv, SourceID: id})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "source_id") {
			t.Errorf("a source_id %s: %v; want an invalid argument naming source_id", name, err)
		}
	}
	empty := addSource(t, s, conv, "https://empty.example")
	for _, mode := range Modes() {
		hits, err := s.Search(ctx, Query{Text: "server cluster", ConversationID: conv, Mode: mode, SourceID: empty})
		if err != nil || len(hits) != 0 {
			t.Errorf("%s search of a source without files: %d hits, %v; want none", mode, len(hits), err)
		}
	}
}
