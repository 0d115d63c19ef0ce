package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of added_tokens: a string recognised in the text
// before any other processing and given its own id.
type addedToken struct {
	id         int
	content    string
	pattern    string // what is searched for: content, or content normalised
	singleWord bool
	lstrip     bool
	rstrip     bool
	normalized bool
}

// addedVocab finds added tokens in text. Tokens with normalized=false are
// searched for in the raw text, the others in the normalised text, each set
// leftmost first and longest among those starting at the same place, as the
// reference's Aho-Corasick automaton does.
type addedVocab struct {
	tokens []addedToken
	// byFirst indexes the tokens of each set by the first byte of their
	// pattern: raw (index 0) and normalised (index 1). An array, not a
	// map: it is consulted for every byte of every text.
	byFirst [2][256][]int
	// count is the number of tokens in each set.
	count [2]int
}

// piece is a span of text, matched by the added token id or unmatched (-1).
type piece struct {
	start, end int
	id         int32
}

func (a *addedVocab) init(list []addedJSON, wp *wordPiece, norm normalizer) error {
	var buf normBuf
	seen := map[string]int{}
	for _, j := range list {
		if j.Content == "" {
			continue
		}
		if j.ID == nil {
			return fmt.Errorf("%w: added token %q has no id", ErrInvalid, j.Content)
		}
		id := *j.ID
		if mid, ok := wp.vocab[j.Content]; ok && int(mid) != id {
			return fmt.Errorf("%w: added token %q has id %d but the vocabulary gives it %d", ErrInvalid, j.Content, id, mid)
		}
		if id < 0 || id > 1<<30 {
			return fmt.Errorf("%w: added token %q has id %d", ErrInvalid, j.Content, id)
		}
		t := addedToken{
			id:         id,
			content:    j.Content,
			pattern:    j.Content,
			singleWord: j.SingleWord,
			lstrip:     j.LStrip,
			rstrip:     j.RStrip,
			// An added token is normalised unless it says otherwise.
			normalized: j.Normalized == nil || *j.Normalized,
		}
		if t.normalized && norm != nil {
			t.pattern = strings.Clone(norm.normalize(&buf, t.content))
		}
		if t.pattern == "" {
			// Normalised to nothing: an empty pattern matches nowhere.
			continue
		}
		set := 0
		if t.normalized {
			set = 1
		}
		key := fmt.Sprintf("%d:%s", set, t.pattern)
		if i, ok := seen[key]; ok {
			// Two tokens with the same pattern: the automaton keeps one
			// value per pattern, the last one added.
			a.tokens[i] = t
			continue
		}
		seen[key] = len(a.tokens)
		a.byFirst[set][t.pattern[0]] = append(a.byFirst[set][t.pattern[0]], len(a.tokens))
		a.count[set]++
		a.tokens = append(a.tokens, t)
	}
	return nil
}

// find returns the token of the set whose pattern starts leftmost in s at or
// after from, the longest of those starting there, and where it starts; -1
// when there is none.
func (a *addedVocab) find(s string, from int, set int) (tok, at int) {
	idx := &a.byFirst[set]
	for i := from; i < len(s); i++ {
		cands := idx[s[i]]
		if len(cands) == 0 {
			continue
		}
		best := -1
		for _, c := range cands {
			p := a.tokens[c].pattern
			if strings.HasPrefix(s[i:], p) && (best < 0 || len(p) > len(a.tokens[best].pattern)) {
				best = c
			}
		}
		if best >= 0 {
			return best, i
		}
	}
	return -1, -1
}

// split appends to dst the pieces of s: the added tokens of the set (raw or
// normalised) found in it and the spans between them. With no tokens in the
// set, s is one unmatched piece.
func (a *addedVocab) split(dst []piece, s string, normalized bool) []piece {
	set := 0
	if normalized {
		set = 1
	}
	if a.count[set] == 0 {
		if s != "" {
			dst = append(dst, piece{0, len(s), -1})
		}
		return dst
	}
	offset := 0 // end of the last match kept
	for pos := 0; pos < len(s); {
		ti, start := a.find(s, pos, set)
		if ti < 0 {
			break
		}
		t := &a.tokens[ti]
		stop := start + len(t.pattern)
		// The search goes on after this match whether or not it is
		// kept, as the automaton's iterator does.
		pos = stop
		if t.singleWord {
			startOK := start == 0 || !endsWithWordChar(s[:start])
			stopOK := stop == len(s) || !startsWithWordChar(s[stop:])
			if !startOK || !stopOK {
				continue
			}
		}
		if t.lstrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), offset)
		}
		if t.rstrip {
			stop = len(s) - len(strings.TrimLeftFunc(s[stop:], unicode.IsSpace))
		}
		if offset < start {
			dst = append(dst, piece{offset, start, -1})
		}
		dst = append(dst, piece{start, stop, int32(t.id)})
		offset = stop
	}
	if offset < len(s) {
		dst = append(dst, piece{offset, len(s), -1})
	}
	return dst
}

// isWordChar is the \w class of the reference's regular expressions:
// alphabetic, marks, decimal digits, connector punctuation and the joiners.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.In(r, unicode.Nl, unicode.Other_Alphabetic, unicode.M, unicode.Nd, unicode.Pc, unicode.Join_Control)
}

func endsWithWordChar(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordChar(r)
}

func startsWithWordChar(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordChar(r)
}
