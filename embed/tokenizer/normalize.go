package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// normalizer changes a piece of text before added tokens marked normalized
// are searched in it and before it is split into words. The result may
// live in buf and is valid until the next call with the same buf.
type normalizer interface {
	normalize(buf *normBuf, s string) string
}

// supportedNormalizers names the normalisers parseNormalizer reads, for
// the error that refuses another.
const supportedNormalizers = "BertNormalizer, Lowercase, Strip, Replace of a string, Prepend, or a Sequence of them"

// patternJSON is the pattern of a Replace normaliser or a Split
// pre-tokeniser: a plain string or a regular expression.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// parseNormalizer reads the normalizer of tokenizer.json, nil for none.
func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var n normalizerJSON
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json normalizer: %v", ErrInvalid, err)
	}
	switch n.Type {
	case "BertNormalizer":
		return newBertNormalizer(n), nil
	case "Lowercase":
		return lowercase{}, nil
	case "Strip":
		return strip{left: n.StripLeft != nil && *n.StripLeft, right: n.StripRight != nil && *n.StripRight}, nil
	case "Prepend":
		if n.Prepend == nil {
			return nil, fmt.Errorf("%w: normalizer Prepend without prepend", ErrInvalid)
		}
		return prepend(*n.Prepend), nil
	case "Replace":
		switch {
		case n.Content == nil || n.Pattern == nil:
			return nil, fmt.Errorf("%w: normalizer Replace without a pattern or content", ErrInvalid)
		case n.Pattern.Regex != nil:
			return nil, fmt.Errorf("%w: normalizer Replace of a regular expression (%s)", ErrUnsupported, supportedNormalizers)
		case n.Pattern.String == nil:
			return nil, fmt.Errorf("%w: normalizer Replace without a pattern", ErrInvalid)
		case *n.Pattern.String == "":
			// The reference inserts the content between every two
			// characters, or fails.
			return nil, fmt.Errorf("%w: normalizer Replace of an empty string", ErrUnsupported)
		}
		return replace{old: *n.Pattern.String, new: *n.Content}, nil
	case "Sequence":
		var seq sequence
		for _, r := range n.Normalizers {
			m, err := parseNormalizer(r)
			if err != nil {
				return nil, err
			}
			if m != nil {
				seq = append(seq, m)
			}
		}
		return seq, nil
	}
	return nil, fmt.Errorf("%w: normalizer %q (supported: %s)", ErrUnsupported, n.Type, supportedNormalizers)
}

// lowercase is the Lowercase normaliser, the lowercasing of BertNormalizer.
type lowercase struct{}

func (lowercase) normalize(buf *normBuf, s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	out := buf.a[:0]
	for _, r := range s {
		if m, ok := lowerMap[r]; ok {
			out = append(out, m...)
			continue
		}
		out = utf8.AppendRune(out, r)
	}
	buf.a = out
	return string(out)
}

// strip is the Strip normaliser: whitespace removed from either end.
type strip struct{ left, right bool }

func (n strip) normalize(_ *normBuf, s string) string {
	if n.left {
		s = strings.TrimLeftFunc(s, isWhitespace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, isWhitespace)
	}
	return s
}

// replace is the Replace normaliser of a string: every occurrence, left to
// right, replaced.
type replace struct{ old, new string }

func (n replace) normalize(_ *normBuf, s string) string { return strings.ReplaceAll(s, n.old, n.new) }

// prepend is the Prepend normaliser: a string put before any text that is
// not empty.
type prepend string

func (n prepend) normalize(_ *normBuf, s string) string {
	if s == "" {
		return s
	}
	return string(n) + s
}

// sequence applies normalisers in turn.
type sequence []normalizer

func (n sequence) normalize(buf *normBuf, s string) string {
	for _, m := range n {
		s = m.normalize(buf, s)
	}
	return s
}

// bertNormalizer is the BertNormalizer: in this order, drop control
// characters and turn whitespace into spaces (clean_text), put spaces around
// CJK ideographs (handle_chinese_chars), strip accents (canonical
// decomposition, then nonspacing marks dropped) and lowercase.
type bertNormalizer struct {
	clean, chinese, strip, lower bool
}

func newBertNormalizer(n normalizerJSON) *bertNormalizer {
	b := &bertNormalizer{clean: true, chinese: true, lower: true}
	if n.CleanText != nil {
		b.clean = *n.CleanText
	}
	if n.HandleChineseChars != nil {
		b.chinese = *n.HandleChineseChars
	}
	if n.Lowercase != nil {
		b.lower = *n.Lowercase
	}
	// strip_accents null follows lowercase, as in the reference.
	b.strip = b.lower
	if n.StripAccents != nil {
		b.strip = *n.StripAccents
	}
	return b
}

// normBuf holds the two buffers normalize alternates between.
type normBuf struct {
	a, b []byte
}

// normalize returns s normalised. The result may live in buf and is valid
// until the next call with the same buf.
func (n *bertNormalizer) normalize(buf *normBuf, s string) string {
	if isASCII(s) {
		return n.normalizeASCII(buf, s)
	}
	out := buf.a[:0]
	for _, r := range s {
		if n.clean {
			if r == 0 || r == 0xFFFD || isControl(r) {
				continue
			}
			if isWhitespace(r) {
				r = ' '
			}
		}
		if n.chinese && isChinese(r) {
			out = append(out, ' ')
			out = utf8.AppendRune(out, r)
			out = append(out, ' ')
			continue
		}
		out = utf8.AppendRune(out, r)
	}
	buf.a = out
	if n.strip {
		res := buf.b[:0]
		for _, r := range string(out) {
			if r >= hangulBase && r < hangulBase+hangulCount {
				res = appendHangul(res, r)
				continue
			}
			if m, ok := stripMap[r]; ok {
				res = append(res, m...)
				continue
			}
			res = utf8.AppendRune(res, r)
		}
		buf.a, buf.b = res, out
		out = res
	}
	if n.lower {
		res := buf.b[:0]
		for _, r := range string(out) {
			if m, ok := lowerMap[r]; ok {
				res = append(res, m...)
				continue
			}
			res = utf8.AppendRune(res, r)
		}
		buf.a, buf.b = res, out
		out = res
	}
	return string(out)
}

// normalizeASCII is normalize for text without a byte over 0x7f, which is
// most text and needs no table: controls other than tab, newline and
// carriage return are dropped, those three become spaces, letters are
// lowercased.
func (n *bertNormalizer) normalizeASCII(buf *normBuf, s string) string {
	if !n.clean && !n.lower {
		return s
	}
	out := buf.a[:0]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if n.clean {
			switch {
			case c == '\t' || c == '\n' || c == '\r':
				c = ' '
			case c < 0x20 || c == 0x7f:
				continue
			}
		}
		if n.lower && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out = append(out, c)
	}
	buf.a = out
	return string(out)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// isWhitespace is Unicode's White_Space property, which is what the
// reference means by whitespace both in the normaliser and in the
// pre-tokeniser (its table agrees with Go's for every code point).
func isWhitespace(r rune) bool {
	return unicode.IsSpace(r)
}

// isControl reports the characters clean_text drops: the reference's
// "other" categories (Cc, Cf, Co) as of the Unicode version it was built
// with, except tab, newline and carriage return.
func isControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.Is(controlTable, r)
}

// isBertPunct reports the characters the BertPreTokenizer isolates: every
// ASCII punctuation or symbol character, and Unicode punctuation (P*) as of
// the reference's Unicode version.
func isBertPunct(r rune) bool {
	if r < utf8.RuneSelf {
		return r > ' ' && r < 0x7f && !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
	}
	return unicode.Is(punctTable, r)
}

// isChinese reports CJK ideographs, the blocks the BERT normaliser puts
// spaces around (Hangul, Hiragana and Katakana are not among them).
func isChinese(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF,
		r >= 0x3400 && r <= 0x4DBF,
		r >= 0x20000 && r <= 0x2A6DF,
		r >= 0x2A700 && r <= 0x2B73F,
		r >= 0x2B740 && r <= 0x2B81F,
		r >= 0x2B920 && r <= 0x2CEAF,
		r >= 0xF900 && r <= 0xFAFF,
		r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}

// Hangul syllables decompose algorithmically into two or three jamo, none of
// which is a mark, so stripping accents leaves the decomposition.
const (
	hangulBase  = 0xAC00
	hangulCount = 11172
	jamoLBase   = 0x1100
	jamoVBase   = 0x1161
	jamoTBase   = 0x11A7
	jamoVCount  = 21
	jamoTCount  = 28
)

func appendHangul(dst []byte, r rune) []byte {
	s := r - hangulBase
	dst = utf8.AppendRune(dst, jamoLBase+s/(jamoVCount*jamoTCount))
	dst = utf8.AppendRune(dst, jamoVBase+(s%(jamoVCount*jamoTCount))/jamoTCount)
	if t := s % jamoTCount; t != 0 {
		dst = utf8.AppendRune(dst, jamoTBase+t)
	}
	return dst
}
