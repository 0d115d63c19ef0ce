package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// word is a piece of normalised text a pre-tokeniser splits further.
type word struct {
	s string
	// first says the piece starts where the text does, which Metaspace's
	// prepend_scheme "first" asks.
	first bool
}

// preTokenizer splits a piece of normalised text into the words WordPiece
// spells one by one.
type preTokenizer interface {
	// split appends the words of w to dst, none of them empty.
	split(dst []word, w word) []word
}

// supportedPreTokenizers names the pre-tokenisers parsePreTokenizer reads,
// for the error that refuses another.
const supportedPreTokenizers = "BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation, Digits, Metaspace, CharDelimiterSplit, Split on a string, or a Sequence of them"

type preTokenizerJSON struct {
	Type string `json:"type"`
	// Punctuation, Split
	Behavior *string `json:"behavior"`
	// Digits
	IndividualDigits bool `json:"individual_digits"`
	// Metaspace; add_prefix_space is the older form of prepend_scheme.
	Replacement    *string `json:"replacement"`
	PrependScheme  *string `json:"prepend_scheme"`
	AddPrefixSpace *bool   `json:"add_prefix_space"`
	Split          *bool   `json:"split"`
	// CharDelimiterSplit
	Delimiter *string `json:"delimiter"`
	// Split
	Pattern *patternJSON `json:"pattern"`
	Invert  bool         `json:"invert"`
	// Sequence
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
}

// parsePreTokenizer reads the pre_tokenizer of tokenizer.json, nil for
// none.
func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var p preTokenizerJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json pre_tokenizer: %v", ErrInvalid, err)
	}
	switch p.Type {
	case "BertPreTokenizer":
		return bertPre{}, nil
	case "Whitespace":
		return whitespace{}, nil
	case "WhitespaceSplit":
		return funcSplit{match: isWhitespace, behavior: removed}, nil
	case "Punctuation":
		b, err := parseBehavior(p.Behavior, isolated)
		if err != nil {
			return nil, err
		}
		return funcSplit{match: isBertPunct, behavior: b}, nil
	case "Digits":
		b := contiguous
		if p.IndividualDigits {
			b = isolated
		}
		return funcSplit{match: isNumeric, behavior: b}, nil
	case "CharDelimiterSplit":
		if p.Delimiter == nil || utf8.RuneCountInString(*p.Delimiter) != 1 {
			return nil, fmt.Errorf("%w: pre-tokenizer CharDelimiterSplit needs a delimiter of one character", ErrInvalid)
		}
		d, _ := utf8.DecodeRuneInString(*p.Delimiter)
		return funcSplit{match: func(r rune) bool { return r == d }, behavior: removed}, nil
	case "Split":
		switch {
		case p.Pattern == nil:
			return nil, fmt.Errorf("%w: pre-tokenizer Split without a pattern", ErrInvalid)
		case p.Pattern.Regex != nil:
			return nil, fmt.Errorf("%w: pre-tokenizer Split on a regular expression (supported: %s)", ErrUnsupported, supportedPreTokenizers)
		case p.Pattern.String == nil:
			return nil, fmt.Errorf("%w: pre-tokenizer Split without a pattern", ErrInvalid)
		}
		b, err := parseBehavior(p.Behavior, -1)
		if err != nil {
			return nil, err
		}
		return stringSplit{pattern: *p.Pattern.String, behavior: b, invert: p.Invert}, nil
	case "Metaspace":
		return parseMetaspace(p)
	case "Sequence":
		var seq preSequence
		for _, r := range p.PreTokenizers {
			q, err := parsePreTokenizer(r)
			if err != nil {
				return nil, err
			}
			if q != nil {
				seq = append(seq, q)
			}
		}
		return seq, nil
	}
	return nil, fmt.Errorf("%w: pre-tokenizer %q (supported: %s)", ErrUnsupported, p.Type, supportedPreTokenizers)
}

// behavior is what a split does with the text it matches.
type behavior int

const (
	removed            behavior = iota // dropped
	isolated                           // a word of its own
	mergedWithPrevious                 // joined to the word before
	mergedWithNext                     // joined to the word after
	contiguous                         // adjacent matches one word
)

var behaviors = map[string]behavior{
	"Removed": removed, "Isolated": isolated, "MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext": mergedWithNext, "Contiguous": contiguous,
}

// parseBehavior reads a split behaviour; def, when not negative, is the
// one an absent field means.
func parseBehavior(s *string, def behavior) (behavior, error) {
	if s == nil {
		if def < 0 {
			return 0, fmt.Errorf("%w: pre-tokenizer Split without a behavior", ErrInvalid)
		}
		return def, nil
	}
	b, ok := behaviors[*s]
	if !ok {
		return 0, fmt.Errorf("%w: split behavior %q", ErrInvalid, *s)
	}
	return b, nil
}

// span is a part of a word: one the pattern matches, or one between
// matches.
type span struct {
	start, end int
	match      bool
}

// funcSpans returns the spans of s, each character match alone a span of
// its own, as the reference does for a pattern given as a function.
func funcSpans(s string, match func(rune) bool) []span {
	var out []span
	last := 0
	for i, r := range s {
		if match(r) {
			if last < i {
				out = append(out, span{last, i, false})
			}
			last = i + utf8.RuneLen(r)
			out = append(out, span{i, last, true})
		}
	}
	if last < len(s) {
		out = append(out, span{last, len(s), false})
	}
	return out
}

// stringSpans returns the spans of s around the non-overlapping
// occurrences of pattern, left to right; an empty pattern matches nothing.
func stringSpans(s, pattern string) []span {
	if pattern == "" {
		return []span{{0, len(s), false}}
	}
	var out []span
	prev := 0
	for {
		i := strings.Index(s[prev:], pattern)
		if i < 0 {
			break
		}
		start := prev + i
		if prev < start {
			out = append(out, span{prev, start, false})
		}
		prev = start + len(pattern)
		out = append(out, span{start, prev, true})
	}
	if prev < len(s) {
		out = append(out, span{prev, len(s), false})
	}
	return out
}

// apply turns the spans into words as behavior says and appends them to
// dst: a span left marked as a match is removed.
func apply(dst []word, w word, spans []span, b behavior) []word {
	switch b {
	case isolated:
		for i := range spans {
			spans[i].match = false
		}
	case mergedWithPrevious, contiguous:
		out := spans[:0]
		prev := false
		for _, x := range spans {
			join := x.match && !prev
			if b == contiguous {
				join = x.match == prev
			}
			if join && len(out) > 0 {
				out[len(out)-1].end = x.end
			} else {
				out = append(out, span{x.start, x.end, false})
			}
			prev = x.match
		}
		spans = out
	case mergedWithNext:
		var out []span
		prev := false
		for i := len(spans) - 1; i >= 0; i-- {
			x := spans[i]
			if x.match && !prev && len(out) > 0 {
				out[len(out)-1].start = x.start
			} else {
				out = append(out, span{x.start, x.end, false})
			}
			prev = x.match
		}
		slices.Reverse(out)
		spans = out
	}
	for _, x := range spans {
		if !x.match && x.start < x.end {
			dst = append(dst, word{w.s[x.start:x.end], w.first && x.start == 0})
		}
	}
	return dst
}

// funcSplit splits where a character class matches: WhitespaceSplit,
// Punctuation, Digits and CharDelimiterSplit.
type funcSplit struct {
	match    func(rune) bool
	behavior behavior
}

func (p funcSplit) split(dst []word, w word) []word {
	return apply(dst, w, funcSpans(w.s, p.match), p.behavior)
}

// stringSplit is the Split pre-tokeniser on a string.
type stringSplit struct {
	pattern  string
	behavior behavior
	invert   bool
}

func (p stringSplit) split(dst []word, w word) []word {
	spans := stringSpans(w.s, p.pattern)
	if p.invert {
		for i := range spans {
			spans[i].match = !spans[i].match
		}
	}
	return apply(dst, w, spans, p.behavior)
}

// bertPre is BertPreTokenizer inside a Sequence: whitespace removed, then
// every punctuation character a word of its own. Alone, Tokenizer.words
// does the same without allocating.
type bertPre struct{}

func (bertPre) split(dst []word, w word) []word {
	for _, v := range apply(nil, w, funcSpans(w.s, isWhitespace), removed) {
		dst = apply(dst, v, funcSpans(v.s, isBertPunct), isolated)
	}
	return dst
}

// whitespace is the Whitespace pre-tokeniser, the reference's \w+|[^\w\s]+:
// runs of word characters and runs of other characters but whitespace.
type whitespace struct{}

func (whitespace) split(dst []word, w word) []word {
	const space, wordChar, other = 0, 1, 2
	start, class := 0, space
	for i, r := range w.s {
		c := other
		switch {
		case unicode.Is(wordTable, r):
			c = wordChar
		case isWhitespace(r):
			c = space
		}
		if c != class {
			if class != space {
				dst = append(dst, word{w.s[start:i], w.first && start == 0})
			}
			start, class = i, c
		}
	}
	if class != space {
		dst = append(dst, word{w.s[start:], w.first && start == 0})
	}
	return dst
}

// isNumeric reports the characters the Digits pre-tokeniser splits off.
func isNumeric(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.Is(numericTable, r)
}

// The prepend schemes of Metaspace.
const (
	prependAlways = iota
	prependNever
	prependFirst
)

// metaspace is the Metaspace pre-tokeniser: spaces become the replacement
// character, which is put before the text as the scheme says, and starts
// each word when split is set.
type metaspace struct {
	replacement rune
	scheme      int
	splitWords  bool
}

func parseMetaspace(p preTokenizerJSON) (preTokenizer, error) {
	m := metaspace{replacement: '▁', scheme: prependAlways, splitWords: true}
	if p.Replacement != nil {
		if utf8.RuneCountInString(*p.Replacement) != 1 {
			return nil, fmt.Errorf("%w: Metaspace replacement %q is not one character", ErrInvalid, *p.Replacement)
		}
		m.replacement, _ = utf8.DecodeRuneInString(*p.Replacement)
	}
	switch {
	case p.PrependScheme != nil:
		switch *p.PrependScheme {
		case "always":
		case "never":
			m.scheme = prependNever
		case "first":
			m.scheme = prependFirst
		default:
			return nil, fmt.Errorf("%w: Metaspace prepend_scheme %q", ErrInvalid, *p.PrependScheme)
		}
	case p.AddPrefixSpace != nil && !*p.AddPrefixSpace:
		m.scheme = prependNever
	}
	if p.Split != nil {
		m.splitWords = *p.Split
	}
	return m, nil
}

func (m metaspace) split(dst []word, w word) []word {
	rep := string(m.replacement)
	s := strings.ReplaceAll(w.s, " ", rep)
	if !strings.HasPrefix(s, rep) && (m.scheme == prependAlways || m.scheme == prependFirst && w.first) {
		s = rep + s
	}
	w.s = s
	if !m.splitWords {
		return append(dst, w)
	}
	return apply(dst, w, funcSpans(s, func(r rune) bool { return r == m.replacement }), mergedWithNext)
}

// preSequence applies pre-tokenisers in turn, each to every word the one
// before gave.
type preSequence []preTokenizer

func (p preSequence) split(dst []word, w word) []word {
	cur := []word{w}
	var next []word
	for _, q := range p {
		next = next[:0]
		for _, v := range cur {
			next = q.split(next, v)
		}
		cur, next = next, cur
	}
	return append(dst, cur...)
}
