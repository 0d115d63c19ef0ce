package embed

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Dimension limits of the local embedder. The upper bound is the largest
// vector pgvector can index with HNSW.
const (
	DefaultLocalDimensions = 384
	MinLocalDimensions     = 32
	MaxLocalDimensions     = 2000
)

// localVersion names the feature recipe of Local. Any change to tokenisation,
// stop words, n-gram sizes, hashing or weighting changes the vectors, so it
// must bump this version: stored vectors are keyed by Model().
const localVersion = "local-hash-v1"

// Relative weight of the two feature families. Each family is normalised on its
// own first so that long words, which yield many n-grams, do not drown the word
// features: words carry the exact vocabulary, n-grams add tolerance to
// inflection ("deadlock" ~ "deadlocks") and to partial identifiers. An equal
// mix is the default; re-measure with the eval tooling before changing it.
const (
	wordWeight  = 0.5
	ngramWeight = 0.5
)

// Character n-gram sizes, in runes, taken over each word with boundary markers.
const (
	minGram = 3
	maxGram = 5
)

// Local is a built-in, offline and deterministic embedder. It needs no model
// download: a text becomes the signed feature hash of its words and of the
// character 3-5-grams of those words, with sublinear term frequency, and the
// result is L2-normalised.
//
// Text is lower-cased and split into runs of Unicode letters and digits. A
// small list of English stop words is dropped from both feature families
// (their n-grams would match nearly every text) unless a text consists of
// nothing else. A text without any letter or digit (for example "" or "--")
// gets a fixed dense unit vector instead of the zero vector, because pgvector's
// cosine distance to a zero vector is NaN; all such texts are identical to one
// another and nearly orthogonal to real text.
//
// Local has no mutable state and is safe for concurrent use.
type Local struct {
	dims     int
	model    string
	fallback []float32
}

var _ Embedder = (*Local)(nil)

// NewLocal returns a Local embedder producing vectors of dims dimensions. A
// dims of 0 selects DefaultLocalDimensions; other values must lie within
// MinLocalDimensions..MaxLocalDimensions.
func NewLocal(dims int) (*Local, error) {
	if dims == 0 {
		dims = DefaultLocalDimensions
	}
	if dims < MinLocalDimensions || dims > MaxLocalDimensions {
		return nil, fmt.Errorf("%w: local dimensions %d outside %d..%d", ErrConfig, dims, MinLocalDimensions, MaxLocalDimensions)
	}
	l := &Local{dims: dims, model: localVersion + "-" + strconv.Itoa(dims)}
	l.fallback = make([]float32, dims)
	v := float32(1 / math.Sqrt(float64(dims)))
	for i := range l.fallback {
		if featureHash('e', []byte(strconv.Itoa(i)))>>63 == 1 {
			l.fallback[i] = -v
		} else {
			l.fallback[i] = v
		}
	}
	return l, nil
}

// Model returns the algorithm version and dimensions, such as "local-hash-v1-384".
func (l *Local) Model() string { return l.model }

// Dimensions returns the length of every vector Embed returns.
func (l *Local) Dimensions() int { return l.dims }

// Lexical reports true: Local's vectors hash a text's words and their
// character n-grams, and carry no meaning beyond them.
func (l *Local) Lexical() bool { return true }

// Embed returns one unit-length vector per text. It stops early with the
// context's error when ctx is done.
func (l *Local) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	_, span := telemetry.StartEmbeddings(ctx, ProviderLocal, l.model, len(texts), false)
	defer span.End()
	out := make([][]float32, len(texts))
	var s scratch
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("local embed: %w", err)
		}
		out[i] = l.embedOne(t, &s)
	}
	return out, nil
}

// scratch holds buffers reused across the texts of one Embed call.
type scratch struct {
	words, grams []uint64
	token        []byte
	bounded      []byte
	offsets      []int
	acc          []float64
	counter      counter
}

func (l *Local) embedOne(text string, s *scratch) []float32 {
	s.words, s.grams = s.words[:0], s.grams[:0]
	l.features(text, s, true)
	if len(s.words) == 0 {
		// A text made only of stop words ("to be or not to be") still
		// deserves a vector that reflects it.
		l.features(text, s, false)
	}
	if len(s.words) == 0 {
		return slices.Clone(l.fallback)
	}
	if cap(s.acc) < l.dims {
		s.acc = make([]float64, l.dims)
	}
	acc := s.acc[:l.dims]
	clear(acc)
	addFamily(acc, s.words, wordWeight, &s.counter)
	addFamily(acc, s.grams, ngramWeight, &s.counter)

	var norm float64
	for _, x := range acc {
		norm += x * x
	}
	out := make([]float32, l.dims)
	if norm == 0 {
		// Every feature cancelled out in the hashed space: vanishingly
		// unlikely, but a zero vector must never leave this package.
		copy(out, l.fallback)
		return out
	}
	inv := 1 / math.Sqrt(norm)
	for i, x := range acc {
		out[i] = float32(x * inv)
	}
	return out
}

// features appends the hashes of the word and n-gram features of text to
// s.words and s.grams. With dropStop it skips stop words.
func (l *Local) features(text string, s *scratch, dropStop bool) {
	s.token = s.token[:0]
	flush := func() {
		if len(s.token) == 0 {
			return
		}
		if !dropStop || !isStopWord(string(s.token)) {
			s.words = append(s.words, featureHash('w', s.token))
			s.grams = appendGrams(s.grams, s)
		}
		s.token = s.token[:0]
	}
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			s.token = utf8.AppendRune(s.token, unicode.ToLower(r))
			continue
		}
		flush()
	}
	flush()
}

// appendGrams appends the hashes of the character n-grams of s.token, framed
// as "<token>" so that prefixes and suffixes are features of their own.
func appendGrams(dst []uint64, s *scratch) []uint64 {
	s.bounded = append(append(append(s.bounded[:0], '<'), s.token...), '>')
	s.offsets = s.offsets[:0]
	for i := range string(s.bounded) {
		s.offsets = append(s.offsets, i)
	}
	s.offsets = append(s.offsets, len(s.bounded))
	runes := len(s.offsets) - 1
	for n := minGram; n <= maxGram && n <= runes; n++ {
		for i := 0; i+n <= runes; i++ {
			dst = append(dst, featureHash('g', s.bounded[s.offsets[i]:s.offsets[i+n]]))
		}
	}
	return dst
}

// addFamily adds one feature family to acc: each distinct feature contributes
// sign * (1 + ln tf), and the family as a whole is scaled to norm weight
// (before hashing collisions) so that families mix in fixed proportion.
func addFamily(acc []float64, hashes []uint64, weight float64, c *counter) {
	if len(hashes) == 0 {
		return
	}
	c.count(hashes)
	var sumSq float64
	for _, slot := range c.used {
		w := sublinear(c.counts[slot])
		sumSq += w * w
	}
	scale := weight / math.Sqrt(sumSq)
	dims := uint64(len(acc))
	for _, slot := range c.used {
		h := c.keys[slot]
		w := sublinear(c.counts[slot]) * scale
		// The low 32 bits pick the slot by multiply-shift (no modulo
		// bias); the top bit picks the sign, so collisions cancel on
		// average instead of piling up.
		idx := ((h & 0xffffffff) * dims) >> 32
		if h>>63 == 1 {
			w = -w
		}
		acc[idx] += w
	}
}

func sublinear(tf uint32) float64 {
	if tf == 1 {
		return 1
	}
	return 1 + math.Log(float64(tf))
}

// counter counts distinct feature hashes in an open-addressing table that is
// reused from text to text; sorting the hashes instead cost most of the time.
type counter struct {
	keys   []uint64
	counts []uint32
	// used lists occupied slots in first-seen order, which keeps the
	// floating-point sums in a deterministic order and makes reset cheap.
	used []int
}

func (c *counter) count(hashes []uint64) {
	for _, slot := range c.used {
		c.counts[slot] = 0
	}
	c.used = c.used[:0]
	size := 64
	for size < 2*len(hashes) {
		size *= 2
	}
	if len(c.keys) < size {
		c.keys = make([]uint64, size)
		c.counts = make([]uint32, size)
	}
	mask := len(c.keys) - 1
	for _, h := range hashes {
		// The high bits are as well mixed as the low ones, and the low
		// ones also pick the vector slot; probing from the high ones
		// keeps the two uses independent.
		slot := int(h>>32) & mask
		for c.counts[slot] != 0 && c.keys[slot] != h {
			slot = (slot + 1) & mask
		}
		if c.counts[slot] == 0 {
			c.keys[slot] = h
			c.used = append(c.used, slot)
		}
		c.counts[slot]++
	}
}

// featureHash is FNV-1a 64 over a one-byte family tag and b, followed by the
// murmur3 finaliser: FNV alone mixes its low bits poorly, and the slot is taken
// from them.
func featureHash(tag byte, b []byte) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	h ^= uint64(tag)
	h *= prime64
	for _, c := range b {
		h ^= uint64(c)
		h *= prime64
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// isStopWord reports whether w, lower-cased, is a common English function word
// that carries no topic.
func isStopWord(w string) bool {
	switch w {
	case "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at",
		"be", "been", "being", "but", "by", "can", "could", "did", "do", "does", "doing",
		"for", "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him",
		"his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "me", "my",
		"of", "on", "or", "our", "ours", "she", "should", "so", "some", "such", "than",
		"that", "the", "their", "theirs", "them", "then", "there", "these", "they", "this",
		"those", "to", "too", "us", "very", "was", "we", "were", "what", "when", "where",
		"which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours":
		return true
	}
	return false
}
