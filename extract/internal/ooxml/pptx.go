package ooxml

import (
	"context"
	"strconv"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
	"github.com/mcpsearch/mcpsearch/extract/internal/xmlsafe"
)

// ReadPPTX returns the text of a PowerPoint presentation, slide by slide in
// presentation order (the slide list of presentation.xml, not the part
// names): each slide as a heading "Slide N: title", then its text boxes and
// placeholders (body paragraphs as list items), its tables as Markdown
// tables, and its speaker notes. Each slide is a span giving its number and
// title.
func ReadPPTX(ctx context.Context, a *archive.Archive, opts textdoc.Options) (*textdoc.Document, error) {
	main, err := mainPart(a, "ppt/presentation.xml")
	if err != nil {
		return nil, err
	}
	rels, err := readRels(a, main)
	if err != nil {
		return nil, err
	}
	pres, err := parsePart(a, main)
	if err != nil {
		return nil, err
	}
	ids := byID(rels)
	b := textdoc.NewBuilder(opts.MaxTextBytes)
	var slides []string
	for _, s := range pres.Child("sldIdLst").Children("sldId") {
		if rl, ok := ids[s.AIn("/relationships", "id")]; ok && rl.is("slide") && !rl.External {
			slides = append(slides, rl.Target)
		}
	}
	for i, part := range slides {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := writeSlide(a, b, i+1, part); err != nil {
			return nil, err
		}
		if err := b.Err(); err != nil {
			return nil, err
		}
	}
	doc, err := b.Document()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(doc.Text) == "" {
		return nil, noText(a, "presentation")
	}
	return doc, nil
}

// writeSlide writes slide number n from part, with its notes.
func writeSlide(a *archive.Archive, b *textdoc.Builder, n int, part string) error {
	if !a.Has(part) {
		return nil
	}
	root, err := parsePart(a, part)
	if err != nil {
		return err
	}
	var s slideText
	s.shapes(root.Child("cSld").Child("spTree"), false)
	s.guessTitle()
	rels, err := readRels(a, part)
	if err != nil {
		return err
	}
	var notes slideText
	if p := first(rels, "notesSlide"); p != "" && a.Has(p) {
		nroot, err := parsePart(a, p)
		if err != nil {
			return err
		}
		notes.shapes(nroot.Child("cSld").Child("spTree"), true)
	}
	title := ""
	if len(s.title) > 0 {
		title = strings.Join(strings.Fields(strings.Join(s.title, " ")), " ")
	}
	b.Locate(textdoc.Location{SlideStart: n, SlideEnd: n, SlideTitle: title}, false)
	heading := "Slide " + strconv.Itoa(n)
	if title != "" {
		heading += ": " + title
	}
	b.Heading(2, heading)
	for _, bl := range s.blocks {
		writeSlideBlock(b, bl)
	}
	if len(notes.blocks) > 0 {
		b.EndBlock()
		b.Line("Notes:")
		for _, bl := range notes.blocks {
			writeSlideBlock(b, bl)
		}
	}
	return nil
}

func writeSlideBlock(b *textdoc.Builder, bl block) {
	switch bl.kind {
	case blockTable:
		b.Table(bl.rows)
	case blockItem:
		b.Line(strings.Repeat("  ", bl.level) + bl.marker + " " + bl.text)
	default:
		b.Block(bl.text)
	}
}

// slideText gathers a slide's title and blocks.
type slideText struct {
	title  []string
	blocks []block
	// boxes are the text shapes that are not placeholders, for guessing
	// the title of a slide that has no title placeholder.
	boxes []textBox
}

// textBox is a text shape: its vertical offset and the block it wrote.
type textBox struct {
	y     int64
	block int
	paras int
}

// guessTitle takes for title, on a slide without a title placeholder,
// the text box at the top when it holds one short paragraph, as slides
// made from a blank layout have it.
func (s *slideText) guessTitle() {
	if len(s.title) > 0 || len(s.boxes) == 0 {
		return
	}
	top := s.boxes[0]
	for _, b := range s.boxes[1:] {
		if b.y < top.y {
			top = b
		}
	}
	if top.y < 0 || top.paras != 1 || top.block >= len(s.blocks) {
		return
	}
	bl := s.blocks[top.block]
	if bl.kind != blockPara || len([]rune(bl.text)) > 120 {
		return
	}
	s.title = []string{bl.text}
	s.blocks = append(s.blocks[:top.block], s.blocks[top.block+1:]...)
}

// placeholders whose text is not the slide's own: the date, footer and
// slide number repeated from the master, and the slide image on a notes
// page.
var skippedPlaceholders = map[string]bool{"dt": true, "ftr": true, "sldNum": true, "hdr": true, "sldImg": true}

// shapes reads the shapes of a shape tree in order: text shapes, tables,
// groups and the chosen branch of alternate content.
func (s *slideText) shapes(tree *xmlsafe.Node, notes bool) {
	if tree == nil {
		return
	}
	for _, k := range tree.Kids {
		switch k.Name.Local {
		case "sp":
			ph := k.Child("nvSpPr").Child("nvPr").Child("ph")
			typ := ph.A("type")
			if ph == nil {
				typ = "none"
			}
			if skippedPlaceholders[typ] {
				continue
			}
			// A notes page holds the notes in its body placeholder, or in
			// a plain text box.
			if notes && typ != "body" && typ != "none" {
				continue
			}
			paras := paragraphs(k.Child("txBody"))
			if typ == "title" || typ == "ctrTitle" {
				for _, p := range paras {
					s.title = append(s.title, p.text)
				}
				continue
			}
			if ph == nil && !notes && len(paras) > 0 {
				y, err := strconv.ParseInt(k.Child("spPr").Child("xfrm").Child("off").A("y"), 10, 64)
				if err != nil {
					y = -1
				}
				s.boxes = append(s.boxes, textBox{y: y, block: len(s.blocks), paras: len(paras)})
			}
			// Body placeholders are bulleted lists by default.
			bulleted := ph != nil && (typ == "" || typ == "body" || typ == "obj") && !notes
			var counters [9]int
			for _, p := range paras {
				switch {
				case p.numbered:
					counters[p.level]++
					for i := p.level + 1; i < len(counters); i++ {
						counters[i] = 0
					}
					s.blocks = append(s.blocks, block{kind: blockItem, level: p.level, text: p.text, marker: strconv.Itoa(counters[p.level]) + "."})
				case (bulleted && !p.noBullet) || p.bullet:
					s.blocks = append(s.blocks, block{kind: blockItem, level: p.level, text: p.text, marker: "-"})
				default:
					counters = [9]int{}
					s.blocks = append(s.blocks, block{kind: blockPara, text: p.text})
				}
			}
		case "graphicFrame":
			if tbl := k.Find("tbl"); tbl != nil {
				s.blocks = append(s.blocks, block{kind: blockTable, rows: tableRows(tbl)})
			}
		case "grpSp":
			s.shapes(k, notes)
		case "AlternateContent":
			if c := k.Child("Choice"); c != nil {
				s.shapes(c, notes)
			} else {
				s.shapes(k.Child("Fallback"), notes)
			}
		}
	}
}

// drawingPara is a DrawingML paragraph's text and list settings.
type drawingPara struct {
	text                       string
	level                      int
	bullet, noBullet, numbered bool
}

// paragraphs returns the non-empty paragraphs of a DrawingML text body.
func paragraphs(body *xmlsafe.Node) []drawingPara {
	var out []drawingPara
	for _, p := range body.Children("p") {
		var b strings.Builder
		for _, k := range p.Kids {
			switch k.Name.Local {
			case "r", "fld":
				b.WriteString(k.Child("t").AllText())
			case "br":
				b.WriteString("\n")
			}
		}
		text := strings.TrimSpace(b.String())
		if text == "" {
			continue
		}
		dp := drawingPara{text: text}
		if ppr := p.Child("pPr"); ppr != nil {
			dp.level, _ = strconv.Atoi(ppr.A("lvl"))
			dp.level = min(max(dp.level, 0), 8)
			dp.noBullet = ppr.Child("buNone") != nil
			dp.bullet = ppr.Child("buChar") != nil
			dp.numbered = ppr.Child("buAutoNum") != nil
		}
		out = append(out, dp)
	}
	return out
}

// tableRows returns a DrawingML table's rows, each cell's paragraphs
// joined.
func tableRows(tbl *xmlsafe.Node) [][]string {
	var rows [][]string
	for _, tr := range tbl.Children("tr") {
		var row []string
		for _, tc := range tr.Children("tc") {
			if tc.A("hMerge") == "1" || tc.A("vMerge") == "1" {
				row = append(row, "")
				continue
			}
			var texts []string
			for _, p := range paragraphs(tc.Child("txBody")) {
				texts = append(texts, p.text)
			}
			row = append(row, strings.Join(texts, " "))
		}
		rows = append(rows, row)
	}
	return rows
}
