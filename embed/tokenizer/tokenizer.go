// Package tokenizer reads a Hugging Face tokenizer.json and turns text into
// token ids exactly as Hugging Face's tokenizers library does when asked for
// no special tokens (encode(text, add_special_tokens=False)), which is how
// static embedding models such as model2vec tokenise.
//
// The model must be WordPiece, the model of BERT-family tokenizers and of
// the model2vec models distilled from them. Supported around it: the
// normalisers BertNormalizer, Lowercase, Strip, Replace of a string,
// Prepend and Sequence; the pre-tokenisers BertPreTokenizer, Whitespace,
// WhitespaceSplit, Punctuation, Digits, Metaspace, CharDelimiterSplit, Split
// on a string and Sequence, each with all its options; added tokens with all
// theirs; and truncation. The post-processor and the decoder add or change
// nothing when no special tokens are asked for, and padding only evens out
// the lengths of a batch of texts: all three are ignored. Any other model,
// normaliser or pre-tokeniser (Unicode normal forms, regular expressions,
// byte-level) is refused by Parse with an error wrapping ErrUnsupported
// that names it, so that a model is never run with a tokenisation that
// differs from the one it was trained with.
//
// The Unicode character classes (control characters, punctuation, word
// characters, digits, lowercasing, accent stripping) are those of the
// reference library, generated into unicode_tables.go by tools/tokref, so
// results do not drift with the Go release's Unicode version.
package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"unicode/utf8"
)

// Errors returned by Parse and Load; test with errors.Is.
var (
	// ErrUnsupported means the tokenizer.json uses a model, normaliser,
	// pre-tokeniser or option this package does not implement.
	ErrUnsupported = errors.New("unsupported tokenizer")
	// ErrInvalid means the tokenizer.json is malformed or inconsistent.
	ErrInvalid = errors.New("invalid tokenizer")
)

// Tokenizer turns text into token ids. It is immutable and safe for
// concurrent use.
type Tokenizer struct {
	norm normalizer // nil: no normaliser
	// preTok is BertPreTokenizer alone, split without allocating; pre is
	// any other pre-tokeniser. Neither: the whole piece is one word.
	preTok     bool
	pre        preTokenizer
	wp         wordPiece
	added      addedVocab
	truncate   int  // keep at most this many ids; 0: no truncation
	truncLeft  bool // drop from the start instead of the end
	vocab      []string
	scratchers sync.Pool
}

// Load reads and parses the tokenizer.json at path.
func Load(path string) (*Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokenizer: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// The parts of tokenizer.json that are read. Fields the encoder does not use
// are ignored: the decoder and the post-processor (with no special tokens
// requested they do not change the ids), padding (it evens out the lengths
// of the texts of a batch; each text is embedded alone), the version.
type fileJSON struct {
	Truncation   json.RawMessage `json:"truncation"`
	AddedTokens  []addedJSON     `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        json.RawMessage `json:"model"`
}

type addedJSON struct {
	ID         *int   `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

type normalizerJSON struct {
	Type string `json:"type"`
	// BertNormalizer
	CleanText          *bool `json:"clean_text"`
	HandleChineseChars *bool `json:"handle_chinese_chars"`
	StripAccents       *bool `json:"strip_accents"`
	Lowercase          *bool `json:"lowercase"`
	// Strip
	StripLeft  *bool `json:"strip_left"`
	StripRight *bool `json:"strip_right"`
	// Replace
	Pattern *patternJSON `json:"pattern"`
	Content *string      `json:"content"`
	// Prepend
	Prepend *string `json:"prepend"`
	// Sequence
	Normalizers []json.RawMessage `json:"normalizers"`
}

type modelJSON struct {
	Type                    string         `json:"type"`
	UnkToken                *string        `json:"unk_token"`
	ContinuingSubwordPrefix *string        `json:"continuing_subword_prefix"`
	MaxInputCharsPerWord    *int           `json:"max_input_chars_per_word"`
	Vocab                   map[string]int `json:"vocab"`
}

type truncationJSON struct {
	MaxLength *int   `json:"max_length"`
	Direction string `json:"direction"`
	Strategy  string `json:"strategy"`
}

func isNull(m json.RawMessage) bool {
	m = bytes.TrimSpace(m)
	return len(m) == 0 || bytes.Equal(m, []byte("null"))
}

// Parse reads a tokenizer.json document.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %v", ErrInvalid, err)
	}
	t := &Tokenizer{}

	if isNull(f.Model) {
		return nil, fmt.Errorf("%w: tokenizer.json has no model", ErrInvalid)
	}
	var m modelJSON
	if err := json.Unmarshal(f.Model, &m); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json model: %v", ErrInvalid, err)
	}
	if m.Type != "WordPiece" {
		return nil, fmt.Errorf("%w: tokenizer model %q (only WordPiece is supported)", ErrUnsupported, m.Type)
	}
	if err := t.wp.init(m); err != nil {
		return nil, err
	}

	norm, err := parseNormalizer(f.Normalizer)
	if err != nil {
		return nil, err
	}
	t.norm = norm
	pre, err := parsePreTokenizer(f.PreTokenizer)
	if err != nil {
		return nil, err
	}
	if _, ok := pre.(bertPre); ok {
		t.preTok = true
	} else if pre != nil {
		t.pre = pre
	}

	if !isNull(f.Truncation) {
		var tr truncationJSON
		if err := json.Unmarshal(f.Truncation, &tr); err != nil {
			return nil, fmt.Errorf("%w: tokenizer.json truncation: %v", ErrInvalid, err)
		}
		if tr.MaxLength == nil || *tr.MaxLength < 0 {
			return nil, fmt.Errorf("%w: truncation without a valid max_length", ErrInvalid)
		}
		switch tr.Direction {
		case "", "Right":
		case "Left":
			t.truncLeft = true
		default:
			return nil, fmt.Errorf("%w: truncation direction %q", ErrUnsupported, tr.Direction)
		}
		if tr.Strategy == "OnlySecond" {
			// The reference fails on every single text.
			return nil, fmt.Errorf("%w: truncation strategy OnlySecond, which needs pairs of texts", ErrUnsupported)
		}
		t.truncate = *tr.MaxLength
		if t.truncate == 0 {
			// max_length 0 keeps nothing; represent it as -1 so that 0
			// can mean "no truncation".
			t.truncate = -1
		}
	}

	if err := t.added.init(f.AddedTokens, &t.wp, t.norm); err != nil {
		return nil, err
	}
	if err := t.buildVocab(); err != nil {
		return nil, err
	}
	return t, nil
}

// buildVocab lists the tokens by id, the model's and the added ones, as the
// reference's get_vocab() does. Ids must be dense: a model has one embedding
// row per id.
func (t *Tokenizer) buildVocab() error {
	byID := map[int]string{}
	for tok, id := range t.wp.vocab {
		byID[int(id)] = tok
	}
	for _, a := range t.added.tokens {
		if prev, ok := byID[a.id]; ok && prev != a.content {
			// The added token takes the id of a model token of the
			// same content only; any other clash is an error.
			if mid, ok := t.wp.vocab[a.content]; !ok || int(mid) != a.id {
				return fmt.Errorf("%w: added token %q has id %d, which belongs to %q", ErrInvalid, a.content, a.id, prev)
			}
		}
		byID[a.id] = a.content
	}
	ids := make([]int, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for i, id := range ids {
		if id != i {
			return fmt.Errorf("%w: token ids are not dense: id %d is missing", ErrInvalid, i)
		}
	}
	t.vocab = make([]string, len(ids))
	for id, tok := range byID {
		t.vocab[id] = tok
	}
	return nil
}

// VocabSize is the number of distinct token ids, added tokens included.
func (t *Tokenizer) VocabSize() int { return len(t.vocab) }

// Token returns the token of id, or "" when id is out of range.
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.vocab) {
		return ""
	}
	return t.vocab[id]
}

// UnknownID returns the id of the WordPiece model's unknown token, which
// stands for any word the vocabulary cannot spell.
func (t *Tokenizer) UnknownID() int { return int(t.wp.unkID) }

// scratch holds the buffers of one Encode call.
type scratch struct {
	pieces []piece
	sub    []piece
	norm   normBuf
	words  []word
}

// Encode appends the ids of text to dst and returns the extended slice. It
// matches encode(text, add_special_tokens=False) of the reference library:
// added tokens (special ones included) are recognised in the text, and no
// special tokens are added around it.
func (t *Tokenizer) Encode(dst []int32, text string) []int32 {
	s, _ := t.scratchers.Get().(*scratch)
	if s == nil {
		s = &scratch{}
	}
	defer t.scratchers.Put(s)
	start := len(dst)

	if !utf8.ValidString(text) {
		// The reference only takes valid strings; Go strings may hold
		// anything. Invalid bytes become U+FFFD, which the BERT
		// normaliser then removes.
		text = string(bytes.ToValidUTF8([]byte(text), []byte("\uFFFD")))
	}

	// First the added tokens matched against the raw text, then each
	// remaining piece is normalised and searched for the added tokens
	// matched against normalised text; what is left goes through the
	// pre-tokeniser and the model.
	s.pieces = t.added.split(s.pieces[:0], text, false)
	for _, p := range s.pieces {
		if p.id >= 0 {
			dst = append(dst, p.id)
			continue
		}
		normalized := text[p.start:p.end]
		if t.norm != nil {
			normalized = t.norm.normalize(&s.norm, normalized)
		}
		s.sub = t.added.split(s.sub[:0], normalized, true)
		for _, q := range s.sub {
			if q.id >= 0 {
				dst = append(dst, q.id)
				continue
			}
			dst = t.words(dst, s, word{normalized[q.start:q.end], p.start == 0 && q.start == 0})
		}
	}

	if t.truncate != 0 {
		n := max(t.truncate, 0)
		if got := len(dst) - start; got > n {
			if t.truncLeft {
				copy(dst[start:], dst[len(dst)-n:])
			}
			dst = dst[:start+n]
		}
	}
	return dst
}

// words splits normalised text w with the pre-tokeniser and appends the
// WordPiece ids of each word. BertPreTokenizer alone, the pre-tokeniser of
// BERT-family models, splits here without allocating: whitespace removed,
// every punctuation character a word of its own.
func (t *Tokenizer) words(dst []int32, sc *scratch, w word) []int32 {
	s := w.s
	if t.pre != nil {
		sc.words = t.pre.split(sc.words[:0], w)
		for _, v := range sc.words {
			dst = t.wp.appendIDs(dst, v.s)
		}
		return dst
	}
	if !t.preTok {
		if s == "" {
			return dst
		}
		return t.wp.appendIDs(dst, s)
	}
	wordStart := -1
	for i, r := range s {
		switch {
		case isWhitespace(r):
			if wordStart >= 0 {
				dst = t.wp.appendIDs(dst, s[wordStart:i])
				wordStart = -1
			}
		case isBertPunct(r):
			if wordStart >= 0 {
				dst = t.wp.appendIDs(dst, s[wordStart:i])
				wordStart = -1
			}
			dst = t.wp.appendIDs(dst, s[i:i+utf8.RuneLen(r)])
		default:
			if wordStart < 0 {
				wordStart = i
			}
		}
	}
	if wordStart >= 0 {
		dst = t.wp.appendIDs(dst, s[wordStart:])
	}
	return dst
}
