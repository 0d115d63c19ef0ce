package eval

import (
	"bytes"
	"context"
	"math"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/mcpsearch/mcpsearch/embed"
)

const miniBEIR = "testdata/minibeir"

func loadMiniBEIR(t *testing.T) *Dataset {
	t.Helper()
	ds, err := Load(miniBEIR)
	if err != nil {
		t.Fatalf("Load(%s): %v", miniBEIR, err)
	}
	return ds
}

// TestMiniBEIRConsistent checks the shipped dataset: every query is judged,
// every judgement names a document of the corpus, and grades are 1 or 2.
func TestMiniBEIRConsistent(t *testing.T) {
	ds := loadMiniBEIR(t)
	if len(ds.Corpus) < 40 || len(ds.Queries) < 20 {
		t.Fatalf("%d docs and %d queries, want at least 40 and 20", len(ds.Corpus), len(ds.Queries))
	}
	docs := make(map[string]bool)
	for _, d := range ds.Corpus {
		if d.Title == "" || d.Text == "" {
			t.Errorf("doc %s lacks title or text", d.ID)
		}
		docs[d.ID] = true
	}
	if len(ds.Qrels) != len(ds.Queries) {
		t.Errorf("%d judged queries but %d loaded", len(ds.Qrels), len(ds.Queries))
	}
	graded := 0
	for q, rel := range ds.Qrels {
		for d, g := range rel {
			if !docs[d] {
				t.Errorf("qrels %s names unknown doc %s", q, d)
			}
			if g != 1 && g != 2 {
				t.Errorf("qrels %s %s grade %d, want 1 or 2", q, d, g)
			}
			if g == 1 {
				graded++
			}
		}
	}
	if graded == 0 {
		t.Error("no partially relevant judgements: grades are not exercised")
	}
}

// TestMiniBEIRBaselines runs two reference rankers over the dataset: a plain
// BM25 and the local hashing embedder with exact cosine search. Both are
// lexical, so they must solve the identifier queries; the floors catch a
// dataset whose judgements point at the wrong documents.
func TestMiniBEIRBaselines(t *testing.T) {
	ds := loadMiniBEIR(t)
	ctx := context.Background()

	bm := newBM25(ds.Corpus)
	local, err := embed.NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := newVectorSearch(ctx, local, ds.Corpus)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode    string
		search  Searcher
		minNDCG float64
	}{
		{"bm25", bm.search, 0.6},
		{"local-vector", vs.search, 0.5},
	}
	var results []Result
	for _, tt := range tests {
		res, err := Evaluate(ctx, ds, tt.mode, tt.search)
		if err != nil {
			t.Fatal(err)
		}
		if res.Queries != len(ds.Queries) {
			t.Errorf("%s: %d queries evaluated, want %d", tt.mode, res.Queries, len(ds.Queries))
		}
		if res.NDCG10 < tt.minNDCG {
			t.Errorf("%s: nDCG@10 %.4f below %.2f", tt.mode, res.NDCG10, tt.minNDCG)
		}
		results = append(results, res)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, results); err != nil {
		t.Fatal(err)
	}
	t.Logf("minibeir:\n%s", b.String())
}

func tokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// bm25 is a minimal in-memory Okapi BM25 (k1 0.9, b 0.4) for reference runs.
type bm25 struct {
	ids    []string
	tf     []map[string]int
	length []float64
	df     map[string]int
	avg    float64
}

func newBM25(docs []Doc) *bm25 {
	ix := &bm25{df: make(map[string]int)}
	var total float64
	for _, d := range docs {
		tf := make(map[string]int)
		toks := tokens(d.Title + " " + d.Text)
		for _, w := range toks {
			tf[w]++
		}
		for w := range tf {
			ix.df[w]++
		}
		ix.ids = append(ix.ids, d.ID)
		ix.tf = append(ix.tf, tf)
		ix.length = append(ix.length, float64(len(toks)))
		total += float64(len(toks))
	}
	ix.avg = total / float64(len(docs))
	return ix
}

func (ix *bm25) search(_ context.Context, query string, k int) ([]string, error) {
	const k1, b = 0.9, 0.4
	n := float64(len(ix.ids))
	scores := make([]float64, len(ix.ids))
	for _, w := range tokens(query) {
		df := float64(ix.df[w])
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for i, tf := range ix.tf {
			if f := float64(tf[w]); f > 0 {
				scores[i] += idf * f * (k1 + 1) / (f + k1*(1-b+b*ix.length[i]/ix.avg))
			}
		}
	}
	return topK(ix.ids, scores, k), nil
}

// vectorSearch is exact cosine search over unit vectors.
type vectorSearch struct {
	e    embed.Embedder
	ids  []string
	vecs [][]float32
}

func newVectorSearch(ctx context.Context, e embed.Embedder, docs []Doc) (*vectorSearch, error) {
	texts := make([]string, len(docs))
	vs := &vectorSearch{e: e}
	for i, d := range docs {
		texts[i] = d.Title + "\n" + d.Text
		vs.ids = append(vs.ids, d.ID)
	}
	var err error
	vs.vecs, err = e.Embed(ctx, texts)
	return vs, err
}

func (vs *vectorSearch) search(ctx context.Context, query string, k int) ([]string, error) {
	q, err := vs.e.Embed(ctx, []string{query})
	if err != nil {
		return nil, err
	}
	scores := make([]float64, len(vs.ids))
	for i, v := range vs.vecs {
		for j := range v {
			scores[i] += float64(v[j]) * float64(q[0][j])
		}
	}
	return topK(vs.ids, scores, k), nil
}

// topK returns the IDs of the k highest positive scores, ties by ID.
func topK(ids []string, scores []float64, k int) []string {
	order := make([]int, 0, len(ids))
	for i := range ids {
		if scores[i] > 0 {
			order = append(order, i)
		}
	}
	sort.Slice(order, func(a, b int) bool {
		if scores[order[a]] != scores[order[b]] {
			return scores[order[a]] > scores[order[b]]
		}
		return ids[order[a]] < ids[order[b]]
	})
	out := make([]string, 0, k)
	for _, i := range order[:min(k, len(order))] {
		out = append(out, ids[i])
	}
	return out
}
