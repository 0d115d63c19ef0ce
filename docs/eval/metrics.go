package eval

import (
	"math"
	"slices"
)

// The metrics below follow trec_eval and pytrec_eval, which BEIR reports:
// relevance grades are taken from rel, a grade of 0 or less counts as not
// relevant, a document that appears again lower in ranked counts only at its
// first position, and k <= 0 yields 0.

// NDCG returns the normalised discounted cumulative gain at k, with linear
// gain: a document of grade g at rank i (from 1) adds g / log2(i+1). (Linear
// gain is what trec_eval's ndcg_cut and therefore BEIR use; the exponential
// 2^g - 1 variant gives other numbers when grades exceed 1.) The ideal DCG
// ranks all judged documents of rel by grade, whether or not they were
// retrieved. It returns 0 when rel has no relevant document.
func NDCG(ranked []string, rel map[string]int, k int) float64 {
	if k <= 0 {
		return 0
	}
	var dcg float64
	forFirst(ranked, k, func(i int, id string) {
		if g := rel[id]; g > 0 {
			dcg += float64(g) / math.Log2(float64(i+2))
		}
	})
	grades := make([]int, 0, len(rel))
	for _, g := range rel {
		if g > 0 {
			grades = append(grades, g)
		}
	}
	slices.Sort(grades)
	slices.Reverse(grades)
	var ideal float64
	for i, g := range grades[:min(k, len(grades))] {
		ideal += float64(g) / math.Log2(float64(i+2))
	}
	if ideal == 0 {
		return 0
	}
	return dcg / ideal
}

// Recall returns the share of the relevant documents of rel (grade > 0) found
// in the first k of ranked. It returns 0 when rel has no relevant document.
func Recall(ranked []string, rel map[string]int, k int) float64 {
	relevant := 0
	for _, g := range rel {
		if g > 0 {
			relevant++
		}
	}
	if k <= 0 || relevant == 0 {
		return 0
	}
	found := 0
	forFirst(ranked, k, func(_ int, id string) {
		if rel[id] > 0 {
			found++
		}
	})
	return float64(found) / float64(relevant)
}

// MRR returns the reciprocal rank of the first relevant document (grade > 0)
// within the first k of ranked, or 0 when there is none. Averaged over
// queries it is the mean reciprocal rank.
func MRR(ranked []string, rel map[string]int, k int) float64 {
	rr := 0.0
	forFirst(ranked, k, func(i int, id string) {
		if rr == 0 && rel[id] > 0 {
			rr = 1 / float64(i+1)
		}
	})
	return rr
}

// forFirst calls fn with the 0-based rank and ID of each of the first k
// entries of ranked, skipping repeats of an ID already seen so that a
// document retrieved twice earns its gain once.
func forFirst(ranked []string, k int, fn func(i int, id string)) {
	seen := make(map[string]struct{}, min(k, len(ranked)))
	for i, id := range ranked[:max(0, min(k, len(ranked)))] {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		fn(i, id)
	}
}
