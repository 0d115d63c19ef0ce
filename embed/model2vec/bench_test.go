package model2vec

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/mcpsearch/mcpsearch/embed/safetensors"
)

// Synthetic models of the catalogue models' shapes. The hub cannot be
// reached from the tests, so the benchmarks build models of the same sizes:
// the BERT uncased vocabulary (29,528 tokens, exactly potion-base-8M's)
// and, for potion-retrieval-32M, that vocabulary plus made-up whole words
// up to 63,091 tokens; random float32 rows; normalisation on.
var benchShapes = []struct {
	name       string
	vocab      int
	dimensions int
}{
	{"potion-base-8M", 29528, 256},
	{"potion-retrieval-32M", 63091, 512},
}

// writeSyntheticModel writes a model of vocab tokens x dims float32s to dir.
func writeSyntheticModel(tb testing.TB, dir string, vocab, dims int) {
	tb.Helper()
	zb, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "bert-uncased.tokenizer.json.gz"))
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
	v := tok["model"].(map[string]any)["vocab"].(map[string]any)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; len(v) < vocab; i++ {
		// Whole words of 6 to 11 letters, the kind a retrieval model's
		// extra vocabulary holds.
		w := make([]byte, 6+i%6)
		for k := range w {
			w[k] = byte('a' + rng.IntN(26))
		}
		if _, ok := v[string(w)]; !ok {
			v[string(w)] = len(v)
		}
	}
	tj, err := json.Marshal(tok)
	if err != nil {
		tb.Fatal(err)
	}
	data := make([]byte, 4*vocab*dims)
	for i := 0; i < vocab*dims; i++ {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(rng.NormFloat64())))
	}
	var st bytes.Buffer
	if err := safetensors.Encode(&st, []safetensors.Tensor{{Name: "embeddings", DType: safetensors.F32, Shape: []int{vocab, dims}, Data: data}}, nil); err != nil {
		tb.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"tokenizer.json":    tj,
		"model.safetensors": st.Bytes(),
		"config.json":       []byte(`{"model_type": "model2vec", "normalize": true}`),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// benchChunks cuts the project's documentation (the README, then the pages
// of doc/) into chunks of 1,000 characters, the default chunk size: English
// prose, tables, code and commands.
func benchChunks(tb testing.TB) []string {
	tb.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "doc", "*.md"))
	if err != nil {
		tb.Fatal(err)
	}
	var text []byte
	for _, p := range append([]string{filepath.Join("..", "..", "README.md")}, pages...) {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		text = append(text, b...)
	}
	r := []rune(string(text))
	var out []string
	for i := 0; i+1000 <= len(r); i += 1000 {
		out = append(out, string(r[i:i+1000]))
	}
	return out
}

// BenchmarkEmbed measures chunks of 1,000 characters embedded per second on
// one goroutine.
func BenchmarkEmbed(b *testing.B) {
	chunks := benchChunks(b)
	for _, s := range benchShapes {
		b.Run(s.name, func(b *testing.B) {
			dir := b.TempDir()
			writeSyntheticModel(b, dir, s.vocab, s.dimensions)
			m, err := Load(dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				batch := chunks[n%len(chunks):]
				batch = batch[:min(len(batch), 64)]
				if _, err := m.Embed(ctx, batch); err != nil {
					b.Fatal(err)
				}
				n += len(batch)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "chunks/s")
		})
	}
}

// BenchmarkTokenize measures the tokenizer alone on the same chunks.
func BenchmarkTokenize(b *testing.B) {
	chunks := benchChunks(b)
	dir := b.TempDir()
	writeSyntheticModel(b, dir, 29528, 8)
	m, err := Load(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	var ids []int32
	n := 0
	for b.Loop() {
		ids = m.tokenize(ids, chunks[n%len(chunks)])
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkLoad measures loading a model (reading, SHA-256 of every file,
// parsing), the heap the loaded model keeps and all it allocates meanwhile.
func BenchmarkLoad(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(s.name, func(b *testing.B) {
			dir := b.TempDir()
			writeSyntheticModel(b, dir, s.vocab, s.dimensions)
			var heap, alloc uint64
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				m, err := Load(dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap = after.HeapAlloc - before.HeapAlloc
				alloc = after.TotalAlloc - before.TotalAlloc
				runtime.KeepAlive(m)
			}
			b.ReportMetric(float64(heap)/(1<<20), "MiB-heap")
			b.ReportMetric(float64(alloc)/(1<<20), "MiB-allocated")
		})
	}
}

// TestSyntheticModelShapes checks that the benchmark models have the
// catalogue models' vocabulary sizes (with few dimensions, to stay fast).
func TestSyntheticModelShapes(t *testing.T) {
	for _, s := range benchShapes {
		dir := t.TempDir()
		writeSyntheticModel(t, dir, s.vocab, 4)
		m, err := Load(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if m.tok.VocabSize() != s.vocab || m.Dimensions() != 4 || m.MemoryBytes() != int64(4*s.vocab*4) {
			t.Errorf("%s: %d tokens x %d, %d bytes", s.name, m.tok.VocabSize(), m.Dimensions(), m.MemoryBytes())
		}
		if k, ok := Find(s.name); !ok || k.Dimensions != s.dimensions {
			t.Errorf("%s: the catalogue gives %d dimensions, the benchmark %d", s.name, k.Dimensions, s.dimensions)
		}
	}
}
