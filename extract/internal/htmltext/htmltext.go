// Package htmltext writes the visible text of an HTML page, one paragraph
// per block element, and notes where its headings stand, for HTML files and
// for the chapters of e-books. It reads the page token by token and never
// builds its tree: the memory it takes is the text it writes, the elements
// open at the point it has reached (at most MaxDepth), and one token of at
// most MaxToken bytes, whatever the page holds.
package htmltext

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

const (
	// MaxToken bounds what the tokenizer buffers for one token. A longer
	// text run, comment or script is read on in pieces; a longer tag
	// keeps its name and loses its attributes. The bound matters because
	// the tokenizer keeps every attribute of a tag, some 40 bytes each for
	// as little as two bytes of input.
	MaxToken = 1 << 20
	// MaxDepth bounds the elements open at once. As browsers do, an
	// element past it closes the innermost one before it opens, so that a
	// page of a million unclosed elements nests no deeper.
	MaxDepth = 512
	// maxTitleBytes bounds the text kept of a page title or a heading:
	// more is never shown in a citation.
	maxTitleBytes = 4 << 10
)

// Heading is a heading of the page: its level (1 for h1), its text, and
// the rune offset in the text where it starts.
type Heading struct {
	Level  int
	Title  string
	Offset int
}

// Page is what Read finds in a page.
type Page struct {
	// Title is the text of the page's first non-empty <title> before its
	// body, with its spaces collapsed; "" when it has none.
	Title string
	// Text is the visible text: the body with one paragraph per block
	// element, blank space collapsed as a browser does, <pre> kept as
	// written; scripts, styles, templates, hidden elements and the rest of
	// <head> are skipped. Control characters other than line feed and tab
	// are dropped.
	Text string
	// Headings are the headings h1 to h6, in order, their offsets in Text:
	// at most textdoc.SpanLimit of the text limit, or Read fails.
	Headings []Heading
}

// Options tune Read.
type Options struct {
	// MaxTextBytes bounds Text: past it Read stops with an error wrapping
	// textdoc.ErrTooLarge. Zero or less means no bound.
	MaxTextBytes int64
	// WithTitle writes the title first in Text, as its own paragraph.
	WithTitle bool
}

// Read reads the page r holds, which must be UTF-8, and returns its text.
// It fails only when r does, when ctx ends, or with textdoc.ErrTooLarge
// when the text passes opts.MaxTextBytes or the headings the span limit.
func Read(ctx context.Context, r io.Reader, opts Options) (*Page, error) {
	return read(ctx, r, opts, MaxToken)
}

// read is Read with the tokenizer's buffer bounded to maxToken bytes.
func read(ctx context.Context, r io.Reader, opts Options, maxToken int) (*Page, error) {
	rd := &reader{opts: opts, skip: -1, maxToken: maxToken}
	rd.w.limit = int(opts.MaxTextBytes)
	if opts.MaxTextBytes <= 0 || int64(rd.w.limit) != opts.MaxTextBytes {
		rd.w.limit = -1
	}
	if err := rd.run(ctx, r); err != nil {
		return nil, err
	}
	for len(rd.stack) > 0 {
		rd.pop()
	}
	rd.endTitle()
	if rd.w.err != nil {
		return nil, rd.w.err
	}
	text, headings := rd.w.finish()
	return &Page{Title: rd.titleText, Text: text, Headings: headings}, nil
}

// reader follows the page's tokens with the few rules of HTML's tree
// construction that change its text: which elements are open (and so
// hidden, preformatted or a heading), and the end tags a start tag implies.
type reader struct {
	opts Options
	// maxToken is MaxToken, but in tests.
	maxToken int
	w        writer
	stack    []element
	// skip is the index in stack of the element whose content is not
	// shown (a script, a hidden element), -1 when none is open.
	skip int
	// inBody is set once the body has begun: a <title> after that is
	// text like any other.
	inBody bool
	// inTitle is set while the first title's text is read into title.
	inTitle   bool
	title     strings.Builder
	titleText string
	// raw is the element whose raw text the tokenizer reads next (script,
	// style, textarea, title...), "" when none; carry the end of a text
	// token cut at MaxToken that belongs to the next piece; last the type
	// of the last token and comment, when it was a comment, its start.
	raw     string
	carry   string
	last    html.TokenType
	comment string
	// swallow is the start tag written before the rest of the input when
	// the tokenizer is started again in raw text: not a tag of the page.
	swallow string
	// where holds the indices in stack of the open elements by name;
	// specials those of HTML's special elements, blocks those of the
	// special elements but address, div and p, scopes those of the
	// elements that bound a scope. With them the open element an end tag
	// closes is found without a walk through the stack.
	where                    map[string][]int
	specials, blocks, scopes []int
	// resumes counts the tokenizers started again past a long token.
	resumes int
	// leadingNewline is set just after a <pre>, <textarea> or <listing>
	// opens: a line feed right after the tag is not part of the text.
	leadingNewline bool
}

// element is an open element and what its end undoes.
type element struct {
	a    atom.Atom
	key  string // its name
	brk  int
	pre  bool
	cell bool
	// heading is set on the heading element whose text gives the current
	// heading's title; start is where its text starts in the writer.
	heading bool
	start   int
	// quiet marks elements opened within skipped content, the skipped
	// element included: their end changes nothing.
	quiet bool
}

func (rd *reader) newTokenizer(r io.Reader) *html.Tokenizer {
	z := html.NewTokenizer(r)
	z.SetMaxBuf(rd.maxToken)
	return z
}

// run reads the tokens of r.
func (rd *reader) run(ctx context.Context, r io.Reader) error {
	in := bufio.NewReaderSize(r, 64<<10)
	z := rd.newTokenizer(in)
	for n := 0; ; n++ {
		if n&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if rd.w.err != nil {
			return rd.w.err
		}
		tt := z.Next()
		if tt != html.TextToken && tt != html.ErrorToken {
			rd.raw = ""
			rd.leadingNewline = false
		}
		switch tt {
		case html.ErrorToken:
			switch err := z.Err(); {
			case err == io.EOF:
				return nil
			case errors.Is(err, html.ErrBufferExceeded):
				z, in = rd.resume(z, in)
			default:
				return fmt.Errorf("%w: html: %v", textdoc.ErrCorrupt, err)
			}
		case html.TextToken:
			rd.textToken(z)
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			if rd.swallow != "" && tag == rd.swallow {
				rd.swallow = ""
				rd.raw = tag
				continue
			}
			rd.swallow = ""
			hide := hasAttr && hiddenAttrs(z, tag)
			rd.startTag(tag, hide, tt == html.SelfClosingTagToken)
			switch tag {
			case "iframe", "noembed", "noframes", "noscript", "plaintext", "script", "style", "textarea", "title", "xmp":
				rd.raw = tag
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			rd.endTag(string(name))
		case html.CommentToken, html.DoctypeToken:
			rd.endTitle()
			raw := z.Raw()
			rd.comment = string(raw[:min(len(raw), 4)])
		}
		rd.last = tt
	}
}

// textToken handles a text token, which may be a piece of a longer one
// cut at MaxToken.
func (rd *reader) textToken(z *html.Tokenizer) {
	raw := z.Raw()
	cut := len(raw) >= rd.maxToken
	rd.carry = ""
	if cut {
		rd.carry = carryOf(raw, rd.raw)
	}
	if rd.skip >= 0 || rd.raw == "script" || rd.raw == "style" {
		return
	}
	var text string
	if cut {
		text = unescape(raw[:len(raw)-len(rd.carry)], rd.raw)
	} else {
		text = string(z.Text())
	}
	if rd.leadingNewline {
		rd.leadingNewline = false
		text = strings.TrimPrefix(text, "\n")
	}
	switch {
	case rd.inTitle:
		if room := maxTitleBytes - rd.title.Len(); room > 0 {
			rd.title.WriteString(text[:min(len(text), room)])
		}
		return
	case !rd.inBody && strings.TrimSpace(text) == "":
		return
	}
	rd.inBody = true
	if rd.w.pre > 0 {
		rd.w.preText(text)
	} else {
		rd.w.text(text)
	}
}

// carryOf returns the end of a text token cut at MaxToken that must be
// read again with what follows: a '<' that may begin a tag (in raw text,
// the start of its end tag), or an unfinished character reference.
func carryOf(raw []byte, rawTag string) string {
	tail := raw[max(0, len(raw)-32):]
	if i := bytes.LastIndexByte(tail, '<'); i >= 0 {
		rest := tail[i:]
		if rawTag == "" && len(rest) <= 2 {
			return string(rest)
		}
		end := "</" + rawTag
		if rawTag != "" && len(rest) <= len(end) && strings.EqualFold(string(rest), end[:len(rest)]) {
			return string(rest)
		}
	}
	if rawTag == "" || rawTag == "title" || rawTag == "textarea" {
		if i := bytes.LastIndexByte(tail, '&'); i >= 0 && bytes.IndexByte(tail[i:], ';') < 0 {
			return string(tail[i:])
		}
	}
	return ""
}

// unescape returns the text of raw bytes of a text token as the tokenizer's
// Text would.
func unescape(raw []byte, rawTag string) string {
	s := strings.ReplaceAll(string(raw), "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	if rawTag == "" || rawTag == "title" || rawTag == "textarea" {
		s = html.UnescapeString(s)
	}
	return s
}

// resume starts a tokenizer again after z stopped at a token longer than
// MaxToken, where that token leaves off, and returns it with the reader
// it reads.
func (rd *reader) resume(z *html.Tokenizer, in *bufio.Reader) (*html.Tokenizer, *bufio.Reader) {
	rd.resumes++
	partial := bytes.Clone(z.Raw())
	rest := io.MultiReader(bytes.NewReader(bytes.Clone(z.Buffered())), in)
	if len(partial) == 0 {
		// The token before was the piece: text, raw text or a comment.
		var prefix string
		switch {
		case rd.last == html.TextToken && rd.raw != "":
			prefix, rd.swallow = "<"+rd.raw+">", rd.raw
		case rd.last == html.TextToken:
		case rd.comment == "<!--":
			prefix = "<!--"
		default:
			// A doctype or a bogus comment runs to the next '>', as
			// one beginning "<?" does.
			prefix = "<?"
		}
		next := bufio.NewReaderSize(io.MultiReader(strings.NewReader(prefix+rd.carry), rest), 64<<10)
		rd.carry = ""
		return rd.newTokenizer(next), next
	}
	// A tag longer than MaxToken: its name is kept, its attributes
	// dropped, and the input skipped to its end.
	next := bufio.NewReaderSize(rest, 64<<10)
	end := bytes.HasPrefix(partial, []byte("</"))
	name := tagName(partial)
	skipTag(partial, next)
	if name != "" {
		if end {
			rd.endTag(name)
		} else {
			rd.startTag(name, false, false)
		}
	}
	return rd.newTokenizer(next), next
}

// tagName returns the lower-case name of the tag whose start is raw.
func tagName(raw []byte) string {
	raw = bytes.TrimPrefix(bytes.TrimPrefix(raw, []byte("<")), []byte("/"))
	end := bytes.IndexAny(raw, " \t\n\r\f/>")
	if end < 0 {
		end = len(raw)
	}
	return strings.ToLower(string(raw[:end]))
}

// skipTag reads r to the '>' that ends the tag whose start is partial,
// passing over quoted attribute values.
func skipTag(partial []byte, r *bufio.Reader) {
	var quote byte
	afterEquals := false
	step := func(c byte) bool {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '>':
			return true
		case (c == '"' || c == '\'') && afterEquals:
			quote = c
		}
		switch {
		case c == '=' && quote == 0:
			afterEquals = true
		case c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f':
			afterEquals = false
		}
		return false
	}
	for _, c := range partial {
		step(c)
	}
	for {
		c, err := r.ReadByte()
		if err != nil || step(c) {
			return
		}
	}
}

// hiddenAttrs reports whether the attributes of the tag z holds mark it
// as not rendered.
func hiddenAttrs(z *html.Tokenizer, tag string) bool {
	hidden := false
	for {
		key, val, more := z.TagAttr()
		switch k := string(key); {
		case k == "hidden":
			hidden = true
		case k == "aria-hidden" && strings.EqualFold(string(val), "true"):
			hidden = true
		case k == "type" && tag == "input" && strings.EqualFold(string(val), "hidden"):
			hidden = true
		}
		if !more {
			return hidden
		}
	}
}

// blockBreaks says how many newlines an element puts around its content: 2 for
// paragraph-like blocks (chunking prefers to cut there), 1 for line-like ones.
var blockBreaks = map[atom.Atom]int{
	atom.P: 2, atom.Div: 2, atom.Section: 2, atom.Article: 2, atom.Header: 2,
	atom.Footer: 2, atom.Nav: 2, atom.Aside: 2, atom.Main: 2, atom.H1: 2,
	atom.H2: 2, atom.H3: 2, atom.H4: 2, atom.H5: 2, atom.H6: 2, atom.Ul: 2,
	atom.Ol: 2, atom.Dl: 2, atom.Table: 2, atom.Blockquote: 2, atom.Pre: 2,
	atom.Figure: 2, atom.Form: 2, atom.Fieldset: 2, atom.Address: 2,
	atom.Details: 2, atom.Hr: 2, atom.Body: 2,
	atom.Br: 1, atom.Li: 1, atom.Dt: 1, atom.Dd: 1, atom.Tr: 1, atom.Caption: 1,
	atom.Figcaption: 1, atom.Summary: 1, atom.Option: 1, atom.Legend: 1,
}

// headingLevels gives the level of each heading element.
var headingLevels = map[atom.Atom]int{
	atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6,
}

// skipped lists elements whose content is never shown as text. (The rest
// of <head> is its title, read apart, and void elements.)
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true,
	atom.Template: true, atom.Svg: true, atom.Math: true, atom.Iframe: true,
	atom.Object: true, atom.Canvas: true, atom.Select: true, atom.Datalist: true,
	atom.Noembed: true, atom.Noframes: true,
}

// void lists the elements that have no content and no end tag.
var void = map[atom.Atom]bool{
	atom.Area: true, atom.Base: true, atom.Br: true, atom.Col: true,
	atom.Embed: true, atom.Hr: true, atom.Img: true, atom.Input: true,
	atom.Keygen: true, atom.Link: true, atom.Meta: true, atom.Param: true,
	atom.Source: true, atom.Track: true, atom.Wbr: true, atom.Image: true,
	atom.Frame: true, atom.Basefont: true, atom.Bgsound: true,
}

// headContent lists the elements that may stand in <head>: any other
// start tag begins the body.
var headContent = map[atom.Atom]bool{
	atom.Html: true, atom.Head: true, atom.Title: true, atom.Meta: true,
	atom.Link: true, atom.Base: true, atom.Style: true, atom.Script: true,
	atom.Noscript: true, atom.Template: true, atom.Basefont: true, atom.Bgsound: true,
}

// closesP lists the start tags that close an open <p>.
var closesP = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true,
	atom.Center: true, atom.Details: true, atom.Dialog: true, atom.Dir: true,
	atom.Div: true, atom.Dl: true, atom.Fieldset: true, atom.Figcaption: true,
	atom.Figure: true, atom.Footer: true, atom.Header: true, atom.Hgroup: true,
	atom.Main: true, atom.Menu: true, atom.Nav: true, atom.Ol: true, atom.P: true,
	atom.Search: true, atom.Section: true, atom.Summary: true, atom.Ul: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true,
	atom.H6: true, atom.Pre: true, atom.Listing: true, atom.Form: true,
	atom.Table: true, atom.Hr: true, atom.Xmp: true, atom.Plaintext: true,
	atom.Li: true, atom.Dd: true, atom.Dt: true,
}

// scopeEnds lists the elements that bound the search for an open element
// an end tag or an implied end closes (HTML's "scope").
var scopeEnds = map[atom.Atom]bool{
	atom.Applet: true, atom.Caption: true, atom.Html: true, atom.Table: true,
	atom.Td: true, atom.Th: true, atom.Marquee: true, atom.Object: true,
	atom.Template: true,
}

// tracked lists the elements kept open outside skipped content: those
// whose end changes the text, and those that bound a scope. Inline
// elements (span, b, a...) change nothing and are not kept.
func tracked(a atom.Atom) bool {
	if _, ok := blockBreaks[a]; ok {
		return true
	}
	switch a {
	case atom.Pre, atom.Textarea, atom.Td, atom.Th, atom.Tr, atom.Thead, atom.Tbody,
		atom.Tfoot, atom.Caption, atom.Button, atom.Optgroup, atom.Applet, atom.Marquee,
		atom.Center, atom.Dialog, atom.Hgroup, atom.Menu, atom.Search, atom.Listing, atom.Dir:
		return true
	}
	return false
}

// special reports HTML's "special" elements, which an end tag of an
// inline element does not close.
func special(a atom.Atom) bool {
	return tracked(a) || skipped[a] || scopeEnds[a]
}

// startTag handles a start tag.
func (rd *reader) startTag(tag string, hide, selfClosing bool) {
	a := atom.Lookup([]byte(tag))
	switch a {
	case atom.Html, atom.Head:
		return
	case atom.Body:
		rd.endTitle()
		rd.inBody = true
		return
	case atom.Title:
		// A title before the body is not text; the first that is not
		// empty titles the page.
		if !rd.inBody && rd.skip < 0 {
			rd.endTitle()
			rd.inTitle = true
			return
		}
	}
	rd.endTitle()
	if !headContent[a] {
		rd.inBody = true
	}
	rd.implyEnds(a)
	if rd.skip >= 0 {
		if !void[a] && !selfClosing {
			rd.push(element{a: a, key: tag, quiet: true})
		}
		return
	}
	switch {
	case a == atom.Input && hide:
	case a == atom.Br:
		rd.w.breakLine(1)
	case a == atom.Hr:
		rd.w.breakLine(2)
	case void[a]:
	case (a == atom.Svg || a == atom.Math) && selfClosing:
	case skipped[a] || hide:
		rd.push(element{a: a, key: tag, quiet: true})
		rd.skip = len(rd.stack) - 1
	case tracked(a):
		rd.open(a, tag)
	}
}

// open opens an element that changes the text, outside skipped content.
func (rd *reader) open(a atom.Atom, tag string) {
	e := element{a: a, key: tag, brk: blockBreaks[a]}
	rd.w.breakLine(e.brk)
	if a == atom.Pre || a == atom.Textarea {
		e.pre = true
		rd.w.pre++
	}
	rd.leadingNewline = a == atom.Pre || a == atom.Textarea || a == atom.Listing
	if level, ok := headingLevels[a]; ok && rd.w.heading == nil {
		rd.w.heading = &Heading{Level: level, Offset: -1}
		e.heading, e.start = true, rd.w.b.Len()
	}
	e.cell = a == atom.Td || a == atom.Th
	rd.push(e)
}

// push opens e; past MaxDepth the innermost element is closed first.
func (rd *reader) push(e element) {
	if len(rd.stack) >= MaxDepth {
		if rd.skip == len(rd.stack)-1 {
			// The skipped element itself stays open: what it holds is
			// skipped without being kept.
			return
		}
		rd.pop()
	}
	i := len(rd.stack)
	rd.stack = append(rd.stack, e)
	if rd.where == nil {
		rd.where = map[string][]int{}
	}
	rd.where[e.key] = append(rd.where[e.key], i)
	if special(e.a) {
		rd.specials = append(rd.specials, i)
		if e.a != atom.Address && e.a != atom.Div && e.a != atom.P {
			rd.blocks = append(rd.blocks, i)
		}
	}
	if scopeEnds[e.a] {
		rd.scopes = append(rd.scopes, i)
	}
}

// pop closes the innermost open element.
func (rd *reader) pop() {
	i := len(rd.stack) - 1
	e := rd.stack[i]
	rd.stack = rd.stack[:i]
	w := rd.where[e.key]
	if len(w) == 1 && e.a == 0 {
		// Names of elements HTML does not know are as many as a page
		// makes up: they are not kept once closed.
		delete(rd.where, e.key)
	} else {
		rd.where[e.key] = w[:len(w)-1]
	}
	for _, s := range []*[]int{&rd.specials, &rd.blocks, &rd.scopes} {
		if n := len(*s); n > 0 && (*s)[n-1] == i {
			*s = (*s)[:n-1]
		}
	}
	if rd.skip == i {
		rd.skip = -1
		return
	}
	if e.quiet {
		return
	}
	if e.heading && rd.w.heading != nil {
		h := *rd.w.heading
		rd.w.heading = nil
		if h.Offset >= 0 {
			if limit := textdoc.SpanLimit(rd.opts.MaxTextBytes); len(rd.w.headings) >= limit {
				rd.w.err = textdoc.TooManySpans(limit)
			}
			h.Title = collapse(rd.w.b.String()[e.start:])
			rd.w.headings = append(rd.w.headings, h)
		}
	}
	if e.pre {
		rd.w.pre--
	}
	if e.cell {
		// Cells of a row stay on one line, kept apart.
		rd.w.pendingSpace = true
	}
	rd.w.breakLine(e.brk)
}

// popTo closes the elements from the innermost to the one at index i;
// nothing when i is -1.
func (rd *reader) popTo(i int) {
	for i >= 0 && len(rd.stack) > i {
		rd.pop()
	}
}

// innermost returns the index of the innermost open element of one of the
// names, -1 when none is open.
func (rd *reader) innermost(names ...string) int {
	i := -1
	for _, n := range names {
		if w := rd.where[n]; len(w) > 0 {
			i = max(i, w[len(w)-1])
		}
	}
	return i
}

func last(s []int) int {
	if len(s) == 0 {
		return -1
	}
	return s[len(s)-1]
}

// inScope returns i when the element at index i is open with no element
// of HTML's scope boundaries, nor of the names, inside it; else -1.
func (rd *reader) inScope(i int, boundaries ...string) int {
	if i < 0 || last(rd.scopes) > i || rd.innermost(boundaries...) > i {
		return -1
	}
	return i
}

// inTableScope is inScope within a table: only a table bounds it.
func (rd *reader) inTableScope(i int) int {
	if i < 0 || rd.innermost("table", "template") > i {
		return -1
	}
	return i
}

// implyEnds closes what the start tag a closes before it opens.
func (rd *reader) implyEnds(a atom.Atom) {
	switch a {
	case atom.Li:
		rd.closeItem("li")
	case atom.Dd, atom.Dt:
		rd.closeItem("dd", "dt")
	case atom.Td, atom.Th:
		rd.popTo(rd.inTableScope(rd.innermost("td", "th")))
	case atom.Tr:
		rd.popTo(rd.inTableScope(rd.innermost("td", "th")))
		rd.popTo(rd.inTableScope(rd.innermost("tr")))
	case atom.Thead, atom.Tbody, atom.Tfoot:
		rd.popTo(rd.inTableScope(rd.innermost("td", "th")))
		rd.popTo(rd.inTableScope(rd.innermost("tr")))
		rd.popTo(rd.inTableScope(rd.innermost("thead", "tbody", "tfoot")))
	case atom.Option, atom.Optgroup:
		if n := len(rd.stack); n > 0 && rd.stack[n-1].a == atom.Option {
			rd.pop()
		}
	}
	if closesP[a] {
		rd.popTo(rd.inScope(rd.innermost("p"), "button"))
	}
	if _, ok := headingLevels[a]; ok {
		if n := len(rd.stack); n > 0 {
			if _, open := headingLevels[rd.stack[n-1].a]; open {
				rd.pop()
			}
		}
	}
}

// closeItem closes an open list item (or definition) that a new one ends,
// looking past no block but a div, a paragraph or an address.
func (rd *reader) closeItem(names ...string) {
	if i := rd.innermost(names...); i >= 0 && last(rd.blocks) <= i {
		rd.popTo(i)
	}
}

// endTag handles an end tag.
func (rd *reader) endTag(tag string) {
	a := atom.Lookup([]byte(tag))
	if a == atom.Title && rd.inTitle {
		rd.endTitle()
		return
	}
	rd.endTitle()
	switch a {
	case atom.Html, atom.Head, atom.Body:
		return
	case atom.Br:
		if rd.skip < 0 {
			rd.w.breakLine(1)
		}
		return
	}
	i := rd.innermost(tag)
	switch {
	case i < 0:
	case special(a):
		// The end tag of a block closes it, and every element inside it,
		// unless a scope boundary lies between.
		if a == atom.P {
			i = rd.inScope(i, "button")
		} else {
			i = rd.inScope(i)
		}
	case last(rd.specials) > i:
		// That of an inline element does not close a block inside it.
		i = -1
	}
	switch {
	case i >= 0:
		rd.popTo(i)
	case a == atom.P && rd.skip < 0:
		// A </p> without a <p> stands for an empty paragraph.
		rd.w.breakLine(2)
	}
}

// endTitle ends the reading of the title, if it was being read.
func (rd *reader) endTitle() {
	if !rd.inTitle {
		return
	}
	rd.inTitle = false
	t := collapse(rd.title.String())
	rd.title.Reset()
	if t == "" || rd.titleText != "" {
		return
	}
	rd.titleText = t
	if rd.opts.WithTitle && rd.w.b.Len() == 0 {
		rd.w.text(t)
		rd.w.breakLine(2)
	}
}

// collapse returns the first maxTitleBytes of s with its runs of blank
// space collapsed to single spaces, as valid UTF-8 without control
// characters.
func collapse(s string) string {
	if len(s) > maxTitleBytes {
		cut := maxTitleBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' && r != '\r' && r != '\f' || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return strings.Join(strings.Fields(s), " ")
}

// Title returns the text of a parsed page's first <title> element,
// with its spaces collapsed; "" when the head has none.
func Title(n *html.Node) string {
	if n.Type == html.ElementNode && n.DataAtom == atom.Title {
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		return strings.Join(strings.Fields(b.String()), " ")
	}
	if n.Type == html.ElementNode && n.DataAtom == atom.Body {
		return ""
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := Title(c); t != "" {
			return t
		}
	}
	return ""
}

// writer collapses blank space the way a browser does, holding spaces and
// line breaks back until the next visible character decides whether they show.
type writer struct {
	b            strings.Builder
	runes        int
	pendingSpace bool
	pendingBreak int
	pre          int
	headings     []Heading
	// heading is the heading being written, whose offset is set by the
	// first visible character it holds.
	heading *Heading
	// limit bounds b's length in bytes (-1: no bound); err is set once
	// it is passed, and nothing more is written.
	limit int
	err   error
}

// finish returns the text without surrounding white space, and the
// headings with their offsets moved to match.
func (w *writer) finish() (string, []Heading) {
	s := w.b.String()
	body := strings.TrimLeftFunc(s, unicode.IsSpace)
	lead := utf8.RuneCountInString(s[:len(s)-len(body)])
	body = strings.TrimRightFunc(body, unicode.IsSpace)
	n := utf8.RuneCountInString(body)
	out := w.headings[:0]
	for _, h := range w.headings {
		h.Offset -= lead
		if h.Offset >= 0 && h.Offset < n {
			out = append(out, h)
		}
	}
	return body, out
}

func (w *writer) breakLine(n int) {
	if n > w.pendingBreak {
		w.pendingBreak = n
	}
}

// flush writes the held-back separator before visible text.
func (w *writer) flush() {
	switch {
	case w.b.Len() == 0:
	case w.pendingBreak > 0:
		w.b.WriteString("\n\n"[:w.pendingBreak])
		w.runes += w.pendingBreak
	case w.pendingSpace:
		w.b.WriteByte(' ')
		w.runes++
	}
	w.pendingBreak = 0
	w.pendingSpace = false
	if w.heading != nil && w.heading.Offset < 0 {
		w.heading.Offset = w.runes
	}
}

// full reports, once the text has passed its limit, that nothing more is
// to be written.
func (w *writer) full() bool {
	if w.err == nil && w.limit >= 0 && w.b.Len() > w.limit {
		w.err = textdoc.TooLarge(int64(w.limit))
	}
	return w.err != nil
}

func (w *writer) text(s string) {
	for _, r := range s {
		switch {
		case r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r':
			w.pendingSpace = true
			continue
		case r < 0x20 || r == 0x7f:
			continue
		}
		if w.full() {
			return
		}
		w.flush()
		w.b.WriteRune(r)
		w.runes++
	}
}

func (w *writer) preText(s string) {
	if s == "" || w.full() {
		return
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f }) >= 0 {
		s = strings.Map(func(r rune) rune {
			if r == '\r' {
				return '\n'
			}
			if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
				return -1
			}
			return r
		}, s)
	}
	if s == "" {
		return
	}
	w.flush()
	w.b.WriteString(s)
	w.runes += utf8.RuneCountInString(s)
	w.full()
}
