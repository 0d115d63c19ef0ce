package model2vec

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/embed/hub"
	"github.com/mcpsearch/mcpsearch/embed/safetensors"
	"github.com/mcpsearch/mcpsearch/embed/tokenizer"
)

// modelConfig is a config.json with the fields model2vec writes, of
// which Load reads normalize.
const modelConfig = `{"model_type": "model2vec", "architectures": ["StaticModel"], "tokenizer_name": "baai/bge-base-en-v1.5", "apply_pca": 8, "apply_zipf": true, "hidden_dim": 8, "seq_length": 1000000, "normalize": true}`

// shapedModel writes a model folder whose tokenizer.json is one of
// embed/tokenizer's fixtures and whose matrix is made up, 8 dimensions a
// token, and returns the folder, the matrix and the tokenizer.json.
func shapedModel(t *testing.T, tokenizerFixture string) (string, []float32, []byte) {
	t.Helper()
	gz, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", tokenizerFixture))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// One row per token id.
	parsed, err := tokenizer.Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	rows := parsed.VocabSize()
	const dims = 8
	matrix := make([]float32, 0, rows*dims)
	data := make([]byte, 0, 4*rows*dims)
	for i := range rows * dims {
		v := float32(math.Sin(float64(i)*0.7)) + float32(i%dims)/10
		matrix = append(matrix, v)
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	var st bytes.Buffer
	if err := safetensors.Encode(&st, []safetensors.Tensor{{Name: "embeddings", DType: safetensors.F32, Shape: []int{rows, dims}, Data: data}}, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"config.json": []byte(modelConfig), "tokenizer.json": tok, "model.safetensors": st.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, matrix, tok
}

// TestPublishedShapes loads models with the catalogued models' tokenizers:
// potion-base-8M's tokenizer.json as published, byte for byte, and one
// shaped like potion-retrieval-32M's with padding and truncation set; and
// checks each vector is the normalised mean of the rows of its text's
// known tokens.
func TestPublishedShapes(t *testing.T) {
	tests := []struct {
		fixture string
		// published names the catalogue model whose tokenizer.json the
		// fixture is, byte for byte.
		published string
	}{
		{"potion-base-8M.tokenizer.json.gz", "potion-base-8M"},
		{"potion-retrieval-32M-shape.tokenizer.json.gz", ""},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.fixture, ".tokenizer.json.gz"), func(t *testing.T) {
			dir, matrix, tok := shapedModel(t, tt.fixture)
			if tt.published != "" {
				k, ok := Find(tt.published)
				i := slices.IndexFunc(k.Snapshot.Files, func(f hub.File) bool { return f.Name == "tokenizer.json" })
				if !ok || i < 0 {
					t.Fatalf("no tokenizer.json of %s in the catalogue", tt.published)
				}
				sum := sha256.Sum256(tok)
				if f := k.Snapshot.Files[i]; f.SHA256 != hex.EncodeToString(sum[:]) || f.Size != int64(len(tok)) {
					t.Fatalf("%s is not the catalogue's tokenizer.json of %s", tt.fixture, tt.published)
				}
			}
			m, err := Load(dir, Options{})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if m.Dimensions() != 8 || !m.Normalized() {
				t.Fatalf("dimensions %d, normalised %v", m.Dimensions(), m.Normalized())
			}
			texts := []string{"The harbour library opens at ten.", "Crossings rose by eight percent; [SEP] qzxqzx", strings.Repeat("tidal gardens ", 400)}
			vecs, err := m.Embed(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			for i, text := range texts {
				// model2vec cuts the text to 512 tokens' worth of
				// characters first.
				if r := []rune(text); len(r) > DefaultMaxTokens*medianTokenLength(m.tok) {
					text = string(r[:DefaultMaxTokens*medianTokenLength(m.tok)])
				}
				ids := m.tok.Encode(nil, text)
				want := make([]float64, 8)
				n := 0
				for _, id := range ids {
					if id == m.unkID || n == DefaultMaxTokens {
						continue
					}
					for k := range want {
						want[k] += float64(matrix[int(id)*8+k])
					}
					n++
				}
				var norm float64
				for _, x := range want {
					norm += x * x
				}
				norm = math.Sqrt(norm)
				for k := range want {
					if math.Abs(want[k]/norm-float64(vecs[i][k])) > 1e-5 {
						t.Fatalf("text %d: vector %v, want the normalised mean %v", i, vecs[i], want)
					}
				}
			}
		})
	}
}

// TestUnsupportedTokenizer checks that a model whose tokenizer cannot be
// read as trained says so on one line naming the file and the part.
func TestUnsupportedTokenizer(t *testing.T) {
	dir, _, _ := shapedModel(t, "potion-base-8M.tokenizer.json.gz")
	path := filepath.Join(dir, "tokenizer.json")
	tok, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tok = bytes.Replace(tok, []byte(`"type": "BertPreTokenizer"`), []byte(`"type": "ByteLevel", "add_prefix_space": false`), 1)
	if err := os.WriteFile(path, tok, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir, Options{})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), path+": ") ||
		!strings.Contains(err.Error(), `pre-tokenizer "ByteLevel"`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Load = %v, want one line naming %s and its ByteLevel pre-tokenizer", err, path)
	}
	t.Log(err)
}
