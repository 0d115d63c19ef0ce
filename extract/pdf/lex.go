package pdf

import (
	"bytes"
	"strconv"
)

// The PDF package parses file structure (cross-reference tables, objects,
// stream filters) well, but its PostScript-style interpreter allocates a
// Value per token and cannot step over inline image data, whose binary bytes
// make it fail the rest of the page. Content streams and CMaps are therefore
// read by this small lexer, which works on the decoded bytes directly.

// tokKind classifies a lexer token.
type tokKind uint8

const (
	tokEOF tokKind = iota
	tokNumber
	tokString
	tokName
	tokKeyword
	tokArrayOpen
	tokArrayClose
	tokDictOpen
	tokDictClose
)

// token is one lexical element of a content stream. For tokString, tokName
// and tokKeyword, text holds the decoded bytes (string escapes resolved, hex
// decoded, name #xx escapes resolved).
type token struct {
	kind tokKind
	num  float64
	text string
}

// lexer tokenises PDF content stream syntax. It never fails: malformed input
// is skipped byte by byte, because a damaged stream should still yield the
// text it does hold.
type lexer struct {
	b       []byte
	pos     int
	scratch []byte
}

func isPDFSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}

func isPDFDelim(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return true
	}
	return false
}

func (l *lexer) skipSpace() {
	for l.pos < len(l.b) {
		c := l.b[l.pos]
		switch {
		case isPDFSpace(c):
			l.pos++
		case c == '%':
			for l.pos < len(l.b) && l.b[l.pos] != '\n' && l.b[l.pos] != '\r' {
				l.pos++
			}
		default:
			return
		}
	}
}

// next returns the next token, or a token of kind tokEOF at the end.
func (l *lexer) next() token {
	for {
		l.skipSpace()
		if l.pos >= len(l.b) {
			return token{kind: tokEOF}
		}
		c := l.b[l.pos]
		switch c {
		case '(':
			l.pos++
			return token{kind: tokString, text: l.literalString()}
		case '<':
			if l.pos+1 < len(l.b) && l.b[l.pos+1] == '<' {
				l.pos += 2
				return token{kind: tokDictOpen}
			}
			l.pos++
			return token{kind: tokString, text: l.hexString()}
		case '>':
			if l.pos+1 < len(l.b) && l.b[l.pos+1] == '>' {
				l.pos += 2
				return token{kind: tokDictClose}
			}
			l.pos++
			continue
		case '[':
			l.pos++
			return token{kind: tokArrayOpen}
		case ']':
			l.pos++
			return token{kind: tokArrayClose}
		case '/':
			l.pos++
			return token{kind: tokName, text: l.name()}
		case ')', '{', '}':
			l.pos++
			continue
		}
		start := l.pos
		for l.pos < len(l.b) && !isPDFSpace(l.b[l.pos]) && !isPDFDelim(l.b[l.pos]) {
			l.pos++
		}
		word := l.b[start:l.pos]
		if n, ok := parseNumber(word); ok {
			return token{kind: tokNumber, num: n}
		}
		return token{kind: tokKeyword, text: keywordString(word)}
	}
}

// keywordString returns common operators without allocating.
func keywordString(b []byte) string {
	switch string(b) {
	case "Tj":
		return "Tj"
	case "TJ":
		return "TJ"
	case "Td":
		return "Td"
	case "Tf":
		return "Tf"
	case "Tm":
		return "Tm"
	case "BT":
		return "BT"
	case "ET":
		return "ET"
	case "cm":
		return "cm"
	case "q":
		return "q"
	case "Q":
		return "Q"
	case "re":
		return "re"
	case "m":
		return "m"
	case "l":
		return "l"
	case "c":
		return "c"
	case "f":
		return "f"
	case "S":
		return "S"
	case "g":
		return "g"
	case "rg":
		return "rg"
	}
	return string(b)
}

// parseNumber parses PDF numbers such as 12, -3.5, .25 and 4. quickly; other
// words are not numbers.
func parseNumber(b []byte) (float64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	i := 0
	neg := false
	if b[0] == '+' || b[0] == '-' {
		neg = b[0] == '-'
		i++
	}
	var v float64
	digits := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		v = v*10 + float64(b[i]-'0')
		digits++
	}
	if i < len(b) && b[i] == '.' {
		i++
		scale := 0.1
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			v += float64(b[i]-'0') * scale
			scale /= 10
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i != len(b) {
		// Exponents are not PDF syntax but some producers write them.
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return 0, false
		}
		return f, true
	}
	if neg {
		v = -v
	}
	return v, true
}

func (l *lexer) literalString() string {
	out := l.scratch[:0]
	depth := 1
	for l.pos < len(l.b) {
		c := l.b[l.pos]
		l.pos++
		switch c {
		case '(':
			depth++
			out = append(out, c)
		case ')':
			depth--
			if depth == 0 {
				l.scratch = out
				return string(out)
			}
			out = append(out, c)
		case '\\':
			if l.pos >= len(l.b) {
				continue
			}
			e := l.b[l.pos]
			l.pos++
			switch e {
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case '\r':
				if l.pos < len(l.b) && l.b[l.pos] == '\n' {
					l.pos++
				}
			case '\n':
			case '0', '1', '2', '3', '4', '5', '6', '7':
				v := int(e - '0')
				for k := 0; k < 2 && l.pos < len(l.b) && l.b[l.pos] >= '0' && l.b[l.pos] <= '7'; k++ {
					v = v*8 + int(l.b[l.pos]-'0')
					l.pos++
				}
				out = append(out, byte(v))
			default:
				out = append(out, e)
			}
		default:
			out = append(out, c)
		}
	}
	l.scratch = out
	return string(out)
}

func unhexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func (l *lexer) hexString() string {
	out := l.scratch[:0]
	var hi byte
	half := false
	for l.pos < len(l.b) {
		c := l.b[l.pos]
		l.pos++
		if c == '>' {
			break
		}
		d, ok := unhexDigit(c)
		if !ok {
			continue
		}
		if half {
			out = append(out, hi<<4|d)
		} else {
			hi = d
		}
		half = !half
	}
	if half {
		// An odd final digit is followed by an implied 0.
		out = append(out, hi<<4)
	}
	l.scratch = out
	return string(out)
}

func (l *lexer) name() string {
	start := l.pos
	for l.pos < len(l.b) && !isPDFSpace(l.b[l.pos]) && !isPDFDelim(l.b[l.pos]) {
		l.pos++
	}
	raw := l.b[start:l.pos]
	if bytes.IndexByte(raw, '#') < 0 {
		return string(raw)
	}
	out := l.scratch[:0]
	for i := 0; i < len(raw); i++ {
		if raw[i] == '#' && i+2 < len(raw) {
			h, ok1 := unhexDigit(raw[i+1])
			lo, ok2 := unhexDigit(raw[i+2])
			if ok1 && ok2 {
				out = append(out, h<<4|lo)
				i += 2
				continue
			}
		}
		out = append(out, raw[i])
	}
	l.scratch = out
	return string(out)
}

// skipInlineImage moves past the data of an inline image, whose "BI" operator
// was just read: the parameters up to "ID", then binary data up to an "EI"
// that stands alone between white space.
func (l *lexer) skipInlineImage() {
	for {
		t := l.next()
		if t.kind == tokEOF {
			return
		}
		if t.kind == tokKeyword && t.text == "ID" {
			break
		}
	}
	// One white-space byte separates ID from the data.
	l.pos++
	for l.pos < len(l.b) {
		i := bytes.Index(l.b[l.pos:], []byte("EI"))
		if i < 0 {
			l.pos = len(l.b)
			return
		}
		at := l.pos + i
		before := at == 0 || isPDFSpace(l.b[at-1])
		after := at+2 >= len(l.b) || isPDFSpace(l.b[at+2]) || isPDFDelim(l.b[at+2])
		l.pos = at + 2
		if before && after {
			return
		}
	}
}

// operand is one operand of a content stream operator. Arrays keep their
// elements; dictionaries (marked-content properties) are parsed past and kept
// only as their kind.
type operand struct {
	kind tokKind
	num  float64
	text string
	arr  []operand
}

// maxNesting bounds array and dictionary nesting so hostile input cannot
// exhaust the stack.
const maxNesting = 32

// maxPendingOperands bounds the operands collected without an operator; more
// means the stream is garbage, and the oldest are dropped.
const maxPendingOperands = 4096

// run reads the stream to its end and calls do for every operator with the
// operands that preceded it. args is only valid during the call.
func (l *lexer) run(do func(op string, args []operand)) {
	var args []operand
	for {
		t := l.next()
		switch t.kind {
		case tokEOF:
			return
		case tokKeyword:
			switch t.text {
			case "true", "false", "null":
				args = append(args, operand{kind: tokKeyword, text: t.text})
				continue
			case "BI":
				l.skipInlineImage()
				// The data is skipped; the operator still tells that
				// an image was painted.
				do("BI", nil)
				args = args[:0]
				continue
			}
			do(t.text, args)
			args = args[:0]
			continue
		case tokArrayOpen:
			args = append(args, operand{kind: tokArrayOpen, arr: l.array(0)})
		case tokDictOpen:
			l.dict(0)
			args = append(args, operand{kind: tokDictOpen})
		case tokArrayClose, tokDictClose:
			// Stray closers carry nothing.
		default:
			args = append(args, operand{kind: t.kind, num: t.num, text: t.text})
		}
		if len(args) > maxPendingOperands {
			args = append(args[:0], args[len(args)-1])
		}
	}
}

func (l *lexer) array(depth int) []operand {
	var out []operand
	for {
		t := l.next()
		switch t.kind {
		case tokEOF, tokArrayClose:
			return out
		case tokArrayOpen:
			if depth >= maxNesting {
				return out
			}
			out = append(out, operand{kind: tokArrayOpen, arr: l.array(depth + 1)})
		case tokDictOpen:
			if depth >= maxNesting {
				return out
			}
			l.dict(depth + 1)
			out = append(out, operand{kind: tokDictOpen})
		case tokDictClose:
		default:
			out = append(out, operand{kind: t.kind, num: t.num, text: t.text})
		}
	}
}

func (l *lexer) dict(depth int) {
	for {
		t := l.next()
		switch t.kind {
		case tokEOF, tokDictClose:
			return
		case tokArrayOpen:
			if depth >= maxNesting {
				return
			}
			l.array(depth + 1)
		case tokDictOpen:
			if depth >= maxNesting {
				return
			}
			l.dict(depth + 1)
		}
	}
}
