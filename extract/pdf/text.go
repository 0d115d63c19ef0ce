package pdf

import (
	"context"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	lpdf "github.com/ledongthuc/pdf"
)

// matrix is a PDF transformation matrix [a b c d e f].
type matrix struct{ a, b, c, d, e, f float64 }

var identity = matrix{a: 1, d: 1}

// mul returns m×n: m applied first, then n.
func (m matrix) mul(n matrix) matrix {
	return matrix{
		a: m.a*n.a + m.b*n.c,
		b: m.a*n.b + m.b*n.d,
		c: m.c*n.a + m.d*n.c,
		d: m.c*n.b + m.d*n.d,
		e: m.e*n.a + m.f*n.c + n.e,
		f: m.e*n.b + m.f*n.d + n.f,
	}
}

// gstate is the part of the graphics state that places text.
type gstate struct {
	ctm, tm, tlm              matrix
	tc, tw, th, tl, tfs, rise float64
	font                      *pdfFont
}

func newGState() gstate {
	return gstate{ctm: identity, tm: identity, tlm: identity, th: 1}
}

// pageInterp runs the text and state operators of a content stream and feeds
// each glyph, with its position, to a textOut.
type pageInterp struct {
	ctx     context.Context
	fonts   *fontCache
	streams *streamCache
	out     *textOut
	g       gstate
	stack   []gstate
	ops     int
	forms   int
}

// maxGStateDepth bounds q nesting; deeper saves are ignored.
const maxGStateDepth = 1024

func num(args []operand, i int) float64 {
	if i < len(args) && args[i].kind == tokNumber {
		return args[i].num
	}
	return 0
}

func matrixArgs(args []operand) matrix {
	return matrix{num(args, 0), num(args, 1), num(args, 2), num(args, 3), num(args, 4), num(args, 5)}
}

func (p *pageInterp) run(content []byte, res *resources, depth int) {
	l := lexer{b: content}
	l.run(func(op string, args []operand) {
		p.ops++
		if p.ops&1023 == 0 {
			if err := p.ctx.Err(); err != nil {
				panic(abortError{err})
			}
		}
		switch op {
		case "q":
			if len(p.stack) < maxGStateDepth {
				p.stack = append(p.stack, p.g)
			}
		case "Q":
			if n := len(p.stack); n > 0 {
				p.g = p.stack[n-1]
				p.stack = p.stack[:n-1]
			}
		case "cm":
			if len(args) == 6 {
				p.g.ctm = matrixArgs(args).mul(p.g.ctm)
			}
		case "BT":
			p.g.tm, p.g.tlm = identity, identity
		case "Tc":
			p.g.tc = num(args, 0)
		case "Tw":
			p.g.tw = num(args, 0)
		case "Tz":
			p.g.th = num(args, 0) / 100
		case "TL":
			p.g.tl = num(args, 0)
		case "Ts":
			p.g.rise = num(args, 0)
		case "Tf":
			if len(args) == 2 {
				p.g.font = res.font(p.fonts, args[0].text)
				p.g.tfs = num(args, 1)
			}
		case "Td":
			p.moveLine(num(args, 0), num(args, 1))
		case "TD":
			p.g.tl = -num(args, 1)
			p.moveLine(num(args, 0), num(args, 1))
		case "Tm":
			if len(args) == 6 {
				p.g.tm = matrixArgs(args)
				p.g.tlm = p.g.tm
			}
		case "T*":
			p.moveLine(0, -p.g.tl)
		case "Tj":
			if len(args) >= 1 {
				p.show(args[len(args)-1].text)
			}
		case "'":
			p.moveLine(0, -p.g.tl)
			if len(args) >= 1 {
				p.show(args[len(args)-1].text)
			}
		case "\"":
			if len(args) == 3 {
				p.g.tw = num(args, 0)
				p.g.tc = num(args, 1)
				p.moveLine(0, -p.g.tl)
				p.show(args[2].text)
			}
		case "TJ":
			if len(args) >= 1 {
				for _, e := range args[len(args)-1].arr {
					switch e.kind {
					case tokString:
						p.show(e.text)
					case tokNumber:
						p.advance(-e.num / 1000 * p.g.tfs * p.g.th)
					}
				}
			}
		case "Do":
			if len(args) == 1 {
				p.doForm(res, args[0].text, depth)
				if res.images[args[0].text] {
					p.out.images++
				}
			}
		case "BI":
			p.out.images++
		}
	})
}

func (p *pageInterp) moveLine(tx, ty float64) {
	p.g.tlm = matrix{a: 1, d: 1, e: tx, f: ty}.mul(p.g.tlm)
	p.g.tm = p.g.tlm
}

// advance moves the text position tx units along the text line.
func (p *pageInterp) advance(tx float64) {
	p.g.tm.e += tx * p.g.tm.a
	p.g.tm.f += tx * p.g.tm.b
}

// doForm runs a form XObject's content in the current state, as painting it
// would. Images and unknown names are skipped without reading their data.
func (p *pageInterp) doForm(res *resources, name string, depth int) {
	if depth >= maxFormDepth || p.forms >= maxFormsPerPage {
		return
	}
	xo, data := res.form(name, p.streams)
	if len(data) == 0 {
		return
	}
	p.forms++
	saved, savedDepth := p.g, len(p.stack)
	if m := xo.Key("Matrix"); m.Len() == 6 {
		fm := matrix{m.Index(0).Float64(), m.Index(1).Float64(), m.Index(2).Float64(),
			m.Index(3).Float64(), m.Index(4).Float64(), m.Index(5).Float64()}
		p.g.ctm = fm.mul(p.g.ctm)
	}
	sub := res
	if r := xo.Key("Resources"); r.Kind() == lpdf.Dict {
		sub = newResources(r)
	}
	p.run(data, sub, depth+1)
	p.g = saved
	p.stack = p.stack[:savedDepth]
}

// show places the glyphs of one string.
func (p *pageInterp) show(s string) {
	f := p.g.font
	if f == nil {
		f = p.fonts.none
	}
	fs, th := p.g.tfs, p.g.th
	m := p.g.tm.mul(p.g.ctm)
	size := math.Abs(fs) * math.Hypot(m.c, m.d) * f.sizeScale
	// The baseline direction in device space; a negative size or scale
	// mirrors it.
	dirX, dirY := m.a*fs*th, m.b*fs*th
	for i := 0; i < len(s); {
		code, n := f.nextCode(s, i)
		i += n
		text, w := f.glyph(code, n)
		x0 := p.g.rise*m.c + m.e
		y0 := p.g.rise*m.d + m.f
		adv := w * fs * th
		// A space glyph of known width is judged by the gap it leaves, like
		// any other: Ghostscript shrinks some to nothing with negative word
		// spacing inside words ("inv o" + "cation").
		if text != " " || w <= 0 {
			p.out.glyph(text, x0, y0, x0+adv*m.a, y0+adv*m.b, dirX, dirY, size)
		}
		tx := w*fs + p.g.tc
		if n == 1 && code == ' ' {
			tx += p.g.tw
		}
		tx *= th
		m.e += tx * m.a
		m.f += tx * m.b
		p.advance(tx)
	}
}

// textOut assembles glyphs into text. Glyphs arrive in content stream order,
// which producers keep in reading order; where they sit decides what goes
// between them: a space when the gap after the previous glyph exceeds 0.15 of
// the font size, a line break when the baseline moves by more than half the
// font size, and a blank line when it moves clearly further than the
// previous line step (a paragraph or heading gap) or up the page (a new
// column or block).
type textOut struct {
	// limit bounds len(buf); beyond it the page ends with tooLarge.
	limit    int
	tooLarge error
	buf      []byte
	has      bool
	ex, ey   float64
	dx, dy   float64
	size     float64
	lineStep float64
	// glyphs counts the glyphs placed, mapped to text or not.
	glyphs int
	// images counts the images painted.
	images int
}

func (o *textOut) String() string {
	return strings.TrimSpace(dehyphenate(string(o.buf)))
}

// dehyphenate joins words hyphenated across a line break ("com-\nmand"),
// when letters stand on both sides of the hyphen and line break,
// so that the word can be found again; poppler's pdftotext does the same.
func dehyphenate(s string) string {
	if !strings.Contains(s, "-\n") && !strings.Contains(s, "\u2010\n") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	prev := rune(0)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == '-' || r == '\u2010') && unicode.IsLetter(prev) && i+n < len(s) && s[i+n] == '\n' {
			next, _ := utf8.DecodeRuneInString(s[i+n+1:])
			if unicode.IsLetter(next) {
				i += n + 1
				prev = r
				continue
			}
		}
		b.WriteRune(r)
		prev = r
		i += n
	}
	return b.String()
}

// Character spacing (Tc) counts as part of the gap: producers such as
// Ghostscript fold word spaces into it.
func (o *textOut) glyph(text string, x0, y0, x1, y1, dirX, dirY, size float64) {
	o.glyphs++
	if l := math.Hypot(dirX, dirY); l > 0 {
		dirX, dirY = dirX/l, dirY/l
	} else {
		dirX, dirY = 1, 0
	}
	if !(size > 0) || math.IsInf(size, 0) {
		size = 1
	}
	if o.has {
		ref := math.Max(size, o.size)
		if dirX*o.dx+dirY*o.dy < 0.95 {
			o.lineBreak(1)
			o.lineStep = 0
		} else {
			vx, vy := x0-o.ex, y0-o.ey
			along := vx*o.dx + vy*o.dy
			up := vy*o.dx - vx*o.dy
			switch {
			case up < -0.5*ref:
				down := -up
				para := down > 1.7*ref
				if o.lineStep > 0 {
					para = down > 1.3*o.lineStep+0.1*ref
				}
				if para {
					o.lineBreak(2)
				} else {
					o.lineBreak(1)
				}
				o.lineStep = down
			case up > 0.5*ref:
				if up > 1.2*ref {
					o.lineBreak(2)
				} else {
					o.lineBreak(1)
				}
				o.lineStep = 0
			case along > 0.15*ref || along < -ref:
				o.space()
			}
		}
	}
	o.write(text)
	o.ex, o.ey = x1, y1
	o.dx, o.dy = dirX, dirY
	o.size = size
	o.has = true
}

func (o *textOut) write(text string) {
	if len(o.buf)+len(text) > o.limit {
		panic(abortError{o.tooLarge})
	}
	for i := 0; i < len(text); i++ {
		if text[i] == ' ' {
			o.space()
			continue
		}
		o.buf = append(o.buf, text[i])
	}
}

func (o *textOut) space() {
	if n := len(o.buf); n > 0 && o.buf[n-1] != ' ' && o.buf[n-1] != '\n' {
		o.buf = append(o.buf, ' ')
	}
}

// lineBreak ends the line with n newlines in all (1 or 2), dropping trailing
// spaces.
func (o *textOut) lineBreak(n int) {
	for len(o.buf) > 0 && o.buf[len(o.buf)-1] == ' ' {
		o.buf = o.buf[:len(o.buf)-1]
	}
	if len(o.buf) == 0 {
		return
	}
	have := 0
	for have < len(o.buf) && o.buf[len(o.buf)-1-have] == '\n' {
		have++
	}
	for ; have < n; have++ {
		o.buf = append(o.buf, '\n')
	}
}
