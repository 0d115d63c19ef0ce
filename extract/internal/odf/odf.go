// Package odf reads OpenDocument files: text (ODT), presentations (ODP)
// and spreadsheets (ODS), as LibreOffice and others write them. The body
// of content.xml is streamed; sheets with rows or columns repeated a
// million times (as ODF marks the empty rows up to a sheet's end) cost
// nothing for their empty repeats.
package odf

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"unicode"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
	"github.com/mcpsearch/mcpsearch/extract/internal/xmlsafe"
)

// maxStylesPart bounds styles.xml, read whole.
const maxStylesPart = 64 << 20

// Read returns the text of the OpenDocument file in a, of whichever kind
// its body says: text, presentation or spreadsheet.
func Read(ctx context.Context, a *archive.Archive, opts textdoc.Options) (*textdoc.Document, error) {
	st := newStyles()
	stylesRoot, err := parseWhole(a, "styles.xml")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	st.add(stylesRoot.Child("styles"))
	st.add(stylesRoot.Child("automatic-styles"))

	rc, err := a.Open("content.xml")
	if err != nil {
		return nil, fmt.Errorf("%w: no content.xml: %w", textdoc.ErrCorrupt, err)
	}
	defer rc.Close()
	d := xmlsafe.NewDecoder(rc, "content.xml")
	b := textdoc.NewBuilder(opts.MaxTextBytes)
	t := &ticker{ctx: ctx}
	if err := readContent(d, t, b, st, stylesRoot, opts); err != nil {
		return nil, err
	}
	doc, err := b.Document()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(doc.Text) == "" {
		return nil, fmt.Errorf("%w: the document holds no text", textdoc.ErrNoText)
	}
	return doc, nil
}

// readContent reads content.xml: its automatic styles, then the body's
// document, whichever kind it is.
func readContent(d *xmlsafe.Decoder, t *ticker, b *textdoc.Builder, st *styles, stylesRoot *xmlsafe.Node, opts textdoc.Options) error {
	inBody := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		start, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch {
		case start.Name.Local == "automatic-styles" && !inBody:
			n, err := d.Subtree(start)
			if err != nil {
				return err
			}
			st.add(n)
		case start.Name.Local == "body":
			inBody = true
		case inBody && start.Name.Local == "text":
			w := &textWalker{d: d, t: t, b: b, st: st, limit: opts.MaxTextBytes}
			if err := w.run(); err != nil {
				return err
			}
			if err := w.writeNotes(); err != nil {
				return err
			}
			writeHeadersFooters(b, stylesRoot)
			return b.Err()
		case inBody && start.Name.Local == "spreadsheet":
			return readSpreadsheet(d, t, b, opts)
		case inBody && start.Name.Local == "presentation":
			n, err := d.Subtree(start)
			if err != nil {
				return err
			}
			return readPresentation(t, b, st, n)
		case inBody:
			return fmt.Errorf("%w: OpenDocument body of kind %s", textdoc.ErrUnsupported, start.Name.Local)
		}
	}
}

// parseWhole reads a small part whole; a missing part is fs.ErrNotExist.
func parseWhole(a *archive.Archive, name string) (*xmlsafe.Node, error) {
	if !a.Has(name) {
		return nil, fs.ErrNotExist
	}
	if a.Size(name) > maxStylesPart {
		return nil, fmt.Errorf("%w: %s inflates to more than %d bytes", textdoc.ErrTooLarge, name, maxStylesPart)
	}
	rc, err := a.Open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return xmlsafe.Parse(rc, name)
}

// ticker reports the context's end every few thousand tokens.
type ticker struct {
	ctx context.Context
	n   int
}

func (t *ticker) tick() error {
	t.n++
	if t.n%4096 == 0 {
		return t.ctx.Err()
	}
	return nil
}

// styles holds what the readers need of the document's styles: list
// styles (numbered or bulleted levels) and the parents of paragraph
// styles.
type styles struct {
	lists   map[string]map[int]listLevel
	parents map[string]string
	// paraLists names the list style a paragraph style applies.
	paraLists map[string]string
}

type listLevel struct {
	numbered       bool
	format         string
	prefix, suffix string
	start          int
}

func newStyles() *styles {
	return &styles{lists: map[string]map[int]listLevel{}, parents: map[string]string{}, paraLists: map[string]string{}}
}

// add reads the list and paragraph styles of a styles element.
func (s *styles) add(n *xmlsafe.Node) {
	if n == nil {
		return
	}
	for _, k := range n.Kids {
		switch k.Name.Local {
		case "list-style":
			levels := map[int]listLevel{}
			for _, l := range k.Kids {
				lvl, err := strconv.Atoi(l.A("level"))
				if err != nil {
					continue
				}
				switch l.Name.Local {
				case "list-level-style-number":
					start, err := strconv.Atoi(l.A("start-value"))
					if err != nil {
						start = 1
					}
					levels[lvl] = listLevel{numbered: l.A("num-format") != "", format: l.A("num-format"),
						prefix: l.A("num-prefix"), suffix: l.A("num-suffix"), start: start}
				case "list-level-style-bullet", "list-level-style-image":
					levels[lvl] = listLevel{}
				}
			}
			s.lists[k.A("name")] = levels
		case "style":
			name := k.A("name")
			if p := k.A("parent-style-name"); p != "" {
				s.parents[name] = p
			}
			if l := k.A("list-style-name"); l != "" {
				s.paraLists[name] = l
			}
		}
	}
}

// isTitle reports whether a paragraph style is, or derives from, the
// Title style.
func (s *styles) isTitle(name string) bool {
	for i := 0; i < 32 && name != ""; i++ {
		if name == "Title" {
			return true
		}
		name = s.parents[name]
	}
	return false
}

// marker returns the marker of item n (from 1 at the list's start value)
// at level of list style name.
func (s *styles) marker(name string, level, n int) string {
	l, ok := s.lists[name][level]
	if !ok || !l.numbered {
		return "-"
	}
	var num string
	switch l.format {
	case "a":
		num = textdoc.Letters(n, 'a')
	case "A":
		num = textdoc.Letters(n, 'A')
	case "i":
		num = strings.ToLower(textdoc.Roman(n))
	case "I":
		num = textdoc.Roman(n)
	default:
		num = strconv.Itoa(n)
	}
	return l.prefix + num + l.suffix
}

func (s *styles) startValue(name string, level int) int {
	if l, ok := s.lists[name][level]; ok && l.numbered {
		return l.start
	}
	return 1
}

// writeHeadersFooters writes the distinct paragraphs of the master pages'
// headers and footers, once each.
func writeHeadersFooters(b *textdoc.Builder, stylesRoot *xmlsafe.Node) {
	seen := map[string]bool{}
	var texts []string
	for _, mp := range stylesRoot.Child("master-styles").Children("master-page") {
		for _, k := range mp.Kids {
			switch k.Name.Local {
			case "header", "footer", "header-left", "footer-left", "header-first", "footer-first":
				for _, p := range k.FindAll("p") {
					s := strings.Join(strings.Fields(nodeText(p)), " ")
					// A page number alone says nothing.
					if s != "" && !seen[s] && strings.IndexFunc(s, unicode.IsLetter) >= 0 {
						seen[s] = true
						texts = append(texts, s)
					}
				}
			}
		}
	}
	if len(texts) == 0 {
		return
	}
	b.Locate(textdoc.Location{Headings: []string{"Headers and footers"}}, false)
	for _, s := range texts {
		b.Block(s)
	}
}

// nodeText returns the text of a paragraph of a tree: spaces, tabs and
// line breaks written out, notes, annotations and deleted text left out.
func nodeText(n *xmlsafe.Node) string {
	var b strings.Builder
	var walk func(*xmlsafe.Node)
	walk = func(n *xmlsafe.Node) {
		for _, k := range n.Kids {
			if k.IsText() {
				b.WriteString(k.Text)
				continue
			}
			switch k.Name.Local {
			case "s":
				b.WriteString(strings.Repeat(" ", spaces(k.A("c"))))
			case "tab":
				b.WriteString("\t")
			case "line-break":
				b.WriteString("\n")
			case "note", "annotation", "tracked-changes", "title", "desc", "binary-data", "note-citation":
			default:
				walk(k)
			}
		}
	}
	walk(n)
	return b.String()
}

// spaces reads the count of a text:s element, bounded.
func spaces(c string) int {
	n, err := strconv.Atoi(c)
	if err != nil || n < 1 {
		return 1
	}
	return min(n, 100)
}
