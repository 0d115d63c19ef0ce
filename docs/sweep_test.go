package docs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/docs/eval"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// envSweep names BEIR dataset folders, separated by commas, over which
// TestBM25Sweep measures keyword nDCG@10 for a grid of BM25 parameters:
//
//	MCPSEARCH_BM25_SWEEP=docs/eval/testdata/minibeir go test -run BM25Sweep -v ./docs/
const envSweep = "MCPSEARCH_BM25_SWEEP"

func TestBM25Sweep(t *testing.T) {
	dirs := os.Getenv(envSweep)
	if dirs == "" {
		t.Skipf("set %s to BEIR dataset folders to sweep BM25's k1 and b", envSweep)
	}
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	loader := openStore(t, pgtest.NewDatabase(t), emb, IngestOptions{})
	ctx := context.Background()
	grid := [][2]float64{{0.9, 0.4}, {1.2, 0.75}, {1.2, 0.4}, {0.9, 0.75}, {1.5, 0.75}, {0.6, 0.3}}
	for _, dir := range strings.Split(dirs, ",") {
		// Relative to the repository root, where the command is run.
		if !filepath.IsAbs(dir) {
			dir = filepath.Join("..", dir)
		}
		ds, err := eval.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		conv := "sweep-" + filepath.Base(dir)
		for _, d := range ds.Corpus {
			text := d.Text
			if d.Title != "" {
				text = d.Title + "\n\n" + text
			}
			if _, err := loader.Ingest(ctx, conv, d.ID+".txt", "text/plain", []byte(text)); err != nil && !errors.Is(err, extract.ErrNoText) {
				t.Fatal(err)
			}
		}
		for _, p := range grid {
			s, err := NewStore(loader.Pool(), emb, Options{BM25K1: p[0], BM25B: p[1]})
			if err != nil {
				t.Fatal(err)
			}
			res, err := eval.Evaluate(ctx, ds, fmt.Sprintf("k1=%g b=%g", p[0], p[1]), func(ctx context.Context, q string, k int) ([]string, error) {
				hits, err := s.Rank(ctx, Query{Text: q, ConversationID: conv, Mode: Keyword}, min(MaxRankDepth, 4*k))
				if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrEmptyQuery) {
					return nil, fmt.Errorf("%w: %w", eval.ErrSkipQuery, err)
				}
				var ids []string
				seen := map[string]bool{}
				for _, h := range hits {
					id := strings.TrimSuffix(h.FileName, ".txt")
					if !seen[id] {
						seen[id] = true
						ids = append(ids, id)
					}
				}
				return ids, err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: nDCG@10 %.4f, Recall@100 %.4f (%d queries)", filepath.Base(dir), res.Mode, res.NDCG10, res.Recall100, res.Queries)
		}
	}
}
