package docs

import (
	"context"
	"testing"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/pg"
)

// remoteEmbedder stands for a real embedding model: only its name differs
// from the local embedder's.
type remoteEmbedder struct{ embed.Embedder }

func (remoteEmbedder) Model() string { return "ollama/nomic-embed-text" }

// TestVectorWeight checks the hybrid weight a store uses: the one it was
// given, or for auto the one chosen for its embedder. No database is
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
	tests := []struct {
		name   string
		emb    embed.Embedder
		weight float64
		want   float64
	}{
		{"auto, local embedder", local, 0, localVectorWeight},
		{"auto, embedding model", remoteEmbedder{local}, 0, 1},
		{"set, local embedder", local, 0.5, 0.5},
		{"set, embedding model", remoteEmbedder{local}, MaxVectorWeight, MaxVectorWeight},
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
