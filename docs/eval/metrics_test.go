package eval

import (
	"math"
	"testing"
)

// l2 is log2(3): the discount of rank 2.
var l2 = math.Log2(3)

func TestNDCG(t *testing.T) {
	tests := []struct {
		name   string
		ranked []string
		rel    map[string]int
		k      int
		want   float64
	}{
		{"perfect single", []string{"a", "b", "c"}, map[string]int{"a": 1}, 10, 1},
		{"relevant at rank 2", []string{"x", "a"}, map[string]int{"a": 1}, 10, 1 / l2}, // 0.6309
		{"graded swapped", []string{"b", "a"}, map[string]int{"a": 2, "b": 1}, 10,
			(1 + 2/l2) / (2 + 1/l2)}, // 2.2619 / 2.6309 = 0.8597
		{"linear gain, not 2^g-1", []string{"b", "a"}, map[string]int{"a": 3, "b": 1}, 10,
			(1 + 3/l2) / (3 + 1/l2)}, // 0.7967; exponential gain would give 0.7098
		{"ideal counts unretrieved", []string{"a"}, map[string]int{"a": 1, "b": 1}, 10, 1 / (1 + 1/l2)}, // 0.6131
		{"ideal cut at k", []string{"a"}, map[string]int{"a": 1, "b": 1, "c": 1}, 1, 1},
		{"beyond k", []string{"x", "y", "a"}, map[string]int{"a": 1}, 2, 0},
		{"grade 0 is not relevant", []string{"a", "b"}, map[string]int{"a": 0, "b": 1}, 10, 1 / l2},
		{"negative grade is not relevant", []string{"a"}, map[string]int{"a": -1}, 10, 0},
		{"repeat earns once", []string{"a", "a"}, map[string]int{"a": 1, "b": 1}, 10, 1 / (1 + 1/l2)},
		{"no judgements", []string{"a"}, nil, 10, 0},
		{"empty ranking", nil, map[string]int{"a": 1}, 10, 0},
		{"k zero", []string{"a"}, map[string]int{"a": 1}, 0, 0},
		{"k negative", []string{"a"}, map[string]int{"a": 1}, -3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NDCG(tt.ranked, tt.rel, tt.k); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("NDCG = %.6f, want %.6f", got, tt.want)
			}
		})
	}
}

func TestRecall(t *testing.T) {
	rel := map[string]int{"a": 1, "b": 2, "c": 0}
	tests := []struct {
		name   string
		ranked []string
		rel    map[string]int
		k      int
		want   float64
	}{
		{"half", []string{"c", "a", "x"}, rel, 10, 0.5},
		{"all", []string{"b", "x", "a"}, rel, 10, 1},
		{"cut by k", []string{"c", "a", "b"}, rel, 2, 0.5},
		{"none in k", []string{"c", "x", "a"}, rel, 1, 0},
		{"repeat counts once", []string{"a", "a", "a"}, rel, 10, 0.5},
		{"no relevant judged", []string{"c"}, map[string]int{"c": 0}, 10, 0},
		{"k zero", []string{"a"}, rel, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Recall(tt.ranked, tt.rel, tt.k); got != tt.want {
				t.Errorf("Recall = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMRR(t *testing.T) {
	tests := []struct {
		name   string
		ranked []string
		rel    map[string]int
		k      int
		want   float64
	}{
		{"first", []string{"a", "b"}, map[string]int{"a": 1, "b": 2}, 10, 1},
		{"third", []string{"x", "y", "a"}, map[string]int{"a": 1}, 10, 1.0 / 3},
		{"beyond k", []string{"x", "y", "a"}, map[string]int{"a": 1}, 2, 0},
		{"grade 0 skipped", []string{"c", "a"}, map[string]int{"c": 0, "a": 1}, 10, 0.5},
		{"first relevant, not best", []string{"b", "a"}, map[string]int{"a": 2, "b": 1}, 10, 1},
		{"none", []string{"x"}, map[string]int{"a": 1}, 10, 0},
		{"k zero", []string{"a"}, map[string]int{"a": 1}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MRR(tt.ranked, tt.rel, tt.k); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("MRR = %v, want %v", got, tt.want)
			}
		})
	}
}
