package docs

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/pg"
)

// namedEmbedder is the local embedder under another model name, standing
// for an embedder of another kind.
type namedEmbedder struct {
	embed.Embedder
	name string
}

func (e namedEmbedder) Model() string { return e.name }

// TestVectorWeight checks the hybrid weight a store uses: the one it was
// given, or for auto the one calibrated for its embedder. No database is
// needed: a store connects on first use.
func TestVectorWeight(t *testing.T) {
	pool, err := pg.Open(context.Background(), "postgres://mcpsearch@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	local, err := embed.NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	remote := namedEmbedder{local, "ollama/nomic-embed-text"}
	static := namedEmbedder{local, "model2vec:minishlab/potion-retrieval-32M@6fc8051fab2a"}
	tests := []struct {
		name   string
		emb    embed.Embedder
		weight float64
		want   float64
	}{
		{"auto, local embedder", local, 0, 0.01},
		{"auto, model2vec model", static, 0, 0.5},
		{"auto, embedding model", remote, 0, 1},
		{"set, local embedder", local, 0.5, 0.5},
		{"set, model2vec model", static, 0.02, 0.02},
		{"set, embedding model", remote, MaxVectorWeight, MaxVectorWeight},
	}
	for _, tt := range tests {
		st, err := NewStore(pool, tt.emb, Options{VectorWeight: tt.weight})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := st.VectorWeight(); got != tt.want {
			t.Errorf("%s: VectorWeight() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestLocalVectorWeightKeepsKeywordOrder checks the property the local
// embedder's weight was chosen for, on random rankings as deep as Hybrid
// fuses them: whatever the vector ranking says, the fused ranking starts
// with BM25's first 17 chunks in BM25's order, and a chunk only the vector
// ranking found comes after every keyword match. A weight of 1/3, the
// former default, fails it.
func TestLocalVectorWeightKeepsKeywordOrder(t *testing.T) {
	const kept = 17
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(weight float64, trials int) error {
		for trial := range trials {
			k := []int{5, 10, 50, MaxTopK, 400, MaxRankDepth}[trial%6]
			kd, vd := hybridDepths(k)
			pool := make([]string, kd+vd)
			for i := range pool {
				pool[i] = fmt.Sprintf("c%d", i)
			}
			rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
			nk := 1 + rng.IntN(kd)
			keyword := make([]candidate, nk)
			for i := range keyword {
				keyword[i] = candidate{id: pool[i], keyword: true, similarity: rng.Float64()}
			}
			// The vector ranking mixes keyword matches, in any order,
			// with chunks that match no keyword.
			rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
			vector := make([]candidate, vd)
			for i := range vector {
				vector[i] = candidate{id: pool[i], vector: true, similarity: 1 - float64(i)/float64(vd)}
			}
			inKeyword := map[string]bool{}
			for _, c := range keyword {
				inKeyword[c.id] = true
			}
			fused := fuse(vector, keyword, weight, 0)
			for i := range min(kept, nk) {
				if fused[i].id != keyword[i].id {
					return fmt.Errorf("depth %d: fused rank %d is %s, BM25's is %s", k, i+1, fused[i].id, keyword[i].id)
				}
			}
			for i, c := range fused {
				if i < nk && !inKeyword[c.id] {
					return fmt.Errorf("depth %d: %s, found by the vectors alone, ranks %d, above a keyword match", k, c.id, i+1)
				}
			}
		}
		return nil
	}
	if err := check(localVectorWeight, 600); err != nil {
		t.Errorf("weight %v: %v", localVectorWeight, err)
	}
	if err := check(1.0/3, 600); err == nil {
		t.Error("weight 1/3 passed too: the check cannot fail")
	}
}

// TestKeywordDecides checks keywordDecides against fuse on random rankings
// as deep as Hybrid fuses them: wherever it says the keyword ranking decides
// the first k hits, fusing with any vector ranking and any threshold gives
// those hits in that order. It holds up to k = 17 at the hashing embedder's
// weight and never at the weights of other embedders; one rank further, a
// vector ranking exists that reorders the hits, so the bound is the exact
// one.
func TestKeywordDecides(t *testing.T) {
	for _, tt := range []struct {
		weight float64
		upTo   int
	}{
		{localVectorWeight, 17},
		{Model2VecVectorWeight, 0},
		{1, 0},
		{0.001, MaxTopK},
	} {
		for k := 1; k <= MaxTopK; k++ {
			if got, want := keywordDecides(k, k, tt.weight), k <= tt.upTo; got != want {
				t.Errorf("weight %v, k %d: keywordDecides = %v, want %v", tt.weight, k, got, want)
			}
			if keywordDecides(k-1, k, tt.weight) {
				t.Errorf("weight %v, k %d: decided with %d keyword hits", tt.weight, k, k-1)
			}
		}
	}

	rng := rand.New(rand.NewPCG(3, 4))
	// worst puts the chunk at keyword rank k+1 first in the vector
	// ranking, and leaves the one at rank k out of it.
	worst := func(keyword []candidate, k, vd int) []candidate {
		vector := []candidate{{id: keyword[k].id, vector: true, similarity: 1}}
		for i := 1; i < vd; i++ {
			vector = append(vector, candidate{id: fmt.Sprintf("v%d", i), vector: true, similarity: 1 - float64(i)/float64(vd)})
		}
		return vector
	}
	for trial := range 2000 {
		k := 1 + rng.IntN(MaxTopK)
		weight := []float64{localVectorWeight, 0.001, 0.005, 0.02}[trial%4]
		kd, vd := hybridDepths(k)
		keyword := make([]candidate, k+rng.IntN(kd-k+1))
		pool := make([]string, len(keyword)+vd)
		for i := range pool {
			pool[i] = fmt.Sprintf("c%d", i)
		}
		for i := range keyword {
			keyword[i] = candidate{id: pool[i], keyword: true, similarity: rng.Float64()}
		}
		rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
		vector := make([]candidate, vd)
		for i := range vector {
			vector[i] = candidate{id: pool[i], vector: true, similarity: 1 - float64(i)/float64(vd)}
		}
		if rng.IntN(2) == 0 && len(keyword) > k {
			vector = worst(keyword, k, vd)
		}
		threshold := rng.Float64()
		fused := fuse(vector, keyword, weight, threshold)
		alone := fuse(nil, keyword, weight, threshold)
		same := true
		for i := range k {
			same = same && fused[i].id == keyword[i].id && alone[i].id == keyword[i].id
		}
		if keywordDecides(len(keyword), k, weight) && !same {
			t.Fatalf("weight %v, k %d: keywordDecides holds, but the fused hits differ from the keyword ranking's", weight, k)
		}
	}
	// One rank past the bound the worst vector ranking reorders the hits.
	k := 18
	keyword := make([]candidate, k+1)
	for i := range keyword {
		keyword[i] = candidate{id: fmt.Sprintf("c%d", i), keyword: true}
	}
	_, vd := hybridDepths(k)
	if fused := fuse(worst(keyword, k, vd), keyword, localVectorWeight, 0); fused[k-1].id == keyword[k-1].id {
		t.Errorf("k %d: the worst vector ranking left keyword rank %d in place; the bound is not tight", k, k)
	}
}

// TestHybridSkipsVectorsWhereKeywordsDecide searches a conversation in
// which the query's words match many chunks, with the hashing embedder, and
// the vector index in use: where the keyword ranking decides the hits
// (top_k up to 17 with as many keyword matches) Hybrid sends no vector
// ranking to PostgreSQL, and returns what it returns when it ranks the
// vectors too: the same chunks in the same order, with the same text,
// places and similarity. Only Score differs, by the absent vector term.
func TestHybridSkipsVectorsWhereKeywordsDecide(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	pool, rec := recordedPool(t, url)
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	// Conversations over 20 chunks are ranked through the index.
	st, err := NewStore(pool, emb, Options{exactChunks: 20})
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewIngester(st, IngestOptions{Chunk: chunk.Options{Size: 300, Overlap: 0}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	const conv = "skip"
	for i := range 8 {
		if _, err := in.Ingest(ctx, conv, fmt.Sprintf("%d.txt", i), "", []byte(prose(uint64(200+i), 600))); err != nil {
			t.Fatal(err)
		}
	}
	if built, err := st.BuildIndex(ctx, IndexPolicy{}, true); err != nil || !built {
		t.Fatalf("BuildIndex = %v, %v", built, err)
	}
	// A file stored after the build: its chunks are ranked exactly. One
	// of them holds a word no other chunk has: searched for, it leaves
	// the vectors the other hits to find.
	if _, err := in.Ingest(ctx, conv, "fresh.txt", "", []byte(prose(300, 300)+" A zeppelin moored at the mast.")); err != nil {
		t.Fatal(err)
	}

	vectorRankings := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := 0
		for _, s := range rec.stmts {
			if strings.Contains(s.sql, "ORDER BY distance") || strings.Contains(s.sql, "hnsw.ef_search") {
				n++
			}
		}
		rec.stmts = nil
		return n
	}
	skipped := 0
	for _, text := range []string{"server cluster replica", "database index query", "garden river", "network", "stadium school bridge", "the harbor", "zeppelin"} {
		for _, k := range []int{1, 5, 10, 17, 18, MaxTopK} {
			q, err := st.checkQuery(Query{Text: text, ConversationID: conv, TopK: k, Threshold: new(0.1)})
			if err != nil {
				t.Fatal(err)
			}
			keyword, err := st.Search(ctx, Query{Text: text, ConversationID: conv, TopK: k, Mode: Keyword})
			if err != nil {
				t.Fatal(err)
			}
			vectorRankings()
			both, err := st.search(ctx, q, searchRun{k: k, fetch: true, bothRankings: true})
			if err != nil {
				t.Fatal(err)
			}
			if n := vectorRankings(); n == 0 {
				t.Fatalf("%q, top %d: with both rankings asked for, no vector ranking was sent", text, k)
			}
			got, err := st.search(ctx, q, searchRun{k: k, fetch: true})
			if err != nil {
				t.Fatal(err)
			}
			decides := k <= 17 && len(keyword) == k
			if n := vectorRankings(); decides != (n == 0) {
				t.Errorf("%q, top %d, %d keyword hits: %d vector statements sent", text, k, len(keyword), n)
			}
			if decides {
				skipped++
			}
			if len(got) != len(both) {
				t.Fatalf("%q, top %d: %d hits, %d with the vector ranking", text, k, len(got), len(both))
			}
			for i := range got {
				g, b := got[i], both[i]
				if math.Abs(g.Score-b.Score) > localVectorWeight/float64(rrfK+1) {
					t.Errorf("%q, top %d, hit %d: score %v, %v with the vector ranking", text, k, i+1, g.Score, b.Score)
				}
				if decides && g.Score != 1/float64(rrfK+i+1) {
					t.Errorf("%q, top %d, hit %d: score %v, want the keyword term 1/%d", text, k, i+1, g.Score, rrfK+i+1)
				}
				g.Score, b.Score = 0, 0
				if !reflect.DeepEqual(g, b) {
					t.Errorf("%q, top %d, hit %d:\n%+v\nwith the vector ranking:\n%+v", text, k, i+1, g, b)
				}
			}
		}
	}
	if skipped < 10 {
		t.Errorf("the keyword ranking decided %d searches; the corpus should let it decide more", skipped)
	}
}
