package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/docs/keyword"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// TestTwoStoresSeeEachOthersFiles runs two stores, as two replicas, on one
// database: each must find in its keyword index a file the other stored, or
// lose one the other deleted, on the very next search.
func TestTwoStoresSeeEachOthersFiles(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	a := openStore(t, url, emb, IngestOptions{})
	b := openStore(t, url, emb, IngestOptions{})
	ctx := context.Background()
	const conv = "replicas"
	find := func(s *testStore, word string) int {
		t.Helper()
		hits, err := s.Search(ctx, Query{Text: word, ConversationID: conv, Mode: Keyword, TopK: MaxTopK})
		if err != nil {
			t.Fatal(err)
		}
		return len(hits)
	}
	if _, err := a.Ingest(ctx, conv, "base.txt", "", []byte(prose(1, 300))); err != nil {
		t.Fatal(err)
	}
	// Both build their index.
	if find(a, "server") == 0 || find(b, "server") == 0 {
		t.Fatal("neither store finds a common word")
	}
	steps := []struct {
		writer, reader *testStore
		word           string
	}{
		{a, b, "quokka"},
		{b, a, "axolotl"},
	}
	for _, st := range steps {
		f, err := st.writer.Ingest(ctx, conv, st.word+".txt", "", []byte("A note about the "+st.word+" and its habitat."))
		if err != nil {
			t.Fatal(err)
		}
		if n := find(st.reader, st.word); n != 1 {
			t.Errorf("the other store finds %q in %d chunks right after it became ready; want 1", st.word, n)
		}
		if err := st.writer.DeleteFile(ctx, f.ID); err != nil {
			t.Fatal(err)
		}
		if n := find(st.reader, st.word); n != 0 {
			t.Errorf("the other store finds %q in %d chunks after its file was deleted; want 0", st.word, n)
		}
	}
	// Files moved to another model by one store: the other's index, built
	// under the old model, is rebuilt and ranks them as a fresh store does.
	words := wordEmbedder{model: "words-64", dims: 64}
	if err := a.Reembed(ctx, words, nil); err != nil {
		t.Fatal(err)
	}
	// As a replica restarted on the new model searches, its cache kept.
	b.setEmbedder(words)
	queries := []string{"server", "database replica failover"}
	fresh := openStore(t, url, words, IngestOptions{})
	if got, want := keywordRankings(t, b, conv, queries), keywordRankings(t, fresh, conv, queries); got != want {
		t.Errorf("after re-embedding, the other store ranks\n%s\nwant\n%s", got, want)
	}
	if n := find(openStore(t, url, emb, IngestOptions{}), "server"); n != 0 {
		t.Errorf("a store on the old model finds %d chunks after re-embedding; want 0", n)
	}
}

// TestKeywordCacheBudget checks that indexes beyond the memory budget are
// evicted and rebuilt on demand, with the same answers.
func TestKeywordCacheBudget(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	loader := openStore(t, url, emb, IngestOptions{Chunk: chunk.Options{Size: 300}})
	ctx := context.Background()
	for i := range 4 {
		if _, err := loader.Ingest(ctx, fmt.Sprintf("c%d", i), "a.txt", "", []byte(prose(uint64(200+i), 2000))); err != nil {
			t.Fatal(err)
		}
	}
	// Measure one index, then allow about two.
	probe, err := NewStore(loader.Pool(), emb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := probe.Search(ctx, Query{Text: "server", ConversationID: "c0", Mode: Keyword}); err != nil {
		t.Fatal(err)
	}
	one := probe.keywords.UsedBytes()
	if one <= 0 {
		t.Fatalf("cached index of %d bytes", one)
	}
	small, err := NewStore(loader.Pool(), emb, Options{KeywordCacheBytes: 2*one + one/2})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		for i := range 4 {
			q := Query{Text: "server cluster garden", ConversationID: fmt.Sprintf("c%d", i), Mode: Keyword}
			got, err := small.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := loader.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 || fmt.Sprint(hitIDs(got)) != fmt.Sprint(hitIDs(want)) {
				t.Errorf("round %d, %s: %v; want %v", round, q.ConversationID, hitIDs(got), hitIDs(want))
			}
			if used := small.keywords.UsedBytes(); used > 2*one+one/2 {
				t.Errorf("cache holds %d bytes over a budget of %d", used, 2*one+one/2)
			}
		}
	}
}

func hitIDs(hits []Hit) []string {
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.ChunkID
	}
	return ids
}

// TestVectorTopKCompleteForSmallConversations stores many small
// conversations beside a large one and checks that every vector search of a
// small one returns min(top_k, matching chunks) chunks, the exact nearest
// ones.
func TestVectorTopKCompleteForSmallConversations(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, url, emb, IngestOptions{Chunk: chunk.Options{Size: 200, Overlap: 0}})
	ctx := context.Background()
	if _, err := s.Ingest(ctx, "large", "large.txt", "", []byte(prose(300, 30000))); err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int{}
	for i := range 12 {
		conv := fmt.Sprintf("small-%d", i)
		f, err := s.Ingest(ctx, conv, "a.txt", "", []byte(prose(uint64(400+i), 20+40*i)))
		if err != nil {
			t.Fatal(err)
		}
		sizes[conv] = f.ChunkCount
	}
	for conv, n := range sizes {
		for _, k := range []int{1, 5, 10, MaxTopK} {
			q := Query{Text: "database replica failover", ConversationID: conv, Mode: Vector, TopK: k, Threshold: new(0.0)}
			hits, err := s.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			// The exact answer, the chunks at similarity 0 (the threshold)
			// or more: the distance on the uncast column matches no index.
			qv, err := emb.Embed(ctx, []string{q.Text})
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.Pool().Query(ctx, `
				SELECT id::text FROM chunks WHERE conversation_id = $1 AND 1 - (embedding <=> $2) >= 0
				ORDER BY embedding <=> $2, id LIMIT $3`, conv, pgvector.NewVector(qv[0]), k)
			if err != nil {
				t.Fatal(err)
			}
			want, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != len(want) || len(want) == 0 {
				t.Errorf("%s (%d chunks), top_k %d: %d hits; want %d", conv, n, k, len(hits), len(want))
			}
			got := map[string]bool{}
			for _, h := range hits {
				got[h.ChunkID] = true
			}
			for _, id := range want {
				if !got[id] {
					t.Errorf("%s, top_k %d: exact neighbour %s missing", conv, k, id)
				}
			}
		}
	}
}

func TestPassage(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{Chunk: chunk.Options{Size: 200, Overlap: 50}})
	ctx := context.Background()
	text := prose(500, 400)
	f, err := s.Ingest(ctx, "passage", "a.txt", "", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	_, full, err := s.FileText(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Pool().Query(ctx, `SELECT id::text FROM chunks WHERE file_id = $1 ORDER BY ordinal`, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) < 6 {
		t.Fatalf("%d chunks; want at least 6", len(ids))
	}
	runes := []rune(full)
	tests := []struct {
		name                string
		at, before, after   int
		wantFirst, wantLast int
	}{
		{"alone", 3, 0, 0, 3, 3},
		{"around", 3, 2, 1, 1, 4},
		{"clipped at the start", 1, 5, 0, 0, 1},
		{"clipped at the end", len(ids) - 2, 0, 5, len(ids) - 2, len(ids) - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := s.Passage(ctx, ids[tt.at], tt.before, tt.after)
			if err != nil {
				t.Fatal(err)
			}
			first, err := s.GetChunk(ctx, ids[tt.wantFirst])
			if err != nil {
				t.Fatal(err)
			}
			last, err := s.GetChunk(ctx, ids[tt.wantLast])
			if err != nil {
				t.Fatal(err)
			}
			if p.FirstChunkID != first.ID || p.LastChunkID != last.ID || len(p.ChunkIDs) != tt.wantLast-tt.wantFirst+1 {
				t.Errorf("chunks %s..%s (%d); want %s..%s", p.FirstChunkID, p.LastChunkID, len(p.ChunkIDs), first.ID, last.ID)
			}
			if p.CharStart != first.CharStart || p.CharEnd != last.CharEnd || p.Content != string(runes[first.CharStart:last.CharEnd]) {
				t.Errorf("passage [%d, %d) %q; want [%d, %d) of the file's text", p.CharStart, p.CharEnd, p.Content, first.CharStart, last.CharEnd)
			}
			if p.ConversationID != "passage" || p.FileID != f.ID {
				t.Errorf("passage of %s in %s; want file %s in passage", p.FileID, p.ConversationID, f.ID)
			}
		})
	}
	for _, bad := range [][2]int{{-1, 0}, {0, MaxPassageNeighbours + 1}} {
		if _, err := s.Passage(ctx, ids[0], bad[0], bad[1]); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Passage(before %d, after %d) = %v; want ErrInvalidArgument", bad[0], bad[1], err)
		}
	}
	if _, err := s.Passage(ctx, "6f1c1e0a-9b1d-4c59-8a53-0d8d3f0b2f11", 1, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Passage(unknown) = %v; want ErrNotFound", err)
	}
}

func TestRankGoesDeeperThanTopK(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{Chunk: chunk.Options{Size: 200, Overlap: 0}})
	ctx := context.Background()
	for i := range 4 {
		if _, err := s.Ingest(ctx, "deep", fmt.Sprintf("%d.txt", i), "", []byte(prose(uint64(600+i), 600))); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range Modes() {
		// No threshold: every chunk that ranks at all is wanted.
		q := Query{Text: "server database cluster", ConversationID: "deep", Mode: mode, Threshold: new(0.0)}
		hits, err := s.Rank(ctx, q, 120)
		if err != nil {
			t.Fatal(err)
		}
		top, err := s.Search(ctx, Query{Text: q.Text, ConversationID: q.ConversationID, Mode: mode, TopK: MaxTopK, Threshold: q.Threshold})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) <= MaxTopK || len(hits) > 120 {
			t.Errorf("%s: Rank to 120 gave %d hits; want more than %d", mode, len(hits), MaxTopK)
		}
		if fmt.Sprint(hitIDs(hits[:len(top)])) != fmt.Sprint(hitIDs(top)) && mode != Hybrid {
			t.Errorf("%s: Rank's first %d hits differ from Search's", mode, len(top))
		}
		// Rank names each hit's file, as Search does.
		files := map[string]string{}
		for _, h := range top {
			files[h.ChunkID] = h.FileID
		}
		for _, h := range hits {
			if h.FileID == "" || (files[h.ChunkID] != "" && files[h.ChunkID] != h.FileID) {
				t.Fatalf("%s: Rank gives chunk %s the file %q; Search %q", mode, h.ChunkID, h.FileID, files[h.ChunkID])
			}
		}
	}
	for _, depth := range []int{0, MaxRankDepth + 1} {
		if _, err := s.Rank(ctx, Query{Text: "server", ConversationID: "deep"}, depth); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Rank to depth %d = %v; want ErrInvalidArgument", depth, err)
		}
	}
}

// keywordRankings returns every hit of queries in conv in Keyword and Hybrid
// mode, with scores, as text to compare.
func keywordRankings(t *testing.T, s *testStore, conv string, queries []string) string {
	t.Helper()
	var b strings.Builder
	for _, mode := range []Mode{Keyword, Hybrid} {
		for _, q := range queries {
			hits, err := s.Search(context.Background(), Query{Text: q, ConversationID: conv, Mode: mode, TopK: MaxTopK})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) == 0 {
				t.Fatalf("%s %q: no hit", mode, q)
			}
			fmt.Fprintf(&b, "%s %q:", mode, q)
			for _, h := range hits {
				fmt.Fprintf(&b, " %s %.12g", h.ChunkID, h.Score)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// storedPostings returns the keyword postings of conv's files by file id.
func storedPostings(t *testing.T, s *testStore, conv string) map[string][]byte {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT id::text, keyword_postings FROM files WHERE conversation_id = $1`, conv)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	var id string
	var p []byte
	if _, err := pgx.ForEachRow(rows, []any{&id, &p}, func() error { out[id] = slices.Clone(p); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKeywordPostingsOfOlderFiles checks that files stored without keyword
// postings (before migration 008), or with postings of a format this build
// does not know, rank exactly as files with postings, that a search writes
// the missing postings back, identical to ingestion's, and that
// FillKeywordPostings writes them all.
func TestKeywordPostingsOfOlderFiles(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	a := openStore(t, url, emb, IngestOptions{Chunk: chunk.Options{Size: 300}})
	ctx := context.Background()
	const conv = "older"
	var files []string
	for i := range 4 {
		f, err := a.Ingest(ctx, conv, fmt.Sprintf("%d.txt", i), "", []byte(prose(uint64(700+i), 500+300*i)))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f.ID)
	}
	if _, err := a.Ingest(ctx, "other", "x.txt", "", []byte(prose(9, 400))); err != nil {
		t.Fatal(err)
	}
	queries := []string{"server database cluster", "replica replica failover latency", "garden"}
	want := keywordRankings(t, a, conv, queries)
	stored := storedPostings(t, a, conv)
	for _, id := range files {
		if p := stored[id]; len(p) == 0 || p[0] != keyword.Format {
			t.Fatalf("file %s stored without keyword postings", id)
		}
	}

	// Files 0 and 2 as stored before the migration; file 3 as written by a
	// newer build.
	unknown := append([]byte{keyword.Format + 1}, stored[files[3]][1:]...)
	if _, err := a.Pool().Exec(ctx, `UPDATE files SET keyword_postings = NULL WHERE id = ANY($1::uuid[])`, []string{files[0], files[2]}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Pool().Exec(ctx, `UPDATE files SET keyword_postings = $2 WHERE id = $1`, files[3], unknown); err != nil {
		t.Fatal(err)
	}
	b := openStore(t, url, emb, IngestOptions{})
	if got := keywordRankings(t, b, conv, queries); got != want {
		t.Errorf("rankings with older files differ:\n%s\nwant\n%s", got, want)
	}
	after := storedPostings(t, b, conv)
	for _, i := range []int{0, 1, 2} {
		if !bytes.Equal(after[files[i]], stored[files[i]]) {
			t.Errorf("file %d: postings after the search (%d bytes) differ from ingestion's (%d bytes)", i, len(after[files[i]]), len(stored[files[i]]))
		}
	}
	if !bytes.Equal(after[files[3]], unknown) {
		t.Error("postings of an unknown format were overwritten")
	}

	if _, err := a.Pool().Exec(ctx, `UPDATE files SET keyword_postings = NULL`); err != nil {
		t.Fatal(err)
	}
	n, err := FillKeywordPostings(ctx, a.Pool())
	if err != nil {
		t.Fatal(err)
	}
	if n != len(files)+1 {
		t.Errorf("FillKeywordPostings wrote %d files' postings; want %d", n, len(files)+1)
	}
	after = storedPostings(t, a, conv)
	for i, id := range files {
		if !bytes.Equal(after[id], stored[id]) {
			t.Errorf("file %d: filled postings differ from ingestion's", i)
		}
	}
	if n, err := FillKeywordPostings(ctx, a.Pool()); err != nil || n != 0 {
		t.Errorf("FillKeywordPostings again = %d, %v; want 0, nil", n, err)
	}
	c := openStore(t, url, emb, IngestOptions{})
	if got := keywordRankings(t, c, conv, queries); got != want {
		t.Errorf("rankings from filled postings differ:\n%s\nwant\n%s", got, want)
	}
}

// BenchmarkStorePostings measures what keyword postings add to storing a
// file of about 100 chunks of 1,000 characters: reading back its chunks'
// tsvectors, building the postings and writing them, in the storing
// transaction (rolled back here):
//
//	go test -run '^$' -bench BenchmarkStorePostings ./docs/
func BenchmarkStorePostings(b *testing.B) {
	emb, err := embed.NewLocal(384)
	if err != nil {
		b.Fatal(err)
	}
	s := openStore(b, pgtest.NewDatabase(b), emb, IngestOptions{})
	ctx := context.Background()
	f, err := s.Ingest(ctx, "bench", "a.txt", "", []byte(newCorpus(3).text(12_000)))
	if err != nil {
		b.Fatal(err)
	}
	id := uuid.MustParse(f.ID)
	for b.Loop() {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		built, err := buildPostings(ctx, tx, f.ConversationID, []uuid.UUID{id})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `UPDATE files SET keyword_postings = $2 WHERE id = $1`, id, built[id]); err != nil {
			b.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			b.Fatal(err)
		}
	}
	perChunk := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(f.ChunkCount)
	b.ReportMetric(perChunk/1e3, "µs/chunk")
	b.ReportMetric(float64(f.ChunkCount), "chunks/file")
}

// TestKeywordIndexUnderConcurrentChanges searches a conversation from
// several goroutines while files are added and deleted, so that merges of
// segments run alongside searches and additions, then checks that the
// index ranks as a fresh store's does.
func TestKeywordIndexUnderConcurrentChanges(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, url, emb, IngestOptions{Chunk: chunk.Options{Size: 300}})
	ctx := context.Background()
	const conv = "busy"
	var files []File
	ingest := func(i int) {
		t.Helper()
		f, err := s.Ingest(ctx, conv, fmt.Sprintf("%d.txt", i), "", []byte(prose(uint64(800+i), 400)))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	for i := range 3 {
		ingest(i)
	}
	queries := []string{"server database cluster", "replica failover", "garden latency"}
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				if _, err := s.Search(ctx, Query{Text: queries[(g+i)%len(queries)], ConversationID: conv, Mode: Keyword, TopK: MaxTopK}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 3; i < 7; i++ {
		ingest(i)
	}
	if err := s.DeleteFile(ctx, files[1].ID); err != nil {
		t.Fatal(err)
	}
	ingest(7)
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s.keywords.Wait()
	fresh := openStore(t, url, emb, IngestOptions{})
	if got, want := keywordRankings(t, s, conv, queries), keywordRankings(t, fresh, conv, queries); got != want {
		t.Errorf("after concurrent changes the index ranks\n%s\nwant\n%s", got, want)
	}
}

// TestKeywordIndexOverBudget searches a conversation whose index is larger
// than the whole cache: it is built for each search and not kept, and the
// search still ranks by it.
func TestKeywordIndexOverBudget(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	emb, _ := embed.NewLocal(384)
	s := openStoreWith(t, url, emb, Options{KeywordCacheBytes: 1000}, IngestOptions{Chunk: chunk.Options{Size: 300}})
	ctx := context.Background()
	for i := range 2 {
		if _, err := s.Ingest(ctx, "big", fmt.Sprintf("%d.txt", i), "", []byte(prose(uint64(300+i), 2000))); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		hits, err := s.Search(ctx, Query{Text: "server cluster", ConversationID: "big", Mode: Keyword, TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 5 {
			t.Errorf("keyword search over an index larger than the cache: %d hits, want 5", len(hits))
		}
		if used := s.keywords.UsedBytes(); used != 0 {
			t.Errorf("the cache holds %d bytes, over its budget of 1000", used)
		}
	}
}
