package docs

import (
	"os"
	"testing"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/embed/model2vec"
	"github.com/mcpsearch/mcpsearch/internal/m2vtest"
)

// envBenchEmbedder chooses the embedder of BenchmarkSmallFiles: "local"
// (the default, the hashing embedder at 384 dimensions) or a model2vec
// model of a catalogue model's shape, "potion-base-8M" or
// "potion-retrieval-32M".
const envBenchEmbedder = "MCPSEARCH_BENCH_EMBEDDER"

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
	shape, ok := m2vtest.ShapeOf(name)
	if !ok {
		b.Fatalf("%s=%q: want local, potion-base-8M or potion-retrieval-32M", envBenchEmbedder, name)
	}
	if k, ok := model2vec.Find(name); !ok || k.Dimensions != shape.Dims {
		b.Fatalf("%s: the catalogue gives %d dimensions, the benchmark %d", name, k.Dimensions, shape.Dims)
	}
	dir := b.TempDir()
	m2vtest.WriteModel(b, dir, shape.Vocab, shape.Dims)
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
