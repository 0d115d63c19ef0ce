// Package htmlmd writes an HTML page as Markdown for a reader that is a
// model: headings, paragraphs, lists, tables, code blocks, links, emphasis
// and definition lists kept; scripts, styles, forms, hidden elements and
// images dropped; and, for its main content, the page's furniture dropped
// too (navigation, menus, sidebars, breadcrumbs, banners, headers and
// footers outside the article, comment and share boxes), and only the page's
// <main> (or its one <article>) written when it has one.
//
// It reads the page token by token and never builds its tree, so that a
// page costs the time of one pass over its bytes: several times faster
// than building the tree, scoring it and converting it, which is what
// reading a search's result pages at once needs.
package htmlmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxMarks bounds the marks a line repeats for nesting (list indents,
// quote marks): a page nesting 500 quotes around every line would otherwise
// write 1,000 bytes a line.
const maxMarks = 8

// MaxDepth bounds the elements open at once; past it, an element closes the
// innermost one before it opens, as browsers do, so that a page of a
// million unclosed elements nests no deeper.
const MaxDepth = 512

// Options tune Convert.
type Options struct {
	// Base resolves the page's relative links; nil leaves them as written.
	Base *url.URL
	// Main writes only the main content: without the page's furniture,
	// and only its <main> element (or role="main") or its one <article>
	// when it has one.
	Main bool
}

// Page is what Convert finds in a page.
type Page struct {
	// Title is the text of the page's <title>, its spaces collapsed; ""
	// when it has none.
	Title string
	// Markdown is the page's text as Markdown.
	Markdown string
}

// Convert reads the UTF-8 page r holds and returns it as Markdown. It fails
// only when r does or ctx ends.
func Convert(ctx context.Context, r io.Reader, opts Options) (*Page, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return ConvertBytes(ctx, body, opts)
}

// ErrTooLarge means the page's Markdown would be more than MaxGrowth times
// its size, which only a page built to make it so asks for.
var ErrTooLarge = errors.New("htmlmd: the page's Markdown is too large")

// MaxGrowth bounds the Markdown of a page of n bytes to MaxGrowth*n plus
// 64 KiB: links made absolute and table cells' marks make it longer than
// the page at most a few times.
const MaxGrowth = 4

// ConvertBytes is Convert of a page held in memory. It fails only when ctx
// ends or with ErrTooLarge.
func ConvertBytes(ctx context.Context, body []byte, opts Options) (*Page, error) {
	sc := wholePage
	if opts.Main {
		sc = mainScope(body)
	}
	p, err := convert(ctx, body, opts, sc)
	if err == nil && sc != wholePage && strings.TrimSpace(p.Markdown) == "" {
		// The page said main or article somewhere no element is (in a
		// script, a comment or its text): its content without its
		// furniture.
		p, err = convert(ctx, body, opts, wholePage)
	}
	return p, err
}

func convert(ctx context.Context, body []byte, opts Options, sc scope) (*Page, error) {
	c := &converter{opts: opts, scope: sc, out: make([]byte, 0, len(body)/3), max: MaxGrowth*len(body) + 64<<10}
	z := html.NewTokenizer(bytes.NewReader(body))
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if c.over() {
				return nil, fmt.Errorf("%w: over %d times the page's %d bytes", ErrTooLarge, MaxGrowth, len(body))
			}
		}
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if err := z.Err(); !errors.Is(err, io.EOF) {
				return nil, err
			}
			c.endAll()
			if c.over() {
				return nil, fmt.Errorf("%w: over %d times the page's %d bytes", ErrTooLarge, MaxGrowth, len(body))
			}
			md := c.markdown()
			if opts.Main {
				md = dropLinkBlocks(md)
			}
			return &Page{Title: strings.Join(strings.Fields(c.title.String()), " "), Markdown: md}, nil
		case html.TextToken:
			c.text(z.Text())
		case html.StartTagToken, html.SelfClosingTagToken:
			c.start(z, tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			name, _ := z.TagName()
			c.end(atom.Lookup(name), string(name))
		}
	}
}

// scope is where the main content is: the whole body, <main> elements, or
// articles.
type scope int

const (
	wholePage scope = iota
	inMain
	inArticle
)

// mainScope looks for a <main> element or role="main", else for exactly one
// <article>, in the page's bytes.
func mainScope(body []byte) scope {
	articles := 0
	// What a script or a comment says is not the page's structure; a
	// mention in the text (role="main" in a tutorial) falls back to the
	// whole page when no element matches (see ConvertBytes).
	body = stripScriptsAndComments(body)
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '<':
			switch rest := body[i+1:]; {
			case hasPrefixFold(rest, "main") && len(rest) > 4 && !isNameByte(rest[4]):
				return inMain
			case hasPrefixFold(rest, "article") && len(rest) > 7 && !isNameByte(rest[7]):
				articles++
			}
		case 'r', 'R':
			if rest := body[i:]; hasPrefixFold(rest, `role="main"`) || hasPrefixFold(rest, `role='main'`) {
				return inMain
			}
		}
	}
	if articles == 1 {
		return inArticle
	}
	return wholePage
}

// stripScriptsAndComments returns body without its comments, scripts and
// styles, or body itself when it has none.
func stripScriptsAndComments(body []byte) []byte {
	if !bytes.Contains(body, []byte("<!--")) && !containsFold(body, "<script") && !containsFold(body, "<style") {
		return body
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		switch {
		case bytes.HasPrefix(body[i:], []byte("<!--")):
			end := bytes.Index(body[i+4:], []byte("-->"))
			if end < 0 {
				return out
			}
			i += 4 + end + 3
		case hasPrefixFold(body[i:], "<script") || hasPrefixFold(body[i:], "<style"):
			closing := "</script"
			if hasPrefixFold(body[i:], "<style") {
				closing = "</style"
			}
			end := indexFold(body[i+1:], closing)
			if end < 0 {
				return out
			}
			i += 1 + end + len(closing)
		default:
			out = append(out, body[i])
			i++
		}
	}
	return out
}

// indexFold is the index of the lowercase ASCII s in b, in any case, or -1.
func indexFold(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if (b[i] == s[0] || b[i]+'a'-'A' == s[0]) && hasPrefixFold(b[i:], s) {
			return i
		}
	}
	return -1
}

func containsFold(b []byte, s string) bool { return indexFold(b, s) >= 0 }

// hasPrefixFold reports whether b begins with the lowercase ASCII prefix,
// in any case.
func hasPrefixFold(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// element is an open element.
type element struct {
	a    atom.Atom
	name string
	// skip: the element and what it holds are not written.
	skip bool
	// main: the element is the main content (see scope).
	main bool
	// linkAt is, for a link, where its "[" was written; href its target.
	linkAt int
	href   string
	// markAt is, for emphasis or inline code, where its opening mark was
	// written, and mark the mark.
	markAt int
	mark   string
	// items counts the items of an ordered list.
	items int
	// table: the element opened a table the converter reads (or one
	// flattened into its cell), which its end closes.
	table bool
	// list is the list marker of an item.
	ordered bool
}

// converter writes Markdown as the tokens come.
type converter struct {
	opts  Options
	scope scope
	out   []byte
	stack []element
	// skipping counts the open skipped elements; mains the open main ones.
	skipping, mains int
	// pre counts open <pre> elements: their text is written as it is.
	pre int
	// breaks is how many line breaks the next text needs before it; 0
	// writes a space first when space is pending.
	breaks int
	space  bool
	// lists is the depth of open lists; quote of open blockquotes.
	lists, quote int
	// table is the table being read (its rows are written when it ends),
	// nil outside one; inner counts the tables open inside it, whose
	// text goes into its cell, spaced.
	table *table
	inner int
	title strings.Builder
	// inTitle is set while the <title> text is read.
	inTitle bool
	// fresh is where the output ends right after a list marker: a block
	// starting there (a paragraph in an item) needs no break.
	fresh int
	// max bounds the output and what a table being read holds.
	max int
}

// over reports whether the output, or the table being read, passed max.
func (c *converter) over() bool {
	n := len(c.out)
	if t := c.table; t != nil {
		n += len(t.cell)
		for _, r := range t.rows {
			for _, cell := range r {
				n += len(cell) + 3
			}
		}
	}
	return n > c.max
}

// table is a table being read.
type table struct {
	rows   [][]string
	row    []string
	cell   []byte
	inCell bool
	// head is set when the first row holds header cells.
	head bool
}

// writing reports whether text is written now.
func (c *converter) writing() bool {
	return c.skipping == 0 && (c.scope == wholePage || c.mains > 0)
}

func (c *converter) start(z *html.Tokenizer, selfClosing bool) {
	name, hasAttr := z.TagName()
	a := atom.Lookup(name)
	var attrs map[string]string
	if hasAttr {
		attrs = map[string]string{}
		for {
			k, v, more := z.TagAttr()
			switch string(k) {
			case "href", "class", "id", "role", "hidden", "aria-hidden", "style":
				attrs[string(k)] = string(v)
			}
			if !more {
				break
			}
		}
	}
	switch a {
	case atom.Title:
		// The page's title, not an SVG image's.
		c.inTitle = !selfClosing && c.title.Len() == 0 && c.innermost(atom.Svg) < 0
		return
	case atom.Br:
		if c.writing() {
			c.lineBreak()
		}
		return
	case atom.Hr:
		if c.writing() && c.table == nil {
			c.block(2)
			c.write("---")
			c.block(2)
		}
		return
	case atom.Img, atom.Input, atom.Meta, atom.Link, atom.Wbr, atom.Source, atom.Col, atom.Area, atom.Embed, atom.Param, atom.Track, atom.Base:
		return
	}
	if selfClosing {
		return
	}
	c.implyEnds(a)
	if len(c.stack) >= MaxDepth {
		c.pop()
	}
	e := element{a: a, name: string(name)}
	// Furniture is looked for where text is written: outside the main
	// element nothing is, and a wrapper of it whose class says "nav" (as
	// some themes' do) must not hide it.
	if c.opts.Main && (c.scope == wholePage || c.mains > 0) && c.furniture(a, attrs) || dropped(a, attrs) {
		e.skip = true
		c.skipping++
	}
	if c.scope != wholePage && !e.skip && c.isMain(a, attrs) {
		e.main = true
		c.mains++
		c.block(2)
	}
	c.stack = append(c.stack, e)
	top := &c.stack[len(c.stack)-1]
	if !c.writing() {
		return
	}
	if t := c.table; t != nil && c.inner == 0 && t.inCell && layoutBlock(a) {
		// A heading in a cell: the table lays the page out, it is not
		// data. Its cells are written as the page's text.
		c.unTable()
	}
	switch a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		if c.table != nil {
			return
		}
		c.block(2)
		c.write(strings.Repeat("#", int(name[1]-'0')) + " ")
	case atom.P, atom.Div, atom.Section, atom.Article, atom.Main, atom.Header, atom.Footer, atom.Address,
		atom.Figure, atom.Figcaption, atom.Details, atom.Summary, atom.Dl, atom.Dt, atom.Dd, atom.Fieldset,
		atom.Center, atom.Caption, atom.Hgroup, atom.Dialog:
		c.block(2)
	case atom.Blockquote:
		c.block(2)
		c.quote++
	case atom.Ul, atom.Ol, atom.Menu:
		if c.lists == 0 {
			c.block(2)
		}
		c.lists++
		top.ordered = a == atom.Ol
	case atom.Li:
		c.block(1)
		marker := "- "
		if p := c.innermost(atom.Ol, atom.Ul, atom.Menu); p >= 0 && c.stack[p].ordered {
			c.stack[p].items++
			marker = strconv.Itoa(c.stack[p].items) + ". "
		}
		c.write(strings.Repeat("  ", min(max(c.lists-1, 0), maxMarks)) + marker)
		c.space, c.fresh = false, len(c.out)
	case atom.Pre:
		if c.table != nil {
			c.pre++
			return
		}
		c.block(2)
		c.write("```\n")
		c.pre++
		c.breaks, c.space = 0, false
	case atom.Table:
		top.table = true
		if c.table != nil {
			c.inner++
			c.space = true
			return
		}
		c.block(2)
		c.table = &table{}
	case atom.Tr:
		if c.table == nil {
			// A row of a layout table.
			c.block(2)
		} else if c.inner == 0 {
			c.table.endRow()
		}
		c.space = true
	case atom.Td, atom.Th:
		c.space = true
		if c.table == nil {
			c.block(2)
		}
		if t := c.table; t != nil && c.inner == 0 {
			t.endCell()
			t.inCell = true
			if a == atom.Th && len(t.rows) == 0 {
				t.head = true
			}
			c.space = false
		}
	case atom.A:
		if href, ok := attrs["href"]; ok && c.pre == 0 {
			if c.space {
				c.write(" ")
				c.space = false
			}
			top.href = c.resolve(href)
			top.linkAt = c.len()
			c.write("[")
		}
	case atom.Strong, atom.B:
		c.openMark(top, "**")
	case atom.Em, atom.I:
		c.openMark(top, "*")
	case atom.Code, atom.Kbd, atom.Samp, atom.Tt:
		if c.pre == 0 && c.innermostMark("`") < 0 {
			c.openMark(top, "`")
		}
	}
}

// openMark writes an emphasis or code mark, to be closed by its element's
// end (or taken back when nothing came between).
func (c *converter) openMark(e *element, mark string) {
	if c.pre > 0 {
		return
	}
	if c.space {
		c.write(" ")
		c.space = false
	}
	e.mark, e.markAt = mark, c.len()
	c.write(mark)
}

func (c *converter) end(a atom.Atom, name string) {
	if a == atom.Title {
		c.inTitle = false
		return
	}
	// The innermost open element of that name, if any, closes with
	// everything inside it; an end tag of nothing open is ignored.
	for i := len(c.stack) - 1; i >= 0; i-- {
		if c.stack[i].a == a && (a != 0 || c.stack[i].name == name) {
			for len(c.stack) > i {
				c.pop()
			}
			return
		}
	}
}

// endAll closes what the page left open.
func (c *converter) endAll() {
	for len(c.stack) > 0 {
		c.pop()
	}
	if c.table != nil {
		c.flushTable()
	}
}

// implyEnds closes the elements a start tag of a ends, as HTML's parser
// does: a paragraph before a block, an item before the next item, a cell
// before the next cell, a row before the next row.
func (c *converter) implyEnds(a atom.Atom) {
	closeIf := func(names []atom.Atom, boundaries []atom.Atom) {
		for i := len(c.stack) - 1; i >= 0; i-- {
			e := c.stack[i].a
			for _, b := range boundaries {
				if e == b {
					return
				}
			}
			for _, n := range names {
				if e == n {
					for len(c.stack) > i {
						c.pop()
					}
					return
				}
			}
		}
	}
	switch a {
	case atom.Li:
		closeIf([]atom.Atom{atom.Li}, []atom.Atom{atom.Ul, atom.Ol, atom.Menu})
	case atom.Dt, atom.Dd:
		closeIf([]atom.Atom{atom.Dt, atom.Dd}, []atom.Atom{atom.Dl})
	case atom.Tr:
		closeIf([]atom.Atom{atom.Tr, atom.Td, atom.Th}, []atom.Atom{atom.Table})
	case atom.Td, atom.Th:
		closeIf([]atom.Atom{atom.Td, atom.Th}, []atom.Atom{atom.Tr, atom.Table})
	case atom.P, atom.Div, atom.Ul, atom.Ol, atom.Pre, atom.Table, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6,
		atom.Blockquote, atom.Dl, atom.Section, atom.Article, atom.Header, atom.Footer, atom.Nav, atom.Aside, atom.Hr:
		closeIf([]atom.Atom{atom.P}, []atom.Atom{atom.Td, atom.Th, atom.Li, atom.Dd, atom.Dt, atom.Blockquote, atom.Div, atom.Section, atom.Article, atom.Main, atom.Body})
	}
}

// pop closes the innermost open element.
func (c *converter) pop() {
	e := c.stack[len(c.stack)-1]
	writing := c.writing()
	c.stack = c.stack[:len(c.stack)-1]
	defer func() {
		if e.skip {
			c.skipping--
		}
		if e.main {
			c.mains--
			c.block(2)
		}
	}()
	if !writing {
		// A table opened while writing closes when its element does,
		// written or not; one opened in a part not written was never
		// read.
		if e.table {
			c.popTable()
		}
		return
	}
	switch e.a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.P, atom.Div, atom.Section, atom.Article, atom.Main,
		atom.Header, atom.Footer, atom.Address, atom.Figure, atom.Figcaption, atom.Details, atom.Summary, atom.Dl, atom.Dt,
		atom.Dd, atom.Fieldset, atom.Center, atom.Caption, atom.Hgroup, atom.Dialog:
		if c.table == nil {
			c.block(2)
		} else {
			c.space = true
		}
	case atom.Blockquote:
		c.quote--
		c.block(2)
	case atom.Ul, atom.Ol, atom.Menu:
		c.lists--
		if c.lists == 0 {
			c.block(2)
		} else {
			c.block(1)
		}
	case atom.Li:
		c.block(1)
	case atom.Pre:
		c.pre--
		if c.table != nil {
			return
		}
		if c.len() > 0 && c.out[len(c.out)-1] != '\n' {
			c.out = append(c.out, '\n')
		}
		c.out = append(c.out, "```"...)
		c.breaks, c.space = 2, false
	case atom.Table:
		if e.table {
			c.popTable()
		}
	case atom.Td, atom.Th:
		if t := c.table; t != nil && c.inner == 0 {
			t.endCell()
		}
		c.space = true
	case atom.Tr:
		if t := c.table; t != nil && c.inner == 0 {
			t.endRow()
		}
	case atom.A:
		if e.href == "" {
			return
		}
		text := strings.TrimSpace(string(c.since(e.linkAt + 1)))
		if text == "" {
			// An anchor with nothing to read: drop its "[".
			c.truncate(e.linkAt)
			return
		}
		c.write("](" + e.href + ")")
	default:
		if e.mark != "" {
			if c.len() == e.markAt+len(e.mark) || strings.TrimSpace(string(c.since(e.markAt+len(e.mark)))) == "" {
				c.truncate(e.markAt)
				return
			}
			c.write(e.mark)
		}
	}
}

// layoutBlock reports whether an element in a table cell makes the table a
// layout rather than data: a heading (data tables hold paragraphs, lists
// and code in their cells, not headings).
func layoutBlock(a atom.Atom) bool {
	switch a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		return true
	}
	return false
}

// unTable turns the table being read into text: the cells read so far are
// paragraphs, and the rest of the table is written as the page's text.
func (c *converter) unTable() {
	t := c.table
	c.table = nil
	t.endCell()
	for _, row := range append(t.rows, t.row) {
		for _, cell := range row {
			if cell = strings.ReplaceAll(cell, `\|`, "|"); cell != "" {
				c.block(2)
				c.write(cell)
			}
		}
	}
	c.block(2)
}

// popTable ends the innermost table: an inner one's text is already in the
// outer table's cell; the outer one is written.
func (c *converter) popTable() {
	if c.table == nil {
		return
	}
	if c.inner > 0 {
		c.inner--
		c.space = true
		return
	}
	c.flushTable()
}

// flushTable writes the table read as a Markdown table: its first row as
// the header, each cell on one line.
func (c *converter) flushTable() {
	t := c.table
	if t == nil {
		return
	}
	c.table = nil
	t.endRow()
	if len(t.rows) == 0 {
		return
	}
	// Rows are written with their own cells, not padded to the widest
	// row: a table of one wide row would otherwise cost rows times
	// columns. The header's width makes the delimiter row.
	cols := len(t.rows[0])
	c.block(2)
	if c.breaks > 0 {
		c.flushBreaks()
	}
	writeRow := func(r []string) {
		c.out = append(c.out, '|')
		for _, cell := range r {
			c.out = append(c.out, ' ')
			c.out = append(c.out, cell...)
			c.out = append(c.out, " |"...)
		}
	}
	for i, r := range t.rows {
		if i > 0 {
			c.out = append(c.out, '\n')
		}
		writeRow(r)
		if i == 0 {
			c.out = append(c.out, '\n', '|')
			for range cols {
				c.out = append(c.out, "---|"...)
			}
		}
	}
	c.breaks, c.space = 2, false
}

func (t *table) endCell() {
	if !t.inCell {
		return
	}
	cell := strings.Join(strings.Fields(string(t.cell)), " ")
	t.row = append(t.row, strings.ReplaceAll(cell, "|", `\|`))
	t.cell, t.inCell = t.cell[:0], false
}

func (t *table) endRow() {
	t.endCell()
	if len(t.row) > 0 {
		t.rows = append(t.rows, t.row)
	}
	t.row = nil
}

// text writes a text token: white space collapsed as a browser does,
// except in <pre>.
func (c *converter) text(raw []byte) {
	if c.inTitle {
		c.title.Write(raw)
		return
	}
	if !c.writing() {
		return
	}
	if c.pre > 0 && c.table == nil {
		if c.breaks > 0 {
			c.flushBreaks()
		}
		c.out = append(c.out, raw...)
		return
	}
	// HTML's white space is ASCII: runs of it are one space.
	for len(raw) > 0 {
		i := 0
		for i < len(raw) && !isSpace(raw[i]) {
			i++
		}
		if i > 0 {
			if c.space {
				c.writeBytes(spaceByte)
			}
			c.space = false
			if c.atLineStart() && markdownMark(raw[:i]) {
				// Text that would read as a heading, a table row, a
				// quote or a code fence is escaped as text.
				c.writeBytes([]byte{'\\'})
			}
			c.writeBytes(raw[:i])
			raw = raw[i:]
			continue
		}
		for i < len(raw) && isSpace(raw[i]) {
			i++
		}
		c.space = true
		raw = raw[i:]
	}
}

var spaceByte = []byte{' '}

// atLineStart reports whether the next text begins a line of the output.
func (c *converter) atLineStart() bool {
	if c.table != nil || c.pre > 0 {
		return false
	}
	return c.breaks > 0 || len(c.out) == 0 || c.out[len(c.out)-1] == '\n'
}

// markdownMark reports whether a word beginning a line would be read as
// Markdown's: a heading's #, a table's |, a quote's >, a code fence.
func markdownMark(word []byte) bool {
	switch word[0] {
	case '#', '|', '>':
		return true
	}
	return bytes.HasPrefix(word, []byte("```")) || bytes.HasPrefix(word, []byte("~~~"))
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\n' || b == '\t' || b == '\r' || b == '\f'
}

// write appends s to the table cell being read, or to the output after the
// breaks it needs.
func (c *converter) write(s string) {
	if t := c.table; t != nil {
		if !t.inCell {
			return
		}
		t.cell = append(t.cell, s...)
		return
	}
	if c.breaks > 0 {
		c.flushBreaks()
	}
	c.out = append(c.out, s...)
}

// writeBytes is write of bytes.
func (c *converter) writeBytes(b []byte) {
	if t := c.table; t != nil {
		if !t.inCell {
			return
		}
		t.cell = append(t.cell, b...)
		return
	}
	if c.breaks > 0 {
		c.flushBreaks()
	}
	c.out = append(c.out, b...)
}

// flushBreaks writes the line breaks pending, then the prefix of the lines
// inside block quotes.
func (c *converter) flushBreaks() {
	if len(c.out) > 0 {
		for range c.breaks {
			c.out = append(c.out, '\n')
		}
	}
	c.breaks = 0
	for range min(c.quote, maxMarks) {
		c.out = append(c.out, "> "...)
	}
	c.space = false
}

// block asks for n line breaks before the next text (2: a new paragraph).
func (c *converter) block(n int) {
	if c.table != nil {
		c.space = true
		return
	}
	if c.fresh > 0 && len(c.out) == c.fresh && c.breaks == 0 {
		// Right after a list marker: the block is the item's text.
		return
	}
	c.breaks = max(c.breaks, n)
	c.space = false
}

func (c *converter) lineBreak() {
	if c.table != nil {
		c.space = true
		return
	}
	if c.pre > 0 {
		c.out = append(c.out, '\n')
		return
	}
	c.breaks = max(c.breaks, 1)
}

// len, since and truncate address what is being written: the table cell
// being read, or the output.
func (c *converter) len() int {
	if c.table != nil {
		return len(c.table.cell)
	}
	return len(c.out)
}

func (c *converter) since(at int) []byte {
	if c.table != nil {
		return c.table.cell[min(at, len(c.table.cell)):]
	}
	return c.out[min(at, len(c.out)):]
}

func (c *converter) truncate(at int) {
	if c.table != nil {
		c.table.cell = c.table.cell[:min(at, len(c.table.cell))]
		return
	}
	c.out = c.out[:min(at, len(c.out))]
}

// innermost returns the index of the innermost open element among as, or
// -1.
func (c *converter) innermost(as ...atom.Atom) int {
	for i := len(c.stack) - 1; i >= 0; i-- {
		for _, a := range as {
			if c.stack[i].a == a {
				return i
			}
		}
	}
	return -1
}

// innermostMark returns the index of the innermost open element that wrote
// mark, or -1.
func (c *converter) innermostMark(mark string) int {
	for i := len(c.stack) - 1; i >= 0; i-- {
		if c.stack[i].mark == mark {
			return i
		}
	}
	return -1
}

func (c *converter) resolve(href string) string {
	href = strings.TrimSpace(href)
	if c.opts.Base == nil || href == "" {
		return href
	}
	u, err := c.opts.Base.Parse(href)
	if err != nil {
		return href
	}
	return u.String()
}

// markdown returns what was written, trimmed.
func (c *converter) markdown() string {
	return strings.TrimSpace(strings.ToValidUTF8(string(c.out), "\uFFFD"))
}

// isMain reports whether an element is the main content of a page whose
// scope says where it is.
func (c *converter) isMain(a atom.Atom, attrs map[string]string) bool {
	switch c.scope {
	case inMain:
		return a == atom.Main || strings.EqualFold(attrs["role"], "main")
	case inArticle:
		return a == atom.Article
	}
	return false
}

// dropped reports whether an element is never text to read: scripts,
// styles, templates, forms' controls and hidden elements.
func dropped(a atom.Atom, attrs map[string]string) bool {
	switch a {
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Iframe, atom.Svg, atom.Math, atom.Select,
		atom.Button, atom.Textarea, atom.Object, atom.Canvas, atom.Video, atom.Audio, atom.Head:
		return true
	}
	if _, ok := attrs["hidden"]; ok {
		return true
	}
	if attrs["aria-hidden"] == "true" {
		return true
	}
	if st := attrs["style"]; st != "" {
		st = strings.ReplaceAll(strings.ToLower(st), " ", "")
		if strings.Contains(st, "display:none") || strings.Contains(st, "visibility:hidden") {
			return true
		}
	}
	return false
}

// furnitureWords are the class and id words of a page's furniture: the
// navigation bars, menus, sidebars, breadcrumbs, tables of contents,
// banners, footers, comment and share boxes that are not the page's content
// ("navheader" and "navfooter" hold the "Prev / Up / Home / Next" bars of
// DocBook manuals).
var furnitureWords = map[string]bool{
	"nav": true, "navbar": true, "navheader": true, "navfooter": true, "navigation": true, "menu": true, "menubar": true,
	"sidebar": true, "breadcrumb": true, "breadcrumbs": true, "toc": true, "footer": true, "skip": true, "skiplink": true,
	"cookie": true, "cookies": true, "banner": true, "ad": true, "ads": true, "advert": true, "advertisement": true,
	"comments": true, "share": true, "social": true, "related": true, "newsletter": true, "subscribe": true, "popup": true,
	"masthead": true, "sitenav": true, "topbar": true, "pager": true, "pagination": true,
}

// furniture reports whether an element is page furniture rather than
// content: a nav, aside or form element; a header or footer outside an
// article or main element; an element whose role is navigation, banner,
// contentinfo, complementary or search; or one whose class or id holds one
// of furnitureWords.
func (c *converter) furniture(a atom.Atom, attrs map[string]string) bool {
	switch a {
	case atom.Nav, atom.Aside, atom.Form:
		return true
	case atom.Header, atom.Footer:
		return c.innermost(atom.Article, atom.Main) < 0
	case atom.Main, atom.Article, atom.Body, atom.Html:
		return false
	}
	switch strings.ToLower(attrs["role"]) {
	case "navigation", "banner", "contentinfo", "complementary", "search":
		return true
	}
	for _, key := range []string{"class", "id"} {
		for token := range strings.FieldsSeq(strings.ToLower(attrs[key])) {
			// A token names furniture by its last word: site-nav,
			// page_footer, sidebar; not wy-nav-content-wrap.
			last := token[strings.LastIndexAny(token, "-_")+1:]
			if furnitureWords[last] || furnitureWords[token] {
				return true
			}
		}
	}
	return false
}

// dropLinkBlocks removes the blocks of md (paragraphs, lists, tables:
// what lies between blank lines, outside code) that are short and mostly
// links: the "Next: / Previous: / Up:" bars, link lists and tables of
// contents a page's furniture holds where no element says so.
func dropLinkBlocks(md string) string {
	var out strings.Builder
	out.Grow(len(md))
	fence := false
	for block := range strings.SplitSeq(md, "\n\n") {
		opens := strings.Count(block, "```")%2 == 1
		if !fence && !opens && linkBlock(block) {
			fence = fence != opens
			continue
		}
		fence = fence != opens
		if out.Len() > 0 {
			out.WriteString("\n\n")
		}
		out.WriteString(block)
	}
	return out.String()
}

// maxNavBlock bounds the bytes of a block that can be navigation.
const maxNavBlock = 16 << 10

// navWords are the words around the links of a navigation bar.
var navWords = map[string]bool{
	"next": true, "previous": true, "prev": true, "up": true, "home": true, "index": true, "contents": true,
	"top": true, "back": true, "forward": true, "first": true, "last": true, "chapter": true, "section": true,
}

// linkBlock reports whether a block of Markdown is navigation: under 400
// characters of text, at least two links, and either link text for at
// least 60% of its text or no other words than navWords (Next, Previous,
// Up, Home...).
func linkBlock(block string) bool {
	// A block of navigation is short: its links' targets make it longer
	// than its text, but not past maxNavBlock.
	if len(block) > maxNavBlock || strings.Count(block, "](") < 2 {
		return false
	}
	links, linked, text := 0, 0, 0
	onlyNav := true
	word := make([]byte, 0, 16)
	endWord := func() {
		if len(word) > 0 && !navWords[strings.ToLower(string(word))] {
			onlyNav = false
		}
		word = word[:0]
	}
	for i := 0; i < len(block); {
		if text >= 400 {
			return false
		}
		if block[i] == '[' {
			// A link's text is under 300 bytes, its target under 2,000:
			// looking no further keeps the scan linear.
			if end := strings.Index(block[i:min(len(block), i+300)], "]("); end > 0 {
				if close := strings.IndexByte(block[i+end:min(len(block), i+end+2000)], ')'); close > 0 {
					n := len(strings.TrimSpace(strings.Trim(block[i+1:i+end], "[]")))
					if n > 0 {
						links++
						linked += n
						text += n
					}
					i += end + close + 1
					endWord()
					continue
				}
			}
		}
		r, size := utf8.DecodeRuneInString(block[i:])
		if !unicode.IsSpace(r) && r != '|' && r != '-' && r != '*' {
			text++
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			word = utf8.AppendRune(word, r)
		} else {
			endWord()
		}
		i += size
	}
	endWord()
	return links >= 2 && text < 400 && (onlyNav || float64(linked) >= 0.6*float64(text))
}
