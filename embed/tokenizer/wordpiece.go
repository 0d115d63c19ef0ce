package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// wordPiece is the greedy longest-match-first WordPiece model.
type wordPiece struct {
	vocab map[string]int32
	// cont holds the tokens that begin with the continuing-subword prefix,
	// keyed without it, so that a lookup of prefix+piece needs no string
	// to be built.
	cont     map[string]int32
	prefix   string
	unkID    int32
	maxChars int
	// maxBytes is the length of the longest key of vocab and cont: no
	// longer piece can match, so the search starts there.
	maxBytes int
}

func (w *wordPiece) init(m modelJSON) error {
	if len(m.Vocab) == 0 {
		return fmt.Errorf("%w: WordPiece model has an empty vocabulary", ErrInvalid)
	}
	w.prefix = "##"
	if m.ContinuingSubwordPrefix != nil {
		w.prefix = *m.ContinuingSubwordPrefix
	}
	w.maxChars = 100
	if m.MaxInputCharsPerWord != nil {
		w.maxChars = *m.MaxInputCharsPerWord
	}
	unk := "[UNK]"
	if m.UnkToken != nil {
		unk = *m.UnkToken
	}
	w.vocab = make(map[string]int32, len(m.Vocab))
	w.cont = make(map[string]int32)
	for tok, id := range m.Vocab {
		if id < 0 || id > 1<<30 {
			return fmt.Errorf("%w: token %q has id %d", ErrInvalid, tok, id)
		}
		w.vocab[tok] = int32(id)
		w.maxBytes = max(w.maxBytes, len(tok))
		if w.prefix != "" && strings.HasPrefix(tok, w.prefix) {
			rest := tok[len(w.prefix):]
			w.cont[rest] = int32(id)
			w.maxBytes = max(w.maxBytes, len(rest))
		}
	}
	id, ok := w.vocab[unk]
	if !ok {
		// The reference fails on the first unknown word; refusing the
		// file up front is clearer.
		return fmt.Errorf("%w: WordPiece unknown token %q is not in the vocabulary", ErrInvalid, unk)
	}
	w.unkID = id
	return nil
}

// lookup returns the id of word[start:end], with the continuing prefix when
// start > 0.
func (w *wordPiece) lookup(piece string, continuing bool) (int32, bool) {
	if continuing {
		if w.prefix == "" {
			id, ok := w.vocab[piece]
			return id, ok
		}
		id, ok := w.cont[piece]
		return id, ok
	}
	id, ok := w.vocab[piece]
	return id, ok
}

// appendIDs appends the ids of one word: the longest vocabulary entry that
// starts the word, then the longest continuation entry at each following
// position. A word that cannot be spelt that way, or is longer than
// maxChars characters, becomes the unknown token as a whole.
func (w *wordPiece) appendIDs(dst []int32, word string) []int32 {
	if utf8.RuneCountInString(word) > w.maxChars {
		return append(dst, w.unkID)
	}
	mark := len(dst)
	for start := 0; start < len(word); {
		end := len(word)
		if end-start > w.maxBytes {
			end = start + w.maxBytes
			for end > start && !utf8.RuneStart(word[end]) {
				end--
			}
		}
		found := false
		for end > start {
			if id, ok := w.lookup(word[start:end], start > 0); ok {
				dst = append(dst, id)
				found = true
				break
			}
			_, size := utf8.DecodeLastRuneInString(word[start:end])
			end -= size
		}
		if !found {
			return append(dst[:mark], w.unkID)
		}
		start = end
	}
	return dst
}
