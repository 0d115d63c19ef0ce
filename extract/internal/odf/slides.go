package odf

import (
	"strconv"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
	"github.com/mcpsearch/mcpsearch/extract/internal/xmlsafe"
)

// skippedClasses are the presentation classes whose text is not the
// slide's own: the date, footer, header and slide number repeated from the
// master, and the slide image of a notes page.
var skippedClasses = map[string]bool{"date-time": true, "footer": true, "header": true, "page-number": true, "page": true}

// readPresentation writes the slides (draw:page) of a presentation in
// order, each a span with its number and title, and its notes.
func readPresentation(t *ticker, b *textdoc.Builder, st *styles, pres *xmlsafe.Node) error {
	n := 0
	for _, page := range pres.Children("page") {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		n++
		var s slide
		for _, k := range page.Kids {
			if k.Name.Local == "notes" {
				var notes slide
				notes.shapes(k, st, true)
				s.notes = append(s.notes, notes.lines...)
				continue
			}
			s.shape(k, st, false)
		}
		title := strings.Join(strings.Fields(strings.Join(s.title, " ")), " ")
		b.Locate(textdoc.Location{SlideStart: n, SlideEnd: n, SlideTitle: title}, false)
		heading := "Slide " + strconv.Itoa(n)
		if title != "" {
			heading += ": " + title
		}
		b.Heading(2, heading)
		for _, l := range s.lines {
			l.write(b)
		}
		if len(s.notes) > 0 {
			b.EndBlock()
			b.Line("Notes:")
			for _, l := range s.notes {
				l.write(b)
			}
		}
		if err := b.Err(); err != nil {
			return err
		}
	}
	return nil
}

// slide gathers a slide's title, lines and notes.
type slide struct {
	title []string
	lines []slideLine
	notes []slideLine
}

type slideLine struct {
	text  string
	item  bool
	depth int
	table [][]string
}

func (l slideLine) write(b *textdoc.Builder) {
	switch {
	case l.table != nil:
		b.Table(l.table)
	case l.item:
		b.Line(strings.Repeat("  ", max(l.depth-1, 0)) + "- " + l.text)
	default:
		b.Block(l.text)
	}
}

func (s *slide) shapes(n *xmlsafe.Node, st *styles, notes bool) {
	for _, k := range n.Kids {
		s.shape(k, st, notes)
	}
}

// shape reads one drawing shape: a frame (text box, table), a custom
// shape, or a group.
func (s *slide) shape(k *xmlsafe.Node, st *styles, notes bool) {
	class := k.A("class")
	if skippedClasses[class] {
		return
	}
	switch k.Name.Local {
	case "frame":
		// A notes page holds the notes in its notes frame, or in a plain
		// text frame.
		if notes && class != "notes" && class != "" {
			return
		}
		if tbl := k.Child("table"); tbl != nil {
			s.lines = append(s.lines, slideLine{table: tableRowsODF(tbl)})
			return
		}
		box := k.Child("text-box")
		if box == nil {
			return
		}
		if class == "title" {
			for _, p := range box.FindAll("p") {
				s.title = append(s.title, nodeText(p))
			}
			return
		}
		s.text(box, 0)
	case "custom-shape", "rect", "ellipse", "polygon", "line", "connector":
		if !notes {
			s.text(k, 0)
		}
	case "g":
		s.shapes(k, st, notes)
	}
}

// text reads the paragraphs and lists of a text container.
func (s *slide) text(n *xmlsafe.Node, depth int) {
	for _, k := range n.Kids {
		switch k.Name.Local {
		case "p", "h":
			if t := strings.TrimSpace(nodeText(k)); t != "" {
				s.lines = append(s.lines, slideLine{text: t, item: depth > 0, depth: depth})
			}
		case "list":
			for _, item := range k.Children("list-item") {
				s.text(item, depth+1)
			}
		}
	}
}

// tableRowsODF returns a table's rows, each cell's paragraphs joined.
func tableRowsODF(tbl *xmlsafe.Node) [][]string {
	var rows [][]string
	tbl.Walk(func(n *xmlsafe.Node) bool {
		if n.Name.Local != "table-row" {
			return n.Name.Local != "table"
		}
		var row []string
		for _, c := range n.Kids {
			if c.Name.Local == "table-cell" || c.Name.Local == "covered-table-cell" {
				var texts []string
				for _, p := range c.FindAll("p") {
					texts = append(texts, strings.TrimSpace(nodeText(p)))
				}
				row = append(row, strings.Join(texts, " "))
			}
		}
		rows = append(rows, row)
		return false
	})
	return rows
}
