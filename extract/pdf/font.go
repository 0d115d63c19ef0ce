package pdf

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	lpdf "github.com/ledongthuc/pdf"
	"golang.org/x/text/encoding/charmap"
)

// Reading a font's widths and encoding through the PDF package on every glyph
// re-resolves (and re-inflates) the font objects each time, which made
// position-aware extraction run at a few pages per second. pdfFont holds
// everything text extraction needs from one font, resolved once per document.
type pdfFont struct {
	// composite is true for Type0 fonts, whose codes are one to four bytes
	// long and whose widths are indexed by CID.
	composite bool
	// identity marks the Identity-H/V encodings: two-byte codes equal to CIDs.
	identity bool
	// ucs2 marks predefined CMaps whose codes are UCS-2 text themselves.
	ucs2 bool
	// space holds the code space ranges used to split the codes of a
	// non-identity composite font.
	space []codeRange

	// Simple fonts: text and advance width (in text space units per unit of
	// font size) for each one-byte code.
	text  [256]string
	width [256]float64

	// Composite fonts: text from ToUnicode, widths from the W array.
	toUnicode *cmapTable
	cidWidths map[uint32]float64
	cidRanges []widthRange
	defWidth  float64
	glyphs    map[uint32]glyphInfo

	// sizeScale converts the text space font size into the height of glyphs
	// (1 except for Type3 fonts with an unusual FontMatrix).
	sizeScale float64
}

type glyphInfo struct {
	text  string
	width float64
}

type widthRange struct {
	lo, hi uint32
	w      float64
}

// nextCode splits the code starting at s[i] and returns it with its length.
func (f *pdfFont) nextCode(s string, i int) (uint32, int) {
	if !f.composite {
		return uint32(s[i]), 1
	}
	if !f.identity && len(f.space) > 0 {
		for n := 1; n <= 4 && i+n <= len(s); n++ {
			code := bytesCode(s[i : i+n])
			for _, r := range f.space {
				if r.n == n && r.lo <= code && code <= r.hi {
					return code, n
				}
			}
		}
		return uint32(s[i]), 1
	}
	if i+1 < len(s) {
		return uint32(s[i])<<8 | uint32(s[i+1]), 2
	}
	return uint32(s[i]), 1
}

// glyph returns the text and advance width of one code.
func (f *pdfFont) glyph(code uint32, n int) (string, float64) {
	if !f.composite {
		return f.text[code&0xff], f.width[code&0xff]
	}
	key := code | uint32(n-1)<<30
	if g, ok := f.glyphs[key]; ok {
		return g.text, g.width
	}
	var g glyphInfo
	if f.toUnicode != nil {
		if t, ok := f.toUnicode.lookup(code, n); ok {
			g.text = cleanGlyph(t)
		}
	}
	if g.text == "" && f.ucs2 && n == 2 {
		g.text = cleanGlyph(string(rune(code)))
	}
	g.width = f.defWidth
	if w, ok := f.cidWidths[code]; ok {
		g.width = w
	} else {
		for _, r := range f.cidRanges {
			if r.lo <= code && code <= r.hi {
				g.width = r.w
				break
			}
		}
	}
	if len(f.glyphs) < 1<<16 {
		f.glyphs[key] = g
	}
	return g.text, g.width
}

func bytesCode(s string) uint32 {
	var c uint32
	for i := 0; i < len(s) && i < 4; i++ {
		c = c<<8 | uint32(s[i])
	}
	return c
}

// loadFont reads what text extraction needs from a font dictionary. Damage in
// optional parts (a broken ToUnicode map, a missing width table) degrades the
// result instead of failing: a font that cannot be read at all still advances
// glyphs by an average width and yields no text for unmapped codes.
func loadFont(fv lpdf.Value) (f *pdfFont) {
	f = &pdfFont{sizeScale: 1, defWidth: 1}
	defer func() {
		// The PDF package reports damaged objects by panicking.
		_ = recover()
	}()
	if fv.Kind() != lpdf.Dict {
		for c := range f.width {
			f.width[c] = 0.5
			f.text[c] = latin1Glyph(byte(c))
		}
		return f
	}
	var toUni *cmapTable
	if tu := fv.Key("ToUnicode"); tu.Kind() == lpdf.Stream {
		data, _ := readStream(tu, maxCMapBytes)
		toUni = parseCMap(data)
	}
	if fv.Key("Subtype").Name() == "Type0" {
		loadCompositeFont(f, fv, toUni)
		return f
	}
	loadSimpleFont(f, fv, toUni)
	return f
}

func loadCompositeFont(f *pdfFont, fv lpdf.Value, toUni *cmapTable) {
	f.composite = true
	f.toUnicode = toUni
	f.glyphs = make(map[uint32]glyphInfo)
	f.cidWidths = make(map[uint32]float64)
	f.defWidth = 1
	enc := fv.Key("Encoding")
	switch name := enc.Name(); {
	case name == "Identity-H" || name == "Identity-V":
		f.identity = true
	case strings.Contains(name, "UCS2") || strings.Contains(name, "UTF16"):
		f.ucs2 = true
		f.identity = true
	default:
		if toUni != nil && len(toUni.space) > 0 {
			f.space = toUni.space
		} else {
			f.identity = true
		}
	}
	desc := fv.Key("DescendantFonts").Index(0)
	if dw := desc.Key("DW"); dw.Kind() == lpdf.Integer || dw.Kind() == lpdf.Real {
		f.defWidth = dw.Float64() / 1000
	}
	w := desc.Key("W")
	for i := 0; i < w.Len(); {
		first := w.Index(i)
		if first.Kind() != lpdf.Integer {
			break
		}
		next := w.Index(i + 1)
		if next.Kind() == lpdf.Array {
			c := uint32(first.Int64())
			for j := 0; j < next.Len() && len(f.cidWidths) < 1<<17; j++ {
				f.cidWidths[c+uint32(j)] = next.Index(j).Float64() / 1000
			}
			i += 2
			continue
		}
		if i+2 >= w.Len() {
			break
		}
		f.cidRanges = append(f.cidRanges, widthRange{
			lo: uint32(first.Int64()),
			hi: uint32(next.Int64()),
			w:  w.Index(i+2).Float64() / 1000,
		})
		i += 3
	}
}

func loadSimpleFont(f *pdfFont, fv lpdf.Value, toUni *cmapTable) {
	scale := 0.001
	if fv.Key("Subtype").Name() == "Type3" {
		if m := fv.Key("FontMatrix"); m.Len() == 6 {
			scale = m.Index(0).Float64()
			if s := m.Index(3).Float64(); s != 0 {
				f.sizeScale = s * 1000
				if f.sizeScale < 0 {
					f.sizeScale = -f.sizeScale
				}
			}
		}
	}

	// Text: the base encoding, then Differences, then ToUnicode, each more
	// authoritative than the one before.
	enc := fv.Key("Encoding")
	base := enc.Name()
	if enc.Kind() == lpdf.Dict {
		base = enc.Key("BaseEncoding").Name()
	}
	for c := 0; c < 256; c++ {
		f.text[c] = baseGlyph(base, byte(c))
	}
	if enc.IsNull() {
		applyBuiltinSymbols(f, fv.Key("BaseFont").Name())
	}
	if enc.Kind() == lpdf.Dict {
		applyDifferences(f, fv, enc.Key("Differences"))
	}
	if toUni != nil {
		for c := 0; c < 256; c++ {
			if t, ok := toUni.lookup(uint32(c), 1); ok {
				f.text[c] = cleanGlyph(t)
			} else if t, ok := toUni.lookup(uint32(c), 2); ok {
				f.text[c] = cleanGlyph(t)
			}
		}
	}

	// Widths: the Widths array, else the standard font metrics.
	widths := fv.Key("Widths")
	if widths.Len() > 0 {
		missing := fv.Key("FontDescriptor").Key("MissingWidth").Float64() * scale
		for c := range f.width {
			f.width[c] = missing
		}
		first := int(fv.Key("FirstChar").Int64())
		for i := 0; i < widths.Len(); i++ {
			if c := first + i; c >= 0 && c < 256 {
				f.width[c] = widths.Index(i).Float64() * scale
			}
		}
		return
	}
	m := standardMetrics(fv.Key("BaseFont").Name())
	for c := range f.width {
		f.width[c] = m.width(f.text[c])
	}
}

// applyDifferences maps the codes listed in an encoding's Differences array
// through their glyph names. The PDF package knows the Adobe glyph list, so
// its decoder is asked for each listed code; names it does not know are tried
// as uniXXXX, uXXXX[XX] or a one-character name with a suffix (a.sc).
func applyDifferences(f *pdfFont, fv lpdf.Value, diffs lpdf.Value) {
	pf := lpdf.Font{V: fv}
	dec := pf.Encoder()
	code := -1
	for i := 0; i < diffs.Len(); i++ {
		x := diffs.Index(i)
		switch x.Kind() {
		case lpdf.Integer:
			code = int(x.Int64())
		case lpdf.Name:
			if code >= 0 && code < 256 {
				raw := string([]byte{byte(code)})
				t := dec.Decode(raw)
				if t == string(rune(code)) || t == raw {
					// Either the name maps to the code's own Latin-1
					// character, or the glyph list does not know it.
					if g := glyphNameText(x.Name()); g != "" || isGlyphIndexName(x.Name()) {
						t = g
					}
				}
				f.text[code] = cleanGlyph(t)
			}
			code++
		}
	}
}

// glyphNameText decodes glyph names the Adobe glyph list does not spell out.
func glyphNameText(name string) string {
	if i := strings.IndexByte(name, '.'); i > 0 {
		name = name[:i]
	}
	switch {
	case len(name) == 1 && name[0] < utf8.RuneSelf:
		return name
	case len(name) == 7 && strings.HasPrefix(name, "uni"):
		if v, err := strconv.ParseUint(name[3:], 16, 32); err == nil {
			return string(rune(v))
		}
	case len(name) >= 5 && len(name) <= 7 && name[0] == 'u':
		if v, err := strconv.ParseUint(name[1:], 16, 32); err == nil {
			return string(rune(v))
		}
	}
	return ""
}

// symbolLetters maps the letters of the Symbol font's built-in encoding,
// 'A'..'Z' then 'a'..'z', to Greek.
const symbolLetters = "ΑΒΧΔΕΦΓΗΙϑΚΛΜΝΟΠΘΡΣΤΥςΩΞΨΖαβχδεφγηιϕκλμνοπθρστυϖωξψζ"

// symbolOthers maps other Symbol codes that occur in running text.
var symbolOthers = map[byte]string{
	0x22: "∀", 0x24: "∃", 0x27: "∋", 0x2a: "∗", 0x2d: "−", 0x40: "≅", 0x5c: "∴",
	0x5e: "⊥", 0x7e: "∼", 0xa3: "≤", 0xa5: "∞", 0xac: "←", 0xae: "→", 0xb1: "±",
	0xb3: "≥", 0xb4: "×", 0xb6: "∂", 0xb7: "•", 0xb8: "÷", 0xb9: "≠", 0xbb: "≈",
	0xc7: "∩", 0xc8: "∪", 0xce: "∈", 0xd1: "∇", 0xd5: "∏", 0xd6: "√", 0xe5: "∑",
	0xf2: "∫",
}

// applyBuiltinSymbols handles the two standard fonts whose built-in encoding
// is not Latin: Symbol (Greek letters and mathematical signs) and
// ZapfDingbats (ornaments, bullets and boxes, which carry no words and are
// left out rather than read as the Latin letters that share their codes).
func applyBuiltinSymbols(f *pdfFont, baseFont string) {
	if i := strings.IndexByte(baseFont, '+'); i >= 0 {
		baseFont = baseFont[i+1:]
	}
	switch {
	case strings.HasPrefix(baseFont, "ZapfDingbats"):
		for c := range f.text {
			if c != ' ' {
				f.text[c] = ""
			}
		}
	case strings.HasPrefix(baseFont, "Symbol"):
		letters := []rune(symbolLetters)
		for c := range f.text {
			switch {
			case c >= 'A' && c <= 'Z':
				f.text[c] = string(letters[c-'A'])
			case c >= 'a' && c <= 'z':
				f.text[c] = string(letters[26+c-'a'])
			case c >= 0x80:
				f.text[c] = symbolOthers[byte(c)]
			default:
				if t, ok := symbolOthers[byte(c)]; ok {
					f.text[c] = t
				}
			}
		}
	}
}

// isGlyphIndexName reports names that number glyphs instead of naming
// characters (g12, glyph12, cid12, index12), which carry no text.
func isGlyphIndexName(name string) bool {
	for _, p := range []string{"glyph", "index", "cid", "g", "G"} {
		if rest, ok := strings.CutPrefix(name, p); ok && rest != "" {
			if _, err := strconv.Atoi(rest); err == nil {
				return true
			}
		}
	}
	return false
}

// baseGlyph decodes a one-byte code in a named base encoding. Fonts without
// one (symbolic fonts, Type1 fonts with a built-in encoding) are read as
// Latin-1, which matches StandardEncoding for letters and digits.
func baseGlyph(encoding string, c byte) string {
	switch encoding {
	case "WinAnsiEncoding":
		return cleanGlyph(string(charmap.Windows1252.DecodeByte(c)))
	case "MacRomanEncoding":
		return cleanGlyph(string(charmap.Macintosh.DecodeByte(c)))
	case "StandardEncoding":
		switch c {
		case '\'':
			return "\u2019"
		case '`':
			return "\u2018"
		}
	}
	return latin1Glyph(c)
}

func latin1Glyph(c byte) string {
	return cleanGlyph(string(rune(c)))
}

// cleanGlyph normalises the text of one glyph: unmapped codes (control
// characters, U+FFFD) become empty, ligatures are spelled out so that words
// stay searchable, no-break spaces and soft hyphens become their plain forms,
// and the ohm, kelvin and angstrom signs become the letters they equal.
func cleanGlyph(s string) string {
	clean := true
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0xa0) || r == 0xad || r == utf8.RuneError || (r >= 0xfb00 && r <= 0xfb06) || (r >= 0x2126 && r <= 0x212b) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == 0xa0:
			b.WriteByte(' ')
		case r == 0xad:
			b.WriteByte('-')
		case r < 0x20 || (r >= 0x7f && r < 0xa0) || r == utf8.RuneError:
		case r >= 0xfb00 && r <= 0xfb06:
			b.WriteString([]string{"ff", "fi", "fl", "ffi", "ffl", "st", "st"}[r-0xfb00])
		case r == 0x2126:
			// The glyph list maps /Omega to the ohm sign, whose canonical
			// form is the Greek letter.
			b.WriteRune('Ω')
		case r == 0x212a:
			b.WriteByte('K')
		case r == 0x212b:
			b.WriteRune('Å')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// maxCMapBytes bounds a ToUnicode stream; real ones are a few kilobytes.
const maxCMapBytes = 8 << 20

// readStream returns the decoded data of a stream, up to limit bytes. A
// stream that breaks off (a truncated file, a damaged deflate stream) yields
// what was decoded before the damage, with the error.
func readStream(v lpdf.Value, limit int64) (data []byte, err error) {
	defer func() {
		// The PDF package panics on filters it does not implement.
		if r := recover(); r != nil {
			err = fmt.Errorf("stream: %v", r)
		}
	}()
	rc := v.Reader()
	defer rc.Close()
	data, err = io.ReadAll(io.LimitReader(rc, limit))
	return data, err
}

// codeRange is a code space range of n-byte codes.
type codeRange struct {
	lo, hi uint32
	n      int
}

// cmapTable maps character codes to Unicode text, as read from a ToUnicode
// CMap stream.
type cmapTable struct {
	space  []codeRange
	single map[uint64]string
	ranges []uniRange
}

// uniRange is a bfrange too large to expand: codes lo..hi map to base with its
// last character incremented by code-lo, or to arr[code-lo].
type uniRange struct {
	lo, hi uint32
	n      int
	base   []rune
	arr    []string
}

func cmapKey(code uint32, n int) uint64 { return uint64(n)<<32 | uint64(code) }

func (m *cmapTable) lookup(code uint32, n int) (string, bool) {
	if t, ok := m.single[cmapKey(code, n)]; ok {
		return t, true
	}
	for _, r := range m.ranges {
		if r.n == n && r.lo <= code && code <= r.hi {
			return r.at(code)
		}
	}
	return "", false
}

// maxExpandedRange is the largest bfrange stored entry by entry.
const maxExpandedRange = 256

// maxCMapEntries bounds the entries kept from one CMap.
const maxCMapEntries = 1 << 17

// parseCMap reads the code space and bfchar/bfrange mappings of a ToUnicode
// CMap, or returns nil when it holds none.
func parseCMap(data []byte) *cmapTable {
	if len(data) == 0 {
		return nil
	}
	m := &cmapTable{single: make(map[uint64]string)}
	l := lexer{b: data}
	l.run(func(op string, args []operand) {
		switch op {
		case "endcodespacerange":
			for i := 0; i+1 < len(args); i += 2 {
				lo, hi := args[i].text, args[i+1].text
				if n := len(lo); n >= 1 && n <= 4 && len(hi) == n {
					m.space = append(m.space, codeRange{bytesCode(lo), bytesCode(hi), n})
				}
			}
		case "endbfchar":
			for i := 0; i+1 < len(args) && len(m.single) < maxCMapEntries; i += 2 {
				src := args[i].text
				if n := len(src); n >= 1 && n <= 4 {
					m.single[cmapKey(bytesCode(src), n)] = cmapDest(args[i+1])
				}
			}
		case "endbfrange":
			for i := 0; i+2 < len(args); i += 3 {
				m.addRange(args[i].text, args[i+1].text, args[i+2])
			}
		}
	})
	if len(m.single) == 0 && len(m.ranges) == 0 {
		return nil
	}
	return m
}

func (m *cmapTable) addRange(loS, hiS string, dst operand) {
	n := len(loS)
	if n < 1 || n > 4 || len(hiS) != n {
		return
	}
	lo, hi := bytesCode(loS), bytesCode(hiS)
	if hi < lo {
		return
	}
	r := uniRange{lo: lo, hi: hi, n: n}
	switch dst.kind {
	case tokArrayOpen:
		for _, e := range dst.arr {
			r.arr = append(r.arr, cmapDest(e))
		}
	case tokString:
		r.base = []rune(utf16BE(dst.text))
	default:
		return
	}
	if hi-lo < maxExpandedRange && len(m.single) < maxCMapEntries {
		for c := lo; ; c++ {
			if t, ok := r.at(c); ok {
				m.single[cmapKey(c, n)] = t
			}
			if c == hi {
				break
			}
		}
		return
	}
	m.ranges = append(m.ranges, r)
}

func (r uniRange) at(code uint32) (string, bool) {
	off := code - r.lo
	if r.arr != nil {
		if int(off) < len(r.arr) {
			return r.arr[off], true
		}
		return "", false
	}
	rs := append([]rune(nil), r.base...)
	if len(rs) > 0 {
		rs[len(rs)-1] += rune(off)
	}
	return string(rs), true
}

// cmapDest decodes a bfchar destination: UTF-16BE text, or rarely a glyph name.
func cmapDest(o operand) string {
	switch o.kind {
	case tokString:
		return utf16BE(o.text)
	case tokName:
		return glyphNameText(o.text)
	}
	return ""
}

func utf16BE(s string) string {
	if len(s) == 1 {
		return string(rune(s[0]))
	}
	u := make([]uint16, 0, len(s)/2)
	for i := 0; i+1 < len(s); i += 2 {
		u = append(u, uint16(s[i])<<8|uint16(s[i+1]))
	}
	return string(utf16.Decode(u))
}
