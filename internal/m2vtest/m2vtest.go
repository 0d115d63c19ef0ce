// Package m2vtest builds model2vec models of the catalogue models' shapes
// for tests and benchmarks: the hub cannot be reached from them, so a
// model of the same size stands in, with random weights.
package m2vtest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpsearch/mcpsearch/embed/safetensors"
)

// Shape is a catalogue model's size.
type Shape struct {
	Name        string
	Vocab, Dims int
}

// Shapes are the catalogue's model2vec models: the BERT uncased vocabulary
// (29,528 tokens, exactly potion-base-8M's) and, for potion-retrieval-32M,
// that vocabulary plus made-up whole words up to 63,091 tokens.
var Shapes = []Shape{
	{"potion-base-8M", 29528, 256},
	{"potion-retrieval-32M", 63091, 512},
}

// ShapeOf returns the shape of the catalogue model name.
func ShapeOf(name string) (Shape, bool) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, true
		}
	}
	return Shape{}, false
}

// WriteModel writes to dir a model2vec model of vocab tokens x dims
// float32s drawn from a normal distribution, normalisation on. Its
// tokenizer is the BERT uncased one of embed/tokenizer's test data, its
// vocabulary extended with whole words of 6 to 11 letters, the kind a
// retrieval model's extra vocabulary holds, up to vocab. The same
// arguments write the same model.
func WriteModel(tb testing.TB, dir string, vocab, dims int) {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	zb, err := os.ReadFile(filepath.Join(root, "embed", "tokenizer", "testdata", "bert-uncased.tokenizer.json.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zb))
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	var tok map[string]any
	if err := json.Unmarshal(raw, &tok); err != nil {
		tb.Fatal(err)
	}
	words := tok["model"].(map[string]any)["vocab"].(map[string]any)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; len(words) < vocab; i++ {
		w := make([]byte, 6+i%6)
		for k := range w {
			w[k] = byte('a' + rng.IntN(26))
		}
		if _, ok := words[string(w)]; !ok {
			words[string(w)] = len(words)
		}
	}
	tj, err := json.Marshal(tok)
	if err != nil {
		tb.Fatal(err)
	}
	data := make([]byte, 4*vocab*dims)
	for i := range vocab * dims {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(rng.NormFloat64())))
	}
	var st bytes.Buffer
	if err := safetensors.Encode(&st, []safetensors.Tensor{{Name: "embeddings", DType: safetensors.F32, Shape: []int{vocab, dims}, Data: data}}, nil); err != nil {
		tb.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"tokenizer.json":    tj,
		"model.safetensors": st.Bytes(),
		"config.json":       []byte(`{"model_type": "model2vec", "normalize": true}`),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// moduleRoot returns the folder of go.mod above the working directory, a
// test's package folder.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("m2vtest: no go.mod above the working directory")
		}
		dir = parent
	}
}
