package docs

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/embed/model2vec"
	"github.com/mcpsearch/mcpsearch/embed/safetensors"
)

// envBenchEmbedder chooses the embedder of BenchmarkSmallFiles: "local"
// (the default, the hashing embedder at 384 dimensions) or a model2vec
// model of a catalogue model's shape, "potion-base-8M" or
// "potion-retrieval-32M".
const envBenchEmbedder = "MCPSEARCH_BENCH_EMBEDDER"

// benchModels are the shapes of the catalogue's model2vec models: the BERT
// uncased vocabulary (29,528 tokens, potion-base-8M's) and, for
// potion-retrieval-32M, that vocabulary extended with made-up whole words
// to 63,091 tokens, with the catalogue's dimensions.
var benchModels = map[string]struct{ vocab, dims int }{
	"potion-base-8M":       {29528, 256},
	"potion-retrieval-32M": {63091, 512},
}

// benchEmbedder returns the embedder envBenchEmbedder names, and a label
// for reports. The hub cannot be reached from the benchmarks, so a model2vec
// model is built with the catalogue model's shape and random float32 rows:
// its vectors are means of random rows over the texts' word pieces, as
// many dimensions as the real model's, and searching them costs what
// searching the real model's does.
func benchEmbedder(b *testing.B) (embed.Embedder, string) {
	b.Helper()
	name := benchEmbedderName()
	if name == "local" {
		emb, err := embed.NewLocal(384)
		if err != nil {
			b.Fatal(err)
		}
		return emb, "local embedder (hashing, 384 dimensions)"
	}
	shape, ok := benchModels[name]
	if !ok {
		b.Fatalf("%s=%q: want local, potion-base-8M or potion-retrieval-32M", envBenchEmbedder, name)
	}
	if k, ok := model2vec.Find(name); !ok || k.Dimensions != shape.dims {
		b.Fatalf("%s: the catalogue gives %d dimensions, the benchmark %d", name, k.Dimensions, shape.dims)
	}
	dir := b.TempDir()
	writeRandomModel(b, dir, shape.vocab, shape.dims)
	m, err := model2vec.Load(dir, model2vec.Options{Name: "bench/" + name})
	if err != nil {
		b.Fatal(err)
	}
	return m, "model2vec, " + name + " shape with random weights"
}

// benchEmbedderName is the embedder envBenchEmbedder names, "local" by
// default.
func benchEmbedderName() string {
	if name := os.Getenv(envBenchEmbedder); name != "" {
		return name
	}
	return "local"
}

// writeRandomModel writes to dir a model2vec model of vocab tokens x dims
// float32s drawn from a normal distribution, normalising its vectors.
func writeRandomModel(tb testing.TB, dir string, vocab, dims int) {
	tb.Helper()
	zb, err := os.ReadFile(filepath.Join("..", "embed", "tokenizer", "testdata", "bert-uncased.tokenizer.json.gz"))
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
