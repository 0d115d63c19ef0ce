package eval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func smallDataset() *Dataset {
	return &Dataset{
		Corpus: []Doc{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}},
		Queries: []Query{
			{ID: "q1", Text: "one"},
			{ID: "q2", Text: "two"},
			{ID: "q3", Text: "three"},
			{ID: "q4", Text: "not judged"},
		},
		Qrels: map[string]map[string]int{
			"q1": {"a": 2, "b": 1},
			"q2": {"c": 1},
			"q3": {"d": 1, "a": 0},
			"q4": {"a": 0},
		},
	}
}

// answers is a Searcher that returns fixed IDs per query text and records
// the queries it saw.
type answers struct {
	byText map[string][]string
	seen   []string
	ks     []int
}

func (a *answers) search(_ context.Context, query string, k int) ([]string, error) {
	a.seen = append(a.seen, query)
	a.ks = append(a.ks, k)
	return a.byText[query], nil
}

func TestEvaluate(t *testing.T) {
	ds := smallDataset()
	tests := []struct {
		name              string
		byText            map[string][]string
		ndcg, recall, mrr float64
	}{
		{
			name:   "perfect",
			byText: map[string][]string{"one": {"a", "b"}, "two": {"c"}, "three": {"d"}},
			ndcg:   1, recall: 1, mrr: 1,
		},
		{
			name:   "nothing found",
			byText: map[string][]string{},
		},
		{
			// q1: b then a (0.8597), q2: miss, q3: second (0.6309).
			name:   "mixed",
			byText: map[string][]string{"one": {"b", "a"}, "two": {"a", "b"}, "three": {"a", "d"}},
			ndcg:   ((1+2/l2)/(2+1/l2) + 0 + 1/l2) / 3,
			recall: (1 + 0 + 1) / 3.0,
			mrr:    (1 + 0 + 0.5) / 3,
		},
		{
			// Repeats are dropped before scoring, so d moves up to
			// rank 2; only the first K distinct IDs count, so "a"
			// after ten others does not.
			name: "repeats and overflow",
			byText: map[string][]string{
				"one":   {"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "a"},
				"three": {"a", "a", "a", "d"},
			},
			ndcg:   (0 + 0 + 1/l2) / 3,
			recall: (0 + 0 + 1) / 3.0,
			mrr:    (0 + 0 + 0.5) / 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &answers{byText: tt.byText}
			res, err := Evaluate(context.Background(), ds, "fake", a.search)
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != "fake" || res.Queries != 3 {
				t.Errorf("mode %q, %d queries; want fake, 3", res.Mode, res.Queries)
			}
			if !slices.Equal(a.seen, []string{"one", "two", "three"}) || slices.ContainsFunc(a.ks, func(k int) bool { return k != Depth }) {
				t.Errorf("searched %q with k %v; want the judged queries with k %d", a.seen, a.ks, Depth)
			}
			for _, m := range []struct {
				name      string
				got, want float64
			}{{"nDCG", res.NDCG10, tt.ndcg}, {"recall", res.Recall10, tt.recall}, {"MRR", res.MRR10, tt.mrr}} {
				if math.Abs(m.got-m.want) > 1e-12 {
					t.Errorf("%s = %.6f, want %.6f", m.name, m.got, m.want)
				}
			}
			if res.P50 > res.P99 {
				t.Errorf("p50 %v > p99 %v", res.P50, res.P99)
			}
		})
	}
}

func TestEvaluateErrors(t *testing.T) {
	boom := errors.New("index offline")
	failing := func(_ context.Context, q string, _ int) ([]string, error) {
		if q == "two" {
			return nil, boom
		}
		return nil, nil
	}
	if _, err := Evaluate(context.Background(), smallDataset(), "m", failing); !errors.Is(err, boom) || !strings.Contains(err.Error(), "query q2") {
		t.Errorf("search failure: error = %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	cancelling := func(context.Context, string, int) ([]string, error) {
		calls++
		cancel()
		return nil, nil
	}
	if _, err := Evaluate(ctx, smallDataset(), "m", cancelling); !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("cancelled: error = %v after %d calls", err, calls)
	}

	unjudged := &Dataset{Queries: []Query{{ID: "q"}}, Qrels: map[string]map[string]int{"q": {"a": 0}}}
	never := func(context.Context, string, int) ([]string, error) {
		t.Error("searched a dataset without judged queries")
		return nil, nil
	}
	if _, err := Evaluate(context.Background(), unjudged, "m", never); !errors.Is(err, ErrNoQueries) {
		t.Errorf("no judged queries: error = %v", err)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{ms(7), 50, 7 * time.Millisecond},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(1, 2), 50, 1 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond},
		{ms(hundred...), 50, 50 * time.Millisecond},
		{ms(append(hundred, 101)...), 99, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("percentile(%d values, %v) = %v, want %v", len(tt.sorted), tt.p, got, tt.want)
		}
	}
}

func TestWriteTable(t *testing.T) {
	results := []Result{
		{Mode: "keyword", NDCG10: 0.61234, Recall10: 0.745, MRR10: 0.58214, Recall100: 0.9, Queries: 28, Skipped: 2, P50: 1234 * time.Microsecond, P99: 45 * time.Millisecond},
		{Mode: "hybrid-rrf", NDCG10: 1, Recall10: 1, MRR10: 1, Recall100: 1, Queries: 300, P50: 850 * time.Microsecond, P99: 1250 * time.Millisecond},
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, results); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"| mode       | nDCG@10 | Recall@10 | MRR@10 | Recall@100 |    p50 |    p99 | queries | skipped |\n" +
		"|------------|--------:|----------:|-------:|-----------:|-------:|-------:|--------:|--------:|\n" +
		"| keyword    |  0.6123 |    0.7450 | 0.5821 |     0.9000 | 1.23ms | 45.0ms |      28 |       2 |\n" +
		"| hybrid-rrf |  1.0000 |    1.0000 | 1.0000 |     1.0000 |  850µs |  1.25s |     300 |       0 |\n"
	if buf.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", buf.String(), want)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	for _, l := range lines {
		if utf8.RuneCountInString(l) != utf8.RuneCountInString(lines[0]) {
			t.Errorf("line %q is not as wide as the header", l)
		}
	}

	buf.Reset()
	if err := WriteTable(&buf, nil); err != nil || strings.Count(buf.String(), "\n") != 2 {
		t.Errorf("empty table = %q, %v; want header and rule", buf.String(), err)
	}
	if err := WriteTable(failWriter{}, results); err == nil {
		t.Error("write error not reported")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestEvaluateSkipsAndWritesARun(t *testing.T) {
	search := func(_ context.Context, q string, _ int) ([]string, error) {
		switch q {
		case "two":
			return nil, fmt.Errorf("query too long: %w", ErrSkipQuery)
		case "one":
			return []string{"b", "a", "b", "c"}, nil
		}
		return []string{"d"}, nil
	}
	var run bytes.Buffer
	res, err := EvaluateRun(context.Background(), smallDataset(), "hybrid search", search, &run)
	if err != nil {
		t.Fatal(err)
	}
	if res.Queries != 2 || res.Skipped != 1 {
		t.Errorf("%d queries, %d skipped; want 2 and 1", res.Queries, res.Skipped)
	}
	if res.Recall100 != 1 || res.Recall10 != 1 {
		t.Errorf("recall@10 %v, recall@100 %v; want 1 and 1", res.Recall10, res.Recall100)
	}
	want := "q1 Q0 b 1 3 hybrid_search\n" +
		"q1 Q0 a 2 2 hybrid_search\n" +
		"q1 Q0 c 3 1 hybrid_search\n" +
		"q3 Q0 d 1 1 hybrid_search\n"
	if run.String() != want {
		t.Errorf("run:\n%s\nwant:\n%s", run.String(), want)
	}
}
