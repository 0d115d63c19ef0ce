// Package rtf reads the text of RTF documents: paragraphs, table rows,
// headings (from \outlinelevel or a "heading N" style), and footnotes at
// the end. Fonts, colours, pictures, objects, field instructions and other
// destinations are skipped; \'hh escapes are decoded with the document's
// code page and \uN escapes as Unicode.
package rtf

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// maxDepth bounds group nesting.
const maxDepth = 512

// skipped are the destinations whose content is not text.
var skipped = map[string]bool{
	"fonttbl": true, "colortbl": true, "info": true, "pict": true, "objdata": true, "objclass": true, "objname": true,
	"themedata": true, "colorschememapping": true, "datastore": true, "latentstyles": true,
	"xmlnstbl": true, "listtable": true, "listoverridetable": true, "rsidtbl": true,
	"generator": true, "filetbl": true, "revtbl": true, "mmathPr": true, "pgdsctbl": true,
	"fldinst": true, "header": true, "headerl": true, "headerr": true, "headerf": true,
	"footer": true, "footerl": true, "footerr": true, "footerf": true, "private": true,
	"bkmkstart": true, "bkmkend": true, "xe": true, "tc": true, "shpinst": true, "nonshppict": true,
}

// headingStyle matches the names of heading styles.
var headingStyle = regexp.MustCompile(`(?i)^heading\s*([1-9])$`)

// state is what a group sets and its end restores.
type state struct {
	skip   bool
	uc     int
	hidden bool
	// dest is the destination the group writes to: text, a footnote, the
	// stylesheet.
	dest int
}

const (
	destText = iota
	destNote
	destStyle
)

type reader struct {
	data  []byte
	pos   int
	stack []state
	cur   state
	// skipChars counts the characters left to skip after a \u escape.
	skipChars int
	// para is the paragraph being read; pending holds \'hh bytes to decode.
	para    strings.Builder
	pending []byte
	dec     *encoding.Decoder
	// level is the paragraph's heading level, -1 for none; style its
	// style number.
	level, style int
	inTable      bool
	row          []string
	// rows counts the rows of the table being written.
	rows       int
	styles     map[int]int
	styleName  strings.Builder
	styleNum   int
	styleLevel int
	notes      []string
	note       strings.Builder
	// high is the first half of a surrogate pair.
	high rune
	// read counts the bytes of text read; limit bounds them.
	read, limit int64
	b           *textdoc.Builder
	outline     textdoc.Outline
}

// Read returns the text of an RTF document.
func Read(ctx context.Context, data []byte, opts textdoc.Options) (*textdoc.Document, error) {
	r := &reader{data: data, cur: state{uc: 1}, level: -1, styles: map[int]int{}, b: textdoc.NewBuilder(opts.MaxTextBytes),
		limit: opts.MaxTextBytes}
	r.dec = charmap.Windows1252.NewDecoder()
	for n := 0; r.pos < len(r.data); n++ {
		if n%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := r.b.Err(); err != nil {
				return nil, err
			}
			if r.read > r.limit {
				return nil, textdoc.TooLarge(r.limit)
			}
		}
		if err := r.step(); err != nil {
			return nil, err
		}
	}
	r.endPara()
	if len(r.notes) > 0 {
		r.b.Locate(textdoc.Location{Headings: []string{"Notes"}}, false)
		for i, n := range r.notes {
			if n != "" {
				r.b.Block(fmt.Sprintf("[%d] %s", i+1, n))
			}
		}
	}
	doc, err := r.b.Document()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(doc.Text) == "" {
		return nil, fmt.Errorf("%w: the RTF document holds no text", textdoc.ErrNoText)
	}
	return doc, nil
}

func (r *reader) step() error {
	c := r.data[r.pos]
	switch c {
	case '{':
		r.flushBytes()
		r.pos++
		if len(r.stack) >= maxDepth {
			return fmt.Errorf("%w: RTF groups nested deeper than %d levels", textdoc.ErrTooLarge, maxDepth)
		}
		r.stack = append(r.stack, r.cur)
		// A group starting with \* is a destination a reader may ignore.
		if strings.HasPrefix(string(r.data[r.pos:min(r.pos+2, len(r.data))]), `\*`) {
			r.cur.skip = true
		}
	case '}':
		r.flushBytes()
		r.pos++
		r.endGroup()
	case '\\':
		r.control()
	case '\r', '\n':
		r.pos++
	default:
		r.pos++
		if c >= 0x80 {
			// Eight-bit text, which RTF should escape, is in the code
			// page too.
			if !r.cur.skip && !r.cur.hidden {
				r.pending = append(r.pending, c)
			}
			return nil
		}
		r.flushBytes()
		r.text(string(rune(c)))
	}
	return nil
}

// endGroup restores the state of the enclosing group, finishing a footnote
// or a style as its group closes.
func (r *reader) endGroup() {
	if len(r.stack) == 0 {
		return
	}
	prev := r.stack[len(r.stack)-1]
	r.stack = r.stack[:len(r.stack)-1]
	if r.cur.dest == destNote && prev.dest != destNote {
		r.notes[len(r.notes)-1] = strings.TrimSpace(strings.Join(strings.Fields(r.note.String()), " "))
		r.note.Reset()
	}
	if r.cur.dest == destStyle && prev.dest == destStyle {
		r.endStyle()
	}
	r.cur = prev
}

// control reads a control word or symbol.
func (r *reader) control() {
	r.pos++
	if r.pos >= len(r.data) {
		return
	}
	c := r.data[r.pos]
	if !isLetter(c) {
		r.pos++
		switch c {
		case '\'':
			if r.pos+2 <= len(r.data) {
				if v, err := strconv.ParseUint(string(r.data[r.pos:r.pos+2]), 16, 8); err == nil {
					r.pos += 2
					if r.skipChars > 0 {
						r.skipChars--
						return
					}
					if !r.cur.skip && !r.cur.hidden {
						r.pending = append(r.pending, byte(v))
					}
					return
				}
			}
		case '\\', '{', '}':
			r.flushBytes()
			r.text(string(c))
		case '~':
			r.flushBytes()
			r.text("\u00a0")
		case '_':
			r.flushBytes()
			r.text("-")
		case '\r', '\n':
			r.flushBytes()
			r.endPara()
		case '*':
			r.cur.skip = true
		}
		return
	}
	start := r.pos
	for r.pos < len(r.data) && isLetter(r.data[r.pos]) && r.pos-start < 32 {
		r.pos++
	}
	word := string(r.data[start:r.pos])
	param, hasParam := 0, false
	pstart := r.pos
	if r.pos < len(r.data) && r.data[r.pos] == '-' {
		r.pos++
	}
	for r.pos < len(r.data) && r.data[r.pos] >= '0' && r.data[r.pos] <= '9' && r.pos-pstart < 11 {
		r.pos++
	}
	if r.pos > pstart {
		if v, err := strconv.Atoi(string(r.data[pstart:r.pos])); err == nil {
			param, hasParam = v, true
		}
	}
	if r.pos < len(r.data) && r.data[r.pos] == ' ' {
		r.pos++
	}
	if word != "u" {
		r.flushBytes()
	}
	r.word(word, param, hasParam)
}

func isLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// word acts on a control word.
func (r *reader) word(word string, param int, hasParam bool) {
	if skipped[word] {
		r.cur.skip = true
		return
	}
	switch word {
	case "bin":
		// Binary data follows: skip it.
		if hasParam && param > 0 {
			r.pos = min(r.pos+param, len(r.data))
		}
	case "ansicpg":
		if dec := decoder(param); dec != nil {
			r.dec = dec
		}
	case "uc":
		if hasParam && param >= 0 {
			r.cur.uc = min(param, 8)
		}
	case "u":
		if hasParam {
			if param < 0 {
				param += 65536
			}
			r.unicode(rune(param))
			r.skipChars = r.cur.uc
		}
	case "stylesheet":
		r.cur.dest = destStyle
		r.cur.skip = false
	case "footnote":
		if r.cur.dest == destText {
			r.notes = append(r.notes, "")
			r.textRaw("[" + strconv.Itoa(len(r.notes)) + "]")
			r.cur.dest, r.cur.skip = destNote, false
		}
	case "chftn":
		// The note's own number is written as [n] already.
	case "v":
		r.cur.hidden = !hasParam || param != 0
	case "par", "sect", "page":
		r.endPara()
	case "line":
		r.text("\n")
	case "tab":
		r.text("\t")
	case "emdash":
		r.text("—")
	case "endash":
		r.text("–")
	case "bullet":
		r.text("•")
	case "lquote":
		r.text("‘")
	case "rquote":
		r.text("’")
	case "ldblquote":
		r.text("“")
	case "rdblquote":
		r.text("”")
	case "pard":
		r.level, r.style = -1, 0
	case "outlinelevel":
		if r.cur.dest == destStyle {
			r.styleLevel = param + 1
		} else if hasParam && param >= 0 && param < 9 {
			r.level = param + 1
		}
	case "s":
		if r.cur.dest == destStyle {
			r.styleNum = param
		} else {
			r.style = param
		}
	case "trowd":
		r.inTable = true
	case "cell":
		r.row = append(r.row, strings.Join(strings.Fields(r.para.String()), " "))
		r.para.Reset()
	case "row":
		if r.cur.dest == destText && len(r.row) > 0 {
			if r.rows == 0 {
				r.b.EndBlock()
			}
			r.b.Line(textdoc.TableRow(r.row))
			if r.rows == 0 {
				r.b.Line(textdoc.TableRule(len(r.row)))
			}
			r.rows++
		}
		r.row, r.inTable = nil, false
	case "intbl":
		r.inTable = true
	}
}

// unicode writes a \u escape. Characters beyond the Basic Multilingual
// Plane come as two escapes, a surrogate pair.
func (r *reader) unicode(c rune) {
	if r.cur.skip || r.cur.hidden {
		return
	}
	switch {
	case c >= 0xd800 && c < 0xdc00:
		r.high = c
		return
	case c >= 0xdc00 && c < 0xe000 && r.high != 0:
		c = utf16.DecodeRune(r.high, c)
	}
	r.high = 0
	r.textRaw(string(c))
}

// flushBytes decodes the \'hh bytes gathered.
func (r *reader) flushBytes() {
	if len(r.pending) == 0 {
		return
	}
	s, err := r.dec.Bytes(r.pending)
	if err != nil {
		s = []byte(strings.ToValidUTF8(string(r.pending), "\uFFFD"))
	}
	r.pending = r.pending[:0]
	r.text(string(s))
}

// text writes s to the current destination unless the group is skipped.
func (r *reader) text(s string) {
	if r.skipChars > 0 {
		// The characters after a \u escape stand for readers that do not
		// know Unicode.
		r.skipChars--
		return
	}
	if r.cur.skip || r.cur.hidden {
		return
	}
	r.textRaw(s)
}

func (r *reader) textRaw(s string) {
	// Paragraphs, notes and styles hold their text until they end: what
	// was read bounds it.
	r.read += int64(len(s))
	switch r.cur.dest {
	case destNote:
		r.note.WriteString(s)
	case destStyle:
		r.styleName.WriteString(s)
	default:
		r.para.WriteString(s)
	}
}

// endStyle records a style of the stylesheet that is a heading.
func (r *reader) endStyle() {
	name := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(r.styleName.String()), ";"))
	level := r.styleLevel
	if m := headingStyle.FindStringSubmatch(name); m != nil {
		level, _ = strconv.Atoi(m[1])
	}
	if level > 0 {
		r.styles[r.styleNum] = level
	}
	r.styleName.Reset()
	r.styleNum, r.styleLevel = 0, 0
}

// endPara writes the paragraph read, as a heading when its outline level
// or style says so.
func (r *reader) endPara() {
	if r.cur.dest == destNote {
		r.note.WriteString(" ")
		return
	}
	if r.cur.dest != destText {
		return
	}
	if r.inTable {
		// A paragraph inside a cell: the cell ends it.
		r.para.WriteString(" ")
		return
	}
	text := strings.TrimSpace(r.para.String())
	r.para.Reset()
	if text == "" {
		return
	}
	if r.rows > 0 {
		// A paragraph outside a row ends the table.
		r.rows = 0
		r.b.EndBlock()
	}
	level := r.level
	if level < 0 {
		if l, ok := r.styles[r.style]; ok {
			level = l
		}
	}
	if level > 0 {
		path := r.outline.Enter(level, text)
		r.b.Locate(textdoc.Location{Headings: path}, false)
		r.b.Heading(level, text)
		return
	}
	r.b.Block(text)
}

// decoder returns the decoder of a Windows code page, nil for unknown ones.
func decoder(cp int) *encoding.Decoder {
	var e encoding.Encoding
	switch cp {
	case 437:
		e = charmap.CodePage437
	case 850:
		e = charmap.CodePage850
	case 866:
		e = charmap.CodePage866
	case 874:
		e = charmap.Windows874
	case 932:
		e = japanese.ShiftJIS
	case 936:
		e = simplifiedchinese.GBK
	case 949:
		e = korean.EUCKR
	case 950:
		e = traditionalchinese.Big5
	case 1250:
		e = charmap.Windows1250
	case 1251:
		e = charmap.Windows1251
	case 1252:
		e = charmap.Windows1252
	case 1253:
		e = charmap.Windows1253
	case 1254:
		e = charmap.Windows1254
	case 1255:
		e = charmap.Windows1255
	case 1256:
		e = charmap.Windows1256
	case 1257:
		e = charmap.Windows1257
	case 1258:
		e = charmap.Windows1258
	case 10000:
		e = charmap.Macintosh
	default:
		return nil
	}
	return e.NewDecoder()
}
