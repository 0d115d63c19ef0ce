// Package model2vec runs model2vec static embedding models (such as
// minishlab/potion-retrieval-32M) in pure Go: a vector is the mean of the
// embedding rows of a text's tokens, normalised when the model says so.
//
// Inference follows model2vec's reference implementation (StaticModel.encode
// with its default maximum of 512 tokens): the text is cut to 512 times the
// median token length in characters, tokenised without special tokens,
// unknown tokens are dropped, the ids are cut to 512, the rows of the
// remaining ids (through the optional mapping tensor, scaled by the optional
// per-token weights) are averaged, and the mean is L2-normalised when
// config.json says "normalize": true.
//
// The one deliberate difference: a text with no known token (empty, only
// unknown words or characters the tokenizer drops) gets a fixed unit vector
// instead of the zero vector, because cosine distance to a zero vector is
// undefined (pgvector returns NaN). All such texts get the same vector.
package model2vec

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/mcpsearch/mcpsearch/embed/safetensors"
	"github.com/mcpsearch/mcpsearch/embed/tokenizer"
	"github.com/mcpsearch/mcpsearch/telemetry"
)

// DefaultMaxTokens is the token limit of model2vec's encode, which this
// package applies unless Options.MaxTokens says otherwise.
const DefaultMaxTokens = 512

// Errors returned by Load; test with errors.Is.
var (
	// ErrNotFound means the folder holds no model in any layout known.
	ErrNotFound = errors.New("model2vec model not found")
	// ErrCorrupt means the model's files are present but damaged,
	// inconsistent with one another, or not the ones expected.
	ErrCorrupt = errors.New("model2vec model corrupt")
	// ErrUnsupported means the model uses something this package does
	// not implement (a tokenizer type, a tensor type).
	ErrUnsupported = errors.New("model2vec model unsupported")
)

// Options adjust Load.
type Options struct {
	// Name is what Model() reports before "@revision": by convention the
	// hub repository ("minishlab/potion-retrieval-32M"). Empty means the
	// folder's base name.
	Name string
	// Revision identifies the weights in Model(). Empty means a digest of
	// the files' contents, so that two different models loaded from
	// folders of the same name never share a name.
	Revision string
	// SHA256 maps file names (as in Files) to the hex SHA-256 they must
	// have; a file that differs makes Load fail with ErrCorrupt.
	SHA256 map[string]string
	// MaxTokens caps the tokens of a text; 0 means DefaultMaxTokens.
	MaxTokens int
}

// folderLayout names the files of a model inside its folder.
type folderLayout struct {
	Config, Weights, Tokenizer string
	// Tensor is the name of the embedding tensor.
	Tensor string
}

// The folder layouts model2vec itself accepts, in the order it tries them.
var layouts = []folderLayout{
	{Config: "config.json", Weights: "model.safetensors", Tokenizer: "tokenizer.json", Tensor: "embeddings"},
	{Config: "config_sentence_transformers.json", Weights: "model.safetensors", Tokenizer: "tokenizer.json", Tensor: "embedding.weight"},
	{Config: "config_sentence_transformers.json", Weights: "0_StaticEmbedding/model.safetensors", Tokenizer: "0_StaticEmbedding/tokenizer.json", Tensor: "embedding.weight"},
}

// Model is a loaded model. It is immutable and safe for concurrent use.
type Model struct {
	name      string
	dims      int
	rows      int
	dtype     safetensors.DType
	f32       []float32
	f16       []uint16
	i8        []int8
	half      *[1 << 16]float32 // F16 decoding table, for F16 models only
	weights   []float64         // per token id; nil: all 1
	mapping   []int32           // token id -> row; nil: the id itself
	tok       *tokenizer.Tokenizer
	unkID     int32
	normalize bool
	maxTokens int
	maxChars  int
	fallback  []float32
	files     map[string]string // file -> hex SHA-256
	bytes     int64
	idsPool   sync.Pool
}

// Load reads the model in dir: config.json, model.safetensors and
// tokenizer.json (or the sentence-transformers layouts model2vec also
// reads).
func Load(dir string, opts Options) (*Model, error) {
	layout, err := findLayout(dir)
	if err != nil {
		return nil, err
	}
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return b, nil
	}
	m := &Model{files: map[string]string{}}
	contents := map[string][]byte{}
	for _, name := range []string{layout.Config, layout.Tokenizer, layout.Weights} {
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		m.files[name] = hex.EncodeToString(sum[:])
		if want, ok := opts.SHA256[name]; ok && want != m.files[name] {
			return nil, fmt.Errorf("%w: %s has SHA-256 %s, want %s", ErrCorrupt, filepath.Join(dir, name), m.files[name], want)
		}
		contents[name] = b
	}
	for name := range opts.SHA256 {
		if _, ok := m.files[name]; !ok {
			return nil, fmt.Errorf("%w: %s is expected but not read by this layout", ErrCorrupt, filepath.Join(dir, name))
		}
	}

	var cfg struct {
		Normalize *bool `json:"normalize"`
	}
	if err := json.Unmarshal(contents[layout.Config], &cfg); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, layout.Config, err)
	}
	m.normalize = cfg.Normalize != nil && *cfg.Normalize

	m.tok, err = tokenizer.Parse(contents[layout.Tokenizer])
	if err != nil {
		tokPath := filepath.Join(dir, layout.Tokenizer)
		if errors.Is(err, tokenizer.ErrUnsupported) {
			return nil, fmt.Errorf("%w: %s: %v", ErrUnsupported, tokPath, err)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, tokPath, err)
	}
	m.unkID = int32(m.tok.UnknownID())

	st, err := safetensors.Parse(contents[layout.Weights])
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, layout.Weights, err)
	}
	if err := m.setTensors(st, layout.Tensor); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, layout.Weights), err)
	}

	m.maxTokens = opts.MaxTokens
	if m.maxTokens <= 0 {
		m.maxTokens = DefaultMaxTokens
	}
	m.maxChars = m.maxTokens * medianTokenLength(m.tok)

	name := opts.Name
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	rev := opts.Revision
	if rev == "" {
		rev = "sha256-" + m.digest()[:12]
	} else if len(rev) > 12 {
		rev = rev[:12]
	}
	m.name = "model2vec:" + name + "@" + rev
	m.fallback = fallbackVector(m.dims)
	return m, nil
}

func findLayout(dir string) (folderLayout, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return folderLayout{}, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	if !st.IsDir() {
		return folderLayout{}, fmt.Errorf("%w: %s is not a folder", ErrNotFound, dir)
	}
	for _, l := range layouts {
		ok := true
		for _, f := range []string{l.Config, l.Weights, l.Tokenizer} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				ok = false
				break
			}
		}
		if ok {
			return l, nil
		}
	}
	return folderLayout{}, fmt.Errorf("%w: %s has no config.json, model.safetensors and tokenizer.json", ErrNotFound, dir)
}

// setTensors takes the embedding matrix and the optional weights and
// mapping from st and checks them against the tokenizer.
func (m *Model) setTensors(st *safetensors.File, tensor string) error {
	emb, ok := st.Tensor(tensor)
	if !ok {
		return fmt.Errorf("%w: no %q tensor (tensors: %v)", ErrCorrupt, tensor, st.Names())
	}
	if len(emb.Shape) != 2 || emb.Shape[0] == 0 || emb.Shape[1] == 0 {
		return fmt.Errorf("%w: %q has shape %v, want rows x dimensions", ErrCorrupt, tensor, emb.Shape)
	}
	m.rows, m.dims = emb.Shape[0], emb.Shape[1]
	m.dtype = emb.DType
	n := m.rows * m.dims
	switch emb.DType {
	case safetensors.F32:
		m.f32 = float32View(emb.Data)
		if m.f32 == nil {
			m.f32 = make([]float32, n)
			for i := range m.f32 {
				m.f32[i] = math.Float32frombits(binary.LittleEndian.Uint32(emb.Data[4*i:]))
			}
		}
		m.bytes = int64(4 * n)
	case safetensors.F16:
		m.f16 = make([]uint16, n)
		for i := range m.f16 {
			m.f16[i] = binary.LittleEndian.Uint16(emb.Data[2*i:])
		}
		m.half = new([1 << 16]float32)
		for h := range m.half {
			m.half[h] = safetensors.HalfToFloat32(uint16(h))
		}
		m.bytes = int64(2*n + 4<<16)
	case safetensors.I8:
		m.i8 = make([]int8, n)
		for i, b := range emb.Data {
			m.i8[i] = int8(b)
		}
		m.bytes = int64(n)
	case safetensors.F64, safetensors.BF16:
		// Rare in model2vec files; kept as float32, which is all the
		// precision a mean of them needs.
		vals, err := emb.Float64s()
		if err != nil {
			return err
		}
		m.f32 = make([]float32, n)
		for i, v := range vals {
			m.f32[i] = float32(v)
		}
		m.dtype = safetensors.F32
		m.bytes = int64(4 * n)
	default:
		return fmt.Errorf("%w: embeddings of type %s (want F32, F16 or I8)", ErrUnsupported, emb.DType)
	}
	for i, v := range m.f32 {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%w: embedding row %d holds %v", ErrCorrupt, i/m.dims, v)
		}
	}

	vocab := m.tok.VocabSize()
	if mp, ok := st.Tensor("mapping"); ok {
		ids, err := mp.Ints()
		if err != nil {
			return fmt.Errorf("%w: mapping: %v", ErrCorrupt, err)
		}
		if len(ids) != vocab {
			return fmt.Errorf("%w: mapping has %d entries for %d tokens", ErrCorrupt, len(ids), vocab)
		}
		m.mapping = make([]int32, len(ids))
		for i, r := range ids {
			if r < 0 || r >= int64(m.rows) {
				return fmt.Errorf("%w: mapping sends token %d to row %d of %d", ErrCorrupt, i, r, m.rows)
			}
			m.mapping[i] = int32(r)
		}
		m.bytes += int64(4 * len(ids))
	} else if m.rows != vocab {
		return fmt.Errorf("%w: %d embedding rows for %d tokens", ErrCorrupt, m.rows, vocab)
	}
	if w, ok := st.Tensor("weights"); ok {
		ws, err := w.Float64s()
		if err != nil {
			return fmt.Errorf("%w: weights: %v", ErrCorrupt, err)
		}
		if len(ws) != vocab {
			return fmt.Errorf("%w: weights has %d entries for %d tokens", ErrCorrupt, len(ws), vocab)
		}
		m.weights = ws
		m.bytes += int64(8 * len(ws))
	}
	return nil
}

// float32View returns b as float32s without copying when the machine is
// little-endian, like the file, and b is aligned for float32 (the reference
// writer pads the header to 8 bytes); otherwise nil. It halves the memory a
// large model needs while it loads.
func float32View(b []byte) []float32 {
	if len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(float32(0)) != 0 {
		return nil
	}
	var probe uint16 = 1
	if *(*byte)(unsafe.Pointer(&probe)) != 1 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// medianTokenLength is model2vec's median_token_length: the median length
// in characters of the vocabulary's tokens, truncated to an integer.
func medianTokenLength(t *tokenizer.Tokenizer) int {
	n := t.VocabSize()
	lens := make([]int, n)
	for i := range lens {
		lens[i] = utf8.RuneCountInString(t.Token(i))
	}
	sort.Ints(lens)
	if n%2 == 1 {
		return lens[n/2]
	}
	// numpy's median of an even count is the mean of the middle two,
	// which int() truncates.
	return (lens[n/2-1] + lens[n/2]) / 2
}

// digest is one hex SHA-256 over the files' names and SHA-256s.
func (m *Model) digest() string {
	names := make([]string, 0, len(m.files))
	for n := range m.files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s %s\n", m.files[n], n)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fallbackVector is the unit vector of texts without a known token: dense,
// with pseudo-random signs, so that it is far from any one embedding axis.
func fallbackVector(dims int) []float32 {
	v := make([]float32, dims)
	x := uint64(0x9e3779b97f4a7c15)
	c := float32(1 / math.Sqrt(float64(dims)))
	for i := range v {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if x&1 == 1 {
			v[i] = c
		} else {
			v[i] = -c
		}
	}
	return v
}

// Model names the model and its revision, such as
// "model2vec:minishlab/potion-retrieval-32M@6fc8051fab2a".
func (m *Model) Model() string { return m.name }

// Dimensions is the length of every vector.
func (m *Model) Dimensions() int { return m.dims }

// Normalized reports whether vectors are L2-normalised (config.json).
func (m *Model) Normalized() bool { return m.normalize }

// Files maps each file read to its hex SHA-256.
func (m *Model) Files() map[string]string {
	out := make(map[string]string, len(m.files))
	for k, v := range m.files {
		out[k] = v
	}
	return out
}

// MemoryBytes is the memory the embedding tables take (embeddings, weights,
// mapping), the tokenizer's vocabulary aside.
func (m *Model) MemoryBytes() int64 { return m.bytes }

// Tokenize returns the ids a text is averaged over: its tokens, unknown ones
// dropped, cut to the maximum.
func (m *Model) Tokenize(text string) []int32 {
	return m.tokenize(nil, text)
}

func (m *Model) tokenize(dst []int32, text string) []int32 {
	if utf8.RuneCountInString(text) > m.maxChars {
		// model2vec cuts the text in characters before tokenising, so
		// that a huge text costs no more than a long one.
		n := 0
		for i := range text {
			if n == m.maxChars {
				text = text[:i]
				break
			}
			n++
		}
	}
	ids := m.tok.Encode(dst[:0], text)
	kept := ids[:0]
	for _, id := range ids {
		if id != m.unkID {
			kept = append(kept, id)
		}
	}
	if len(kept) > m.maxTokens {
		kept = kept[:m.maxTokens]
	}
	return kept
}

// Embed returns one vector per text. It stops early with the context's
// error when ctx is done.
func (m *Model) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	_, span := telemetry.StartEmbeddings(ctx, "model2vec", m.name, len(texts), false)
	defer span.End()
	out := make([][]float32, len(texts))
	idsp, _ := m.idsPool.Get().(*[]int32)
	if idsp == nil {
		idsp = new([]int32)
	}
	defer m.idsPool.Put(idsp)
	acc := make([]float64, m.dims)
	for i, text := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("model2vec embed: %w", err)
			}
		}
		*idsp = m.tokenize(*idsp, text)
		out[i] = m.pool(acc, *idsp)
	}
	return out, nil
}

// pool averages the rows of ids into a new vector.
func (m *Model) pool(acc []float64, ids []int32) []float32 {
	out := make([]float32, m.dims)
	if len(ids) == 0 {
		copy(out, m.fallback)
		return out
	}
	clear(acc)
	d := m.dims
	for _, id := range ids {
		row := int(id)
		if m.mapping != nil {
			row = int(m.mapping[id])
		}
		w := 1.0
		if m.weights != nil {
			w = m.weights[id]
		}
		off := row * d
		// Slicing the row to len(acc) lets the compiler drop the
		// bounds checks of the inner loops.
		switch m.dtype {
		case safetensors.F32:
			r := m.f32[off:][:len(acc)]
			if w == 1 {
				for k := range acc {
					acc[k] += float64(r[k])
				}
				continue
			}
			for k := range acc {
				acc[k] += float64(r[k]) * w
			}
		case safetensors.F16:
			r := m.f16[off:][:len(acc)]
			for k := range acc {
				acc[k] += float64(m.half[r[k]]) * w
			}
		case safetensors.I8:
			r := m.i8[off:][:len(acc)]
			for k := range acc {
				acc[k] += float64(r[k]) * w
			}
		}
	}
	inv := 1 / float64(len(ids))
	var sq float64
	for _, x := range acc {
		sq += x * inv * x * inv
	}
	if sq == 0 {
		// The rows cancelled out: a zero vector must not leave.
		copy(out, m.fallback)
		return out
	}
	if m.normalize {
		inv /= math.Sqrt(sq)
	}
	for k, x := range acc {
		out[k] = float32(x * inv)
	}
	return out
}
