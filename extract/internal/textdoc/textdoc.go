// Package textdoc is what the format readers of package extract share: the
// error kinds they report, and a Builder that writes a document's text
// block by block while recording where each part of it comes from (a slide,
// a sheet's cells, a heading's section). It knows no format.
package textdoc

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/extract/internal/safetext"
)

// The kinds of failure every reader reports; package extract exports them
// under the same names.
var (
	// ErrUnsupported reports a file of a type that cannot be read.
	ErrUnsupported = errors.New("unsupported file type")
	// ErrTooLarge reports a file beyond a size limit.
	ErrTooLarge = errors.New("file too large")
	// ErrNoText reports a file that yields no text.
	ErrNoText = errors.New("no extractable text")
	// ErrCorrupt reports a file that cannot be parsed.
	ErrCorrupt = errors.New("corrupt or unreadable file")
)

// Location says where a part of a document's text comes from, in the
// format's own terms. Package extract converts it to its own Location,
// which has the same fields.
type Location struct {
	PageStart, PageEnd   int
	SlideStart, SlideEnd int
	SlideTitle           string
	Sheet                string
	Cells                string
	Headings             []string
	OCR                  bool
}

// Span is a part of the text, in rune offsets [Start, End), and where it
// comes from. Break marks a span no chunk may run into from the span before
// it, such as the first rows of another sheet.
type Span struct {
	Start, End int
	Loc        Location
	Break      bool
}

// Document is a reader's output: text, and spans in order. Spans do not
// overlap; text before the first span has no location.
type Document struct {
	Text  string
	Spans []Span
}

// Bounds of what a document's locations hold, so that a file of a million
// headings, or of one heading a megabyte long, cannot make its locations
// (copied into every chunk) take more memory than its text.
const (
	// MaxSpans bounds the spans of a document (its headings, slides,
	// sheets and blocks of rows) under the default text limit; see
	// SpanLimit. Past it the reader fails with ErrTooLarge.
	MaxSpans = 100000
	// MaxTitleRunes bounds a heading, slide title or sheet name kept in a
	// location; the text keeps it whole.
	MaxTitleRunes = 200
	// MaxLevels bounds the depth of a heading path.
	MaxLevels = 9
)

// SpanLimit returns the most spans a document whose text may hold
// textLimit bytes may have: MaxSpans, or one per 512 bytes of text when
// that is more (a sheet's blocks of rows take a chunk's size each).
func SpanLimit(textLimit int64) int {
	return int(max(MaxSpans, min(textLimit, 1<<40)/512))
}

// Title returns s on one line, its runs of white space collapsed, cut to
// at most MaxTitleRunes runes (ending with "…" when it was cut).
func Title(s string) string {
	if len(s) > 4*MaxTitleRunes+64 {
		// Only the start is kept: collapse no more than it needs.
		cut := 4*MaxTitleRunes + 64
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + " …"
	}
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= MaxTitleRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxTitleRunes-1 {
			return strings.TrimSpace(s[:i]) + "…"
		}
		n++
	}
	return s
}

// Builder writes a document's text as blocks (paragraphs, headings, tables)
// separated by blank lines, or as lines of one block, and records spans.
// Every string written is made valid UTF-8 without control characters other
// than line feed and tab. Once the text passes the limit, writes stop and
// Err reports ErrTooLarge; readers check Err to stop early.
type Builder struct {
	text  strings.Builder
	runes int
	limit int64
	spans []Span
	// pending is the location of the span that begins with the next text
	// written.
	pending *Span
	// owed is how many newlines the next text is separated by: 2 after a
	// block, 1 after a line.
	owed int
	err  error
	// spanLimit is SpanLimit of limit.
	spanLimit int
}

// NewBuilder returns a Builder whose text may hold up to limit bytes.
func NewBuilder(limit int64) *Builder {
	return &Builder{limit: limit, spanLimit: SpanLimit(limit)}
}

// TooLarge is the error for text beyond limit bytes, worded as the PDF
// reader words it.
func TooLarge(limit int64) error {
	return fmt.Errorf("%w: its text exceeds %d bytes (the text limit)", ErrTooLarge, limit)
}

// TooManySpans is the error for a document of more than limit spans.
func TooManySpans(limit int) error {
	return fmt.Errorf("%w: it holds more than %d headings, slides or blocks of rows (the limit of a document's parts)", ErrTooLarge, limit)
}

// Locate makes the next text written start a span at loc; brk marks it as
// a Break. Calling it again before any text is written replaces loc. The
// titles and names in loc are cut as Title cuts them.
func (b *Builder) Locate(loc Location, brk bool) {
	loc.SlideTitle, loc.Sheet = Title(loc.SlideTitle), Title(loc.Sheet)
	if len(loc.Headings) > 0 {
		hs := make([]string, len(loc.Headings))
		for i, h := range loc.Headings {
			hs[i] = Title(h)
		}
		loc.Headings = hs
	}
	b.pending = &Span{Loc: loc, Break: brk}
}

// Block writes s as a block of its own, after a blank line. Blank s writes
// nothing.
func (b *Builder) Block(s string) {
	b.write(s, 2, 2)
}

// Line writes s on the line after the previous line, or after a blank line
// when the previous write was a Block. Leading spaces (a nested list item's
// indent) are kept. Blank s writes nothing.
func (b *Builder) Line(s string) {
	b.write(s, 1, 1)
}

// EndBlock makes the next write, even a Line, start a new block.
func (b *Builder) EndBlock() {
	b.owed = 2
}

// write writes s after max(sep, owed) newlines and leaves after owed.
func (b *Builder) write(s string, sep, after int) {
	if b.err != nil {
		return
	}
	s = strings.TrimLeft(strings.TrimRight(safetext.Text(s), " \t\n"), "\n")
	if strings.TrimSpace(s) == "" {
		return
	}
	if b.runes > 0 {
		sep = max(sep, b.owed)
		b.text.WriteString("\n\n"[:sep])
		b.runes += sep
	}
	if b.pending != nil {
		if len(b.spans) >= b.spanLimit {
			b.err = TooManySpans(b.spanLimit)
			return
		}
		if n := len(b.spans); n > 0 {
			b.spans[n-1].End = b.runes
		}
		p := *b.pending
		p.Start = b.runes
		b.spans = append(b.spans, p)
		b.pending = nil
	}
	b.text.WriteString(s)
	b.runes += utf8.RuneCountInString(s)
	b.owed = after
	if int64(b.text.Len()) > b.limit {
		b.err = TooLarge(b.limit)
	}
}

// Err returns ErrTooLarge once the text has passed the limit.
func (b *Builder) Err() error {
	return b.err
}

// Document returns the text and spans written, or Err.
func (b *Builder) Document() (*Document, error) {
	if b.err != nil {
		return nil, b.err
	}
	if n := len(b.spans); n > 0 {
		b.spans[n-1].End = b.runes
	}
	return &Document{Text: b.text.String(), Spans: b.spans}, nil
}

// Heading writes a Markdown heading of level (1 to 6) as a block.
func (b *Builder) Heading(level int, title string) {
	level = min(max(level, 1), 6)
	b.Block(strings.Repeat("#", level) + " " + oneLine(title))
}

// TableRow returns cells as one row of a Markdown table. Line breaks in a
// cell become spaces and pipes are escaped, so that a row stays one line.
func TableRow(cells []string) string {
	var s strings.Builder
	s.WriteString("|")
	for _, c := range cells {
		s.WriteString(" ")
		s.WriteString(strings.ReplaceAll(oneLine(c), "|", `\|`))
		s.WriteString(" |")
	}
	return s.String()
}

// TableRule returns the line under a Markdown table's header row of n
// columns.
func TableRule(n int) string {
	return "|" + strings.Repeat("---|", max(n, 1))
}

// Table writes rows as a Markdown table whose first row is the header, as
// one block. Rows may differ in length; shorter ones are padded.
func (b *Builder) Table(rows [][]string) {
	width := 0
	for _, r := range rows {
		width = max(width, len(r))
	}
	if width == 0 {
		return
	}
	b.EndBlock()
	for i, r := range rows {
		for len(r) < width {
			r = append(r, "")
		}
		b.Line(TableRow(r))
		if i == 0 {
			b.Line(TableRule(width))
		}
	}
	b.EndBlock()
}

// oneLine collapses runs of white space, line breaks included, into single
// spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Outline follows the headings of a document to give the heading path in
// force: the titles of the last heading of each level above the current
// one, outermost first.
type Outline struct {
	levels []int
	titles []string
}

// Enter records a heading of level with title and returns the path it
// opens. A heading closes every open heading of its level or deeper. Levels
// past MaxLevels count as MaxLevels; titles are cut as Title cuts them.
func (o *Outline) Enter(level int, title string) []string {
	level = min(level, MaxLevels)
	i := len(o.levels)
	for i > 0 && o.levels[i-1] >= level {
		i--
	}
	o.levels = append(o.levels[:i], level)
	o.titles = append(o.titles[:i], Title(title))
	return o.Path()
}

// Path returns a copy of the current heading path.
func (o *Outline) Path() []string {
	if len(o.titles) == 0 {
		return nil
	}
	return append([]string(nil), o.titles...)
}

// Options are what every reader is given.
type Options struct {
	// MaxTextBytes bounds the text, in bytes.
	MaxTextBytes int64
	// ChunkSize is the size in characters of the blocks that tables of
	// data (sheets, CSV files) are written in, each starting with the
	// header row.
	ChunkSize int
}

// BlockWithSpans writes text, whose own spans are spans (in rune offsets
// of text, in order), as a block: a chapter read by another reader. A span
// at offset 0 starts the block's span; without one the text continues the
// span before it. Text that needs cleaning keeps only its first span.
func (b *Builder) BlockWithSpans(text string, spans []Span) {
	text = strings.TrimSpace(text)
	if b.err != nil || text == "" {
		return
	}
	if !safetext.IsClean(text) {
		text = safetext.Text(text)
		if len(spans) > 0 {
			spans = []Span{{Loc: spans[0].Loc}}
		}
	}
	// A first span at the text's start begins there; without one, the
	// text continues the span before it (a heading written just before).
	if len(spans) > 0 && spans[0].Start == 0 {
		b.Locate(spans[0].Loc, spans[0].Break)
		spans = spans[1:]
	}
	start := b.runes
	if b.runes > 0 {
		start += max(2, b.owed)
	}
	b.write(text, 2, 2)
	if b.err != nil || len(spans) == 0 || len(b.spans) == 0 {
		return
	}
	n := utf8.RuneCountInString(text)
	for _, s := range spans {
		if s.Start <= 0 || s.Start >= n {
			continue
		}
		last := len(b.spans) - 1
		if b.spans[last].Start >= start+s.Start {
			b.spans[last].Loc = s.Loc
			continue
		}
		if len(b.spans) >= b.spanLimit {
			b.err = TooManySpans(b.spanLimit)
			return
		}
		b.spans[last].End = start + s.Start
		b.spans = append(b.spans, Span{Start: start + s.Start, Loc: s.Loc, Break: s.Break})
	}
}
