package docs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/docs/eval"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// TestDefaultThresholdCalibration measures, on the shipped minibeir dataset
// with the local embedder at several sizes, the cosine similarity of each
// judged query's best vector hit, split by whether that hit is judged
// relevant, and of the other hits of the top 10. It logs the figures the
// local default threshold was fitted on (run with -v) and checks that the
// default keeps the relevant best hits and drops most non-relevant ones.
func TestDefaultThresholdCalibration(t *testing.T) {
	t.Parallel()
	ds, err := eval.Load("eval/testdata/minibeir")
	if err != nil {
		t.Fatal(err)
	}
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	for _, dims := range []int{128, 384, 1536} {
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			emb, err := embed.NewLocal(dims)
			if err != nil {
				t.Fatal(err)
			}
			s := openStore(t, url, emb, IngestOptions{})
			conv := fmt.Sprintf("minibeir-%d", dims)
			for _, d := range ds.Corpus {
				if _, err := s.Ingest(ctx, conv, d.ID+".txt", "text/plain", []byte(d.Title+"\n\n"+d.Text)); err != nil {
					t.Fatal(err)
				}
			}
			th := s.DefaultThreshold()
			if th != LocalThreshold(dims) {
				t.Fatalf("DefaultThreshold = %v, want LocalThreshold(%d) = %v", th, dims, LocalThreshold(dims))
			}
			var topRel, topNon, restRel, restNon []float64
			keptTop := 0
			for _, q := range ds.Queries {
				hits, err := s.Search(ctx, Query{Text: q.Text, ConversationID: conv, Mode: Vector, TopK: 10, Threshold: new(0.0)})
				if err != nil {
					t.Fatal(err)
				}
				for i, h := range hits {
					rel := ds.Qrels[q.ID][strings.TrimSuffix(h.FileName, ".txt")] > 0
					switch {
					case i == 0 && rel:
						topRel = append(topRel, h.Similarity)
						// The same query without a threshold: the
						// default must keep this relevant best hit.
						def, err := s.Search(ctx, Query{Text: q.Text, ConversationID: conv, Mode: Vector})
						if err != nil {
							t.Fatal(err)
						}
						if len(def) > 0 && def[0].ChunkID == h.ChunkID {
							keptTop++
						}
					case i == 0:
						topNon = append(topNon, h.Similarity)
					case rel:
						restRel = append(restRel, h.Similarity)
					default:
						restNon = append(restNon, h.Similarity)
					}
				}
			}
			for _, l := range []struct {
				name string
				v    []float64
			}{{"top hit relevant", topRel}, {"top hit not relevant", topNon}, {"ranks 2-10 relevant", restRel}, {"ranks 2-10 not relevant", restNon}} {
				slices.Sort(l.v)
				t.Logf("%-24s n=%3d %s", l.name, len(l.v), quantiles(l.v))
			}
			rel := append(slices.Clone(topRel), restRel...)
			non := append(slices.Clone(topNon), restNon...)
			for _, c := range []float64{0.10, th - 0.02, th, th + 0.02, 0.30, RemoteThreshold} {
				kr, kn, tr := above(rel, c), above(non, c), above(topRel, c)
				mark := ""
				if c == th {
					mark = " (default)"
				}
				t.Logf("threshold %.2f%s: keeps %d/%d relevant hits, %d/%d non-relevant; %d/%d relevant best hits",
					c, mark, kr, len(rel), kn, len(non), tr, len(topRel))
			}
			if keptTop < len(topRel)*9/10 {
				t.Errorf("with the default threshold %.2f, %d of %d queries keep their relevant best hit; want 90%%", th, keptTop, len(topRel))
			}
			if kn := above(non, th); kn > len(non)/5 {
				t.Errorf("the default threshold %.2f keeps %d of %d non-relevant hits; want at most a fifth", th, kn, len(non))
			}
		})
	}
}

func above(v []float64, th float64) int {
	n := 0
	for _, x := range v {
		if x >= th {
			n++
		}
	}
	return n
}

func quantiles(v []float64) string {
	if len(v) == 0 {
		return ""
	}
	q := func(p float64) float64 { return v[int(p*float64(len(v)-1))] }
	return fmt.Sprintf("min %.3f p10 %.3f median %.3f p90 %.3f max %.3f", v[0], q(0.1), q(0.5), q(0.9), v[len(v)-1])
}

func TestDefaultThresholdPerEmbedder(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	pool := openPool(t, url)
	local, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		emb  embed.Embedder
		opts Options
		want float64
	}{
		{"local", local, Options{}, 0.17},
		{"local behind a wrapper", failingEmbedder{local}, Options{}, 0.17},
		{"model2vec model", namedEmbedder{local, "model2vec:minishlab/potion-base-8M@bf8b056651a2"}, Options{}, Model2VecThreshold},
		{"other model", wordEmbedder{model: "words", dims: 64}, Options{}, RemoteThreshold},
		{"set by the operator", local, Options{DefaultThreshold: 0.4}, 0.4},
	}
	for _, tt := range tests {
		s, err := NewStore(pool, tt.emb, tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.DefaultThreshold(); got != tt.want {
			t.Errorf("%s: DefaultThreshold = %v, want %v", tt.name, got, tt.want)
		}
	}
	for _, bad := range []float64{-0.1, 1.1} {
		if _, err := NewStore(pool, local, Options{DefaultThreshold: bad}); err == nil {
			t.Errorf("NewStore accepted a default threshold of %v", bad)
		}
	}
	for dims, want := range map[int]float64{128: 0.22, 384: 0.17, 1536: 0.13} {
		if got := LocalThreshold(dims); got != want {
			t.Errorf("LocalThreshold(%d) = %v, want %v", dims, got, want)
		}
	}
}
