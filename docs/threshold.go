package docs

import (
	"math"
	"strings"
)

// RemoteThreshold is the default similarity threshold of embedders other
// than the local one: the contract's 0.7, the cosine similarity of a
// relevant match with a real embedding model.
const RemoteThreshold = 0.7

// Model2VecThreshold is the default similarity threshold of model2vec
// static embedding models. It is an estimate, not a measurement (the
// models' hub cannot be reached from the machines the project is developed and tested on):
// their vectors are means of token rows from which the common direction was
// removed, so unrelated texts score near 0 and relevant passages well below
// a transformer model's 0.7. `mcpsearch eval` prints the similarity of each
// query's best vector hit, relevant or not, to calibrate it on a corpus;
// MCP_docs_threshold sets another.
const Model2VecThreshold = 0.3

// localModelPrefix names the local hashing embedder's recipe the local
// threshold was calibrated on (embed.Local's model is this prefix and its
// dimensions). A new recipe needs a new calibration.
const localModelPrefix = "local-hash-v1-"

// LocalThreshold returns the default similarity threshold of the local
// hashing embedder at dims dimensions: 0.09 + 1.5/√dims, rounded to two
// decimals (0.22 at 128, 0.17 at 384, 0.13 at 1,536).
//
// Between unrelated texts the local embedder's similarity comes from hash
// collisions, whose size shrinks as 1/√dims, on top of the n-grams texts
// share; its relevant matches sit at 0.2-0.5, far below a real model's. The
// constants were fitted on the shipped minibeir dataset (see
// TestDefaultThresholdCalibration and doc/documents.md): at each
// of 128, 384 and 1,536 dimensions every query whose best vector hit is
// relevant keeps it, and at most a fifth of the non-relevant hits of the
// top 10 pass.
func LocalThreshold(dims int) float64 {
	return math.Round((0.09+1.5/math.Sqrt(float64(max(1, dims))))*100) / 100
}

// DefaultThreshold returns the similarity threshold a Query without one
// uses: Options.DefaultThreshold when set, otherwise the calibrated value
// of the embedder in use: LocalThreshold for the local embedder,
// Model2VecThreshold for model2vec models and RemoteThreshold for any
// other.
func (s *Store) DefaultThreshold() float64 {
	if s.opts.DefaultThreshold > 0 {
		return s.opts.DefaultThreshold
	}
	emb := s.Embedder()
	switch m := emb.Model(); {
	case strings.HasPrefix(m, localModelPrefix):
		return LocalThreshold(emb.Dimensions())
	case strings.HasPrefix(m, model2vecModelPrefix):
		return Model2VecThreshold
	}
	return RemoteThreshold
}
