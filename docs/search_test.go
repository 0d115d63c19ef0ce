package docs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/migrations"
)

// TestKeywordFindsAnExactCodeThatVectorMisses uses an embedder blind to
// digits: for it the target chunk only shares the word "err" with the query,
// while reference pages full of "error code" look much closer. BM25 finds the
// target through the rare term "-4471".
func TestKeywordFindsAnExactCodeThatVectorMisses(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	s := openStore(t, url, wordEmbedder{model: "test-words-64", dims: 64}, IngestOptions{})
	ctx := context.Background()
	const conv = "codes"
	target, err := s.Ingest(ctx, conv, "incident.txt", "", []byte("Incident: the payment service crashed with ERR-4471 after the certificate rotation."))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		text := fmt.Sprintf("Error code reference, page %d: every error code ERR has a meaning; look the error code up in the error table.", i)
		if _, err := s.Ingest(ctx, conv, fmt.Sprintf("reference-%d.txt", i), "", []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	const query = "error code ERR-4471"
	rank := func(mode Mode, topK int) int {
		t.Helper()
		hits, err := s.Search(ctx, Query{Text: query, ConversationID: conv, Mode: mode, TopK: topK})
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range hits {
			if h.FileID == target.ID {
				return i + 1
			}
		}
		return 0
	}
	if r := rank(Keyword, 5); r != 1 {
		t.Errorf("keyword search ranks the chunk with ERR-4471 at %d, want 1", r)
	}
	if r := rank(Vector, 5); r != 0 {
		t.Errorf("vector search ranks the chunk with ERR-4471 at %d; the test embedder should not see it in the top 5", r)
	}
	// Fusion ranks it below reference pages that both lists rank fairly
	// high, but above those ranked low in both.
	if r := rank(Hybrid, 10); r == 0 {
		t.Error("hybrid search lost the chunk keyword search ranks first")
	}
}

func TestThresholdAndScorePerMode(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{Chunk: chunk.Options{Size: 300, Overlap: 0}})
	ctx := context.Background()
	const conv = "threshold"
	for i := range 4 {
		if _, err := s.Ingest(ctx, conv, fmt.Sprintf("%d.txt", i), "", []byte(prose(uint64(20+i), 400))); err != nil {
			t.Fatal(err)
		}
	}
	search := func(q Query) []Hit {
		t.Helper()
		q.ConversationID = conv
		hits, err := s.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return hits
	}
	const query = "database replica failover latency"

	t.Run("vector", func(t *testing.T) {
		all := search(Query{Text: query, Mode: Vector, TopK: 20, Threshold: new(0.0)})
		if len(all) != 20 {
			t.Fatalf("%d hits, want 20", len(all))
		}
		for i, h := range all {
			if h.Score != h.Similarity {
				t.Errorf("hit %d: score %v, similarity %v; vector mode scores by similarity", i, h.Score, h.Similarity)
			}
			if i > 0 && h.Similarity > all[i-1].Similarity {
				t.Errorf("hit %d is more similar than hit %d", i, i-1)
			}
		}
		cut := all[4].Similarity
		above := search(Query{Text: query, Mode: Vector, TopK: 20, Threshold: new(cut)})
		want := 0
		for _, h := range all {
			if h.Similarity >= cut {
				want++
			}
		}
		if len(above) != want {
			t.Errorf("threshold %v: %d hits, want the %d at or above it", cut, len(above), want)
		}
		for _, h := range above {
			if h.Similarity < cut {
				t.Errorf("hit below the threshold: %v < %v", h.Similarity, cut)
			}
		}
		if hits := search(Query{Text: query, Mode: Vector, Threshold: new(1.0)}); len(hits) != 0 {
			t.Errorf("threshold 1: %d hits, want none", len(hits))
		}
	})

	t.Run("keyword ignores the threshold", func(t *testing.T) {
		hits := search(Query{Text: query, Mode: Keyword, Threshold: new(1.0), TopK: 10})
		if len(hits) != 10 {
			t.Fatalf("%d hits, want 10", len(hits))
		}
		for i, h := range hits {
			if h.Similarity >= 1 || h.Similarity <= 0 {
				t.Errorf("hit %d: similarity %v, want it reported in (0, 1)", i, h.Similarity)
			}
			if h.Score <= 0 || (i > 0 && h.Score > hits[i-1].Score) {
				t.Errorf("hit %d: BM25 score %v out of order", i, h.Score)
			}
		}
	})

	t.Run("hybrid keeps keyword matches above any threshold", func(t *testing.T) {
		keyword := map[string]bool{}
		for _, h := range search(Query{Text: query, Mode: Keyword, TopK: MaxTopK}) {
			keyword[h.ChunkID] = true
		}
		hits := search(Query{Text: query, Threshold: new(1.0), TopK: 10})
		if len(hits) == 0 {
			t.Fatal("no hits")
		}
		for i, h := range hits {
			if !keyword[h.ChunkID] {
				t.Errorf("hit %d matched no keyword yet passed threshold 1 (similarity %v)", i, h.Similarity)
			}
			if h.Score <= 0 || h.Score > 2.0/(rrfK+1) || (i > 0 && h.Score > hits[i-1].Score) {
				t.Errorf("hit %d: fused score %v out of range or order", i, h.Score)
			}
		}
		// Stop words only: no keyword can match, so the threshold decides.
		if hits := search(Query{Text: "the and of", Threshold: new(1.0)}); len(hits) != 0 {
			t.Errorf("stop-word query at threshold 1: %d hits, want none", len(hits))
		}
		if hits := search(Query{Text: "the and of", Threshold: new(0.0)}); len(hits) != DefaultTopK {
			t.Errorf("stop-word query at threshold 0: %d hits, want %d from vector search", len(hits), DefaultTopK)
		}
	})
}

func TestSearchArguments(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Ingest(ctx, "args", fmt.Sprintf("%d.txt", i), "", []byte(prose(uint64(40+i), 3000))); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		q    Query
		want error
		hits int // checked when want is nil; -1 skips
	}{
		{"empty", Query{Text: " \n\t", ConversationID: "args"}, ErrEmptyQuery, 0},
		{"too long", Query{Text: strings.Repeat("é", MaxQueryRunes+1), ConversationID: "args"}, ErrInvalidArgument, 0},
		{"longest", Query{Text: strings.Repeat("é", MaxQueryRunes), ConversationID: "args"}, nil, -1},
		{"no conversation", Query{Text: "x"}, ErrInvalidArgument, 0},
		{"negative threshold", Query{Text: "x", ConversationID: "args", Threshold: new(-0.1)}, ErrInvalidArgument, 0},
		{"threshold above 1", Query{Text: "x", ConversationID: "args", Threshold: new(1.5)}, ErrInvalidArgument, 0},
		{"NaN threshold", Query{Text: "x", ConversationID: "args", Threshold: new(math.NaN())}, ErrInvalidArgument, 0},
		{"negative top_k", Query{Text: "x", ConversationID: "args", TopK: -1}, ErrInvalidArgument, 0},
		{"unknown mode", Query{Text: "x", ConversationID: "args", Mode: "fuzzy"}, ErrInvalidArgument, 0},
		{"default top_k", Query{Text: "server cluster", ConversationID: "args"}, nil, DefaultTopK},
		{"largest top_k", Query{Text: "server cluster", ConversationID: "args", TopK: MaxTopK}, nil, MaxTopK},
		{"top_k above the maximum", Query{Text: "server cluster", ConversationID: "args", TopK: MaxTopK + 1}, ErrInvalidArgument, 0},
		{"conversation id with spaces around", Query{Text: "server cluster", ConversationID: "  args "}, nil, DefaultTopK},
		{"unknown conversation", Query{Text: "server cluster", ConversationID: "nobody"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits, err := s.Search(ctx, tt.q)
			if tt.want != nil {
				if !errors.Is(err, tt.want) || Retryable(err) {
					t.Errorf("Search = %v; want non-retryable %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Search = %v", err)
			}
			if hits == nil {
				t.Error("nil hits; want an empty slice")
			}
			if tt.hits >= 0 && len(hits) != tt.hits {
				t.Errorf("%d hits, want %d", len(hits), tt.hits)
			}
		})
	}
}

// TestModelsNeverMixAndReembed stores files under two models of different
// dimensions in one conversation, then moves one store to the other model.
func TestModelsNeverMixAndReembed(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	e384, _ := embed.NewLocal(384)
	e256, _ := embed.NewLocal(256)
	a := openStore(t, url, e384, IngestOptions{})
	b := openStore(t, url, e256, IngestOptions{})
	const conv = "models"
	fa, err := a.Ingest(ctx, conv, "a.txt", "", []byte("Orchard notes. "+prose(60, 900)))
	if err != nil {
		t.Fatal(err)
	}
	fb, err := b.Ingest(ctx, conv, "b.txt", "", []byte("Orchard notes. "+prose(61, 900)))
	if err != nil {
		t.Fatal(err)
	}
	const query = "orchard notes server cluster"
	files := func(s *testStore, mode Mode) map[string]bool {
		t.Helper()
		hits, err := s.Search(ctx, Query{Text: query, ConversationID: conv, Mode: mode, TopK: MaxTopK})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, h := range hits {
			seen[h.FileID] = true
		}
		return seen
	}
	for _, mode := range []Mode{Hybrid, Vector, Keyword} {
		if got := files(a, mode); !got[fa.ID] || got[fb.ID] {
			t.Errorf("%s search with the 384-dimension model sees files %v; want only %s", mode, got, fa.ID)
		}
		if got := files(b, mode); !got[fb.ID] || got[fa.ID] {
			t.Errorf("%s search with the 256-dimension model sees files %v; want only %s", mode, got, fb.ID)
		}
	}

	if built, err := a.BuildIndex(ctx, IndexPolicy{}, true); err != nil || !built {
		t.Fatalf("BuildIndex for %s = %v, %v", e384.Model(), built, err)
	}
	var calls [][2]int
	if err := a.Reembed(ctx, e256, func(done, total int) { calls = append(calls, [2]int{done, total}) }); err != nil {
		t.Fatal(err)
	}
	// The first build for the new model drops the old model's index,
	// which no file uses any more.
	if built, err := a.BuildIndex(ctx, IndexPolicy{}, true); err != nil || !built {
		t.Fatalf("BuildIndex for %s = %v, %v", e256.Model(), built, err)
	}
	var registered, indexes []string
	if err := a.Pool().QueryRow(ctx, `SELECT
		(SELECT array_agg(embedding_model) FROM vector_indexes),
		(SELECT array_agg(indexname) FROM pg_indexes WHERE indexname LIKE 'chunks\_hnsw\_%')`).Scan(&registered, &indexes); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(registered, []string{e256.Model()}) || len(indexes) != 1 || !strings.HasPrefix(indexes[0], indexPrefix(e256.Model(), 256)) {
		t.Errorf("after Reembed and a build: indexes registered for %v, vector indexes %v; want only %s's", registered, indexes, e256.Model())
	}
	if want := [][2]int{{0, 0}, {0, fa.ChunkCount}, {fa.ChunkCount, fa.ChunkCount}}; !slices.Equal(calls, want) {
		t.Errorf("progress calls %v, want %v", calls, want)
	}
	if a.Embedder().Model() != e256.Model() {
		t.Errorf("store embedder after Reembed is %s, want %s", a.Embedder().Model(), e256.Model())
	}
	for _, mode := range []Mode{Hybrid, Vector, Keyword} {
		if got := files(a, mode); !got[fa.ID] || !got[fb.ID] {
			t.Errorf("%s search after Reembed sees files %v; want both", mode, got)
		}
	}
	var wrongModel, wrongDims int
	err = a.Pool().QueryRow(ctx, `
		SELECT (SELECT count(*) FROM chunks WHERE embedding_model <> $1),
		       (SELECT count(*) FROM chunks WHERE vector_dims(embedding) <> 256)`, e256.Model()).Scan(&wrongModel, &wrongDims)
	if err != nil {
		t.Fatal(err)
	}
	if wrongModel != 0 || wrongDims != 0 {
		t.Errorf("after Reembed %d chunks keep another model and %d other dimensions", wrongModel, wrongDims)
	}
	moved, err := a.GetFile(ctx, fa.ID)
	if err != nil {
		t.Fatal(err)
	}
	if moved.EmbeddingModel != e256.Model() {
		t.Errorf("file model after Reembed = %s, want %s", moved.EmbeddingModel, e256.Model())
	}

	// The stored vectors are the new embedder's: the reported similarity
	// matches one computed here.
	hits, err := a.Search(ctx, Query{Text: query, ConversationID: conv, Mode: Vector, TopK: 1, Threshold: new(0.0)})
	if err != nil || len(hits) != 1 {
		t.Fatalf("Search = %v, %v", hits, err)
	}
	vecs, _ := e256.Embed(ctx, []string{query, hits[0].Content})
	if want := cosine(vecs[0], vecs[1]); math.Abs(hits[0].Similarity-want) > 1e-4 {
		t.Errorf("similarity %v, recomputed %v", hits[0].Similarity, want)
	}

	calls = nil
	if err := a.Reembed(ctx, e256, func(done, total int) { calls = append(calls, [2]int{done, total}) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls, [][2]int{{0, 0}}) {
		t.Errorf("second Reembed progress %v; want nothing to do", calls)
	}
	checkStats(t, a.Pool(), conv)
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// TestFilteredVectorSearchThroughTheIndex forces the planner onto the HNSW
// index, where a selective conversation filter starves a plain index scan:
// the 40 nearest chunks overall all belong to a large conversation. Both the
// iterative scan (pgvector 0.8) and the exact fallback (older pgvector) must
// still return what an exact search returns.
func TestFilteredVectorSearchThroughTheIndex(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	emb, _ := embed.NewLocal(384)
	m := modelSpec{name: emb.Model(), dims: emb.Dimensions()}
	loader := openStore(t, url, emb, IngestOptions{Chunk: chunk.Options{Size: 200, Overlap: 0}})
	if _, err := loader.Ingest(ctx, "large", "large.txt", "", []byte(prose(70, 12000))); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := loader.Ingest(ctx, "small", fmt.Sprintf("%d.txt", i), "", []byte(prose(uint64(80+i), 20))); err != nil {
			t.Fatal(err)
		}
	}
	const query = "server cluster replica"
	if built, err := loader.BuildIndex(ctx, IndexPolicy{}, true); err != nil || !built {
		t.Fatalf("BuildIndex = %v, %v", built, err)
	}
	st, err := loader.IndexState(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// What an exact search keeps: the small conversation's chunks with a
	// similarity of at least 0 (the threshold).
	rows, err := loader.Pool().Query(ctx, `SELECT id::text, content FROM chunks WHERE conversation_id = 'small'`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ ID, Content string }
	small, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, c := range small {
		v, _ := emb.Embed(ctx, []string{query, c.Content})
		if cosine(v[0], v[1]) >= 0 {
			want[c.ID] = true
		}
	}
	if len(want) == 0 {
		t.Fatal("no chunk of the small conversation is similar to the query; change the test data")
	}

	// Disabling the alternatives leaves the HNSW index as the cheapest
	// path; JIT would only slow the penalised plans down.
	forced := url + "&options=" + strings.NewReplacer(" ", "%20", "=", "%3D").Replace(
		"-c enable_seqscan=off -c enable_bitmapscan=off -c enable_sort=off -c jit=off")
	conn, err := pgx.Connect(ctx, forced)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The same settings in a transaction that a distributed database
	// (Citus) sends along to the worker that runs the statement.
	for _, q := range []string{"BEGIN", "SET LOCAL citus.propagate_set_commands = 'local'",
		"SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off", "SET LOCAL enable_sort = off"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	qv, _ := emb.Embed(ctx, []string{query})
	// The values inline: a distributed database's EXPLAIN cannot show the
	// worker's plan of a statement with a vector parameter.
	plan := explain(t, conn, strings.NewReplacer("$1", "'"+vectorText(qv[0])+"'", "$2", "'small'", "$3", "5").Replace(vectorSQL(m, st.Watermark, 0, "")))
	if !strings.Contains(plan, st.Index) {
		t.Fatalf("vector query plan does not use %s:\n%s", st.Index, plan)
	}
	// The premise: a plain filtered index scan comes back short.
	rows, err = conn.Query(ctx, vectorSQL(m, st.Watermark, 0, ""), vectorText(qv[0]), "small", 5)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID, FileID string
		Sim        float64
	}])
	if err != nil {
		t.Fatal(err)
	}
	distributed, err := migrations.Distributed(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	// On a distributed database the small conversation's shard holds a
	// fraction of the model's chunks, which may not starve the scan: the
	// searches below must find every chunk either way.
	if len(plain) >= len(small) && !distributed {
		t.Fatalf("a plain index scan found %d of %d chunks; the test data does not starve it", len(plain), len(small))
	}

	for _, exact := range []bool{false, true} {
		// However small, the conversation is ranked through the index.
		s := openStoreWith(t, forced, emb, Options{exactChunks: -1}, IngestOptions{})
		s.forceExactFallback = exact
		hits, err := s.Search(ctx, Query{Text: query, ConversationID: "small", Mode: Vector, TopK: 5, Threshold: new(0.0)})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, h := range hits {
			got[h.ChunkID] = true
		}
		if !maps.Equal(got, want) {
			t.Errorf("exact fallback %v: hits %v, want %v", exact, got, want)
		}
	}
}

func explain(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func vectorText(v []float32) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// TestModelNameIsQuoted stores and searches under a model name that needs
// quoting in SQL.
func TestModelNameIsQuoted(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgtest.NewDatabase(t), wordEmbedder{model: "o'brien/embed v2; DROP TABLE chunks", dims: 16}, IngestOptions{})
	ctx := context.Background()
	if _, err := s.Ingest(ctx, "q", "a.txt", "", []byte("quoting matters in every statement")); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{Hybrid, Vector, Keyword} {
		hits, err := s.Search(ctx, Query{Text: "quoting statement", ConversationID: "q", Mode: mode, Threshold: new(0.0)})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 1 {
			t.Errorf("%s: %d hits, want 1", mode, len(hits))
		}
	}
}

func TestFuse(t *testing.T) {
	t.Parallel()
	c := func(id string, sim float64) candidate { return candidate{id: id, similarity: sim} }
	k := func(id string, sim float64) candidate { return candidate{id: id, similarity: sim, keyword: true} }
	r := func(ranks ...int) float64 {
		var s float64
		for _, rank := range ranks {
			s += 1 / float64(rrfK+rank)
		}
		return s
	}
	tests := []struct {
		name      string
		vector    []candidate
		keyword   []candidate
		weight    float64 // of the vector list; 0 means 1
		threshold float64
		want      []string
		scores    []float64
	}{
		{
			name:    "a light vector list yields to keywords",
			vector:  []candidate{c("a", 0.9), c("b", 0.8)},
			keyword: []candidate{k("b", 0.8), k("c", 0.1)},
			weight:  0.25,
			want:    []string{"b", "c", "a"},
			scores:  []float64{0.25*r(2) + r(1), r(2), 0.25 * r(1)},
		},
		{
			name:    "a heavy vector list outranks keywords",
			vector:  []candidate{c("a", 0.9)},
			keyword: []candidate{k("c", 0.1)},
			weight:  2,
			want:    []string{"a", "c"},
			scores:  []float64{2 * r(1), r(1)},
		},
		{
			name:    "in both lists beats first in one",
			vector:  []candidate{c("a", 0.9), c("b", 0.8)},
			keyword: []candidate{k("b", 0.8), k("c", 0.1)},
			want:    []string{"b", "a", "c"},
			scores:  []float64{r(2, 1), r(1), r(2)},
		},
		{
			name:      "threshold drops vector-only chunks, not keyword matches",
			vector:    []candidate{c("a", 0.9), c("b", 0.5), c("c", 0.4)},
			keyword:   []candidate{k("c", 0.4)},
			threshold: 0.6,
			want:      []string{"c", "a"},
			scores:    []float64{r(3, 1), r(1)},
		},
		{
			name:    "equal scores order by similarity",
			vector:  []candidate{c("x", 0.7)},
			keyword: []candidate{k("y", 0.2)},
			want:    []string{"x", "y"},
			scores:  []float64{r(1), r(1)},
		},
		{name: "nothing", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			weight := tt.weight
			if weight == 0 {
				weight = 1
			}
			got := fuse(tt.vector, tt.keyword, weight, tt.threshold)
			var ids []string
			for i, g := range got {
				ids = append(ids, g.id)
				if i < len(tt.scores) && math.Abs(g.score-tt.scores[i]) > 1e-12 {
					t.Errorf("%s: score %v, want %v", g.id, g.score, tt.scores[i])
				}
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("fuse = %v, want %v", ids, tt.want)
			}
		})
	}
}

func TestIndexName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		model  string
		dims   int
		prefix string
	}{
		{"local-hash-v1-384", 384, "chunks_hnsw_local_hash_v1_384_384_"},
		{"openai/text-embedding-3-small", 1536, "chunks_hnsw_openai_text_embeddi_1536_"},
		{"O'Brien  Model", 8, "chunks_hnsw_o_brien_model_8_"},
		{"---", 8, "chunks_hnsw__8_"},
		{strings.Repeat("x", 300), 4000, "chunks_hnsw_" + strings.Repeat("x", 19) + "_4000_"},
	}
	for _, tt := range tests {
		// The largest watermark a sequence can reach still fits.
		got := indexName(tt.model, tt.dims, math.MaxInt64)
		if !strings.HasPrefix(got, tt.prefix) || !strings.HasPrefix(got, indexPrefix(tt.model, tt.dims)) || len(got) > 63 {
			t.Errorf("indexName(%q, %d) = %q; want prefix %q and at most 63 bytes", tt.model, tt.dims, got, tt.prefix)
		}
	}
	// Names that read the same differ by their digest.
	if indexPrefix("a-b", 8) == indexPrefix("a_b", 8) {
		t.Error("models a-b and a_b share an index name")
	}
}

func TestVersionAtLeast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v    string
		want bool
	}{
		{"0.8.0", true}, {"0.8", true}, {"0.10.1", true}, {"1.0.0", true},
		{"0.7.4", false}, {"0.5.1", false}, {"", false}, {"x.y", false},
	}
	for _, tt := range tests {
		if got := versionAtLeast(tt.v, 0, 8); got != tt.want {
			t.Errorf("versionAtLeast(%q, 0, 8) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

// TestKeywordScoresAreOkapiBM25 recomputes every keyword ranking from the
// chunks' lexemes with the textbook formula (a word repeated in the query
// counting that often), after files are added and deleted, so that the
// in-process index's incremental updates and rebuilds are checked too.
func TestKeywordScoresAreOkapiBM25(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{Chunk: chunk.Options{Size: 200, Overlap: 0}})
	ctx := context.Background()
	const conv = "bm25"
	var files []File
	for i := range 3 {
		f, err := s.Ingest(ctx, conv, fmt.Sprintf("%d.txt", i), "", []byte(prose(uint64(90+i), 300)))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// Another conversation's chunks must not count.
	if _, err := s.Ingest(ctx, "elsewhere", "x.txt", "", []byte(prose(99, 300))); err != nil {
		t.Fatal(err)
	}
	queries := []string{
		"Replicas of the database failing over",
		"database database database replica",
		"cluster leader election timeout retry latency",
	}
	checkBM25(t, s, conv, queries)
	// Appended to the cached index.
	if _, err := s.Ingest(ctx, conv, "3.txt", "", []byte(prose(93, 400))); err != nil {
		t.Fatal(err)
	}
	checkBM25(t, s, conv, queries)
	// Rebuilt without the deleted file.
	if err := s.DeleteFile(ctx, files[1].ID); err != nil {
		t.Fatal(err)
	}
	checkBM25(t, s, conv, queries)
}

// checkBM25 compares the keyword rankings of queries with a reference BM25
// computed from the conversation's stored tsvectors.
func checkBM25(t *testing.T, s *testStore, conv string, queries []string) {
	t.Helper()
	ctx := context.Background()
	// tf[chunk][lexeme], from the stored tsvectors.
	rows, err := s.Pool().Query(ctx, `
		SELECT c.id::text, u.lexeme, cardinality(u.positions)
		FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u WHERE c.conversation_id = $1`, conv)
	if err != nil {
		t.Fatal(err)
	}
	tf := map[string]map[string]int{}
	var id, lexeme string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &lexeme, &n}, func() error {
		if tf[id] == nil {
			tf[id] = map[string]int{}
		}
		tf[id][lexeme] = n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	df := map[string]int{}
	total := 0
	for _, terms := range tf {
		for term, n := range terms {
			df[term]++
			total += n
		}
	}
	avgdl := float64(total) / float64(len(tf))
	bm25 := func(chunkID string, query map[string]int) float64 {
		dl := 0
		for _, n := range tf[chunkID] {
			dl += n
		}
		var score float64
		for q, qtf := range query {
			f := float64(tf[chunkID][q])
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (float64(len(tf))-float64(df[q])+0.5)/(float64(df[q])+0.5))
			score += float64(qtf) * idf * f * (DefaultBM25K1 + 1) / (f + DefaultBM25K1*(1-DefaultBM25B+DefaultBM25B*float64(dl)/avgdl))
		}
		return score
	}

	for _, query := range queries {
		// The query's lexemes are the stems PostgreSQL's English
		// configuration gives these words, with their counts.
		rows, err := s.Pool().Query(ctx, `SELECT lexeme, cardinality(positions) FROM unnest(to_tsvector('english', $1))`, query)
		if err != nil {
			t.Fatal(err)
		}
		lexemes := map[string]int{}
		if _, err := pgx.ForEachRow(rows, []any{&lexeme, &n}, func() error { lexemes[lexeme] = n; return nil }); err != nil {
			t.Fatal(err)
		}
		type ref struct {
			id    string
			score float64
		}
		var want []ref
		for id := range tf {
			if sc := bm25(id, lexemes); sc > 0 {
				want = append(want, ref{id, sc})
			}
		}
		slices.SortFunc(want, func(a, b ref) int { return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(a.id, b.id)) })
		want = want[:min(len(want), MaxTopK)]
		hits, err := s.Search(ctx, Query{Text: query, ConversationID: conv, Mode: Keyword, TopK: MaxTopK})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != len(want) || len(hits) == 0 {
			t.Fatalf("%q: %d hits, want %d (every chunk with a query term)", query, len(hits), len(want))
		}
		for i, h := range hits {
			// Scores equal up to summation order; a near tie may swap.
			if math.Abs(h.Score-want[i].score) > 1e-9 {
				t.Errorf("%q hit %d: score %v, BM25 %v", query, i, h.Score, want[i].score)
			}
			if want := bm25(h.ChunkID, lexemes); math.Abs(h.Score-want) > 1e-9 {
				t.Errorf("%q hit %d: score %v, its BM25 %v", query, i, h.Score, want)
			}
		}
	}
}
