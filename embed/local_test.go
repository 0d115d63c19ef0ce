package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

func newTestLocal(t testing.TB, dims int) *Local {
	t.Helper()
	l, err := NewLocal(dims)
	if err != nil {
		t.Fatalf("NewLocal(%d): %v", dims, err)
	}
	return l
}

func embedOne(t testing.TB, e Embedder, text string) []float32 {
	t.Helper()
	vecs, err := e.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatalf("Embed(%q): %v", text, err)
	}
	return vecs[0]
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestNewLocalDimensions(t *testing.T) {
	tests := []struct {
		dims      int
		wantDims  int
		wantModel string
		wantErr   bool
	}{
		{dims: 0, wantDims: 384, wantModel: "local-hash-v1-384"},
		{dims: 32, wantDims: 32, wantModel: "local-hash-v1-32"},
		{dims: 1024, wantDims: 1024, wantModel: "local-hash-v1-1024"},
		{dims: 2000, wantDims: 2000, wantModel: "local-hash-v1-2000"},
		{dims: 31, wantErr: true},
		{dims: 2001, wantErr: true},
		{dims: -384, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.dims), func(t *testing.T) {
			l, err := NewLocal(tt.dims)
			if tt.wantErr {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("NewLocal(%d) error = %v, want ErrConfig", tt.dims, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewLocal(%d): %v", tt.dims, err)
			}
			if l.Dimensions() != tt.wantDims || l.Model() != tt.wantModel {
				t.Errorf("got dims %d model %q, want %d %q", l.Dimensions(), l.Model(), tt.wantDims, tt.wantModel)
			}
			if got := len(embedOne(t, l, "hello world")); got != tt.wantDims {
				t.Errorf("vector length %d, want %d", got, tt.wantDims)
			}
		})
	}
}

func TestLocalUnitNorm(t *testing.T) {
	l := newTestLocal(t, 0)
	texts := []string{
		"PostgreSQL stores vectors with pgvector",
		"a",
		"to be or not to be",
		"",
		"   --- !!! ...",
		"Grüße aus München: Straße, Übergröße",
		"東京の天気は晴れです",
		"E1047 max_connections=200",
		strings.Repeat("repeat ", 5000),
		"x" + strings.Repeat("y", 3000),
	}
	vecs, err := l.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		if len(v) != l.Dimensions() {
			t.Errorf("text %d: length %d", i, len(v))
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("text %d: non-finite component", i)
			}
		}
		if n := norm(v); math.Abs(n-1) > 1e-5 {
			t.Errorf("text %d (%.20q): norm %v, want 1", i, texts[i], n)
		}
	}
}

func TestLocalDeterministic(t *testing.T) {
	texts := []string{"Go channels and goroutines", "", "Connection refused on port 5432"}
	a, err := newTestLocal(t, 256).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	// A second instance, and the texts in another batch order, must agree
	// bit for bit: stored vectors are compared with vectors made later.
	rev := []string{texts[2], texts[1], texts[0]}
	b, err := newTestLocal(t, 256).Embed(context.Background(), rev)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		got := b[len(texts)-1-i]
		for j := range a[i] {
			if a[i][j] != got[j] {
				t.Fatalf("text %d differs at %d: %v vs %v", i, j, a[i][j], got[j])
			}
		}
	}
}

// TestLocalPinned fixes the vectors of version v1: if this fails, the recipe
// changed and localVersion must be bumped along with these figures.
func TestLocalPinned(t *testing.T) {
	v := embedOne(t, newTestLocal(t, 64), "The quick brown fox jumps over the lazy dog")
	var sum, weighted float64
	for i, x := range v {
		sum += float64(x)
		weighted += float64(i+1) * float64(x)
	}
	const wantSum, wantWeighted = 1.157204852, 14.159342952
	if math.Abs(sum-wantSum) > 1e-5 || math.Abs(weighted-wantWeighted) > 1e-4 {
		t.Errorf("checksums = %.9f, %.9f; want %.9f, %.9f", sum, weighted, wantSum, wantWeighted)
	}
}

func TestLocalSimilarity(t *testing.T) {
	l := newTestLocal(t, 0)
	tests := []struct {
		query, related, unrelated string
	}{
		{
			query:     "how to configure database connection pooling",
			related:   "Configuring the connection pool of the database: max connections and idle timeout",
			unrelated: "Simmer the tomato sauce with garlic and basil for twenty minutes",
		},
		{
			query:     "goroutine leak",
			related:   "A goroutine that blocks forever on a channel leaks; use context cancellation",
			unrelated: "TCP retransmission timers back off exponentially after packet loss",
		},
		{
			query:     "error E1047",
			related:   "E1047 means the replication slot is missing",
			unrelated: "E2210 means the disk is full",
		},
		{
			// Inflected forms share character n-grams.
			query:     "indexes",
			related:   "indexing strategy",
			unrelated: "baking bread",
		},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q := embedOne(t, l, tt.query)
			rel, unrel := cosine(q, embedOne(t, l, tt.related)), cosine(q, embedOne(t, l, tt.unrelated))
			if rel <= unrel {
				t.Errorf("cos(related) = %.3f <= cos(unrelated) = %.3f", rel, unrel)
			}
		})
	}
}

func TestLocalCaseAndPunctuation(t *testing.T) {
	l := newTestLocal(t, 0)
	a := embedOne(t, l, "PostgreSQL, Replication!")
	b := embedOne(t, l, "postgresql replication")
	if c := cosine(a, b); c < 0.999999 {
		t.Errorf("case and punctuation changed the vector: cosine %v", c)
	}
}

func TestLocalNoLetters(t *testing.T) {
	l := newTestLocal(t, 0)
	empty := embedOne(t, l, "")
	symbols := embedOne(t, l, " \t--- ?! ")
	if c := cosine(empty, symbols); c < 0.999999 {
		t.Errorf("texts without letters differ: cosine %v", c)
	}
	if n := norm(empty); math.Abs(n-1) > 1e-5 {
		t.Errorf("fallback norm %v, want 1", n)
	}
	text := embedOne(t, l, "replication lag on the standby server")
	if c := math.Abs(cosine(empty, text)); c > 0.3 {
		t.Errorf("fallback too close to real text: |cosine| %v", c)
	}
	// The fallback is a copy: changing one result must not change the next.
	empty[0] = 42
	if again := embedOne(t, l, ""); again[0] == 42 {
		t.Error("fallback vector shared between calls")
	}
}

func TestLocalStopWordsOnly(t *testing.T) {
	l := newTestLocal(t, 0)
	a := embedOne(t, l, "to be or not to be")
	b := embedOne(t, l, "which of these")
	empty := embedOne(t, l, "")
	if c := cosine(a, empty); c > 0.99 {
		t.Errorf("stop-word text got the no-text fallback: cosine %v", c)
	}
	if c := cosine(a, b); c > 0.9 {
		t.Errorf("different stop-word texts nearly identical: cosine %v", c)
	}
}

func TestLocalConcurrent(t *testing.T) {
	l := newTestLocal(t, 0)
	texts := []string{"alpha beta", "gamma delta", "epsilon", "", "zeta eta theta"}
	want, err := l.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for range 20 {
				got, err := l.Embed(context.Background(), texts)
				if err != nil {
					errs <- err
					return
				}
				for i := range got {
					for j := range got[i] {
						if got[i][j] != want[i][j] {
							errs <- fmt.Errorf("text %d component %d differs", i, j)
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestLocalCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newTestLocal(t, 0).Embed(ctx, []string{"a", "b"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

func TestLocalEmptyBatch(t *testing.T) {
	vecs, err := newTestLocal(t, 0).Embed(context.Background(), nil)
	if err != nil || len(vecs) != 0 {
		t.Fatalf("Embed(nil) = %d vectors, %v", len(vecs), err)
	}
}

// benchChunk builds a deterministic 1000-character text of technical words.
func benchChunk(seed int) string {
	words := strings.Fields("the replication slot holds write-ahead log segments until every standby " +
		"confirms them; a goroutine that blocks on an unbuffered channel leaks memory, and " +
		"connection pooling bounds max_connections while vacuum reclaims dead tuples in indexes " +
		"error E1047 appears when the configuration file omits shared_buffers or work_mem")
	var b strings.Builder
	for i := seed; b.Len() < 1000; i++ {
		b.WriteString(words[(i*7+seed)%len(words)])
		b.WriteByte(' ')
	}
	return b.String()[:1000]
}

func BenchmarkLocalEmbed(b *testing.B) {
	for _, dims := range []int{384, 1024} {
		b.Run(fmt.Sprint(dims), func(b *testing.B) {
			l := newTestLocal(b, dims)
			chunks := make([]string, 64)
			for i := range chunks {
				chunks[i] = benchChunk(i)
			}
			ctx := context.Background()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if _, err := l.Embed(ctx, chunks); err != nil {
					b.Fatal(err)
				}
				n += len(chunks)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "texts/s")
		})
	}
}
