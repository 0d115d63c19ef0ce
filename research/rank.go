package research

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"github.com/mcpsearch/mcpsearch/embed"
)

// BM25 parameters: k1 1.2 and b 0.75, the values that did best on the
// technical and the prose collections of the documents' search (see
// doc/performance.md).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// rrfK is reciprocal rank fusion's constant, as search_docs uses it.
	rrfK = 60
	// PerPage is the most passages one page gives while other pages gave
	// some: an answer is more often confirmed than repeated on one page.
	PerPage = 3
	// headingWeight is how many words of a passage's text one word of
	// its heading path counts as.
	headingWeight = 3.0
	// minRelativeScore is the least score, relative to the best
	// passage's, of a passage returned.
	minRelativeScore = 0.1
	// RerankDepth is how many of the best candidates a reranker reorders.
	RerankDepth = 50
	// DefaultMaxEmbed is how many passages, the best by keywords first, a
	// semantic embedder ranks when Options.MaxEmbed is 0.
	DefaultMaxEmbed = 64
)

// Reranker reorders passages by their relevance to a query (a
// cross-encoder behind an API, package rerank).
type Reranker interface {
	// Rerank returns one score per text, in order, higher is better.
	Rerank(ctx context.Context, query string, texts []string) ([]float64, error)
}

// Vectors is the embedder that ranks passages by meaning, with the weight
// of its ranking beside BM25's (docs.Store: the documents' embedder and
// search_docs's fusion weight for it, whichever it has switched to).
type Vectors interface {
	Embedder() embed.Embedder
	VectorWeight() float64
}

// Ranking is how passages are chosen among the pages read.
type Ranking struct {
	// Vectors, when its embedder's vectors carry meaning (embed.Semantic),
	// ranks the passages too, fused with BM25 by weighted reciprocal rank
	// fusion as search_docs fuses them; nil or a lexical embedder leaves
	// BM25 alone.
	Vectors Vectors
	// MaxEmbed bounds the passages the embedder ranks, the best by BM25
	// first (default DefaultMaxEmbed): a remote embedder is paid by the
	// text.
	MaxEmbed int
	// Reranker, when set, reorders the best RerankDepth candidates.
	Reranker Reranker
}

// ranked is a passage with its scores.
type ranked struct {
	*passage
	keyword float64
	score   float64
}

// rank orders passages by their relevance to query and returns the best max
// of them: at most PerPage of one page unless fewer pages gave any, and
// near-identical ones once. note says in one line what could not be used
// (the embedder, the reranker), "" when everything was.
func (r Ranking) rank(ctx context.Context, query string, all []passage, max int) (best []ranked, note string) {
	if len(all) == 0 || max <= 0 {
		return nil, ""
	}
	terms := queryTerms(query)
	cands := bm25(terms, all)
	byKeyword := func(a, b ranked) int {
		if c := cmpFloat(b.keyword, a.keyword); c != 0 {
			return c
		}
		return cmpPos(a, b)
	}
	slices.SortStableFunc(cands, byKeyword)
	for i := range cands {
		cands[i].score = cands[i].keyword
	}

	var notes []string
	if emb := r.embedder(); emb != nil {
		if err := r.fuse(ctx, query, cands, emb, r.Vectors.VectorWeight()); err != nil {
			notes = append(notes, fmt.Sprintf("the embedder failed (%v): passages ranked by keywords alone", clip(err.Error(), 120)))
		}
	}
	// Candidates with no score share no word with the question and were
	// not found by meaning either.
	cands = slices.DeleteFunc(cands, func(c ranked) bool { return c.score <= 0 })
	if len(cands) == 0 {
		return nil, strings.Join(notes, "; ")
	}
	if top := cands[0].score; top > 0 {
		for i := range cands {
			cands[i].score /= top
		}
	}
	// A passage scoring a tenth of the best matches a word or two of the
	// question by chance: it costs the reader more than it tells.
	cands = slices.DeleteFunc(cands, func(c ranked) bool { return c.score < minRelativeScore })
	if r.Reranker != nil {
		if err := r.rerank(ctx, query, cands[:min(len(cands), RerankDepth)]); err != nil {
			notes = append(notes, fmt.Sprintf("the reranker failed (%v): passages in their fused order", clip(err.Error(), 120)))
		} else {
			// The reranker's scores and the fused ones are not on one
			// scale: only what it ordered is chosen from.
			cands = cands[:min(len(cands), RerankDepth)]
		}
	}
	return choose(cands, max), strings.Join(notes, "; ")
}

// bm25 scores every passage against terms with Okapi BM25, the statistics
// (document frequencies, average length) being those of the passages
// given: the pages read for one question. A passage's heading path counts
// as its words; a passage made mostly of links (a table of contents, a list
// of related pages) keeps only its share of other text.
func bm25(terms map[string]float64, all []passage) []ranked {
	type counts struct {
		tf  map[string]float64
		len float64
	}
	per := make([]counts, len(all))
	df := make(map[string]int, len(terms))
	total := 0.0
	for i := range all {
		c := counts{}
		weight := 1.0
		count := func(t []byte, part bool) {
			w := weight
			if part {
				// A part of a compound word is weaker evidence than the
				// word itself: jit_above_cost is not about jit as jit is.
				w *= partWeight
			} else {
				c.len += weight
			}
			if _, ok := terms[string(t)]; ok {
				if c.tf == nil {
					c.tf = map[string]float64{}
				}
				c.tf[string(t)] += w
			}
		}
		// The heading path says what the passage is about in a few words:
		// its words count as headingWeight words of the text (BM25F).
		weight = headingWeight
		termsOf(all[i].heading, count)
		weight = 1
		termsOf(all[i].title, count)
		termsOf(all[i].text, count)
		for t := range c.tf {
			df[t]++
		}
		per[i] = c
		total += c.len
	}
	n := float64(len(all))
	avg := math.Max(total/n, 1)
	out := make([]ranked, len(all))
	for i := range all {
		s := 0.0
		for t, tf := range per[i].tf {
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			s += terms[t] * idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*per[i].len/avg))
		}
		out[i] = ranked{passage: &all[i], keyword: s * (1 - all[i].linkShare)}
	}
	return out
}

// fuse adds the embedder's ranking of the best MaxEmbed candidates (which
// are sorted by keyword score) to their scores by weighted reciprocal rank
// fusion, and re-sorts them.
func (r Ranking) fuse(ctx context.Context, query string, cands []ranked, emb embed.Embedder, w float64) error {
	limit := r.MaxEmbed
	if limit <= 0 {
		limit = DefaultMaxEmbed
	}
	head := cands[:min(len(cands), limit)]
	texts := make([]string, 0, len(head)+1)
	texts = append(texts, query)
	for _, c := range head {
		texts = append(texts, passageForModel(c.passage))
	}
	vecs, err := emb.Embed(ctx, texts)
	if err != nil {
		return err
	}
	if len(vecs) != len(texts) {
		return errors.New("the embedder returned a vector count unlike the texts'")
	}
	sims := make([]float64, len(head))
	order := make([]int, len(head))
	for i := range head {
		sims[i] = cosine(vecs[0], vecs[i+1])
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpFloat(sims[b], sims[a]) })
	if w <= 0 {
		w = 1
	}
	for i := range cands {
		cands[i].score = 0
		if cands[i].keyword > 0 {
			cands[i].score = 1 / float64(rrfK+i+1)
		}
	}
	for rank, i := range order {
		if sims[i] > 0 {
			head[i].score += w / float64(rrfK+rank+1)
		}
	}
	slices.SortStableFunc(cands, func(a, b ranked) int {
		if c := cmpFloat(b.score, a.score); c != 0 {
			return c
		}
		return cmpPos(a, b)
	})
	return nil
}

// embedder returns the embedder that ranks by meaning, or nil.
func (r Ranking) embedder() embed.Embedder {
	if r.Vectors == nil {
		return nil
	}
	if e := r.Vectors.Embedder(); e != nil && embed.Semantic(e) {
		return e
	}
	return nil
}

// rerank reorders head by the reranker's scores, which become their
// scores.
func (r Ranking) rerank(ctx context.Context, query string, head []ranked) error {
	texts := make([]string, len(head))
	for i, c := range head {
		texts[i] = passageForModel(c.passage)
	}
	scores, err := r.Reranker.Rerank(ctx, query, texts)
	if err != nil {
		return err
	}
	if len(scores) != len(head) {
		return fmt.Errorf("%d scores for %d passages", len(scores), len(head))
	}
	for i := range head {
		head[i].score = scores[i]
	}
	slices.SortStableFunc(head, func(a, b ranked) int {
		if c := cmpFloat(b.score, a.score); c != 0 {
			return c
		}
		return cmpPos(a, b)
	})
	return nil
}

// passageForModel is the text a model reads of a passage: its heading path
// on the first line, then the passage.
func passageForModel(p *passage) string {
	if p.heading == "" {
		return p.shown()
	}
	return p.heading + "\n" + p.shown()
}

// choose takes the best max of cands, sorted best first: at most PerPage
// of one page while others still have passages to give, then the rest of
// the best, each passage that repeats one already chosen (the same text on
// another site) left out.
func choose(cands []ranked, max int) []ranked {
	var out []ranked
	var shingles []map[uint64]bool
	perPage := map[int]int{}
	var deferred []ranked
	take := func(c ranked) {
		sh := shingleSet(c.text)
		for _, s := range shingles {
			if nearDuplicate(sh, s) {
				return
			}
		}
		out = append(out, c)
		shingles = append(shingles, sh)
		perPage[c.page]++
	}
	for _, c := range cands {
		if len(out) == max {
			break
		}
		if perPage[c.page] >= PerPage {
			deferred = append(deferred, c)
			continue
		}
		take(c)
	}
	// Fewer pages gave passages than max needs: the best of the rest.
	for _, c := range deferred {
		if len(out) == max {
			break
		}
		take(c)
	}
	slices.SortStableFunc(out, func(a, b ranked) int {
		if c := cmpFloat(b.score, a.score); c != 0 {
			return c
		}
		return cmpPos(a, b)
	})
	return out
}

// shingleSet returns the hashes of the passage's runs of four words
// (lowercase letters and digits), or of its single words when it has fewer.
func shingleSet(text string) map[uint64]bool {
	var words []uint64
	termsOf(text, func(t []byte, part bool) {
		if !part {
			h := fnv.New64a()
			h.Write(t)
			words = append(words, h.Sum64())
		}
	})
	set := map[uint64]bool{}
	k := min(4, len(words))
	for i := 0; i+k <= len(words) && k > 0; i++ {
		var h uint64 = 14695981039346656037
		for _, w := range words[i : i+k] {
			h = (h ^ w) * 1099511628211
		}
		set[h] = true
	}
	return set
}

// nearDuplicate reports whether most of the smaller of two shingle sets is
// in the other: the same text, cut at other places or with a line of its
// own, as syndicated copies of a page are.
func nearDuplicate(a, b map[uint64]bool) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(a) == 0 {
		return false
	}
	shared := 0
	for h := range a {
		if b[h] {
			shared++
		}
	}
	return float64(shared) >= 0.6*float64(len(a))
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range min(len(a), len(b)) {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpPos orders equal scores by page, then by place in the page, so that
// rankings are repeatable.
func cmpPos(a, b ranked) int {
	if a.page != b.page {
		return a.page - b.page
	}
	return a.ord - b.ord
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
