package docs

import "strings"

// localVectorWeight is the hybrid weight of the built-in hashing embedder:
// low enough that its vector ranking only orders what BM25 leaves unordered.
// Hybrid's fused score adds 1/(rrfK+r) for a keyword rank r and w/(rrfK+v)
// for a vector rank v, so the vector ranking can move a chunk past the next
// keyword rank only if w/(rrfK+1) exceeds 1/((rrfK+r)(rrfK+r+1)): with
// w = 0.01 never within BM25's first 17 chunks, so hybrid's top 10 is BM25's
// top 10 whenever BM25 finds ten chunks, and a chunk only the vectors found
// (when its similarity reaches the threshold) always ranks below every
// keyword match of the deepest keyword ranking Hybrid fuses (1,500 chunks).
// Hybrid therefore never ranks below keyword search, and adds the passages
// that share no word with the query. Where BM25 finds at least as many
// chunks as asked for, up to 17, Hybrid does not rank the vectors at all
// (keywordDecides): they could not change the hits.
//
// Larger weights let the hashed vectors, which carry no meaning BM25 lacks,
// reorder BM25's best hits, and that cost quality. On the shipped minibeir
// set (`mcpsearch eval --vector-weight 0,0.01,0.02,0.05,0.1,0.2,0.3333,0.5,1`)
// nDCG@10 is 0.824 from 0 to 0.02, as keyword search's, then 0.811 at 0.05,
// 0.807 at 0.1, 0.820 at 0.2, 0.816 at 1/3 (the former default) and 0.760
// at 1; on three larger collections 1/3 lost up to 0.021 to BM25 on two.
const localVectorWeight = 0.01

// Model2VecVectorWeight is the hybrid weight of model2vec static embedding
// models. It was not measured here (the models' hub cannot be reached from
// the machines the project is developed and tested on): static models rank below BM25 on
// average over the BEIR collections by their published results, so the
// vector ranking gets half the keyword ranking's weight rather than plain
// reciprocal rank fusion's equal share. `mcpsearch eval --vector-weight`
// measures a corpus; MCP_docs_vector_weight sets another.
const Model2VecVectorWeight = 0.5

// model2vecModelPrefix begins the model name of every model2vec model
// ("model2vec:<repository>@<revision>", see embed/model2vec).
const model2vecModelPrefix = "model2vec:"

// VectorWeight returns the weight Hybrid search gives the vector ranking,
// the keyword ranking's being 1: Options.VectorWeight when set, otherwise
// (auto) the weight calibrated for the embedder: localVectorWeight for the
// local hashing embedder, Model2VecVectorWeight for model2vec models, and 1,
// plain reciprocal rank fusion, for a transformer embedding model behind an
// API. It follows the embedder Reembed switches to.
func (s *Store) VectorWeight() float64 {
	if s.opts.VectorWeight > 0 {
		return s.opts.VectorWeight
	}
	switch m := s.Embedder().Model(); {
	case strings.HasPrefix(m, localModelPrefix):
		return localVectorWeight
	case strings.HasPrefix(m, model2vecModelPrefix):
		return Model2VecVectorWeight
	}
	return 1
}
