package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// K is the cut-off of nDCG, Recall and MRR; Depth is the cut-off of the
// deep recall, and the k Evaluate passes to the Searcher.
const (
	K     = 10
	Depth = 100
)

// ErrNoQueries is returned by Evaluate when the dataset has no judged query.
var ErrNoQueries = errors.New("eval: dataset has no query with a relevant document")

// ErrSkipQuery, wrapped in a Searcher's error, skips that query: it is
// counted in Result.Skipped and left out of the averages, and the run goes
// on. A searcher returns it for a query the system refuses as invalid.
var ErrSkipQuery = errors.New("eval: query skipped")

// Searcher runs one query and returns up to k document IDs (Doc.ID), best
// first. A searcher over chunks should map chunks to their documents and
// fetch enough chunks to fill k distinct documents.
type Searcher func(ctx context.Context, query string, k int) (docIDs []string, err error)

// Result is the outcome of one retrieval mode on one dataset.
type Result struct {
	// Mode names what was measured, such as "keyword", "vector" or "hybrid".
	Mode string
	// NDCG10, Recall10 and MRR10 are the means over queries of NDCG,
	// Recall and MRR at 10; Recall100 is the mean recall at Depth.
	NDCG10, Recall10, MRR10, Recall100 float64
	// Queries is the number of queries evaluated.
	Queries int
	// Skipped is the number of judged queries the Searcher skipped.
	Skipped int
	// P50 and P99 are latency percentiles of one search call (nearest-rank).
	P50, P99 time.Duration
}

// Evaluate runs every judged query of ds through search with k = Depth, one
// at a time so that latencies are not disturbed by each other, and averages
// the metrics over queries. Repeated IDs in an answer are dropped before
// scoring (the first occurrence counts); the first K IDs are scored for
// nDCG, Recall and MRR, the first Depth for Recall100. A query whose search
// fails with ErrSkipQuery is counted and skipped; any other search error
// stops the run, as does the end of ctx.
func Evaluate(ctx context.Context, ds *Dataset, mode string, search Searcher) (Result, error) {
	return EvaluateRun(ctx, ds, mode, search, nil)
}

// EvaluateRun is Evaluate that also writes every ranked list to run, when
// not nil, in TREC run format ("qid Q0 docid rank score tag", the tag being
// mode and the score descending with the rank), for scoring with other
// tools.
func EvaluateRun(ctx context.Context, ds *Dataset, mode string, search Searcher, run io.Writer) (Result, error) {
	res := Result{Mode: mode}
	lat := make([]time.Duration, 0, len(ds.Queries))
	var ndcg, recall, mrr, recall100 float64
	tag := strings.Join(strings.Fields(mode), "_")
	for _, q := range ds.Queries {
		rel := ds.Qrels[q.ID]
		if !judgedRelevant(rel) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("eval %s: %w", mode, err)
		}
		start := time.Now()
		ids, err := search(ctx, q.Text, Depth)
		took := time.Since(start)
		if errors.Is(err, ErrSkipQuery) {
			res.Skipped++
			continue
		}
		if err != nil {
			return res, fmt.Errorf("eval %s: query %s: %w", mode, q.ID, err)
		}
		lat = append(lat, took)
		ids = distinct(ids, Depth)
		ndcg += NDCG(ids, rel, K)
		recall += Recall(ids, rel, K)
		mrr += MRR(ids, rel, K)
		recall100 += Recall(ids, rel, Depth)
		if run != nil {
			for i, id := range ids {
				if _, err := fmt.Fprintf(run, "%s Q0 %s %d %d %s\n", q.ID, id, i+1, len(ids)-i, tag); err != nil {
					return res, fmt.Errorf("eval %s: write run: %w", mode, err)
				}
			}
		}
	}
	if len(lat) == 0 {
		return res, ErrNoQueries
	}
	n := float64(len(lat))
	res.Queries = len(lat)
	res.NDCG10, res.Recall10, res.MRR10, res.Recall100 = ndcg/n, recall/n, mrr/n, recall100/n
	slices.Sort(lat)
	res.P50, res.P99 = percentile(lat, 50), percentile(lat, 99)
	return res, nil
}

// distinct returns the first k distinct IDs of ids, in order.
func distinct(ids []string, k int) []string {
	out := make([]string, 0, min(k, len(ids)))
	seen := make(map[string]struct{}, cap(out))
	for _, id := range ids {
		if len(out) == k {
			break
		}
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		out = append(out, id)
	}
	return out
}

// percentile returns the nearest-rank p-th percentile of sorted, which must
// not be empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// WriteTable writes results as an aligned table that is also a Markdown
// table: mode, nDCG@10, Recall@10, MRR@10, Recall@100, p50, p99, queries
// and skipped queries.
func WriteTable(w io.Writer, results []Result) error {
	head := []string{"mode", "nDCG@10", "Recall@10", "MRR@10", "Recall@100", "p50", "p99", "queries", "skipped"}
	rows := [][]string{head}
	for _, r := range results {
		rows = append(rows, []string{
			r.Mode,
			strconv.FormatFloat(r.NDCG10, 'f', 4, 64),
			strconv.FormatFloat(r.Recall10, 'f', 4, 64),
			strconv.FormatFloat(r.MRR10, 'f', 4, 64),
			strconv.FormatFloat(r.Recall100, 'f', 4, 64),
			formatLatency(r.P50),
			formatLatency(r.P99),
			strconv.Itoa(r.Queries),
			strconv.Itoa(r.Skipped),
		})
	}
	width := make([]int, len(head))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], len([]rune(cell)))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		for i, cell := range cells {
			pad := strings.Repeat(" ", width[i]-len([]rune(cell)))
			b.WriteString("| ")
			// The mode is text and reads best left-aligned; figures
			// line up on the right.
			if i == 0 {
				b.WriteString(cell + pad)
			} else {
				b.WriteString(pad + cell)
			}
			b.WriteString(" ")
		}
		b.WriteString("|\n")
	}
	line(rows[0])
	for i := range head {
		dashes := strings.Repeat("-", width[i]+1)
		if i == 0 {
			b.WriteString("|-" + dashes)
		} else {
			b.WriteString("|" + dashes + ":")
		}
	}
	b.WriteString("|\n")
	for _, row := range rows[1:] {
		line(row)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatLatency prints a duration with about three significant digits in a
// unit that suits it: 850µs, 12.3ms, 1.25s.
func formatLatency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + "µs"
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	}
}
