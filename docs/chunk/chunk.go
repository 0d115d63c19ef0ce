// Package chunk splits extracted documents into overlapping pieces of about
// a fixed number of characters, cut where the text has natural boundaries,
// for embedding and keyword search.
package chunk

import (
	"errors"
	"fmt"
	"sort"
	"unicode"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/extract"
)

// Options sets the size of chunks and how much consecutive chunks share. Both
// are counted in characters (runes).
type Options struct {
	// Size is the largest chunk length; chunks are cut at a boundary in its
	// second half when the text has one.
	Size int
	// Overlap is how much of the end of a chunk the next chunk repeats, so
	// that a passage cut in two is still found whole in one of them.
	Overlap int
	// Sentences keeps sentences whole, for chunks shown to a reader as
	// passages: a chunk ends only at a page, span, paragraph, line or
	// sentence end, even when that makes it shorter than half of Size, and
	// the next chunk begins at the start of a sentence. Only a sentence
	// longer than Size is cut, at a space.
	Sentences bool
}

// Default sizes, in characters.
const (
	DefaultSize    = 1000
	DefaultOverlap = 150
	// MinSize is the smallest Size Validate accepts.
	MinSize = 100
)

// ErrInvalidOptions reports Options out of range.
var ErrInvalidOptions = errors.New("invalid chunk options")

// DefaultOptions returns chunks of 1000 characters overlapping by 150.
func DefaultOptions() Options {
	return Options{Size: DefaultSize, Overlap: DefaultOverlap}
}

// Validate reports whether o can be used: Size at least 100 and Overlap at
// least 0 and less than half of Size.
func (o Options) Validate() error {
	if o.Size < MinSize {
		return fmt.Errorf("%w: size %d is below the minimum of %d characters", ErrInvalidOptions, o.Size, MinSize)
	}
	if o.Overlap < 0 || o.Overlap >= o.Size/2 {
		return fmt.Errorf("%w: overlap %d must be at least 0 and less than half the size (%d)", ErrInvalidOptions, o.Overlap, o.Size/2)
	}
	return nil
}

// normalised returns DefaultOptions for the zero Options and clamps other
// invalid values into range.
func (o Options) normalised() Options {
	if o == (Options{}) {
		return DefaultOptions()
	}
	if o.Size < MinSize {
		o.Size = MinSize
	}
	if o.Overlap < 0 {
		o.Overlap = 0
	}
	if o.Overlap >= o.Size/2 {
		o.Overlap = o.Size/2 - 1
	}
	return o
}

// Chunk is one piece of a document.
type Chunk struct {
	// Ordinal is the chunk's position in the document, from 0.
	Ordinal int
	// Content is the chunk's text: exactly the runes [Start, End) of the
	// document's text.
	Content string
	// Page is the number of the page the chunk starts on (0 for formats
	// without pages): PageStart, kept for the page_number of citations.
	Page int
	// PageStart and PageEnd are the numbers of the pages holding the
	// chunk's first and last characters (0 for formats without pages). A
	// chunk that begins with the last lines of page 7 and runs onto page 8
	// has PageStart 7 and PageEnd 8, so that a citation can name both.
	PageStart, PageEnd int
	// Start and End are rune offsets into extract.Document.Text.
	Start, End int
	// Location says where the chunk comes from in the format's own terms
	// (pages, slides and title, sheet and cells, heading path, OCR),
	// computed from the document's spans that the chunk overlaps; zero for
	// plain text. Store it as Location.JSON and show Location.String.
	Location extract.Location
}

// Split cuts doc into chunks of at most o.Size characters. Each chunk ends at
// the strongest boundary found in the second half of its allowed length
// (page or span end, then paragraph end, then sentence end, then white
// space), or at the size limit when there is none, and always at the start
// of a span marked Break (another sheet) when one comes before. The next
// chunk starts o.Overlap characters before that end, moved forward to the
// start of a word, but never before the start of the page or span the cut
// falls in, so a chunk that begins a page, a slide or a section does not
// drag the previous one's last lines (and page number) along.
//
// Chunks are trimmed of surrounding white space and blank ones are dropped.
// The zero Options means DefaultOptions; other invalid options are clamped
// into range (call Validate to reject them instead).
func Split(doc *extract.Document, o Options) []Chunk {
	if doc == nil || doc.Text == "" {
		return nil
	}
	o = o.normalised()
	s := splitter{runes: newRuneText(doc.Text), pages: doc.Pages, opts: o}
	s.boundaries(doc.Spans)
	chunks := s.split()
	if len(doc.Spans) > 0 {
		for i := range chunks {
			chunks[i].Location = doc.Locate(chunks[i].Start, chunks[i].End)
		}
	}
	return chunks
}

type splitter struct {
	runes *runeText
	pages []extract.Page
	opts  Options
	// ends are the offsets where a page or a span ends, sorted; starts the
	// offsets where one starts; breaks where a Break span starts.
	ends, starts, breaks []int
}

// boundaries collects the page and span boundaries the cuts prefer.
func (s *splitter) boundaries(spans []extract.Span) {
	for _, p := range s.pages {
		s.ends = append(s.ends, p.End)
		s.starts = append(s.starts, p.Start)
	}
	for _, sp := range spans {
		s.ends = append(s.ends, sp.Start, sp.End)
		s.starts = append(s.starts, sp.Start)
		if sp.Break && sp.Start > 0 {
			s.breaks = append(s.breaks, sp.Start)
		}
	}
	sort.Ints(s.ends)
	sort.Ints(s.starts)
	sort.Ints(s.breaks)
}

func (s *splitter) split() []Chunk {
	n := s.runes.n
	chunks := make([]Chunk, 0, n/(s.opts.Size-s.opts.Overlap)+1)
	start := s.skipSpace(0, n)
	prevCut, prevEnd := 0, 0
	for start < n {
		cut := n
		if start+s.opts.Size < n {
			cut = s.findCut(start, prevCut)
		} else if b := s.firstBreak(start, n); b > 0 {
			cut = b
		}
		end := cut
		for end > start && isSpace(s.runes.at(end-1)) {
			end--
		}
		// A chunk that ends where the previous one did (only white space
		// lies between their cuts) would repeat it.
		if end > start && end > prevEnd {
			prevEnd = end
			first, last := s.pageNumber(start), s.pageNumber(end-1)
			chunks = append(chunks, Chunk{
				Ordinal:   len(chunks),
				Content:   s.runes.slice(start, end),
				Page:      first,
				PageStart: first,
				PageEnd:   last,
				Start:     start,
				End:       end,
			})
		}
		if cut >= n {
			break
		}
		prevCut = cut
		start = s.skipSpace(s.nextStart(start, cut), n)
	}
	return chunks
}

// findCut returns where the chunk starting at start ends: the rightmost
// boundary of the strongest kind within (start+Size/2, start+Size] and after
// the previous cut, or the size limit.
func (s *splitter) findCut(start, prevCut int) int {
	limit := start + s.opts.Size
	if b := s.firstBreak(start, limit); b > 0 {
		return b
	}
	low := max(start+s.opts.Size/2, prevCut)
	if p := s.lastPageEnd(low, limit); p > 0 {
		return p
	}
	// Scanning down from the limit, the first paragraph end is the best cut
	// left; sentence and word ends are remembered in case there is none.
	sentence, space := 0, 0
	for p := limit; p > low; p-- {
		r := s.runes.at(p - 1)
		if r == '\n' && s.runes.at(p-2) == '\n' {
			return p
		}
		if sentence == 0 && (s.isSentenceEnd(p) || s.opts.Sentences && s.runes.at(p) == '\n') {
			sentence = p
		}
		if space == 0 && (isSpace(s.runes.at(p)) || isSpace(r)) {
			space = p
		}
	}
	switch {
	case sentence > 0:
		return sentence
	case s.opts.Sentences:
		// A shorter chunk rather than a sentence cut in two.
		if p := s.lastSentenceEnd(max(start, prevCut), low); p > 0 {
			return p
		}
	}
	if space > 0 {
		return space
	}
	return limit
}

// sentenceEndsBy reports whether a sentence or line ends in (from, limit],
// or the text does.
func (s *splitter) sentenceEndsBy(from, limit int) bool {
	if limit >= s.runes.n {
		return true
	}
	for p := from + 1; p <= limit; p++ {
		if s.isSentenceEnd(p) || s.runes.at(p) == '\n' {
			return true
		}
	}
	return false
}

// lastSentenceEnd returns the last sentence or line end in (low, high], or
// 0: the cut of a chunk that keeps sentences whole when its second half has
// none.
func (s *splitter) lastSentenceEnd(low, high int) int {
	for p := high; p > low; p-- {
		if s.isSentenceEnd(p) || s.runes.at(p) == '\n' {
			return p
		}
	}
	return 0
}

// lastPageEnd returns the last page or span end in (low, high], or 0.
func (s *splitter) lastPageEnd(low, high int) int {
	i := sort.SearchInts(s.ends, high+1)
	if i > 0 && s.ends[i-1] > low {
		return s.ends[i-1]
	}
	return 0
}

// firstBreak returns the first start of a Break span in (start, high], or
// 0.
func (s *splitter) firstBreak(start, high int) int {
	i := sort.SearchInts(s.breaks, start+1)
	if i < len(s.breaks) && s.breaks[i] <= high {
		return s.breaks[i]
	}
	return 0
}

// isSentenceEnd reports whether a sentence ends just before p: terminal
// punctuation, possibly followed by closing quotes or brackets, then white
// space. CJK full stops need no space after them.
func (s *splitter) isSentenceEnd(p int) bool {
	q := p - 1
	for q > 0 && isCloser(s.runes.at(q)) {
		q--
	}
	switch s.runes.at(q) {
	case '.', '!', '?', '…':
		return isSpace(s.runes.at(p))
	case '。', '！', '？':
		return true
	}
	return false
}

func isCloser(r rune) bool {
	switch r {
	case '"', '\'', ')', ']', '”', '’', '»', '」', '』':
		return true
	}
	return false
}

// nextStart returns where the chunk after [start, cut) begins: Overlap runes
// back from cut, moved forward to a word start, not before the page cut falls
// in, and always after start so that splitting progresses.
func (s *splitter) nextStart(start, cut int) int {
	p := cut - s.opts.Overlap
	if floor := s.pageStart(cut); p < floor {
		p = floor
	}
	if p <= start {
		p = start + 1
	}
	if p >= cut {
		return cut
	}
	if s.opts.Sentences {
		// The overlap begins at the first sentence it holds whole, and is
		// dropped when the sentence after cut would not fit beside it.
		for p < cut && !(s.isSentenceEnd(p) || s.runes.at(p-1) == '\n') {
			p++
		}
		if p < cut && !s.sentenceEndsBy(cut, p+s.opts.Size) {
			return cut
		}
		return p
	}
	if !isSpace(s.runes.at(p - 1)) {
		// Inside a word: its rest belongs to the previous chunk only.
		for p < cut && !isSpace(s.runes.at(p)) {
			p++
		}
	}
	for p < cut && isSpace(s.runes.at(p)) {
		p++
	}
	return p
}

// pageIndex returns the index of the page holding rune pos (empty pages hold
// nothing), or the last page when pos is at the end of the text; -1 when the
// document has no pages.
func (s *splitter) pageIndex(pos int) int {
	if len(s.pages) == 0 {
		return -1
	}
	i := sort.Search(len(s.pages), func(i int) bool { return s.pages[i].End > pos })
	if i == len(s.pages) {
		return len(s.pages) - 1
	}
	return i
}

func (s *splitter) pageNumber(pos int) int {
	if i := s.pageIndex(pos); i >= 0 {
		return s.pages[i].Number
	}
	return 0
}

// pageStart returns the start of the page or span holding pos: the last
// start at or before it.
func (s *splitter) pageStart(pos int) int {
	floor := 0
	if i := s.pageIndex(pos); i >= 0 && s.pages[i].Start <= pos {
		floor = s.pages[i].Start
	}
	if i := sort.SearchInts(s.starts, pos+1); i > 0 {
		floor = max(floor, s.starts[i-1])
	}
	return floor
}

func (s *splitter) skipSpace(p, n int) int {
	for p < n && isSpace(s.runes.at(p)) {
		p++
	}
	return p
}

func isSpace(r rune) bool {
	if r < 0x80 {
		return r == ' ' || r == '\n' || r == '\t' || r == '\r' || r == '\f' || r == '\v'
	}
	return unicode.IsSpace(r)
}

// runeText gives the runes of a text by their index without a []rune of the
// whole text, which takes four bytes a character: ASCII text is indexed as
// it is, other text through a cursor that steps from the rune read last,
// with a mark every markEvery runes for longer moves. The splitter reads
// the text in runs, forward and back, so that steps are few.
type runeText struct {
	s     string
	n     int
	ascii bool
	// marks holds the byte offset of every markEvery-th rune.
	marks []int
	// pos and off are the cursor: a rune index and its byte offset.
	pos, off int
}

const markEvery = 256

func newRuneText(s string) *runeText {
	if !utf8.ValidString(s) {
		// Each invalid byte is a rune of its own, U+FFFD, as in a []rune.
		s = string([]rune(s))
	}
	t := &runeText{s: s, ascii: true}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			t.ascii = false
			break
		}
	}
	if t.ascii {
		t.n = len(s)
		return t
	}
	for off := 0; off < len(s); t.n++ {
		if t.n%markEvery == 0 {
			t.marks = append(t.marks, off)
		}
		_, size := utf8.DecodeRuneInString(s[off:])
		off += size
	}
	return t
}

// seek moves the cursor to rune p, 0 <= p <= n.
func (t *runeText) seek(p int) {
	if d := p - t.pos; d > markEvery || d < -markEvery {
		k := min(p/markEvery, len(t.marks)-1)
		t.pos, t.off = k*markEvery, t.marks[k]
	}
	for t.pos < p {
		_, size := utf8.DecodeRuneInString(t.s[t.off:])
		t.pos, t.off = t.pos+1, t.off+size
	}
	for t.pos > p {
		_, size := utf8.DecodeLastRuneInString(t.s[:t.off])
		t.pos, t.off = t.pos-1, t.off-size
	}
}

// at returns rune p, 0 <= p < n.
func (t *runeText) at(p int) rune {
	if t.ascii {
		return rune(t.s[p])
	}
	t.seek(p)
	r, _ := utf8.DecodeRuneInString(t.s[t.off:])
	return r
}

// offset returns the byte offset of rune p, 0 <= p <= n.
func (t *runeText) offset(p int) int {
	if t.ascii {
		return p
	}
	t.seek(p)
	return t.off
}

// slice returns the runes [start, end) as a part of the text, not a copy.
func (t *runeText) slice(start, end int) string {
	from := t.offset(start)
	return t.s[from:t.offset(end)]
}
