package model2vec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/embed/safetensors"
)

type golden struct {
	MedianTokenLength int `json:"median_token_length"`
	UnkID             int `json:"unk_id"`
	Dims              int `json:"dims"`
	Rows              int `json:"rows"`
	Cases             []struct {
		MaxLength int       `json:"max_length"`
		Text      string    `json:"text"`
		IDs       []int32   `json:"ids"`
		Vector    []float64 `json:"vector"`
	} `json:"cases"`
}

// TestGolden compares ids and vectors with what model2vec's algorithm gives
// on the reference tokenizer's ids (tools/tokref/gen.js), for models of each
// tensor type, with and without weights, mapping and normalisation.
func TestGolden(t *testing.T) {
	for _, name := range []string{"f32", "f16-weights", "i8-mapping", "f32-mapping-i32"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			var g golden
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatal(err)
			}
			models := map[int]*Model{}
			checked := 0
			for _, c := range g.Cases {
				m := models[c.MaxLength]
				if m == nil {
					if m, err = Load(dir, Options{MaxTokens: c.MaxLength}); err != nil {
						t.Fatalf("Load: %v", err)
					}
					if got := medianTokenLength(m.tok); got != g.MedianTokenLength {
						t.Fatalf("median token length %d, want %d", got, g.MedianTokenLength)
					}
					if m.Dimensions() != g.Dims || m.rows != g.Rows || int(m.unkID) != g.UnkID {
						t.Fatalf("dims %d rows %d unk %d, want %d %d %d", m.Dimensions(), m.rows, m.unkID, g.Dims, g.Rows, g.UnkID)
					}
					models[c.MaxLength] = m
				}
				ids := m.Tokenize(c.Text)
				if !slices.Equal(ids, c.IDs) && len(ids)+len(c.IDs) > 0 {
					t.Errorf("max %d: Tokenize(%+q) = %v, want %v", c.MaxLength, c.Text, ids, c.IDs)
					continue
				}
				vecs, err := m.Embed(context.Background(), []string{c.Text})
				if err != nil {
					t.Fatal(err)
				}
				want := c.Vector
				if len(c.IDs) == 0 {
					want = make([]float64, len(m.fallback))
					for i, x := range m.fallback {
						want[i] = float64(x)
					}
				}
				for k := range want {
					if d := math.Abs(float64(vecs[0][k]) - want[k]); d > 1e-5*math.Max(1, math.Abs(want[k])) {
						t.Errorf("max %d: Embed(%+q)[%d] = %v, want %v", c.MaxLength, c.Text, k, vecs[0][k], want[k])
						break
					}
				}
				checked++
			}
			if checked < 100 {
				t.Fatalf("only %d cases checked", checked)
			}
		})
	}
}

func TestModelName(t *testing.T) {
	dir := filepath.Join("testdata", "f32")
	a, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.Model(), "model2vec:f32@sha256-") || len(a.Model()) != len("model2vec:f32@sha256-")+12 {
		t.Errorf("Model() = %q", a.Model())
	}
	b, err := Load(filepath.Join("testdata", "f16-weights"), Options{Name: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Model() == b.Model() {
		t.Errorf("two different models share the name %q", a.Model())
	}
	c, err := Load(dir, Options{Name: "minishlab/x", Revision: "6fc8051fab2a1e0ee76689cf08c853792ac285e7"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Model() != "model2vec:minishlab/x@6fc8051fab2a" {
		t.Errorf("Model() = %q", c.Model())
	}
}

// TestFallback checks that a text with no known token gets a fixed unit
// vector, never the zero vector.
func TestFallback(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "f16-weights"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := m.Embed(context.Background(), []string{"", "   ", "\u0000", "qqqqqqq"})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		var sq float64
		for _, x := range v {
			sq += float64(x) * float64(x)
		}
		if math.Abs(sq-1) > 1e-6 || !slices.Equal(v, vecs[0]) {
			t.Errorf("vector %d = %v (norm² %v), want the fallback unit vector", i, v, sq)
		}
	}
}

func TestEmbedCancelled(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "f32"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Embed(ctx, []string{"a"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Embed: %v, want context.Canceled", err)
	}
}

// TestSentenceTransformersLayout checks the other folder layout model2vec
// reads: the matrix named embedding.weight, under 0_StaticEmbedding, with
// config_sentence_transformers.json (which has no normalize flag).
func TestSentenceTransformersLayout(t *testing.T) {
	src := filepath.Join("testdata", "f32")
	dir := t.TempDir()
	sub := filepath.Join(dir, "0_StaticEmbedding")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.ReadFile(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	emb, _ := st.Tensor("embeddings")
	emb.Name = "embedding.weight"
	var buf bytes.Buffer
	if err := safetensors.Encode(&buf, []safetensors.Tensor{emb}, nil); err != nil {
		t.Fatal(err)
	}
	tok, _ := os.ReadFile(filepath.Join(src, "tokenizer.json"))
	for name, b := range map[string][]byte{
		filepath.Join(sub, "model.safetensors"):                 buf.Bytes(),
		filepath.Join(sub, "tokenizer.json"):                    tok,
		filepath.Join(dir, "config_sentence_transformers.json"): []byte(`{"__version__": {}}`),
	} {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st2, err := Load(dir, Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	ref, err := Load(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st2.Normalized() || !ref.Normalized() {
		t.Fatalf("normalised: %v and %v, want false and true", st2.Normalized(), ref.Normalized())
	}
	a, _ := st2.Embed(context.Background(), []string{"hello world"})
	b, _ := ref.Embed(context.Background(), []string{"hello world"})
	var norm float64
	for _, x := range a[0] {
		norm += float64(x) * float64(x)
	}
	norm = math.Sqrt(norm)
	for k := range a[0] {
		if math.Abs(float64(a[0][k])/norm-float64(b[0][k])) > 1e-6 {
			t.Fatalf("vectors differ in direction at %d: %v vs %v", k, a[0], b[0])
		}
	}
}
