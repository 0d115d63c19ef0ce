package model2vec

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/m2vtest"
)

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
	for _, s := range m2vtest.Shapes {
		b.Run(s.Name, func(b *testing.B) {
			dir := b.TempDir()
			m2vtest.WriteModel(b, dir, s.Vocab, s.Dims)
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
	m2vtest.WriteModel(b, dir, 29528, 8)
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
	for _, s := range m2vtest.Shapes {
		b.Run(s.Name, func(b *testing.B) {
			dir := b.TempDir()
			m2vtest.WriteModel(b, dir, s.Vocab, s.Dims)
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
	for _, s := range m2vtest.Shapes {
		dir := t.TempDir()
		m2vtest.WriteModel(t, dir, s.Vocab, 4)
		m, err := Load(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if m.tok.VocabSize() != s.Vocab || m.Dimensions() != 4 || m.MemoryBytes() != int64(4*s.Vocab*4) {
			t.Errorf("%s: %d tokens x %d, %d bytes", s.Name, m.tok.VocabSize(), m.Dimensions(), m.MemoryBytes())
		}
		if k, ok := Find(s.Name); !ok || k.Dimensions != s.Dims {
			t.Errorf("%s: the catalogue gives %d dimensions, the benchmark %d", s.Name, k.Dimensions, s.Dims)
		}
	}
}
