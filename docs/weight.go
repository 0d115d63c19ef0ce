package docs

import "strings"

// localVectorWeight is the hybrid weight of the built-in hashing embedder:
// with the keyword ranking weighted three times as much, hybrid search beat
// equal weights on both evaluation sets measured (nDCG@10 0.344 against
// 0.328 on Cranfield, 0.806 against 0.760 on the shipped minibeir), and
// came level with BM25 alone (0.341 and 0.823), which equal weights fell
// short of.
const localVectorWeight = 1.0 / 3

// VectorWeight returns the weight Hybrid search gives the vector ranking,
// the keyword ranking's being 1: Options.VectorWeight when set, otherwise
// (auto) 1/3 for the local embedder, whose hashed features carry no meaning
// BM25 lacks, and 1, plain reciprocal rank fusion, for a real embedding
// model. It follows the embedder Reembed switches to.
func (s *Store) VectorWeight() float64 {
	if s.opts.VectorWeight > 0 {
		return s.opts.VectorWeight
	}
	if strings.HasPrefix(s.Embedder().Model(), localModelPrefix) {
		return localVectorWeight
	}
	return 1
}
