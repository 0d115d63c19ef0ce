package docs

import (
	"bytes"
	"container/heap"
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Keyword ranking runs in the process, over an inverted index per
// conversation.
//
// PostgreSQL stays the source of truth. Every change to a conversation's
// chunks (a file stored, deleted or re-embedded) replaces the conversation's
// generation in conversation_stats in the same transaction, with a number
// from a sequence, never reused. Each search reads that number; when it
// differs from the cached index's, the index is brought up to date before it
// is used: the postings of files that became ready are added, and a file
// deleted or moved to another model makes the index be rebuilt. So a file is
// searchable on every replica as soon as its transaction commits, and a
// replica that starts, or evicts an index, rebuilds it from the database.
//
// Each ready file carries its keyword postings (files.keyword_postings): a
// compact copy of its chunks' tsvectors in the format below, derived from
// them in the transaction that stores the chunks. Building an index reads
// one value per file, where reading the chunks' tsvectors, each TOASTed out
// of line, costs about four buffer reads per chunk. A file stored before the
// postings existed (NULL) is read from its chunks' tsvectors instead, and
// whichever process does so writes its postings back afterwards, so that the
// next build is fast; FillKeywordPostings does it for every file at once.
//
// An index is a list of segments in that format: a file's postings are
// searched as they come from the database, so that a first search pays
// for reading them and nothing more. Once a search has used the index, the
// segments are merged into one off the search path, which holds each
// lexeme once: about 360 KB for 1,000 chunks of 1,000 characters, against
// 600 KB as read.
//
// Indexes live in an LRU cache bounded by their memory
// (Options.KeywordCacheBytes); an index larger than the whole budget is
// built for the search and not kept.
//
// The keyword postings format, version 1 (varints are unsigned, as
// encoding/binary writes them):
//
//	byte        postingsFormat
//	varint      n, the number of chunks
//	n × 16      the chunks' ids, in ordinal order; a chunk's number is its
//	            position here
//	n × varint  the chunks' lengths, in lexeme occurrences
//	varint      t, the number of terms
//	⌈t/16⌉ × 4  little-endian offset, in the terms that follow, of every
//	            16th term
//	t terms, in ascending byte order of their lexemes, each:
//	  varint    lexeme length, then the lexeme's bytes
//	  varint    df, the number of chunks holding it
//	  varint    the length in bytes of its postings, then df postings in
//	            ascending chunk order, each a varint gap<<1 | 1 when the
//	            lexeme occurs once in the chunk, or gap<<1 followed by a
//	            varint number of occurrences; gap is the chunk number for
//	            the first posting and the difference from the previous one
//	            after it

// postingsFormat is the first byte of keyword postings in the format above.
// A reader treats any other value as absent postings.
const postingsFormat = 1

// termBlock is the number of terms per entry of the block offsets.
const termBlock = 16

// DefaultKeywordCacheBytes is the default memory budget of the keyword
// indexes: about 700,000 chunks of 1,000 characters once merged.
const DefaultKeywordCacheBytes = 256 << 20

// term is a query lexeme and how often the query holds it.
type term struct {
	lexeme string
	count  int
}

// convIndex is one conversation's inverted index. The fields below mu are
// read under its read lock and changed under its write lock.
type convIndex struct {
	conversationID string

	mu         sync.RWMutex
	generation int64
	// files maps each indexed file to the model of its chunks.
	files map[uuid.UUID]string
	// Per chunk, by number: id, length in lexeme occurrences, model number.
	ids    []uuid.UUID
	doclen []int32
	model  []uint16
	models []string
	// totalLen is the sum of doclen.
	totalLen int64
	// segments hold the postings, each of its chunks numbered from its
	// base, in chunk order.
	segments []segment
	// compacting is set while the segments are being merged.
	compacting bool
	bytes      int64
}

func newConvIndex(conversationID string) *convIndex {
	return &convIndex{conversationID: conversationID, generation: -1, files: map[uuid.UUID]string{}}
}

// Memory estimates, in bytes, of what memoryBytes does not count exactly.
const (
	// A map entry: the id, a string header and the map's own overhead.
	bytesPerFile = 16 + 16 + 32
	// The convIndex itself and its cache entry.
	bytesPerIndex = 256
	// A segment's header in the index.
	bytesPerSegment = 80
)

// keywordCache holds the conversations' indexes, least recently used first
// out, within a memory budget.
type keywordCache struct {
	budget int64
	// compactions runs one merge of segments at a time; pending counts
	// those started and not done.
	compactions sync.Mutex
	pending     sync.WaitGroup

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
// recently used indexes beyond the budget. It reports whether ix is
// cached.
func (c *keywordCache) put(ix *convIndex, bytes int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, cached := c.entries[ix.conversationID]
	if cached && e.Value.(*convIndex) != ix {
		// Another search built and cached an index meanwhile; keep that one.
		return false
	}
	if cached {
		c.used -= e.Value.(*convIndex).bytes
		c.lru.MoveToFront(e)
	} else {
		if bytes > c.budget {
			return false
		}
		e = c.lru.PushFront(ix)
		c.entries[ix.conversationID] = e
	}
	ix.bytes = bytes
	c.used += bytes
	c.evict()
	_, cached = c.entries[ix.conversationID]
	return cached
}

// evict drops the least recently used indexes until the cache is within
// its budget. The caller holds c.mu.
func (c *keywordCache) evict() {
	for c.used > c.budget && c.lru.Len() > 0 {
		last := c.lru.Back()
		old := last.Value.(*convIndex)
		c.lru.Remove(last)
		delete(c.entries, old.conversationID)
		c.used -= old.bytes
	}
}

// resize records the new size of ix if it is cached, evicting the least
// recently used indexes beyond the budget.
func (c *keywordCache) resize(ix *convIndex, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[ix.conversationID]; !ok || e.Value.(*convIndex) != ix {
		return
	}
	c.used += bytes - ix.bytes
	ix.bytes = bytes
	c.evict()
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
// read-locked; the caller calls RUnlock. An index too large for the cache
// is built for the search and not kept.
func (s *Store) keywordIndex(ctx context.Context, conversationID string, gen int64) (*convIndex, error) {
	var ix *convIndex
	for range 3 {
		ix = s.keywords.get(conversationID)
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
			ix = newConvIndex(conversationID)
			if _, err := s.refreshIndex(ctx, ix); err != nil {
				return nil, err
			}
			ix.mu.RLock()
			return ix, nil
		}
		// Refreshed, whether or not the cache kept it.
		ix.mu.RLock()
		if ix.generation >= gen {
			return ix, nil
		}
		ix.mu.RUnlock()
	}
	// Generations kept moving under us; the index is current as of the last
	// refresh, which is newer than gen was.
	ix.mu.RLock()
	return ix, nil
}

// refreshIndex brings ix up to the database's current state of its
// conversation, adding the postings of new ready files. It reports rebuild
// when an indexed file was deleted or re-embedded, which adding cannot
// express; ix is then left unchanged.
func (s *Store) refreshIndex(ctx context.Context, ix *convIndex) (rebuild bool, err error) {
	built, rebuild, err := s.refreshLocked(ctx, ix)
	if len(built) > 0 {
		// Written back once ix is unlocked, so that searches of the
		// conversation do not wait for it. Not needed for this search: a
		// failure only leaves the next build as slow as this one.
		if _, werr := savePostings(ctx, s.pool, built); werr != nil {
			s.log.Warn("docs: keyword postings not written back", "conversation_id", ix.conversationID, "files", len(built), "error", werr)
		}
	}
	return rebuild, err
}

// refreshLocked is refreshIndex under ix's write lock; it returns the
// postings it built from chunks' tsvectors, for files stored without.
func (s *Store) refreshLocked(ctx context.Context, ix *convIndex) (built map[uuid.UUID][]byte, rebuild bool, err error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ch, err := s.readChanges(ctx, ix)
	if err != nil || ch.rebuild || ch.current {
		return nil, ch.rebuild, err
	}
	if err := ix.appendFiles(ch.added); err != nil {
		return nil, false, fmt.Errorf("docs: keyword index of %q: %w", ix.conversationID, err)
	}
	ix.generation = ch.generation
	// An index the cache does not keep serves one search: merging it
	// would be work for nothing.
	if s.keywords.put(ix, ix.memoryBytes()) && len(ix.segments) > 1 && !ix.compacting {
		ix.compacting = true
		c := s.keywords
		c.pending.Go(func() { c.compact(ix, s.log) })
	}
	return ch.built, false, nil
}

// compact merges ix's segments into one, which holds each lexeme once,
// and takes the memory saved off the cache's account. Searches go on
// meanwhile: the segments do not change, files added meanwhile are new
// segments after them, and the merged segment replaces those it merged
// under the write lock.
func (c *keywordCache) compact(ix *convIndex, log *slog.Logger) {
	c.compactions.Lock()
	defer c.compactions.Unlock()
	ix.mu.RLock()
	segs := slices.Clone(ix.segments)
	ix.mu.RUnlock()
	merged, err := mergeSegments(segs)
	ix.mu.Lock()
	ix.compacting = false
	if err != nil {
		ix.mu.Unlock()
		log.Error("docs: keyword postings malformed; searches may miss chunks of the conversation", "conversation_id", ix.conversationID, "error", err)
		return
	}
	ix.segments = append([]segment{merged}, ix.segments[len(segs):]...)
	// Under ix's lock, as refreshIndex's put is: a refresh between the
	// two would otherwise have its larger size overwritten.
	c.resize(ix, ix.memoryBytes())
	ix.mu.Unlock()
}

// indexChanges is what refreshIndex reads of a conversation.
type indexChanges struct {
	// current is set when the index is at the database's generation.
	current bool
	// rebuild is set when an indexed file left the conversation or moved
	// to another model.
	rebuild    bool
	generation int64
	// added are the ready files the index lacks, in id order.
	added []addedFile
	// built holds the postings made from the chunks' tsvectors for added
	// files that had none stored.
	built map[uuid.UUID][]byte
}

// addedFile is a ready file to merge into an index.
type addedFile struct {
	id    uuid.UUID
	model string
	seg   segment
}

// readChanges reads the conversation's generation and, when it differs
// from ix's, its ready files with the postings of those ix lacks, in one
// statement: one snapshot and one round trip. The caller holds ix's write
// lock.
func (s *Store) readChanges(ctx context.Context, ix *convIndex) (indexChanges, error) {
	var ch indexChanges
	// The postings of files already indexed are not sent again.
	known := make([]uuid.UUID, 0, len(ix.files))
	for id := range ix.files {
		known = append(known, id)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT g.generation, f.id, f.embedding_model,
		       CASE WHEN f.id = ANY($3) THEN NULL ELSE f.keyword_postings END
		FROM (SELECT (SELECT generation FROM conversation_stats WHERE conversation_id = $1) AS generation) g
		LEFT JOIN files f ON f.conversation_id = $1 AND f.status = 'ready'
		                 AND g.generation IS DISTINCT FROM $2
		ORDER BY f.id`,
		pgx.QueryResultFormats{pgx.BinaryFormatCode, pgx.BinaryFormatCode, pgx.TextFormatCode, pgx.BinaryFormatCode},
		ix.conversationID, ix.generation, known)
	if err != nil {
		return ch, dbError("docs: keyword index", err)
	}
	defer rows.Close()
	type readyFile struct {
		id       uuid.UUID
		model    string
		postings []byte
	}
	var (
		gen   *int64
		files []readyFile
		id    *uuid.UUID
		model *string
	)
	for rows.Next() {
		var postings []byte
		if err := rows.Scan(&gen, &id, &model, &postings); err != nil {
			return ch, dbError("docs: keyword index", err)
		}
		if id != nil {
			files = append(files, readyFile{*id, *model, postings})
		}
	}
	if err := rows.Err(); err != nil {
		return ch, dbError("docs: keyword index", err)
	}
	if gen != nil && *gen == ix.generation {
		ch.current = true
		return ch, nil
	}
	if gen != nil {
		ch.generation = *gen
	}
	seen := make(map[uuid.UUID]bool, len(files))
	var legacy []uuid.UUID
	for _, f := range files {
		seen[f.id] = true
		model, ok := ix.files[f.id]
		switch {
		case ok && model != f.model:
			ch.rebuild = true
			return ch, nil
		case ok:
			continue
		}
		a := addedFile{id: f.id, model: f.model}
		if f.postings != nil {
			if a.seg, err = parsePostings(f.postings); err == nil {
				ch.added = append(ch.added, a)
				continue
			}
			// Postings of another format, as a newer build may write:
			// the chunks say the same.
			s.log.Warn("docs: keyword postings unreadable; reading the file's chunks instead", "file_id", f.id, "error", err)
		}
		ch.added = append(ch.added, a)
		legacy = append(legacy, f.id)
	}
	for id := range ix.files {
		if !seen[id] {
			ch.rebuild = true
			return ch, nil
		}
	}
	if len(legacy) == 0 {
		return ch, nil
	}
	// Read after the statement above: the chunks of a ready file do not
	// change, and a file deleted meanwhile has none, which the next
	// generation corrects.
	if ch.built, err = buildPostings(ctx, s.pool, legacy); err != nil {
		return ch, err
	}
	for i := range ch.added {
		a := &ch.added[i]
		if p, ok := ch.built[a.id]; ok {
			if a.seg, err = parsePostings(p); err != nil {
				return ch, fmt.Errorf("docs: keyword index: file %s: %w", a.id, err)
			}
		}
	}
	return ch, nil
}

// appendFiles adds files to the index, numbering their chunks after those
// it holds. The caller holds the write lock.
func (ix *convIndex) appendFiles(files []addedFile) error {
	total := len(ix.ids)
	for _, f := range files {
		if total+int(f.seg.n) > math.MaxInt32 {
			return errors.New("too many chunks for one index")
		}
		total += int(f.seg.n)
	}
	if len(ix.ids) == 0 {
		// A first build: exact sizes, as no append is likely soon.
		ix.ids = make([]uuid.UUID, 0, total)
		ix.doclen = make([]int32, 0, total)
		ix.model = make([]uint16, 0, total)
	}
	for _, f := range files {
		m := slices.Index(ix.models, f.model)
		if m < 0 {
			ix.models = append(ix.models, f.model)
			m = len(ix.models) - 1
		}
		seg := f.seg
		seg.base = int32(len(ix.ids))
		ix.ids = append(ix.ids, seg.ids...)
		ix.doclen = append(ix.doclen, seg.doclen...)
		for _, l := range seg.doclen {
			ix.model = append(ix.model, uint16(m))
			ix.totalLen += int64(l)
		}
		// The index holds the chunks; the segment, its terms.
		seg.ids, seg.doclen = nil, nil
		ix.segments = append(ix.segments, seg)
		ix.files[f.id] = f.model
	}
	return nil
}

// memoryBytes returns the index's memory. The caller holds a lock.
func (ix *convIndex) memoryBytes() int64 {
	n := int64(bytesPerIndex)
	n += int64(cap(ix.ids))*16 + int64(cap(ix.doclen))*4 + int64(cap(ix.model))*2
	n += int64(len(ix.files)) * bytesPerFile
	for _, m := range ix.models {
		n += 16 + int64(len(m))
	}
	n += int64(cap(ix.segments)) * bytesPerSegment
	for _, sg := range ix.segments {
		n += int64(cap(sg.buf))
	}
	return n
}

// segment is postings in the format: one file's, as stored, or several
// files' merged.
type segment struct {
	// file names the segment in errors; zero for a merged one.
	file uuid.UUID
	// buf is the memory the segment's slices are in.
	buf []byte
	// ids and doclen are the chunks', until an index takes them.
	ids    []uuid.UUID
	doclen []int32
	// n is the number of chunks, base the index's number of the first.
	n, base int32
	// nterms is the number of terms; blocks holds the offset of every
	// termBlock-th one in terms.
	nterms int
	blocks []byte
	terms  []byte
}

// errPostings reports keyword postings that do not follow the format.
var errPostings = errors.New("malformed keyword postings")

// uvarint reads a varint from p and returns it with the rest of p.
func uvarint(p []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: truncated number", errPostings)
	}
	return v, p[n:], nil
}

// parsePostings reads the header of keyword postings, whose terms are then
// read in place: a search reads what it needs with bounds checks, and a
// merge checks everything.
func parsePostings(b []byte) (segment, error) {
	sg := segment{buf: b}
	if len(b) == 0 || b[0] != postingsFormat {
		return sg, fmt.Errorf("%w: not of format %d", errPostings, postingsFormat)
	}
	n, p, err := uvarint(b[1:])
	if err != nil {
		return sg, err
	}
	if n > uint64(len(p))/17 {
		return sg, fmt.Errorf("%w: %d chunks in %d bytes", errPostings, n, len(b))
	}
	sg.n = int32(n)
	sg.ids = make([]uuid.UUID, n)
	for i := range sg.ids {
		copy(sg.ids[i][:], p[16*i:])
	}
	p = p[16*n:]
	sg.doclen = make([]int32, n)
	for i := range sg.doclen {
		var l uint64
		if l, p, err = uvarint(p); err != nil {
			return sg, err
		}
		if l > math.MaxInt32 {
			return sg, fmt.Errorf("%w: chunk length %d", errPostings, l)
		}
		sg.doclen[i] = int32(l)
	}
	terms, p, err := uvarint(p)
	if err != nil {
		return sg, err
	}
	// A term takes 5 bytes at least.
	if terms > uint64(len(p))/5 {
		return sg, fmt.Errorf("%w: %d terms in %d bytes", errPostings, terms, len(p))
	}
	nb := (int(terms) + termBlock - 1) / termBlock
	if len(p) < 4*nb {
		return sg, fmt.Errorf("%w: truncated block offsets", errPostings)
	}
	sg.nterms, sg.blocks, sg.terms = int(terms), p[:4*nb], p[4*nb:]
	for i := range nb {
		if sg.blockOffset(i) >= len(sg.terms) {
			return sg, fmt.Errorf("%w: block offset %d beyond %d bytes", errPostings, sg.blockOffset(i), len(sg.terms))
		}
	}
	return sg, nil
}

func (sg *segment) blockOffset(i int) int {
	return int(binary.LittleEndian.Uint32(sg.blocks[4*i:]))
}

// readTerm reads the term at the start of p: its lexeme, document
// frequency and postings, and the rest of p after it. It reports false when
// p does not hold a whole term.
func readTerm(p []byte) (lex []byte, df uint64, postings, rest []byte, ok bool) {
	l, n := binary.Uvarint(p)
	if n <= 0 || l > uint64(len(p)-n) {
		return nil, 0, nil, nil, false
	}
	lex, p = p[n:n+int(l)], p[n+int(l):]
	df, n = binary.Uvarint(p)
	if n <= 0 {
		return nil, 0, nil, nil, false
	}
	p = p[n:]
	size, n := binary.Uvarint(p)
	if n <= 0 || size > uint64(len(p)-n) {
		return nil, 0, nil, nil, false
	}
	return lex, df, p[n : n+int(size)], p[n+int(size):], true
}

// find returns lexeme's document frequency and postings in the segment, or
// ok false when none of its chunks holds it.
func (sg *segment) find(lexeme []byte) (df uint64, postings []byte, ok bool) {
	nb := len(sg.blocks) / 4
	// The last block whose first lexeme is not after lexeme.
	b := sort.Search(nb, func(i int) bool {
		lex, _, _, _, ok := readTerm(sg.terms[sg.blockOffset(i):])
		return !ok || bytes.Compare(lex, lexeme) > 0
	}) - 1
	if b < 0 {
		return 0, nil, false
	}
	p := sg.terms[sg.blockOffset(b):]
	for range min(termBlock, sg.nterms-b*termBlock) {
		lex, df, postings, rest, ok := readTerm(p)
		if !ok {
			return 0, nil, false
		}
		switch c := bytes.Compare(lex, lexeme); {
		case c == 0:
			return df, postings, true
		case c > 0:
			return 0, nil, false
		}
		p = rest
	}
	return 0, nil, false
}

// termWriter writes the terms of postings, in lexeme order, and their
// block offsets.
type termWriter struct {
	terms  []byte
	blocks []byte
	n      int
}

func (w *termWriter) add(lex []byte, df uint64, postings []byte) error {
	if w.n%termBlock == 0 {
		if len(w.terms) > math.MaxUint32 {
			return errors.New("keyword postings over 4 GiB")
		}
		w.blocks = binary.LittleEndian.AppendUint32(w.blocks, uint32(len(w.terms)))
	}
	w.n++
	w.terms = binary.AppendUvarint(w.terms, uint64(len(lex)))
	w.terms = append(w.terms, lex...)
	w.terms = binary.AppendUvarint(w.terms, df)
	w.terms = binary.AppendUvarint(w.terms, uint64(len(postings)))
	w.terms = append(w.terms, postings...)
	return nil
}

// appendTo appends the terms' section of the format to out.
func (w *termWriter) appendTo(out []byte) []byte {
	out = binary.AppendUvarint(out, uint64(w.n))
	out = append(out, w.blocks...)
	return append(out, w.terms...)
}

// postingsBuilder makes a file's keyword postings from its chunks' tsvectors.
type postingsBuilder struct {
	ids    []uuid.UUID
	doclen []uint64
	// terms numbers the lexemes in order of appearance; lexemes holds them
	// by number.
	terms   map[string]int32
	lexemes []string
	posts   []rawPosting
}

// rawPosting is one lexeme (by number) in one chunk (by number).
type rawPosting struct {
	term int32
	doc  int32
	tf   uint32
}

func newPostingsBuilder() *postingsBuilder {
	return &postingsBuilder{terms: map[string]int32{}}
}

// add appends the file's next chunk, given its tsvector in binary form.
func (b *postingsBuilder) add(id uuid.UUID, tsv []byte) error {
	doc := int32(len(b.ids))
	var length uint64
	err := parseTSVector(tsv, func(lex []byte, tf int) {
		length += uint64(tf)
		// The lookup with string(lex) does not allocate; a new lexeme is
		// copied so that it does not pin the row's buffer.
		t, ok := b.terms[string(lex)]
		if !ok {
			t = int32(len(b.lexemes))
			s := string(lex)
			b.terms[s] = t
			b.lexemes = append(b.lexemes, s)
		}
		b.posts = append(b.posts, rawPosting{term: t, doc: doc, tf: uint32(tf)})
	})
	if err != nil {
		return err
	}
	b.ids = append(b.ids, id)
	b.doclen = append(b.doclen, length)
	return nil
}

// bytes returns the postings of the chunks added so far.
func (b *postingsBuilder) bytes() []byte {
	order := make([]int32, len(b.lexemes))
	size := 0
	for i, l := range b.lexemes {
		order[i] = int32(i)
		size += len(l) + 4
	}
	slices.SortFunc(order, func(x, y int32) int { return strings.Compare(b.lexemes[x], b.lexemes[y]) })
	rank := make([]int32, len(order))
	for r, t := range order {
		rank[t] = int32(r)
	}
	// A counting sort by lexeme keeps each lexeme's postings in chunk
	// order, the order they were added in.
	start := make([]int32, len(order)+1)
	for _, p := range b.posts {
		start[rank[p.term]+1]++
	}
	for r := range order {
		start[r+1] += start[r]
	}
	next := slices.Clone(start[:len(order)])
	sorted := make([]rawPosting, len(b.posts))
	for _, p := range b.posts {
		r := rank[p.term]
		sorted[next[r]] = p
		next[r]++
	}

	w := termWriter{terms: make([]byte, 0, size+3*len(b.posts))}
	var postings []byte
	for r, t := range order {
		ps := sorted[start[r]:start[r+1]]
		postings = postings[:0]
		prev := int32(0)
		for _, p := range ps {
			postings = appendPosting(postings, uint64(p.doc-prev), uint64(p.tf))
			prev = p.doc
		}
		// A file's postings are far below the format's 4 GiB.
		_ = w.add([]byte(b.lexemes[t]), uint64(len(ps)), postings)
	}
	out := make([]byte, 0, 1+2*binary.MaxVarintLen64+21*len(b.ids)+len(w.blocks)+len(w.terms))
	out = append(out, postingsFormat)
	out = binary.AppendUvarint(out, uint64(len(b.ids)))
	for _, id := range b.ids {
		out = append(out, id[:]...)
	}
	for _, l := range b.doclen {
		out = binary.AppendUvarint(out, l)
	}
	return w.appendTo(out)
}

// appendPosting appends one posting of the format: its gap and its number
// of occurrences.
func appendPosting(out []byte, gap, tf uint64) []byte {
	if tf == 1 {
		return binary.AppendUvarint(out, gap<<1|1)
	}
	out = binary.AppendUvarint(out, gap<<1)
	return binary.AppendUvarint(out, tf)
}

// termCursor walks the terms of one segment in a merge.
type termCursor struct {
	seg *segment
	// rest is the segment's terms after the current one.
	rest     []byte
	left     int
	lex      []byte
	key      uint64
	df       uint64
	postings []byte
}

// next moves to the segment's next term and reports whether there was one.
func (c *termCursor) next() (bool, error) {
	if c.left == 0 {
		if len(c.rest) != 0 {
			return false, fmt.Errorf("%w: %d bytes after the last term", errPostings, len(c.rest))
		}
		return false, nil
	}
	c.left--
	lex, df, postings, rest, ok := readTerm(c.rest)
	switch {
	case !ok:
		return false, fmt.Errorf("%w: truncated term", errPostings)
	case len(lex) == 0:
		return false, fmt.Errorf("%w: empty lexeme", errPostings)
	case c.lex != nil && bytes.Compare(c.lex, lex) >= 0:
		return false, fmt.Errorf("%w: lexeme %q after %q", errPostings, lex, c.lex)
	case df == 0 || df > uint64(c.seg.n):
		return false, fmt.Errorf("%w: lexeme %q in %d of %d chunks", errPostings, lex, df, c.seg.n)
	}
	c.lex, c.key, c.df, c.postings, c.rest = lex, lexemeKey(lex), df, postings, rest
	return true, nil
}

// copyPostings appends the current term's postings to out, numbered from
// base, after prev, the last chunk number out holds for the term (-1 for
// none), and returns out and the last number appended.
func (c *termCursor) copyPostings(out []byte, base, prev int64) ([]byte, int64, error) {
	p := c.postings
	doc := int64(-1)
	for range c.df {
		v, q, err := uvarint(p)
		if err != nil {
			return nil, 0, err
		}
		tf := uint64(1)
		if v&1 == 0 {
			if tf, q, err = uvarint(q); err != nil {
				return nil, 0, err
			}
			if tf < 2 || tf > math.MaxUint16 {
				return nil, 0, fmt.Errorf("%w: %d occurrences", errPostings, tf)
			}
		}
		p = q
		gap := v >> 1
		switch {
		case gap >= uint64(c.seg.n):
			return nil, 0, fmt.Errorf("%w: chunk gap %d among %d chunks", errPostings, gap, c.seg.n)
		case doc < 0:
			doc = int64(gap)
		case gap == 0:
			return nil, 0, fmt.Errorf("%w: a chunk twice in the postings of %q", errPostings, c.lex)
		default:
			doc += int64(gap)
		}
		if doc >= int64(c.seg.n) {
			return nil, 0, fmt.Errorf("%w: chunk %d among %d", errPostings, doc, c.seg.n)
		}
		n := base + doc
		g := n
		if prev >= 0 {
			g = n - prev
		}
		out = appendPosting(out, uint64(g), tf)
		prev = n
	}
	if len(p) != 0 {
		return nil, 0, fmt.Errorf("%w: %d bytes after the postings of %q", errPostings, len(p), c.lex)
	}
	return out, prev, nil
}

// mergeHeap is a min-heap of the cursors of a merge, by index, ordered by
// lexeme, then by run. It is written out rather than built on
// container/heap: a merge compares lexemes some ten times per term, and
// comparisons of an 8-byte prefix held by value cost a fraction of
// interface calls and byte comparisons.
type mergeHeap struct {
	cs []termCursor
	h  []int32
}

func (m *mergeHeap) less(a, b int32) bool {
	ca, cb := &m.cs[a], &m.cs[b]
	if ca.key != cb.key {
		return ca.key < cb.key
	}
	if c := bytes.Compare(ca.lex, cb.lex); c != 0 {
		return c < 0
	}
	return a < b
}

func (m *mergeHeap) push(c int32) {
	m.h = append(m.h, c)
	i := len(m.h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !m.less(m.h[i], m.h[parent]) {
			break
		}
		m.h[i], m.h[parent] = m.h[parent], m.h[i]
		i = parent
	}
}

func (m *mergeHeap) pop() int32 {
	top := m.h[0]
	last := len(m.h) - 1
	m.h[0] = m.h[last]
	m.h = m.h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		j := l
		if r := l + 1; r < last && m.less(m.h[r], m.h[l]) {
			j = r
		}
		if !m.less(m.h[j], m.h[i]) {
			break
		}
		m.h[i], m.h[j] = m.h[j], m.h[i]
		i = j
	}
	return top
}

// lexemeKey is the first 8 bytes of lex, zero-padded, as a number: keys
// that differ order as their lexemes do.
func lexemeKey(lex []byte) uint64 {
	if len(lex) >= 8 {
		return binary.BigEndian.Uint64(lex)
	}
	var b [8]byte
	copy(b[:], lex)
	return binary.BigEndian.Uint64(b[:])
}

// mergeSegments merges segments, consecutive in chunk order, into one that
// numbers their chunks from the first's base, checking each against the
// format.
func mergeSegments(segs []segment) (segment, error) {
	m := &mergeHeap{cs: make([]termCursor, len(segs)), h: make([]int32, 0, len(segs))}
	size, blocks := 0, 0
	var n int64
	for i := range segs {
		sg := &segs[i]
		size += len(sg.terms)
		blocks = max(blocks, len(sg.blocks))
		n += int64(sg.n)
		c := &m.cs[i]
		*c = termCursor{seg: sg, rest: sg.terms, left: sg.nterms}
		ok, err := c.next()
		if err != nil {
			return segment{}, segmentError(sg, err)
		}
		if ok {
			m.push(int32(i))
		}
	}
	if n > math.MaxInt32 {
		return segment{}, errors.New("too many chunks for one index")
	}
	// Merged, a lexeme is written once instead of once per segment.
	w := termWriter{terms: make([]byte, 0, size), blocks: make([]byte, 0, 2*blocks)}
	var postings []byte
	group := make([]int32, 0, len(segs))
	for len(m.h) > 0 {
		group = append(group[:0], m.pop())
		first := &m.cs[group[0]]
		lex, key := first.lex, first.key
		for len(m.h) > 0 {
			c := &m.cs[m.h[0]]
			if c.key != key || !bytes.Equal(c.lex, lex) {
				break
			}
			group = append(group, m.pop())
		}
		var df uint64
		postings = postings[:0]
		prev := int64(-1)
		for _, i := range group {
			c := &m.cs[i]
			df += c.df
			var err error
			if postings, prev, err = c.copyPostings(postings, int64(c.seg.base-segs[0].base), prev); err != nil {
				return segment{}, segmentError(c.seg, err)
			}
		}
		if err := w.add(lex, df, postings); err != nil {
			return segment{}, err
		}
		for _, i := range group {
			c := &m.cs[i]
			ok, err := c.next()
			if err != nil {
				return segment{}, segmentError(c.seg, err)
			}
			if ok {
				m.push(i)
			}
		}
	}
	// One buffer of the exact size, the index keeping what it holds and
	// not the room a guess left.
	buf := make([]byte, 0, len(w.blocks)+len(w.terms))
	buf = append(append(buf, w.blocks...), w.terms...)
	return segment{buf: buf, n: int32(n), base: segs[0].base, nterms: w.n,
		blocks: buf[:len(w.blocks):len(w.blocks)], terms: buf[len(w.blocks):]}, nil
}

// segmentError names the file of a malformed segment.
func segmentError(sg *segment, err error) error {
	if sg.file == uuid.Nil {
		return err
	}
	return fmt.Errorf("file %s: %w", sg.file, err)
}

// rowsQuerier is what buildPostings reads with: a transaction or a pool.
type rowsQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// buildPostings makes the keyword postings of files from their chunks'
// tsvectors.
func buildPostings(ctx context.Context, q rowsQuerier, files []uuid.UUID) (map[uuid.UUID][]byte, error) {
	builders := make(map[uuid.UUID]*postingsBuilder, len(files))
	for _, id := range files {
		builders[id] = newPostingsBuilder()
	}
	// The tsvectors come in PostgreSQL's binary form, parsed here: the
	// cheapest form to send and to read.
	rows, err := q.Query(ctx, `
		SELECT file_id, id, tsv FROM chunks
		WHERE file_id = ANY($1)
		ORDER BY file_id, ordinal`,
		pgx.QueryResultFormats{pgx.BinaryFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode}, files)
	if err != nil {
		return nil, dbError("docs: keyword postings", err)
	}
	defer rows.Close()
	var file, id uuid.UUID
	for rows.Next() {
		if err := rows.Scan(&file, &id, nil); err != nil {
			return nil, dbError("docs: keyword postings", err)
		}
		if err := builders[file].add(id, rows.RawValues()[2]); err != nil {
			return nil, fmt.Errorf("docs: keyword postings: chunk %s: %w", id, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("docs: keyword postings", err)
	}
	out := make(map[uuid.UUID][]byte, len(files))
	for id, b := range builders {
		out[id] = b.bytes()
	}
	return out, nil
}

// storeFilePostings writes the keyword postings of the file whose chunks tx
// has just written; ingestion calls it in the transaction that stores them.
func storeFilePostings(ctx context.Context, tx pgx.Tx, fileID string) error {
	id, err := uuid.Parse(fileID)
	if err != nil {
		return fmt.Errorf("docs: keyword postings of %q: %w", fileID, err)
	}
	return storePostings(ctx, tx, []uuid.UUID{id})
}

// storePostings writes the keyword postings of files whose chunks tx holds.
func storePostings(ctx context.Context, tx pgx.Tx, files []uuid.UUID) error {
	built, err := buildPostings(ctx, tx, files)
	if err != nil {
		return err
	}
	ids, values := postingsColumns(built)
	if _, err := tx.Exec(ctx, `
		UPDATE files f SET keyword_postings = v.p
		FROM unnest($1::uuid[], $2::bytea[]) AS v(id, p) WHERE f.id = v.id`, ids, values); err != nil {
		return dbError("docs: keyword postings", err)
	}
	return nil
}

func postingsColumns(built map[uuid.UUID][]byte) ([]uuid.UUID, [][]byte) {
	ids := make([]uuid.UUID, 0, len(built))
	values := make([][]byte, 0, len(built))
	for id, p := range built {
		ids = append(ids, id)
		values = append(values, p)
	}
	return ids, values
}

// savePostings writes back postings built for ready files stored without
// them, and returns how many it wrote. Any process may: the value derives
// from the chunks, which do not change while the file is ready. A file
// locked by another transaction (being deleted, or written back by another
// process) is skipped rather than waited for, so this never blocks nor
// deadlocks a writer.
func savePostings(ctx context.Context, pool *pgxpool.Pool, built map[uuid.UUID][]byte) (int, error) {
	ids, values := postingsColumns(built)
	tag, err := pool.Exec(ctx, `
		WITH todo AS (
			SELECT id FROM files
			WHERE id = ANY($1) AND status = 'ready' AND keyword_postings IS NULL
			ORDER BY id
			FOR UPDATE SKIP LOCKED)
		UPDATE files f SET keyword_postings = v.p
		FROM todo JOIN unnest($1::uuid[], $2::bytea[]) AS v(id, p) ON v.id = todo.id
		WHERE f.id = todo.id`, ids, values)
	if err != nil {
		return 0, dbError("docs: keyword postings", err)
	}
	return int(tag.RowsAffected()), nil
}

// fillBatch is the number of files FillKeywordPostings reads at a time.
const fillBatch = 50

// FillKeywordPostings writes the keyword postings of every ready file that
// has none (files stored before migration 008), and returns how many it
// wrote. Searches write them too, for the files of the conversation
// searched; this does every file at once, as after an upgrade, so that no
// search pays for it. It may run while other processes serve and ingest;
// mcpsearch migrate runs it.
func FillKeywordPostings(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var after uuid.UUID
	total := 0
	for {
		rows, err := pool.Query(ctx, `
			SELECT id FROM files
			WHERE status = 'ready' AND keyword_postings IS NULL AND id > $1
			ORDER BY id LIMIT $2`, after, fillBatch)
		if err != nil {
			return total, dbError("docs: fill keyword postings", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return total, dbError("docs: fill keyword postings", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		built, err := buildPostings(ctx, pool, ids)
		if err != nil {
			return total, err
		}
		n, err := savePostings(ctx, pool, built)
		total += n
		if err != nil {
			return total, err
		}
		after = ids[len(ids)-1]
	}
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
	m := slices.Index(ix.models, model)
	n := len(ix.ids)
	if m < 0 || n == 0 || depth <= 0 {
		return nil
	}
	avgdl := max(float64(ix.totalLen)/float64(n), 1)
	acc := make([]float64, n)
	var touched []int32
	type match struct {
		sg       *segment
		df       uint64
		postings []byte
	}
	var found []match
	for _, t := range terms {
		lex := []byte(t.lexeme)
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
		idf := math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
		w := float64(t.count) * idf * (k1 + 1)
		for _, f := range found {
			// Postings are read as they came from the database: a
			// malformed one ends its list rather than the process.
			p, local := f.postings, int64(-1)
			for range f.df {
				v, k := binary.Uvarint(p)
				if k <= 0 {
					break
				}
				p = p[k:]
				tf := 1.0
				if v&1 == 0 {
					x, k := binary.Uvarint(p)
					if k <= 0 {
						break
					}
					p = p[k:]
					tf = float64(x)
				}
				gap := v >> 1
				if gap >= uint64(f.sg.n) {
					break
				}
				if local < 0 {
					local = int64(gap)
				} else {
					local += int64(gap)
				}
				doc := int64(f.sg.base) + local
				if local >= int64(f.sg.n) || doc >= int64(n) {
					break
				}
				// A count of 0 only comes from corrupt postings: it
				// would add nothing, and list the chunk twice.
				if int(ix.model[doc]) != m || tf == 0 {
					continue
				}
				norm := k1 * (1 - b + b*float64(ix.doclen[doc])/avgdl)
				if acc[doc] == 0 {
					touched = append(touched, int32(doc))
				}
				acc[doc] += w * tf / (tf + norm)
			}
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
