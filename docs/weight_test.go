package docs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mcpsearch/mcpsearch/embed"
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
