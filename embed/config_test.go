package embed

import (
	"errors"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		wantModel string
		wantDims  int    // checked for local only: remote sizes may need a probe
		wantErr   string // in the error; "" for success
	}{
		{name: "default is local", cfg: Config{}, wantModel: "local-hash-v1-384", wantDims: 384},
		{name: "local with dims", cfg: Config{Provider: "local", Dimensions: 1024}, wantModel: "local-hash-v1-1024", wantDims: 1024},
		{name: "provider case and space", cfg: Config{Provider: " Local "}, wantModel: "local-hash-v1-384", wantDims: 384},
		{name: "local repeating its model", cfg: Config{Provider: "local", Model: "local-hash-v1-384"}, wantModel: "local-hash-v1-384", wantDims: 384},
		{name: "local with a foreign model", cfg: Config{Provider: "local", Model: "text-embedding-3-small"}, wantErr: "leave the model empty"},
		{name: "local with a base URL", cfg: Config{BaseURL: "http://127.0.0.1:1"}, wantErr: "provider local takes no base URL"},
		{name: "local dims out of range", cfg: Config{Dimensions: 4096}, wantErr: "outside 32..2000"},
		{name: "openai", cfg: Config{Provider: "openai", Model: "text-embedding-3-large", APIKey: "sk", Dimensions: 256, SendDimensions: true}, wantModel: "openai:text-embedding-3-large@256"},
		{name: "openai compatible", cfg: Config{Provider: "openai", Model: "bge-m3", BaseURL: "http://127.0.0.1:8080/v1"}, wantModel: "openai:bge-m3"},
		{name: "openai without model", cfg: Config{Provider: "openai", APIKey: "sk"}, wantErr: "openai: model is required"},
		{name: "openai without key", cfg: Config{Provider: "openai", Model: "text-embedding-3-small"}, wantErr: "API key is required"},
		{name: "ollama", cfg: Config{Provider: "ollama", Model: "nomic-embed-text", Dimensions: 768}, wantModel: "ollama:nomic-embed-text:latest"},
		{name: "ollama without model", cfg: Config{Provider: "ollama"}, wantErr: "ollama: model is required"},
		{name: "ollama with send dimensions", cfg: Config{Provider: "ollama", Model: "m", SendDimensions: true}, wantErr: "send-dimensions"},
		{name: "unknown provider", cfg: Config{Provider: "cohere"}, wantErr: `unknown provider "cohere" (want local, openai, ollama or model2vec)`},
		{name: "model2vec from a folder", cfg: Config{Provider: "model2vec", ModelDir: "model2vec/testdata/f32", ModelsDir: "/nonexistent"}, wantModel: "model2vec:f32@sha256-", wantDims: 16},
		{name: "model2vec with matching dims", cfg: Config{Provider: "model2vec", ModelDir: "model2vec/testdata/f32", Dimensions: 16}, wantModel: "model2vec:f32@sha256-", wantDims: 16},
		{name: "model2vec named folder", cfg: Config{Provider: "model2vec", Model: "mine", ModelDir: "model2vec/testdata/f32"}, wantModel: "model2vec:mine@sha256-", wantDims: 16},
		{name: "model2vec not pulled", cfg: Config{Provider: "model2vec", ModelsDir: "model2vec/testdata"}, wantErr: "mcpsearch models pull potion-retrieval-32M"},
		{name: "model2vec without folders", cfg: Config{Provider: "model2vec"}, wantErr: "no models folder"},
		{name: "model2vec with other dims", cfg: Config{Provider: "model2vec", ModelDir: "model2vec/testdata/f32", Dimensions: 384}, wantErr: "has 16 dimensions, not 384"},
		{name: "model2vec with a key", cfg: Config{Provider: "model2vec", APIKey: "sk"}, wantErr: "provider model2vec takes no base URL"},
		{name: "model folder for local", cfg: Config{ModelDir: "model2vec/testdata/f32"}, wantErr: "a model folder is for provider model2vec only"},
		{name: "models dir ignored by local", cfg: Config{ModelsDir: "/nonexistent"}, wantModel: "local-hash-v1-384", wantDims: 384},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(tt.cfg)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want ErrConfig mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			// A model2vec folder without a manifest is named by a digest
			// of its files: the test names the part before it.
			if e.Model() != tt.wantModel && !(strings.HasSuffix(tt.wantModel, "@sha256-") && strings.HasPrefix(e.Model(), tt.wantModel) && len(e.Model()) == len(tt.wantModel)+12) {
				t.Errorf("Model() = %q, want %q", e.Model(), tt.wantModel)
			}
			if tt.wantDims != 0 && e.Dimensions() != tt.wantDims {
				t.Errorf("Dimensions() = %d, want %d", e.Dimensions(), tt.wantDims)
			}
		})
	}
}
