package embed

import (
	"path/filepath"
	"testing"
)

// TestSemantic checks which embedders say their vectors capture meaning:
// what search_docs tells agents about paraphrases depends on it.
func TestSemantic(t *testing.T) {
	local, err := NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	openai, err := New(Config{Provider: ProviderOpenAI, Model: "text-embedding-3-small", BaseURL: "http://127.0.0.1:1/v1", Dimensions: 8})
	if err != nil {
		t.Fatal(err)
	}
	ollama, err := New(Config{Provider: ProviderOllama, Model: "nomic-embed-text", BaseURL: "http://127.0.0.1:1", Dimensions: 8})
	if err != nil {
		t.Fatal(err)
	}
	m2v, err := New(Config{Provider: ProviderModel2Vec, ModelDir: filepath.Join("model2vec", "testdata", "f32")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		e    Embedder
		want bool
	}{
		{"local hashing", local, false},
		{"openai-compatible", openai, true},
		{"ollama", ollama, true},
		{"model2vec", m2v, true},
	}
	for _, tt := range tests {
		if got := Semantic(tt.e); got != tt.want {
			t.Errorf("Semantic(%s %s) = %v, want %v", tt.name, tt.e.Model(), got, tt.want)
		}
	}
}
