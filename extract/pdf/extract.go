// Package pdf reads the text of PDF files, page by page, in reading order.
// It is built on the object model of github.com/ledongthuc/pdf with its own
// content stream interpreter, font and CMap handling, and guards that keep a
// hostile file from looping or consuming unbounded memory. It knows nothing
// of other formats, storage or MCP.
package pdf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	lpdf "github.com/ledongthuc/pdf"

	"github.com/mcpsearch/mcpsearch/extract/internal/safetext"
)

// Document is the extracted text of one PDF.
type Document struct {
	// Text is the text of every page, valid UTF-8, pages separated by a
	// blank line, without the running headers and footers repeated at the
	// top or bottom of most pages (unless Options.KeepRunningLines).
	Text string
	// Pages lists page spans in Text, in order, numbered from 1. Offsets
	// are in runes (characters), not bytes.
	Pages []Page
	// Info tells, for each page of Pages at the same index, what it draws
	// besides its text, so that a caller can tell a scanned page.
	Info []PageInfo
}

// PageInfo tells what a page draws, for deciding whether it needs OCR.
type PageInfo struct {
	// Images counts the images the page paints: image XObjects, directly
	// or in forms, and inline images.
	Images int
	// Glyphs counts the glyphs the page shows, mapped to text or not: a
	// page showing many glyphs but little text has fonts that map none.
	Glyphs int
}

// Page is one page's span of Document.Text, in rune offsets [Start, End).
type Page struct {
	Number int
	Start  int
	End    int
}

var (
	// ErrCorrupt reports a file that cannot be parsed. A panic inside the
	// PDF parser is recovered and reported as ErrCorrupt with a reason.
	ErrCorrupt = errors.New("corrupt or unreadable PDF")
	// ErrEncrypted reports a PDF that needs a password to be read.
	ErrEncrypted = errors.New("encrypted PDF needs a password")
	// ErrNoText reports a PDF that yields no text: its pages hold only
	// images or vector graphics (typically a scan), or its fonts map no
	// glyph to a character.
	ErrNoText = errors.New("no extractable text")
	// ErrTooLarge reports a PDF whose text exceeds the limit.
	ErrTooLarge = errors.New("PDF too large")
)

// Default limits of Options.
const (
	// DefaultMaxTextBytes bounds the text of one file.
	DefaultMaxTextBytes = 32 << 20
	// DefaultMaxStreamBytes bounds the decoded size of one content stream,
	// form or CMap; honest pages hold a few hundred kilobytes.
	DefaultMaxStreamBytes = 32 << 20
	// DefaultMaxDecodedBytes bounds the bytes decoded from all streams of
	// one file.
	DefaultMaxDecodedBytes = 256 << 20
)

// Options bound the memory one extraction may use, whatever the file
// declares. Zero or negative fields take the defaults. Beyond a limit
// Extract fails with an error wrapping ErrTooLarge that names it.
type Options struct {
	// MaxTextBytes bounds the extracted text of the file, in bytes.
	MaxTextBytes int64
	// MaxStreamBytes bounds what one stream may decode to. A stream that
	// many pages share is decoded once.
	MaxStreamBytes int64
	// MaxDecodedBytes bounds what all streams of the file decode to in
	// total.
	MaxDecodedBytes int64
	// KeepRunningLines keeps running headers and footers, the lines
	// repeated at the top or bottom of most pages, which are otherwise
	// dropped from the text (see dropRunningLines). Comparisons with other
	// extractors, which keep them, set it.
	KeepRunningLines bool
	// KeepEmpty returns the document, its pages empty, instead of failing
	// with ErrNoText when no page yields text but none is damaged: a scan,
	// whose pages a caller then reads through OCR.
	KeepEmpty bool
}

func (o Options) withDefaults() Options {
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = DefaultMaxTextBytes
	}
	if o.MaxStreamBytes <= 0 {
		o.MaxStreamBytes = DefaultMaxStreamBytes
	}
	if o.MaxDecodedBytes <= 0 {
		o.MaxDecodedBytes = DefaultMaxDecodedBytes
	}
	return o
}

// Extract returns the text of every page of data. A page that cannot be
// read yields the text read before the damage (often none); the document
// fails with ErrCorrupt only when no page yields any text and some page
// failed.
//
// Errors wrap ErrCorrupt, ErrEncrypted, ErrNoText or ErrTooLarge, or are
// ctx's error when ctx ends during extraction. Extract returns as soon as
// ctx ends, even while the parser is busy inside one object. Error messages
// are one line of valid UTF-8 without control characters, at most
// safetext.MaxMessageBytes long, whatever bytes the file holds, and the text
// is valid UTF-8 without NUL or other control characters but line feed and
// tab.
func Extract(ctx context.Context, data []byte, opts Options) (*Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrNoText)
	}
	doc, err := extractPDFIsolated(ctx, data, opts.withDefaults())
	return doc, safetext.Error(err)
}

func runeCount(s string) int {
	return utf8.RuneCountInString(s)
}

// Limits that keep a hostile PDF from consuming unbounded time or memory.
const (
	// maxPageTreeNodes bounds the page tree walk, which a cyclic tree would
	// otherwise never finish.
	maxPageTreeNodes = 1 << 20
	// maxPageTreeDepth bounds page tree nesting.
	maxPageTreeDepth = 64
	// maxFormDepth bounds nested form XObjects, maxFormsPerPage their count.
	maxFormDepth    = 12
	maxFormsPerPage = 4096
)

// pageSeparator stands between the texts of consecutive pages, so that a
// chunker sees a page end as a paragraph end.
const pageSeparator = "\n\n"

// pdfPage is one leaf of the page tree with the resources it inherits.
type pdfPage struct {
	v   lpdf.Value
	res lpdf.Value
}

// abortError carries the context's error out of a content stream callback.
type abortError struct{ err error }

// extractPDFIsolated runs extractPDF on its own goroutine so that Extract
// returns as soon as ctx ends even while the PDF package is busy inside one
// object, where it cannot be interrupted; the work then stops at its next
// cancellation check. Every path through extractPDF is bounded, so an
// abandoned run always finishes.
func extractPDFIsolated(ctx context.Context, data []byte, opts Options) (*Document, error) {
	type result struct {
		doc *Document
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			// A panic on this goroutine would end the process; recover
			// whatever escaped the finer-grained recovery below.
			if v := recover(); v != nil {
				done <- result{nil, fmt.Errorf("%w: %v", ErrCorrupt, v)}
			}
		}()
		doc, err := extractPDF(ctx, data, opts)
		done <- result{doc, err}
	}()
	select {
	case r := <-done:
		return r.doc, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// extractPDF reads the text of every page. A page that cannot be read yields
// the text read before the damage (often none); the document fails with
// ErrCorrupt only when no page yields any text and some page failed.
func extractPDF(ctx context.Context, data []byte, opts Options) (*Document, error) {
	r, err := openPDF(data)
	if err != nil {
		return nil, err
	}
	pages, err := collectPages(r)
	if err != nil {
		return nil, err
	}
	if len(pages) == 0 {
		return nil, fmt.Errorf("%w: no pages found", ErrCorrupt)
	}

	fonts := newFontCache()
	streams := newStreamCache(opts)
	texts := make([]string, len(pages))
	info := make([]PageInfo, len(pages))
	var (
		// total is the length in bytes of the text so far, separators
		// included.
		total    int
		glyphs   int
		firstErr error
	)
	for i, pg := range pages {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// The page may write what is left of the text budget, less the
		// separator before it.
		left := int(opts.MaxTextBytes) - total - len(pageSeparator)
		out := &textOut{limit: left, tooLarge: textTooLarge(opts.MaxTextBytes)}
		text, drawn, err := extractPage(ctx, pg, fonts, streams, out)
		if streams.err != nil {
			return nil, streams.err
		}
		// Glyph text is already filtered; this guards the page offsets
		// and the database against whatever a font's CMap still lets by.
		text = safetext.Text(text)
		glyphs += drawn
		info[i] = PageInfo{Images: out.images, Glyphs: drawn}
		if err != nil {
			var abort abortError
			if errors.As(err, &abort) {
				return nil, abort.err
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("page %d: %w", i+1, err)
			}
		}
		if text != "" && total > 0 {
			total += len(pageSeparator)
		}
		if int64(total+len(text)) > opts.MaxTextBytes {
			return nil, textTooLarge(opts.MaxTextBytes)
		}
		total += len(text)
		texts[i] = text
	}
	if !opts.KeepRunningLines {
		texts = dropRunningLines(texts)
	}
	doc := joinPages(texts)
	doc.Info = info
	if strings.TrimSpace(doc.Text) == "" {
		switch {
		case firstErr != nil:
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, firstErr)
		case opts.KeepEmpty:
			return doc, nil
		case glyphs > 0:
			return nil, fmt.Errorf("%w: the PDF draws %d glyphs but its fonts map none of them to characters", ErrNoText, glyphs)
		}
		return nil, fmt.Errorf("%w (scanned PDF?)", ErrNoText)
	}
	return doc, nil
}

// joinPages returns the document of the page texts, page i+1 at index i:
// the texts with pageSeparator between those with text, and each page's span
// in rune offsets. The separator belongs to the page before it; a page
// without text is an empty span where it would stand.
func joinPages(texts []string) *Document {
	size := 0
	for _, t := range texts {
		size += len(t) + len(pageSeparator)
	}
	var b strings.Builder
	b.Grow(size)
	doc := &Document{Pages: make([]Page, 0, len(texts))}
	pos, lastWithText := 0, 0
	for i, text := range texts {
		if text != "" && b.Len() > 0 {
			// Empty pages after the last page with text move to the
			// separator's end and stay empty.
			b.WriteString(pageSeparator)
			pos += len(pageSeparator)
			doc.Pages[lastWithText].End = pos
			for j := lastWithText + 1; j < len(doc.Pages); j++ {
				doc.Pages[j].Start, doc.Pages[j].End = pos, pos
			}
		}
		if text != "" {
			lastWithText = len(doc.Pages)
		}
		start := pos
		b.WriteString(text)
		pos += runeCount(text)
		doc.Pages = append(doc.Pages, Page{Number: i + 1, Start: start, End: pos})
	}
	doc.Text = b.String()
	return doc
}

// Error lets abortError travel as an error through page recovery.
func (a abortError) Error() string { return a.err.Error() }

// openPDF opens data with the PDF package after two repairs that keep
// offsets intact: a PDF 2.0 header (the package only accepts 1.x) is read as
// 1.7, and bytes after the last %%EOF marker are cut off.
func openPDF(data []byte) (*lpdf.Reader, error) {
	if !bytes.HasPrefix(data, []byte("%PDF-")) {
		return nil, fmt.Errorf("%w: not a PDF file (no %%PDF- header)", ErrCorrupt)
	}
	if len(data) > 9 && (data[5] != '1' || data[6] != '.' || data[7] < '0' || data[7] > '7' || (data[8] != '\r' && data[8] != '\n')) {
		fixed := make([]byte, len(data))
		copy(fixed, data)
		copy(fixed[5:], "1.7")
		if fixed[8] != '\r' && fixed[8] != '\n' {
			fixed[8] = '\n'
		}
		data = fixed
	}
	if i := bytes.LastIndex(data, []byte("%%EOF")); i >= 0 && len(data)-(i+5) > 64 {
		data = data[:i+5]
	}
	if err := checkStructure(data); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	r, err := newReader(data)
	if err != nil {
		if errors.Is(err, lpdf.ErrInvalidPassword) {
			return nil, ErrEncrypted
		}
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return r, nil
}

func newReader(data []byte) (r *lpdf.Reader, err error) {
	defer func() {
		if v := recover(); v != nil {
			r, err = nil, fmt.Errorf("malformed PDF: %v", v)
		}
	}()
	return lpdf.NewReader(bytes.NewReader(data), int64(len(data)))
}

// collectPages walks the page tree once, in order, passing inherited
// resources down. (Looking each page up from the root costs a walk per page
// and re-reads shared objects every time.) A kid that cannot be read counts
// as one empty page so that later pages keep their numbers.
func collectPages(r *lpdf.Reader) (pages []pdfPage, err error) {
	defer func() {
		if v := recover(); v != nil {
			pages, err = nil, fmt.Errorf("%w: page tree: %v", ErrCorrupt, v)
		}
	}()
	root := r.Trailer().Key("Root").Key("Pages")
	budget := maxPageTreeNodes
	var walk func(node, res lpdf.Value, depth int)
	walk = func(node, res lpdf.Value, depth int) {
		if budget <= 0 || depth > maxPageTreeDepth || node.Kind() != lpdf.Dict {
			return
		}
		budget--
		kids, res, ok := readTreeNode(node, res)
		switch {
		case !ok:
			pages = append(pages, pdfPage{})
		case kids.IsNull():
			pages = append(pages, pdfPage{v: node, res: res})
		default:
			for i := 0; i < kids.Len(); i++ {
				kid, ok := resolveKid(kids, i)
				if !ok {
					pages = append(pages, pdfPage{})
					continue
				}
				walk(kid, res, depth+1)
			}
		}
	}
	walk(root, lpdf.Value{}, 0)
	return pages, nil
}

// readTreeNode returns the kids of an intermediate page tree node (null for a
// page) and the resources in force for it; ok is false when the node cannot
// be read.
func readTreeNode(node, inherited lpdf.Value) (kids, res lpdf.Value, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	res = inherited
	if own := node.Key("Resources"); own.Kind() == lpdf.Dict {
		res = own
	}
	if k := node.Key("Kids"); k.Kind() == lpdf.Array && node.Key("Type").Name() != "Page" {
		kids = k
	}
	return kids, res, true
}

func resolveKid(kids lpdf.Value, i int) (kid lpdf.Value, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return kids.Index(i), true
}

// extractPage returns the text of one page, written through out, and how
// many glyphs it draws. A
// panic in the PDF package or a damaged content stream ends the page early
// with the text read so far and an error; context cancellation returns an
// abortError.
func extractPage(ctx context.Context, pg pdfPage, fonts *fontCache, streams *streamCache, out *textOut) (text string, glyphs int, err error) {
	defer func() {
		if v := recover(); v != nil {
			if a, ok := v.(abortError); ok {
				text, glyphs, err = "", 0, a
				return
			}
			text, glyphs, err = out.String(), out.glyphs, fmt.Errorf("%v", v)
		}
	}()
	if pg.v.Kind() != lpdf.Dict {
		return "", 0, errors.New("unreadable page object")
	}
	content, readErr := pageContent(pg.v.Key("Contents"), streams)
	p := &pageInterp{ctx: ctx, fonts: fonts, streams: streams, out: out}
	p.g = newGState()
	p.run(content, newResources(pg.res), 0)
	return out.String(), out.glyphs, readErr
}

// pageContent concatenates a page's content streams. Damage in one stream
// keeps what was decoded of it and is reported with the rest.
func pageContent(c lpdf.Value, streams *streamCache) ([]byte, error) {
	switch c.Kind() {
	case lpdf.Stream:
		return streams.read(c)
	case lpdf.Array:
		var (
			all      []byte
			firstErr error
		)
		for i := 0; i < c.Len() && int64(len(all)) < streams.opts.MaxStreamBytes && streams.err == nil; i++ {
			data, err := streams.read(c.Index(i))
			if err != nil && firstErr == nil {
				firstErr = err
			}
			all = append(all, data...)
			all = append(all, '\n')
		}
		return all, firstErr
	}
	return nil, nil
}

// fontCache shares fonts across the pages of one document. Fonts are keyed by
// the text of their dictionary, whose indirect references print as "n 0 R":
// two dictionaries with the same text describe the same font, and the key is
// found without a handle on the object's identity, which the package does not
// expose.
//
// Fonts referenced indirectly are also keyed by object number, so that pages
// sharing a font find it without resolving the font object again, which for
// objects inside compressed object streams means inflating the stream anew.
type fontCache struct {
	byKey map[string]*pdfFont
	byRef map[int64]*pdfFont
	none  *pdfFont
}

func newFontCache() *fontCache {
	return &fontCache{
		byKey: make(map[string]*pdfFont),
		byRef: make(map[int64]*pdfFont),
		none:  loadFont(lpdf.Value{}),
	}
}

func (c *fontCache) get(fv lpdf.Value) *pdfFont {
	if fv.Kind() != lpdf.Dict {
		return c.none
	}
	key := fv.String()
	if f, ok := c.byKey[key]; ok {
		return f
	}
	f := loadFont(fv)
	c.byKey[key] = f
	return f
}

// resources resolves names used by one content stream: fonts and XObjects.
type resources struct {
	v         lpdf.Value
	fontDict  lpdf.Value
	fontRefs  map[string]operand
	xobjDict  lpdf.Value
	fonts     map[string]*pdfFont
	xobjects  map[string]lpdf.Value
	formCache map[string][]byte
	// images names the XObjects that are images.
	images map[string]bool
	loaded bool
}

func newResources(v lpdf.Value) *resources {
	return &resources{v: v, fonts: make(map[string]*pdfFont)}
}

func (r *resources) load() {
	if !r.loaded {
		r.loaded = true
		r.fontDict = r.v.Key("Font")
		r.xobjDict = r.v.Key("XObject")
		// The dictionary prints references as "n g R"; reading them back
		// gives each font's object number without resolving it.
		if r.fontDict.Kind() == lpdf.Dict {
			l := lexer{b: []byte(r.fontDict.String())}
			if l.next().kind == tokDictOpen {
				r.fontRefs = l.readDict()
			}
		}
	}
}

// font returns the named font; a font that cannot be resolved reads as the
// fallback font rather than failing the page.
func (r *resources) font(cache *fontCache, name string) (f *pdfFont) {
	if f, ok := r.fonts[name]; ok {
		return f
	}
	defer func() {
		if recover() != nil {
			f = cache.none
		}
		r.fonts[name] = f
	}()
	r.load()
	ref, isRef := r.fontRefs[name]
	isRef = isRef && ref.kind == tokNumber
	if isRef {
		if f, ok := cache.byRef[int64(ref.num)]; ok {
			return f
		}
	}
	f = cache.get(r.fontDict.Key(name))
	if isRef {
		cache.byRef[int64(ref.num)] = f
	}
	return f
}

// form returns the content of the named form XObject, or nil for images,
// unknown names and forms that cannot be read.
func (r *resources) form(name string, streams *streamCache) (xo lpdf.Value, data []byte) {
	defer func() {
		if recover() != nil {
			xo, data = lpdf.Value{}, nil
			r.xobjects[name] = xo
		}
	}()
	if r.xobjects == nil {
		r.xobjects = make(map[string]lpdf.Value)
		r.formCache = make(map[string][]byte)
		r.images = make(map[string]bool)
	}
	xo, ok := r.xobjects[name]
	if !ok {
		r.xobjects[name] = lpdf.Value{}
		r.load()
		xo = r.xobjDict.Key(name)
		if xo.Kind() == lpdf.Stream && xo.Key("Subtype").Name() == "Image" {
			r.images[name] = true
		}
		if xo.Kind() != lpdf.Stream || xo.Key("Subtype").Name() != "Form" {
			xo = lpdf.Value{}
		}
		r.xobjects[name] = xo
	}
	if xo.IsNull() {
		return xo, nil
	}
	data, ok = r.formCache[name]
	if !ok {
		// A damaged form keeps what could be decoded of it.
		data, _ = streams.read(xo)
		r.formCache[name] = data
	}
	return xo, data
}

// streamCache decodes the content streams and forms of one document within
// its Options: a stream that many pages share is decoded once, and what
// all decoding takes is counted. The first limit passed is kept in err, and
// decoding stops; the PDF package's own recovery of panics cannot swallow
// it there.
type streamCache struct {
	opts Options
	// byKey holds decoded streams by their identity (the stream's dictionary
	// and file offset, as the PDF package prints it), while they take no
	// more than opts.MaxStreamBytes in all.
	byKey   map[string][]byte
	held    int64
	decoded int64
	err     error
}

func newStreamCache(opts Options) *streamCache {
	return &streamCache{opts: opts, byKey: make(map[string][]byte)}
}

// read returns the decoded data of stream v. A stream that breaks off
// yields what was decoded before the damage, with the error.
func (c *streamCache) read(v lpdf.Value) ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	key := v.String()
	if data, ok := c.byKey[key]; ok {
		return data, nil
	}
	data, err := readStream(v, c.opts.MaxStreamBytes+1)
	if int64(len(data)) > c.opts.MaxStreamBytes {
		c.err = fmt.Errorf("%w: a stream decodes to more than %d bytes (the stream limit)", ErrTooLarge, c.opts.MaxStreamBytes)
		return nil, c.err
	}
	c.decoded += int64(len(data))
	if c.decoded > c.opts.MaxDecodedBytes {
		c.err = fmt.Errorf("%w: its streams decode to more than %d bytes (the decoded limit)", ErrTooLarge, c.opts.MaxDecodedBytes)
		return nil, c.err
	}
	// Keep the newest streams: pages that share one come one after the
	// other, or paint the same form.
	for k, d := range c.byKey {
		if c.held+int64(len(data)) <= c.opts.MaxStreamBytes {
			break
		}
		delete(c.byKey, k)
		c.held -= int64(len(d))
	}
	c.byKey[key] = data
	c.held += int64(len(data))
	return data, err
}

// textTooLarge is the error for text beyond limit bytes.
func textTooLarge(limit int64) error {
	return fmt.Errorf("%w: its text exceeds %d bytes (the text limit)", ErrTooLarge, limit)
}
