package ooxml

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
	"github.com/mcpsearch/mcpsearch/extract/internal/xmlsafe"
)

// ReadDOCX returns the text of a Word document: the body in document order
// (paragraphs, lists with their markers, tables row by row as Markdown
// tables, the text of hyperlinks, text boxes and field results), then the
// footnotes and endnotes referenced from it ("[1]" in the text), then the
// distinct texts of the page headers and footers, once each. Inserted text
// of tracked changes is kept and deleted text dropped, as are hidden text
// and field codes. Headings, found through their style's outline level or
// built-in name (so whatever the language the style is displayed in), are
// written as Markdown headings and start a span holding the heading path.
func ReadDOCX(ctx context.Context, a *archive.Archive, opts textdoc.Options) (*textdoc.Document, error) {
	main, err := mainPart(a, "word/document.xml")
	if err != nil {
		return nil, err
	}
	rels, err := readRels(a, main)
	if err != nil {
		return nil, err
	}
	r := &docx{a: a, b: textdoc.NewBuilder(opts.MaxTextBytes), counters: map[string][]int{},
		noteText: map[string][]string{}, limit: opts.MaxTextBytes}
	if err := r.loadStyles(first(rels, "styles")); err != nil {
		return nil, err
	}
	if err := r.loadNumbering(first(rels, "numbering")); err != nil {
		return nil, err
	}
	t := &ticker{ctx: ctx}
	if err := r.walk(t, main, r.writeBody); err != nil {
		return nil, err
	}
	if err := r.writeNotes(t, rels); err != nil {
		return nil, err
	}
	if err := r.writeHeadersFooters(t, rels); err != nil {
		return nil, err
	}
	doc, err := r.b.Document()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(doc.Text) == "" {
		return nil, noText(a, "document")
	}
	return doc, nil
}

type docx struct {
	// limit bounds the text one part may hold before it is written, as
	// the text of the document.
	limit   int64
	a       *archive.Archive
	b       *textdoc.Builder
	outline textdoc.Outline
	// styles holds paragraph styles by id; defaultStyle is the id of the
	// style of paragraphs that name none.
	styles       map[string]*style
	defaultStyle string
	numbering    numbering
	// counters holds the list counters of each numbering instance, one
	// per level.
	counters map[string][]int
	// notes lists the footnotes and endnotes referenced, in order, as
	// "footnote:ID" or "endnote:ID"; noteText their paragraphs.
	notes    []string
	noteText map[string][]string
}

type style struct {
	name, basedOn string
	// outline is the outline level the style sets, -1 when it sets none.
	outline      int
	numID, level string
}

// headingName matches the built-in names of heading styles, which Word
// keeps in English whatever language it displays them in.
var headingName = regexp.MustCompile(`^heading\s*([1-9])$`)

func (r *docx) loadStyles(part string) error {
	r.styles = map[string]*style{}
	if part == "" {
		return nil
	}
	root, err := parsePart(r.a, part)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, s := range root.Children("style") {
		if s.A("type") != "paragraph" {
			continue
		}
		id := s.A("styleId")
		st := &style{name: strings.ToLower(strings.TrimSpace(s.Child("name").A("val"))),
			basedOn: s.Child("basedOn").A("val"), outline: -1}
		if ppr := s.Child("pPr"); ppr != nil {
			if o := ppr.Child("outlineLvl"); o != nil {
				if n, err := strconv.Atoi(o.A("val")); err == nil {
					st.outline = n
				}
			}
			if np := ppr.Child("numPr"); np != nil {
				st.numID, st.level = np.Child("numId").A("val"), np.Child("ilvl").A("val")
			}
		}
		r.styles[id] = st
		if s.A("default") == "1" || s.A("default") == "true" {
			r.defaultStyle = id
		}
	}
	return nil
}

// headingLevel returns the heading level a style gives its paragraphs:
// 1 to 9, 0 for the document title, -1 for none. Levels are inherited
// through basedOn.
func (r *docx) headingLevel(id string) int {
	for i := 0; i < 32 && id != ""; i++ {
		s, ok := r.styles[id]
		if !ok {
			break
		}
		switch {
		case s.outline >= 0 && s.outline < 9:
			return s.outline + 1
		case s.outline >= 9:
			return -1
		case s.name == "title":
			return 0
		}
		if m := headingName.FindStringSubmatch(s.name); m != nil {
			return int(m[1][0] - '0')
		}
		id = s.basedOn
	}
	return -1
}

// styleNumbering returns the list numbering a style gives its paragraphs.
func (r *docx) styleNumbering(id string) (numID, level string) {
	for i := 0; i < 32 && id != ""; i++ {
		s, ok := r.styles[id]
		if !ok {
			break
		}
		if s.numID != "" {
			return s.numID, s.level
		}
		id = s.basedOn
	}
	return "", ""
}

// numbering holds the list definitions of numbering.xml.
type numbering struct {
	// abstract maps a numbering instance to its abstract definition's
	// levels; override to levels it redefines.
	abstract map[string]map[int]numLevel
	override map[string]map[int]numLevel
}

type numLevel struct {
	format string
	start  int
}

func (r *docx) loadNumbering(part string) error {
	r.numbering = numbering{abstract: map[string]map[int]numLevel{}, override: map[string]map[int]numLevel{}}
	if part == "" {
		return nil
	}
	root, err := parsePart(r.a, part)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	levels := func(n *xmlsafe.Node) map[int]numLevel {
		m := map[int]numLevel{}
		for _, l := range n.Children("lvl") {
			i, err := strconv.Atoi(l.A("ilvl"))
			if err != nil || i < 0 || i > 8 {
				continue
			}
			start, err := strconv.Atoi(l.Child("start").A("val"))
			if err != nil {
				start = 1
			}
			m[i] = numLevel{format: l.Child("numFmt").A("val"), start: start}
		}
		return m
	}
	abstracts := map[string]map[int]numLevel{}
	for _, an := range root.Children("abstractNum") {
		abstracts[an.A("abstractNumId")] = levels(an)
	}
	for _, n := range root.Children("num") {
		id := n.A("numId")
		r.numbering.abstract[id] = abstracts[n.Child("abstractNumId").A("val")]
		over := map[int]numLevel{}
		for _, o := range n.Children("lvlOverride") {
			if l := o.Child("lvl"); l != nil {
				for k, v := range levels(o) {
					over[k] = v
				}
			}
		}
		r.numbering.override[id] = over
	}
	return nil
}

// marker returns the list marker of the next item of numbering instance
// numID at level, advancing its counter: "-" for bullets, "3." or "c."
// for numbered items, "" for none.
func (r *docx) marker(numID string, level int) string {
	level = min(max(level, 0), 8)
	l, ok := r.numbering.override[numID][level]
	if !ok {
		l, ok = r.numbering.abstract[numID][level]
	}
	if !ok {
		// A list the numbering part does not define is bulleted, and
		// needs no counter: there are as many such lists as a body
		// makes up.
		return "-"
	}
	c := r.counters[numID]
	if c == nil {
		c = make([]int, 9)
		r.counters[numID] = c
	}
	if c[level] == 0 {
		c[level] = l.start
	} else {
		c[level]++
	}
	for i := level + 1; i < len(c); i++ {
		c[i] = 0
	}
	n := c[level]
	switch l.format {
	case "bullet":
		return "-"
	case "none":
		return ""
	case "lowerLetter":
		return textdoc.Letters(n, 'a') + "."
	case "upperLetter":
		return textdoc.Letters(n, 'A') + "."
	case "lowerRoman":
		return strings.ToLower(textdoc.Roman(n)) + "."
	case "upperRoman":
		return textdoc.Roman(n) + "."
	}
	return strconv.Itoa(n) + "."
}

// blockKind is the kind of a block of a document.
type blockKind int

const (
	blockPara blockKind = iota
	blockHeading
	blockItem
	blockTable
)

// block is a paragraph, a heading, a list item or a table, complete.
type block struct {
	kind blockKind
	// level is a heading's level or a list item's nesting.
	level  int
	marker string
	text   string
	rows   [][]string
	// note is the footnote or endnote the block belongs to, in a notes
	// part: "footnote:ID".
	note string
}

// para is a paragraph being read.
type para struct {
	text    strings.Builder
	style   string
	outline int
	numID   string
	level   string
}

// walker reads one part (the body, a notes part, a header) as blocks.
type walker struct {
	r    *docx
	d    *xmlsafe.Decoder
	t    *ticker
	emit func(block) error
	// paras are the open paragraphs: more than one inside a text box.
	paras []*para
	// deferred holds the blocks of text boxes, written after the
	// paragraph holding them.
	deferred []block
	tables   textdoc.Tables
	// fields holds, for each open field, whether its code (not its
	// result) is being read.
	fields []bool
	hidden bool
	inText int
	note   string
	// read counts the bytes of text read, which paragraphs and tables
	// hold until they are complete.
	read int64
}

// walk reads part and hands its blocks, in order, to emit.
func (r *docx) walk(t *ticker, part string, emit func(block) error) error {
	d, done, err := openPart(r.a, part)
	if err != nil {
		return err
	}
	defer done()
	w := &walker{r: r, d: d, t: t, emit: emit}
	return w.run()
}

func (w *walker) run() error {
	for {
		if err := w.t.tick(); err != nil {
			return err
		}
		tok, err := w.d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if err := w.start(t); err != nil {
				return err
			}
		case xml.EndElement:
			if err := w.end(t.Name.Local); err != nil {
				return err
			}
		case xml.CharData:
			if w.inText > 0 && len(w.paras) > 0 && !w.hidden && !w.inFieldCode() {
				w.paras[len(w.paras)-1].text.Write(t)
				w.read += int64(len(t))
			}
		}
		if w.read > w.r.limit {
			return textdoc.TooLarge(w.r.limit)
		}
	}
}

func attr(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

func (w *walker) add(s string) {
	if len(w.paras) > 0 && !w.hidden && !w.inFieldCode() {
		w.paras[len(w.paras)-1].text.WriteString(s)
		w.read += int64(len(s))
	}
}

func (w *walker) inFieldCode() bool {
	for _, code := range w.fields {
		if code {
			return true
		}
	}
	return false
}

func (w *walker) start(t xml.StartElement) error {
	switch t.Name.Local {
	case "p":
		w.paras = append(w.paras, &para{outline: -1})
	case "pPr":
		return w.readPPr()
	case "rPr":
		return w.readRPr()
	case "r":
		w.hidden = false
	case "t":
		w.inText++
	case "tab", "ptab":
		w.add("\t")
	case "br", "cr":
		w.add("\n")
	case "noBreakHyphen":
		w.add("-")
	case "fldChar":
		switch attr(t, "fldCharType") {
		case "begin":
			w.fields = append(w.fields, true)
		case "separate":
			if n := len(w.fields); n > 0 {
				w.fields[n-1] = false
			}
		case "end":
			if n := len(w.fields); n > 0 {
				w.fields = w.fields[:n-1]
			}
		}
	case "footnoteReference", "endnoteReference":
		kind := strings.TrimSuffix(t.Name.Local, "Reference")
		if len(w.paras) > 0 && !w.hidden {
			w.r.notes = append(w.r.notes, kind+":"+attr(t, "id"))
			w.add("[" + strconv.Itoa(len(w.r.notes)) + "]")
		}
	case "tbl":
		w.tables.Open()
	case "tr":
		w.tables.StartRow()
	case "tc":
		w.tables.StartCell()
	case "footnote", "endnote":
		switch attr(t, "type") {
		case "separator", "continuationSeparator", "continuationNotice":
			return w.d.Skip()
		}
		w.note = t.Name.Local + ":" + attr(t, "id")
	case "del", "moveFrom", "delText", "instrText", "sdtPr", "Fallback", "tblPr", "trPr", "tcPr",
		"sectPr", "commentRangeStart", "fldData", "delInstrText":
		// Deleted or moved-away text, field codes, a content control's
		// placeholder settings, and the fallback copy of content given
		// twice (mc:AlternateContent) are not the document's text.
		return w.d.Skip()
	}
	return nil
}

// readPPr reads a paragraph's properties up to their end: style, list
// numbering and outline level.
func (w *walker) readPPr() error {
	var p *para
	if n := len(w.paras); n > 0 {
		p = w.paras[n-1]
	}
	for depth := 1; depth > 0; {
		tok, err := w.d.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if p == nil {
				continue
			}
			switch t.Name.Local {
			case "pStyle":
				p.style = attr(t, "val")
			case "numId":
				p.numID = attr(t, "val")
			case "ilvl":
				p.level = attr(t, "val")
			case "outlineLvl":
				if n, err := strconv.Atoi(attr(t, "val")); err == nil {
					p.outline = n
				}
			}
		case xml.EndElement:
			depth--
		}
	}
	return nil
}

// readRPr reads a run's properties up to their end, noting hidden text.
func (w *walker) readRPr() error {
	for depth := 1; depth > 0; {
		tok, err := w.d.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch t.Name.Local {
			case "vanish", "webHidden", "specVanish":
				v := strings.ToLower(attr(t, "val"))
				w.hidden = v != "0" && v != "false" && v != "off"
			}
		case xml.EndElement:
			depth--
		}
	}
	return nil
}

func (w *walker) end(local string) error {
	switch local {
	case "p":
		n := len(w.paras)
		if n == 0 {
			return nil
		}
		p := w.paras[n-1]
		w.paras = w.paras[:n-1]
		return w.finishPara(p)
	case "t":
		if w.inText > 0 {
			w.inText--
		}
	case "tc":
		w.tables.EndCell()
	case "tr":
		w.tables.EndRow()
	case "tbl":
		// A table in a cell becomes that cell's text, row by row.
		rows, outer := w.tables.Close()
		switch {
		case !outer:
		case len(w.paras) > 0:
			w.deferred = append(w.deferred, block{kind: blockTable, rows: rows, note: w.note})
		default:
			return w.emit(block{kind: blockTable, rows: rows, note: w.note})
		}
	case "footnote", "endnote":
		w.note = ""
	}
	return nil
}

// finishPara hands on a paragraph just closed: to the cell it is in, to
// the paragraph holding its text box, or as a block.
func (w *walker) finishPara(p *para) error {
	text := strings.TrimSpace(p.text.String())
	bl := w.r.classify(p, text)
	bl.note = w.note
	switch {
	case len(w.paras) > 0:
		if text != "" {
			w.deferred = append(w.deferred, bl)
		}
		return nil
	case w.tables.In():
		if text != "" {
			w.tables.Add(blockText(bl))
		}
		for _, d := range w.deferred {
			w.tables.Add(blockText(d))
		}
		w.deferred = nil
		return nil
	}
	if text != "" {
		if err := w.emit(bl); err != nil {
			return err
		}
	}
	deferred := w.deferred
	w.deferred = nil
	for _, d := range deferred {
		if err := w.emit(d); err != nil {
			return err
		}
	}
	return nil
}

// blockText is a block's text on one line, for a table cell.
func blockText(bl block) string {
	switch bl.kind {
	case blockItem:
		return strings.TrimSpace(bl.marker + " " + bl.text)
	case blockTable:
		var rows []string
		for _, r := range bl.rows {
			rows = append(rows, strings.Join(textdoc.NonEmpty(r), " | "))
		}
		return strings.Join(rows, " ")
	}
	return bl.text
}

// classify makes a paragraph a heading, a list item or a plain paragraph.
func (r *docx) classify(p *para, text string) block {
	style := p.style
	if style == "" {
		style = r.defaultStyle
	}
	level := r.headingLevel(style)
	switch {
	case p.outline >= 0 && p.outline < 9:
		level = p.outline + 1
	case p.outline >= 9:
		level = -1
	}
	if level >= 0 {
		return block{kind: blockHeading, level: level, text: text}
	}
	numID, ilvl := p.numID, p.level
	if numID == "" {
		numID, ilvl = r.styleNumbering(style)
	}
	if numID != "" && numID != "0" && text != "" {
		lvl, _ := strconv.Atoi(ilvl)
		return block{kind: blockItem, level: lvl, marker: r.marker(numID, lvl), text: text}
	}
	return block{kind: blockPara, text: text}
}

// writeBody writes a block of the body.
func (r *docx) writeBody(bl block) error {
	writeBlock(r.b, &r.outline, bl)
	return r.b.Err()
}

// writeBlock writes a block, a heading starting a span with its path.
func writeBlock(b *textdoc.Builder, o *textdoc.Outline, bl block) {
	switch bl.kind {
	case blockHeading:
		path := o.Enter(bl.level, bl.text)
		b.Locate(textdoc.Location{Headings: path}, false)
		b.Heading(max(bl.level, 1), bl.text)
	case blockItem:
		line := strings.Repeat("  ", min(max(bl.level, 0), 8))
		if bl.marker != "" {
			line += bl.marker + " "
		}
		b.Line(line + strings.ReplaceAll(bl.text, "\n", " "))
	case blockTable:
		b.Table(bl.rows)
	default:
		b.Block(bl.text)
	}
}

// writeNotes writes the footnotes and endnotes referenced from the body,
// in the order of their references.
func (r *docx) writeNotes(t *ticker, rels []rel) error {
	if len(r.notes) == 0 {
		return nil
	}
	collect := func(bl block) error {
		if bl.note != "" {
			r.noteText[bl.note] = append(r.noteText[bl.note], blockText(bl))
		}
		return nil
	}
	for _, kind := range []string{"footnotes", "endnotes"} {
		if part := first(rels, kind); part != "" && r.a.Has(part) {
			if err := r.walk(t, part, collect); err != nil {
				return err
			}
		}
	}
	r.b.Locate(textdoc.Location{Headings: []string{"Notes"}}, false)
	r.b.EndBlock()
	for i, key := range r.notes {
		if text := strings.Join(r.noteText[key], " "); text != "" {
			r.b.Block(fmt.Sprintf("[%d] %s", i+1, text))
		}
	}
	return r.b.Err()
}

// writeHeadersFooters writes the distinct paragraphs of the page headers
// and footers once, whatever the number of sections and pages they
// repeat on.
func (r *docx) writeHeadersFooters(t *ticker, rels []rel) error {
	seen := map[string]bool{}
	var texts []string
	collect := func(bl block) error {
		s := strings.TrimSpace(blockText(bl))
		// A page number alone says nothing.
		if s != "" && !seen[s] && strings.IndexFunc(s, unicode.IsLetter) >= 0 {
			seen[s] = true
			texts = append(texts, s)
		}
		return nil
	}
	for _, rl := range rels {
		if rl.External || !(rl.is("header") || rl.is("footer")) || !r.a.Has(rl.Target) {
			continue
		}
		if err := r.walk(t, rl.Target, collect); err != nil {
			return err
		}
	}
	if len(texts) == 0 {
		return nil
	}
	r.b.Locate(textdoc.Location{Headings: []string{"Headers and footers"}}, false)
	for _, s := range texts {
		r.b.Block(s)
	}
	return r.b.Err()
}
