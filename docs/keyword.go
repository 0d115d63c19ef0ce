package docs

import (
	"bytes"
	"container/heap"
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Keyword ranking runs in the process, over an inverted index per
// conversation built from the chunks' tsv in PostgreSQL.
//
// PostgreSQL stays the source of truth. Every change to a conversation's
// chunks (a file stored, deleted or re-embedded) replaces the conversation's
// generation in conversation_stats in the same transaction, with a number
// from a sequence, never reused. Each search reads that number; when it
// differs from the cached index's, the index is brought up to date before it
// is used: the chunks of files that became ready are appended, and a file
// deleted or moved to another model makes the index be rebuilt. So a file is
// searchable on every replica as soon as its transaction commits, and a
// replica that starts, or evicts an index, rebuilds it from the database.
//
// Indexes live in an LRU cache bounded by an estimate of their memory
// (Options.KeywordCacheBytes); an index larger than the whole budget is
// built for the search and not kept.

// DefaultKeywordCacheBytes is the default memory budget of the keyword
// indexes: about 600,000 chunks of 1,000 characters.
const DefaultKeywordCacheBytes = 256 << 20

// term is a query lexeme and how often the query holds it.
type term struct {
	lexeme string
	count  int
}

// postings lists the chunks holding one lexeme, in index order, with the
// lexeme's frequency in each.
type postings struct {
	docs []int32
	tf   []uint16
}

// convIndex is one conversation's inverted index. The fields below mu are
// read under its read lock and changed under its write lock.
type convIndex struct {
	conversationID string

	mu         sync.RWMutex
	generation int64
	// files maps each indexed file to the model of its chunks.
	files map[uuid.UUID]string
	// Per chunk, by index: id, length in lexeme occurrences, model number.
	ids    []uuid.UUID
	doclen []int32
	model  []uint16
	models []string
	// totalLen is the sum of doclen.
	totalLen int64
	// terms numbers the lexemes; posts holds their postings by number,
	// by value, so that a term costs no allocation of its own.
	terms map[string]int32
	posts []postings
	bytes int64
}

func newConvIndex(conversationID string) *convIndex {
	return &convIndex{conversationID: conversationID, generation: -1, files: map[uuid.UUID]string{}, terms: map[string]int32{}}
}

// Memory estimates, in bytes, of the index's parts; see memoryBytes.
const (
	bytesPerChunk = 16 + 4 + 2
	// A map entry (string header, number, overhead) and the two slice
	// headers in posts.
	bytesPerTerm = 32 + 48
	bytesPerFile = 48 + 16
)

// keywordCache holds the conversations' indexes, least recently used first
// out, within a memory budget.
type keywordCache struct {
	budget int64

	mu      sync.Mutex
	used    int64
	lru     *list.List // of *convIndex, most recent at the front
	entries map[string]*list.Element
}

func newKeywordCache(budget int64) *keywordCache {
	return &keywordCache{budget: budget, lru: list.New(), entries: map[string]*list.Element{}}
}

// get returns the conversation's cached index, or a new empty one that is
// cached once it is built.
func (c *keywordCache) get(conversationID string) *convIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[conversationID]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*convIndex)
	}
	return newConvIndex(conversationID)
}

// put records ix's new size, caches it if it fits and evicts the least
// recently used indexes beyond the budget.
func (c *keywordCache) put(ix *convIndex, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, cached := c.entries[ix.conversationID]
	if cached && e.Value.(*convIndex) != ix {
		// Another search built and cached an index meanwhile; keep that one.
		return
	}
	if cached {
		c.used -= e.Value.(*convIndex).bytes
		c.lru.MoveToFront(e)
	} else {
		if bytes > c.budget {
			return
		}
		e = c.lru.PushFront(ix)
		c.entries[ix.conversationID] = e
	}
	ix.bytes = bytes
	c.used += bytes
	for c.used > c.budget && c.lru.Len() > 0 {
		last := c.lru.Back()
		old := last.Value.(*convIndex)
		c.lru.Remove(last)
		delete(c.entries, old.conversationID)
		c.used -= old.bytes
	}
}

// drop forgets ix, as when it must be rebuilt from scratch.
func (c *keywordCache) drop(ix *convIndex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[ix.conversationID]; ok && e.Value.(*convIndex) == ix {
		c.lru.Remove(e)
		delete(c.entries, ix.conversationID)
		c.used -= ix.bytes
	}
}

// usedBytes returns the estimated memory of the cached indexes.
func (c *keywordCache) usedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// keywordIndex returns the conversation's index at generation gen or later,
// read-locked; the caller calls RUnlock.
func (s *Store) keywordIndex(ctx context.Context, conversationID string, gen int64) (*convIndex, error) {
	for range 3 {
		ix := s.keywords.get(conversationID)
		ix.mu.RLock()
		if ix.generation >= gen {
			return ix, nil
		}
		ix.mu.RUnlock()
		rebuild, err := s.refreshIndex(ctx, ix)
		if err != nil {
			return nil, err
		}
		if rebuild {
			// A file left the index: start again from an empty one.
			s.keywords.drop(ix)
			fresh := newConvIndex(conversationID)
			if _, err := s.refreshIndex(ctx, fresh); err != nil {
				return nil, err
			}
			fresh.mu.RLock()
			return fresh, nil
		}
	}
	// Generations kept moving under us; the index is current as of the last
	// refresh, which is newer than gen was.
	ix := s.keywords.get(conversationID)
	ix.mu.RLock()
	return ix, nil
}

// refreshIndex brings ix up to the database's current state of its
// conversation, appending the chunks of new ready files. It reports rebuild
// when an indexed file was deleted or re-embedded, which appending cannot
// express; ix is then left unchanged.
func (s *Store) refreshIndex(ctx context.Context, ix *convIndex) (rebuild bool, err error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	// One snapshot for the generation, the file list and the chunks.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return false, dbError("docs: keyword index", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var gen *int64
	if err := tx.QueryRow(ctx, `SELECT (SELECT generation FROM conversation_stats WHERE conversation_id = $1)`,
		ix.conversationID).Scan(&gen); err != nil {
		return false, dbError("docs: keyword index", err)
	}
	if gen != nil && *gen == ix.generation {
		return false, nil
	}
	rows, err := tx.Query(ctx, `SELECT id, embedding_model FROM files WHERE conversation_id = $1 AND status = 'ready'`, ix.conversationID)
	if err != nil {
		return false, dbError("docs: keyword index", err)
	}
	type readyFile struct {
		id    uuid.UUID
		model string
	}
	files, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (readyFile, error) {
		var f readyFile
		err := r.Scan(&f.id, &f.model)
		return f, err
	})
	if err != nil {
		return false, dbError("docs: keyword index", err)
	}
	seen := make(map[uuid.UUID]bool, len(files))
	var added []uuid.UUID
	for _, f := range files {
		seen[f.id] = true
		model, ok := ix.files[f.id]
		switch {
		case !ok:
			added = append(added, f.id)
		case model != f.model:
			return true, nil
		}
	}
	for id := range ix.files {
		if !seen[id] {
			return true, nil
		}
	}
	if len(added) > 0 {
		if err := ix.load(ctx, tx, added); err != nil {
			return false, err
		}
		for _, f := range files {
			if _, ok := ix.files[f.id]; !ok {
				ix.files[f.id] = f.model
			}
		}
	}
	if gen != nil {
		ix.generation = *gen
	} else {
		ix.generation = 0
	}
	s.keywords.put(ix, ix.memoryBytes())
	return false, nil
}

// load appends the chunks of files to the index. The caller holds the write
// lock.
func (ix *convIndex) load(ctx context.Context, tx pgx.Tx, files []uuid.UUID) error {
	// The tsvectors come in PostgreSQL's binary form, parsed here: the
	// cheapest form to send and to read.
	rows, err := tx.Query(ctx, `
		SELECT id, embedding_model, tsv FROM chunks
		WHERE file_id = ANY($1)
		ORDER BY file_id, ordinal`,
		pgx.QueryResultFormats{pgx.BinaryFormatCode, pgx.TextFormatCode, pgx.BinaryFormatCode}, files)
	if err != nil {
		return dbError("docs: keyword index", err)
	}
	defer rows.Close()
	var (
		id    uuid.UUID
		model string
	)
	for rows.Next() {
		if err := rows.Scan(&id, &model, nil); err != nil {
			return dbError("docs: keyword index", err)
		}
		if err := ix.add(id, model, rows.RawValues()[2]); err != nil {
			return fmt.Errorf("docs: keyword index: chunk %s: %w", id, err)
		}
	}
	if err := rows.Err(); err != nil {
		return dbError("docs: keyword index", err)
	}
	return nil
}

// parseTSVector calls fn with each lexeme of tsv, a tsvector in
// PostgreSQL's binary form, and its number of positions (1 for a lexeme
// stored without any). The binary form is a big-endian int32 count, then
// per lexeme its UTF-8 text ended by a NUL byte, an int16 number of
// positions and as many int16 positions. The lexeme passed to fn is only
// valid during the call.
func parseTSVector(tsv []byte, fn func(lexeme []byte, count int)) error {
	if len(tsv) < 4 {
		return errors.New("tsvector: too short")
	}
	n := int(binary.BigEndian.Uint32(tsv))
	rest := tsv[4:]
	for range n {
		end := bytes.IndexByte(rest, 0)
		if end < 0 || len(rest) < end+3 {
			return errors.New("tsvector: truncated lexeme")
		}
		lex := rest[:end]
		npos := int(binary.BigEndian.Uint16(rest[end+1:]))
		rest = rest[end+3:]
		if len(rest) < 2*npos {
			return errors.New("tsvector: truncated positions")
		}
		rest = rest[2*npos:]
		fn(lex, max(npos, 1))
	}
	if len(rest) != 0 {
		return fmt.Errorf("tsvector: %d bytes after the last lexeme", len(rest))
	}
	return nil
}

// add appends one chunk, given its tsvector in binary form. The caller holds
// the write lock.
func (ix *convIndex) add(id uuid.UUID, model string, tsv []byte) error {
	doc := int32(len(ix.ids))
	m := -1
	for i, name := range ix.models {
		if name == model {
			m = i
			break
		}
	}
	if m < 0 {
		ix.models = append(ix.models, model)
		m = len(ix.models) - 1
	}
	var length int32
	err := parseTSVector(tsv, func(lex []byte, tf int) {
		length += int32(tf)
		// The lookup with string(lex) does not allocate; a new term is
		// copied so that it does not pin the row's buffer.
		id, ok := ix.terms[string(lex)]
		if !ok {
			id = int32(len(ix.posts))
			ix.posts = append(ix.posts, postings{})
			ix.terms[string(lex)] = id
		}
		p := &ix.posts[id]
		p.docs = append(p.docs, doc)
		p.tf = append(p.tf, uint16(min(tf, math.MaxUint16)))
	})
	if err != nil {
		return err
	}
	ix.ids = append(ix.ids, id)
	ix.doclen = append(ix.doclen, length)
	ix.model = append(ix.model, uint16(m))
	ix.totalLen += int64(length)
	return nil
}

// memoryBytes estimates the index's memory. The caller holds a lock.
func (ix *convIndex) memoryBytes() int64 {
	n := int64(len(ix.ids)) * bytesPerChunk
	n += int64(len(ix.files)) * bytesPerFile
	n += int64(cap(ix.posts)-len(ix.posts)) * 48
	for lex, id := range ix.terms {
		p := &ix.posts[id]
		n += bytesPerTerm + int64(len(lex)) + int64(cap(p.docs))*4 + int64(cap(p.tf))*2
	}
	return n
}

// scored is a chunk of the keyword ranking.
type scored struct {
	doc   int32
	score float64
}

// top ranks the chunks of model holding any of terms by Okapi BM25 and
// returns the best depth, best first, ties broken by chunk id. N, the
// document frequencies and the average length count every chunk of the
// conversation, whatever its model. A term the query holds several times
// weighs that many times. The caller holds the read lock.
func (ix *convIndex) top(terms []term, model string, depth int, k1, b float64) []candidate {
	m := -1
	for i, name := range ix.models {
		if name == model {
			m = i
		}
	}
	n := len(ix.ids)
	if m < 0 || n == 0 || depth <= 0 {
		return nil
	}
	avgdl := max(float64(ix.totalLen)/float64(n), 1)
	acc := make([]float64, n)
	var touched []int32
	for _, t := range terms {
		id, ok := ix.terms[t.lexeme]
		if !ok {
			continue
		}
		p := &ix.posts[id]
		df := float64(len(p.docs))
		idf := math.Log(1 + (float64(n)-df+0.5)/(df+0.5))
		w := float64(t.count) * idf * (k1 + 1)
		for i, doc := range p.docs {
			if int(ix.model[doc]) != m {
				continue
			}
			tf := float64(p.tf[i])
			norm := k1 * (1 - b + b*float64(ix.doclen[doc])/avgdl)
			if acc[doc] == 0 {
				touched = append(touched, doc)
			}
			acc[doc] += w * tf / (tf + norm)
		}
	}
	h := &scoreHeap{ids: ix.ids}
	for _, doc := range touched {
		sc := scored{doc, acc[doc]}
		if h.Len() < depth {
			heap.Push(h, sc)
		} else if h.better(sc, h.items[0]) {
			h.items[0] = sc
			heap.Fix(h, 0)
		}
	}
	out := make([]candidate, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		sc := heap.Pop(h).(scored)
		out[i] = candidate{id: ix.ids[sc.doc].String(), score: sc.score, keyword: true}
	}
	return out
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
