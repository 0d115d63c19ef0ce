package odf

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
	"github.com/mcpsearch/mcpsearch/extract/internal/xmlsafe"
)

// textWalker streams the body of a text document (office:text) into a
// Builder: headings (text:h, and paragraphs of the Title style) with their
// heading paths, paragraphs, list items with their markers, tables as
// Markdown tables, frames' text after the paragraph anchoring them, and
// notes as "[n]" with their text at the end. Tracked deletions,
// annotations, index sources and declarations are left out.
type textWalker struct {
	d       *xmlsafe.Decoder
	t       *ticker
	b       *textdoc.Builder
	st      *styles
	outline textdoc.Outline

	paras    []*textPara
	deferred []textBlock
	lists    []*textList
	// counters keeps the last number of each list style and level, for
	// lists that continue an earlier one.
	counters    map[string]int
	itemPending bool
	tables      textdoc.Tables
	notes       []string
	// noteStack holds the indexes in notes of the notes being read.
	noteStack []int
	// read counts the bytes of text read; limit bounds them.
	read, limit int64
}

type textPara struct {
	text strings.Builder
	// level is a heading's level: 0 for a title, -1 for no heading.
	level  int
	item   bool
	depth  int
	marker string
	// note is the number of notes open when the paragraph started: the
	// paragraph of a note body has one more than the paragraph citing it.
	note int
}

type textList struct {
	style string
	n     int
}

type textBlock struct {
	para  *textPara
	text  string
	table [][]string
}

func (w *textWalker) run() error {
	w.counters = map[string]int{}
	for depth := 1; depth > 0; {
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
			skip, err := w.start(t)
			if err != nil {
				return err
			}
			if skip {
				if err := w.d.Skip(); err != nil {
					return err
				}
				continue
			}
			depth++
		case xml.EndElement:
			depth--
			if err := w.end(t.Name.Local); err != nil {
				return err
			}
		case xml.CharData:
			w.add(string(t))
		}
		if err := w.b.Err(); err != nil {
			return err
		}
		if w.read > w.limit {
			// Paragraphs, tables and notes hold their text until they
			// end: what was read bounds it.
			return textdoc.TooLarge(w.limit)
		}
	}
	return nil
}

func attr(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

func (w *textWalker) add(s string) {
	if n := len(w.paras); n > 0 {
		w.paras[n-1].text.WriteString(s)
		w.read += int64(len(s))
	}
}

// start handles an element's start; skip asks to skip its content.
func (w *textWalker) start(t xml.StartElement) (skip bool, err error) {
	local := t.Name.Local
	switch {
	case strings.HasSuffix(local, "-source"), strings.HasSuffix(local, "-decls"):
		// The settings of an index, and variable declarations.
		return true, nil
	case (local == "title" || local == "desc") && strings.Contains(t.Name.Space, "svg"):
		return true, nil
	}
	switch local {
	case "h":
		level, err := strconv.Atoi(attr(t, "outline-level"))
		if err != nil || level < 1 {
			level = 1
		}
		w.openPara(min(level, 10))
	case "p":
		level := -1
		if w.st.isTitle(attr(t, "style-name")) {
			level = 0
		}
		w.openPara(level)
	case "list":
		style := attr(t, "style-name")
		if style == "" && len(w.lists) > 0 {
			style = w.lists[len(w.lists)-1].style
		}
		l := &textList{style: style}
		key := style + "/" + strconv.Itoa(len(w.lists)+1)
		if attr(t, "continue-numbering") == "true" || attr(t, "continue-list") != "" {
			l.n = w.counters[key]
		}
		w.lists = append(w.lists, l)
	case "list-item":
		if n := len(w.lists); n > 0 {
			l := w.lists[n-1]
			if v, err := strconv.Atoi(attr(t, "start-value")); err == nil {
				l.n = v - 1
			} else if l.n == 0 {
				l.n = w.st.startValue(l.style, n) - 1
			}
			l.n++
			// Only the lists of a style the styles define are numbered:
			// a body names as many others as it likes.
			if _, ok := w.st.lists[l.style]; ok {
				w.counters[l.style+"/"+strconv.Itoa(n)] = l.n
			}
		}
		w.itemPending = true
	case "list-header":
		w.itemPending = false
	case "s":
		w.add(strings.Repeat(" ", spaces(attr(t, "c"))))
	case "tab":
		w.add("\t")
	case "line-break":
		w.add("\n")
	case "note":
		w.notes = append(w.notes, "")
		w.add("[" + strconv.Itoa(len(w.notes)) + "]")
		w.noteStack = append(w.noteStack, len(w.notes)-1)
	case "note-citation", "tracked-changes", "annotation", "binary-data", "image":
		// The citation is written as [n]; deleted text, comments and
		// embedded data are not the document's text.
		return true, nil
	case "table":
		w.tables.Open()
	case "table-row":
		w.tables.StartRow()
	case "table-cell", "covered-table-cell":
		w.tables.StartCell()
	case "table-column", "table-columns", "table-header-columns":
		return true, nil
	}
	return false, nil
}

func (w *textWalker) openPara(level int) {
	p := &textPara{level: level, note: len(w.noteStack)}
	if w.itemPending && len(w.lists) > 0 {
		l := w.lists[len(w.lists)-1]
		p.item, p.depth = true, len(w.lists)
		p.marker = w.st.marker(l.style, len(w.lists), l.n)
		w.itemPending = false
	}
	w.paras = append(w.paras, p)
}

func (w *textWalker) end(local string) error {
	switch local {
	case "h", "p":
		n := len(w.paras)
		if n == 0 {
			return nil
		}
		p := w.paras[n-1]
		w.paras = w.paras[:n-1]
		return w.finish(p)
	case "list":
		if n := len(w.lists); n > 0 {
			w.lists = w.lists[:n-1]
		}
	case "list-item":
		w.itemPending = false
	case "note":
		if n := len(w.noteStack); n > 0 {
			w.noteStack = w.noteStack[:n-1]
		}
	case "table-cell", "covered-table-cell":
		w.tables.EndCell()
	case "table-row":
		w.tables.EndRow()
	case "table":
		rows, outer := w.tables.Close()
		switch {
		case !outer:
		case len(w.paras) > 0:
			w.deferred = append(w.deferred, textBlock{table: rows})
		default:
			w.write(textBlock{table: rows})
		}
	}
	return nil
}

// finish hands on a paragraph just closed: to its note, to the cell it is
// in, to the paragraph anchoring its frame, or to the text.
func (w *textWalker) finish(p *textPara) error {
	text := strings.TrimSpace(p.text.String())
	switch {
	case p.note > 0 && p.note <= len(w.noteStack):
		i := w.noteStack[p.note-1]
		w.notes[i] = strings.TrimSpace(w.notes[i] + " " + text)
		return nil
	case len(w.paras) > 0:
		if text != "" {
			w.deferred = append(w.deferred, textBlock{para: p, text: text})
		}
		return nil
	case w.tables.In():
		if text != "" {
			w.tables.Add(strings.TrimSpace(p.marker + " " + text))
		}
		for _, d := range w.deferred {
			w.tables.Add(d.text)
		}
		w.deferred = nil
		return nil
	}
	if text != "" {
		w.write(textBlock{para: p, text: text})
	}
	deferred := w.deferred
	w.deferred = nil
	for _, d := range deferred {
		w.write(d)
	}
	return nil
}

func (w *textWalker) write(bl textBlock) {
	switch {
	case bl.table != nil:
		w.b.Table(bl.table)
	case bl.para.level >= 0:
		path := w.outline.Enter(bl.para.level, bl.text)
		w.b.Locate(textdoc.Location{Headings: path}, false)
		w.b.Heading(max(bl.para.level, 1), bl.text)
	case bl.para.item:
		w.b.Line(strings.Repeat("  ", max(bl.para.depth-1, 0)) + bl.para.marker + " " + strings.ReplaceAll(bl.text, "\n", " "))
	default:
		w.b.Block(bl.text)
	}
}

// writeNotes writes the notes cited, in order, as "[n] text".
func (w *textWalker) writeNotes() error {
	if len(w.notes) == 0 {
		return nil
	}
	w.b.Locate(textdoc.Location{Headings: []string{"Notes"}}, false)
	w.b.EndBlock()
	for i, n := range w.notes {
		if n != "" {
			w.b.Block(fmt.Sprintf("[%d] %s", i+1, n))
		}
	}
	return w.b.Err()
}
