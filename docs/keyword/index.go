// Package keyword is an in-process BM25 engine: the inverted index of one
// conversation's chunks, built from the keyword postings each file carries
// (a compact copy of its chunks' PostgreSQL tsvectors, in the format of
// postings.go), kept current by adding and removing files, and an LRU cache
// of such indexes bounded by their memory. It knows nothing of where the
// postings come from: its caller reads them from the database and says which
// generation of the conversation they bring the index to.
package keyword

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/google/uuid"
)

// Term is a query lexeme and how often the query holds it.
type Term struct {
	Lexeme string
	Count  int
}

// Params are Okapi BM25's term frequency saturation k1 and length
// normalisation b.
type Params struct {
	K1, B float64
}

// Hit is a chunk of a keyword ranking: its id, its file's, and its score.
type Hit struct {
	ID    uuid.UUID
	File  uuid.UUID
	Score float64
}

// File is a file whose chunks an index adds: its id, the embedding model of
// its chunks (searches rank one model's chunks) and its keyword postings.
type File struct {
	ID       uuid.UUID
	Model    string
	Postings []byte
}

// Changes bring an index from its generation to Generation: the files that
// became ready or moved to another model since, and the files removed since.
// A file both added and removed is removed.
type Changes struct {
	Generation int64
	Added      []File
	Removed    []uuid.UUID
}

// dead marks, in Index.model, the chunks of removed files.
const dead = math.MaxUint16

// maxModels bounds the models one index tells apart; dead is reserved.
const maxModels = dead - 1

// Index is one conversation's inverted index. Searches run in parallel with
// each other and with merges; Refresh and the swap at the end of a merge
// take the write lock.
type Index struct {
	// epoch names the incarnation of the conversation the index is of; see
	// New.
	epoch int64

	// refresh serialises refreshes, so that two searches finding the index
	// behind do not both read the same changes.
	refresh sync.Mutex

	mu         sync.RWMutex
	generation int64
	// files maps each indexed file to its chunks: a range of chunk numbers.
	files map[uuid.UUID]chunkRange
	// starts and owners name the file of every chunk: owners[i] holds the
	// chunks from starts[i] up to the next start, in the order files were
	// added.
	starts []int32
	owners []uuid.UUID
	// Per chunk, by number: id, length in lexeme occurrences, model number
	// (dead for a removed file's).
	ids    []uuid.UUID
	doclen []int32
	model  []uint16
	models []string
	// live counts the chunks not removed, and liveLen their lengths.
	live    int
	liveLen int64
	// segments hold the postings, each of its chunks numbered from its
	// base, in chunk order.
	segments []segment
	// merging is set while a merge runs.
	merging bool

	// accs holds score accumulators for searches, one per chunk, all zero:
	// a search of a large conversation need not allocate and clear one.
	accs sync.Pool
}

type chunkRange struct {
	start, n int32
}

// New returns an empty index of the conversation incarnation epoch, at
// generation -1: its first Refresh reads every file. The caller compares
// Epoch with the conversation's current one to know that the index is of a
// conversation since deleted and made again.
func New(epoch int64) *Index {
	return &Index{epoch: epoch, generation: -1, files: map[uuid.UUID]chunkRange{}}
}

// Epoch returns the epoch New was given.
func (ix *Index) Epoch() int64 { return ix.epoch }

// Generation returns the generation the index is at.
func (ix *Index) Generation() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.generation
}

// Refresh brings the index to generation want or later. If it is behind, it
// calls read with the generation the index is at, under a lock that keeps
// other refreshes of the index waiting (searches go on), and applies the
// changes read returns. A read error is returned as is.
func (ix *Index) Refresh(want int64, read func(have int64) (Changes, error)) error {
	if ix.Generation() >= want {
		return nil
	}
	ix.refresh.Lock()
	defer ix.refresh.Unlock()
	have := ix.Generation()
	if have >= want {
		return nil
	}
	ch, err := read(have)
	if err != nil {
		return err
	}
	return ix.apply(ch)
}

// apply adds and removes what ch says, unless the index is at ch's
// generation already. Postings are checked before anything changes, so a
// malformed file leaves the index as it was.
func (ix *Index) apply(ch Changes) error {
	segs := make([]segment, len(ch.Added))
	for i, f := range ch.Added {
		sg, err := parse(f.Postings)
		if err != nil {
			return fmt.Errorf("file %s: %w", f.ID, err)
		}
		sg.file = f.ID
		segs[i] = sg
	}
	removed := make(map[uuid.UUID]bool, len(ch.Removed))
	for _, id := range ch.Removed {
		removed[id] = true
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.generation >= ch.Generation {
		return nil
	}
	for id := range removed {
		ix.remove(id)
	}
	total := len(ix.ids)
	for _, sg := range segs {
		total += int(sg.n)
	}
	if total > math.MaxInt32 {
		return errors.New("too many chunks for one index")
	}
	if len(ix.ids) == 0 {
		// A first build: exact sizes, as no append is likely soon.
		ix.ids = make([]uuid.UUID, 0, total)
		ix.doclen = make([]int32, 0, total)
		ix.model = make([]uint16, 0, total)
	}
	for i, f := range ch.Added {
		if removed[f.ID] {
			continue
		}
		m, err := ix.modelNumber(f.Model)
		if err != nil {
			return err
		}
		if r, ok := ix.files[f.ID]; ok {
			// Known already: the file moved to another model, its chunks
			// stay what they were.
			if ix.model[r.start] != dead {
				for c := r.start; c < r.start+r.n; c++ {
					ix.model[c] = m
				}
			}
			continue
		}
		sg := segs[i]
		sg.base = int32(len(ix.ids))
		ix.files[f.ID] = chunkRange{start: sg.base, n: sg.n}
		if sg.n > 0 {
			ix.starts, ix.owners = append(ix.starts, sg.base), append(ix.owners, f.ID)
		}
		ix.ids = append(ix.ids, sg.ids...)
		ix.doclen = append(ix.doclen, sg.doclen...)
		for _, l := range sg.doclen {
			ix.model = append(ix.model, m)
			ix.liveLen += int64(l)
		}
		ix.live += int(sg.n)
		// The index holds the chunks; the segment, its terms.
		sg.ids, sg.doclen = nil, nil
		ix.segments = append(ix.segments, sg)
	}
	ix.generation = ch.Generation
	return nil
}

// remove marks the chunks of file id dead. The caller holds the write lock.
func (ix *Index) remove(id uuid.UUID) {
	r, ok := ix.files[id]
	if !ok {
		return
	}
	delete(ix.files, id)
	if ix.model[r.start] == dead {
		return
	}
	for c := r.start; c < r.start+r.n; c++ {
		ix.model[c] = dead
		ix.liveLen -= int64(ix.doclen[c])
	}
	ix.live -= int(r.n)
}

func (ix *Index) modelNumber(model string) (uint16, error) {
	if m := slices.Index(ix.models, model); m >= 0 {
		return uint16(m), nil
	}
	if len(ix.models) >= maxModels {
		return 0, errors.New("too many embedding models in one index")
	}
	ix.models = append(ix.models, model)
	return uint16(len(ix.models) - 1), nil
}

// Stale reports whether removed files hold more of the index than live
// ones do: rebuilt from the files left, it would take less than half the
// memory and search faster.
func (ix *Index) Stale() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.ids)-ix.live > ix.live && len(ix.ids) > 0
}

// Chunks returns the number of live chunks in the index.
func (ix *Index) Chunks() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// Segments returns the number of postings segments searches read.
func (ix *Index) Segments() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.segments)
}

// Memory estimates, in bytes, of what Bytes does not count exactly.
const (
	// A map entry: the id, the range and the map's own overhead.
	bytesPerFile = 16 + 8 + 24
	// The Index itself and its cache entry.
	bytesPerIndex = 256
	// A segment's header in the index.
	bytesPerSegment = 80
)

// Bytes estimates the index's memory.
func (ix *Index) Bytes() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.bytes()
}

func (ix *Index) bytes() int64 {
	n := int64(bytesPerIndex)
	n += int64(cap(ix.ids))*16 + int64(cap(ix.doclen))*4 + int64(cap(ix.model))*2
	n += int64(len(ix.files))*bytesPerFile + int64(cap(ix.starts))*4 + int64(cap(ix.owners))*16
	for _, m := range ix.models {
		n += 16 + int64(len(m))
	}
	n += int64(cap(ix.segments)) * bytesPerSegment
	for _, sg := range ix.segments {
		n += int64(cap(sg.buf))
	}
	return n
}

// Search ranks the live chunks of model holding any of terms by Okapi BM25
// and returns the best depth, best first, ties broken by chunk id. N, the
// document frequencies and the average length count every live chunk of
// the conversation, whatever its model. A term the query holds several
// times weighs that many times.
func (ix *Index) Search(terms []Term, model string, depth int, p Params) []Hit {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.search(terms, model, depth, p, nil)
}

// SearchFiles is Search restricted to the chunks of files (the files of one
// source of the conversation): the scores are Search's, computed with the
// statistics of the whole conversation, so the hits are Search's hits of
// those files, in the same order. Files the index does not hold are
// ignored. Restricting costs a bit per chunk of the conversation and a
// step per chunk of files, besides the search.
func (ix *Index) SearchFiles(terms []Term, model string, depth int, p Params, files []uuid.UUID) []Hit {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	only := make(chunkSet, (len(ix.ids)+63)/64)
	for _, id := range files {
		if r, ok := ix.files[id]; ok {
			only.add(r)
		}
	}
	return ix.search(terms, model, depth, p, only)
}

// chunkSet is a set of chunk numbers, a bit each.
type chunkSet []uint64

// add adds the chunks of r.
func (s chunkSet) add(r chunkRange) {
	for c := r.start; c < r.start+r.n; c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

// has reports whether chunk doc is in the set.
func (s chunkSet) has(doc int64) bool { return s[doc>>6]&(1<<(doc&63)) != 0 }

// search is Search, of the chunks in only when it is not nil. The caller
// holds the read lock.
func (ix *Index) search(terms []Term, model string, depth int, p Params, only chunkSet) []Hit {
	m := slices.Index(ix.models, model)
	n := len(ix.ids)
	if m < 0 || ix.live == 0 || depth <= 0 {
		return nil
	}
	avgdl := max(float64(ix.liveLen)/float64(ix.live), 1)
	acc, _ := ix.accs.Get().(*[]float64)
	if acc == nil || len(*acc) < n {
		a := make([]float64, n)
		acc = &a
	}
	var touched []int32
	defer func() {
		for _, doc := range touched {
			(*acc)[doc] = 0
		}
		ix.accs.Put(acc)
	}()
	scores := *acc
	var found []match
	for _, t := range terms {
		lex := []byte(t.Lexeme)
		found = found[:0]
		var df uint64
		for i := range ix.segments {
			sg := &ix.segments[i]
			if d, p, ok := sg.find(lex); ok {
				found = append(found, match{sg, d, p})
				df += d
			}
		}
		if df == 0 {
			continue
		}
		if ix.live < n {
			// Removed chunks stay in the postings until the index is
			// rebuilt: they must not count.
			df = 0
			for _, f := range found {
				f.each(n, func(doc int64, _ float64) {
					if ix.model[doc] != dead {
						df++
					}
				})
			}
			if df == 0 {
				continue
			}
		}
		idf := math.Log(1 + (float64(ix.live)-float64(df)+0.5)/(float64(df)+0.5))
		w := float64(t.Count) * idf * (p.K1 + 1)
		for _, f := range found {
			f.each(n, func(doc int64, tf float64) {
				// A count of 0 only comes from corrupt postings: it
				// would add nothing, and list the chunk twice.
				if int(ix.model[doc]) != m || tf == 0 || (only != nil && !only.has(doc)) {
					return
				}
				norm := p.K1 * (1 - p.B + p.B*float64(ix.doclen[doc])/avgdl)
				if scores[doc] == 0 {
					touched = append(touched, int32(doc))
				}
				scores[doc] += w * tf / (tf + norm)
			})
		}
	}
	h := &scoreHeap{ids: ix.ids}
	for _, doc := range touched {
		sc := scored{doc, scores[doc]}
		if h.Len() < depth {
			heap.Push(h, sc)
		} else if h.better(sc, h.items[0]) {
			h.items[0] = sc
			heap.Fix(h, 0)
		}
	}
	out := make([]Hit, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		sc := heap.Pop(h).(scored)
		out[i] = Hit{ID: ix.ids[sc.doc], File: ix.owner(sc.doc), Score: sc.score}
	}
	return out
}

// owner returns the file of chunk doc. The caller holds a lock.
func (ix *Index) owner(doc int32) uuid.UUID {
	i, found := slices.BinarySearch(ix.starts, doc)
	if !found {
		i--
	}
	return ix.owners[i]
}

// match is one segment's postings of a query term.
type match struct {
	sg       *segment
	df       uint64
	postings []byte
}

// each calls fn with the index number and occurrence count of every chunk
// in the postings. Postings are read as they came from the database: a
// malformed one ends its list rather than the process.
func (f match) each(n int, fn func(doc int64, tf float64)) {
	p, local := f.postings, int64(-1)
	for range f.df {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return
		}
		p = p[k:]
		tf := 1.0
		if v&1 == 0 {
			x, k := binary.Uvarint(p)
			if k <= 0 {
				return
			}
			p = p[k:]
			tf = float64(x)
		}
		gap := v >> 1
		if gap >= uint64(f.sg.n) {
			return
		}
		if local < 0 {
			local = int64(gap)
		} else {
			local += int64(gap)
		}
		doc := int64(f.sg.base) + local
		if local >= int64(f.sg.n) || doc >= int64(n) {
			return
		}
		fn(doc, tf)
	}
}

// scored is a chunk of the keyword ranking.
type scored struct {
	doc   int32
	score float64
}

// scoreHeap is a min-heap of the best chunks so far: its root is the worst
// of them.
type scoreHeap struct {
	items []scored
	ids   []uuid.UUID
}

// better orders by score, then by chunk id ascending.
func (h *scoreHeap) better(a, b scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return bytes.Compare(h.ids[a.doc][:], h.ids[b.doc][:]) < 0
}

func (h *scoreHeap) Len() int           { return len(h.items) }
func (h *scoreHeap) Less(i, j int) bool { return h.better(h.items[j], h.items[i]) }
func (h *scoreHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *scoreHeap) Push(x any)         { h.items = append(h.items, x.(scored)) }
func (h *scoreHeap) Pop() any {
	last := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return last
}

// Merging. Each added file is a segment, searched in place: a first
// search pays for reading the postings and nothing more. Segments are then
// merged off the search path, tiered so that a file's postings are copied a
// few times over the life of the index rather than at every merge: the
// trailing run of segments of level ℓ or lower (a segment of n chunks is
// of level ⌊log₈ n⌋) is merged once it holds mergeFactor segments of level
// ℓ, for the lowest ℓ for which it does. Files added one at a time thus merge
// as a counter in base 8 carries (8 one-chunk segments into one of 8, 8 of
// those into one of 64, ...), a conversation read at once merges in one
// pass, and a search reads at most about mergeFactor segments per level.

// mergeFactor is how many segments of one level make a merge.
const mergeFactor = 8

// level is the tier of a segment of n chunks.
func level(n int32) int {
	l := 0
	for n >= mergeFactor {
		n /= mergeFactor
		l++
	}
	return l
}

// maxSegments is the most segments an index keeps whatever their levels:
// past it (files of very different sizes read at once), all are merged.
const maxSegments = 64

// mergePlan returns the start of the trailing run of segments to merge, or
// false when none is due: for the lowest level ℓ at which the trailing run
// of segments of level ℓ or lower holds mergeFactor segments of level ℓ,
// that run.
func mergePlan(sizes []int32) (int, bool) {
	maxLevel := 0
	for _, n := range sizes {
		maxLevel = max(maxLevel, level(n))
	}
	for l := 0; l <= maxLevel; l++ {
		i, at := len(sizes), 0
		for i > 0 && level(sizes[i-1]) <= l {
			i--
			if level(sizes[i]) == l {
				at++
			}
		}
		if at >= mergeFactor {
			return i, true
		}
	}
	if len(sizes) > maxSegments {
		return 0, true
	}
	return 0, false
}

// MergeDue reports whether Merge has work to do.
func (ix *Index) MergeDue() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.merging {
		return false
	}
	_, ok := mergePlan(ix.sizes())
	return ok
}

func (ix *Index) sizes() []int32 {
	s := make([]int32, len(ix.segments))
	for i, sg := range ix.segments {
		s[i] = sg.n
	}
	return s
}

// Merge merges segments as the tiers say until none is due, and reports
// whether it merged any. Searches go on meanwhile: segments do not change,
// files added meanwhile are new segments after them, and a merged segment
// replaces those it merged under the write lock. One merge of an index
// runs at a time; a second call returns at once.
func (ix *Index) Merge() (bool, error) {
	ix.mu.Lock()
	if ix.merging {
		ix.mu.Unlock()
		return false, nil
	}
	ix.merging = true
	ix.mu.Unlock()
	defer func() {
		ix.mu.Lock()
		ix.merging = false
		ix.mu.Unlock()
	}()
	merged := false
	for {
		ix.mu.RLock()
		start, ok := mergePlan(ix.sizes())
		segs := slices.Clone(ix.segments[start:])
		ix.mu.RUnlock()
		if !ok {
			return merged, nil
		}
		m, err := mergeSegments(segs)
		if err != nil {
			return merged, err
		}
		ix.mu.Lock()
		// Segments before start never change; those merged are still
		// there, followed by any added meanwhile.
		tail := ix.segments[start+len(segs):]
		ix.segments = append(append(ix.segments[:start:start], m), tail...)
		ix.mu.Unlock()
		merged = true
	}
}

// Check reports whether p is keyword postings this package reads, wrapping
// ErrMalformed when it is not. Only the header is checked: a search reads
// the terms with bounds checks, and a merge checks everything.
func Check(p []byte) error {
	_, err := parse(p)
	return err
}
