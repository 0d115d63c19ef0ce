package keyword

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"
)

// The keyword postings format, version 1 (varints are unsigned, as
// encoding/binary writes them):
//
//	byte        Format
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

// Format is the first byte of keyword postings in the format above. A
// reader treats any other value as postings it cannot read.
const Format = 1

// termBlock is the number of terms per entry of the block offsets.
const termBlock = 16

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

// ErrMalformed reports keyword postings that do not follow the format.
var ErrMalformed = errors.New("malformed keyword postings")

// uvarint reads a varint from p and returns it with the rest of p.
func uvarint(p []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: truncated number", ErrMalformed)
	}
	return v, p[n:], nil
}

// parse reads the header of keyword postings, whose terms are then read in
// place: a search reads what it needs with bounds checks, and a merge
// checks everything.
func parse(b []byte) (segment, error) {
	sg := segment{buf: b}
	if len(b) == 0 || b[0] != Format {
		return sg, fmt.Errorf("%w: not of format %d", ErrMalformed, Format)
	}
	n, p, err := uvarint(b[1:])
	if err != nil {
		return sg, err
	}
	if n > uint64(len(p))/17 {
		return sg, fmt.Errorf("%w: %d chunks in %d bytes", ErrMalformed, n, len(b))
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
			return sg, fmt.Errorf("%w: chunk length %d", ErrMalformed, l)
		}
		sg.doclen[i] = int32(l)
	}
	terms, p, err := uvarint(p)
	if err != nil {
		return sg, err
	}
	// A term takes 5 bytes at least.
	if terms > uint64(len(p))/5 {
		return sg, fmt.Errorf("%w: %d terms in %d bytes", ErrMalformed, terms, len(p))
	}
	nb := (int(terms) + termBlock - 1) / termBlock
	if len(p) < 4*nb {
		return sg, fmt.Errorf("%w: truncated block offsets", ErrMalformed)
	}
	sg.nterms, sg.blocks, sg.terms = int(terms), p[:4*nb], p[4*nb:]
	for i := range nb {
		if sg.blockOffset(i) >= len(sg.terms) {
			return sg, fmt.Errorf("%w: block offset %d beyond %d bytes", ErrMalformed, sg.blockOffset(i), len(sg.terms))
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

// Builder makes a file's keyword postings from its chunks' tsvectors, as
// PostgreSQL sends them in binary form. The zero Builder is not usable:
// NewBuilder makes one.
type Builder struct {
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

// NewBuilder returns a Builder holding no chunk.
func NewBuilder() *Builder {
	return &Builder{terms: map[string]int32{}}
}

// Add appends the file's next chunk, given its id and its tsvector in
// PostgreSQL's binary form. It fails, adding nothing, on a malformed
// tsvector.
func (b *Builder) Add(id uuid.UUID, tsv []byte) error {
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

// Bytes returns the postings of the chunks added so far.
func (b *Builder) Bytes() []byte {
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
	out = append(out, Format)
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
			return false, fmt.Errorf("%w: %d bytes after the last term", ErrMalformed, len(c.rest))
		}
		return false, nil
	}
	c.left--
	lex, df, postings, rest, ok := readTerm(c.rest)
	switch {
	case !ok:
		return false, fmt.Errorf("%w: truncated term", ErrMalformed)
	case len(lex) == 0:
		return false, fmt.Errorf("%w: empty lexeme", ErrMalformed)
	case c.lex != nil && bytes.Compare(c.lex, lex) >= 0:
		return false, fmt.Errorf("%w: lexeme %q after %q", ErrMalformed, lex, c.lex)
	case df == 0 || df > uint64(c.seg.n):
		return false, fmt.Errorf("%w: lexeme %q in %d of %d chunks", ErrMalformed, lex, df, c.seg.n)
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
				return nil, 0, fmt.Errorf("%w: %d occurrences", ErrMalformed, tf)
			}
		}
		p = q
		gap := v >> 1
		switch {
		case gap >= uint64(c.seg.n):
			return nil, 0, fmt.Errorf("%w: chunk gap %d among %d chunks", ErrMalformed, gap, c.seg.n)
		case doc < 0:
			doc = int64(gap)
		case gap == 0:
			return nil, 0, fmt.Errorf("%w: a chunk twice in the postings of %q", ErrMalformed, c.lex)
		default:
			doc += int64(gap)
		}
		if doc >= int64(c.seg.n) {
			return nil, 0, fmt.Errorf("%w: chunk %d among %d", ErrMalformed, doc, c.seg.n)
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
		return nil, 0, fmt.Errorf("%w: %d bytes after the postings of %q", ErrMalformed, len(p), c.lex)
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
