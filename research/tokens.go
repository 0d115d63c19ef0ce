package research

import (
	"bytes"
	"unicode"
	"unicode/utf8"
)

// tokens calls fn with each term of text: lowercase runs of letters and
// digits, stemmed for plurals (stemBytes). A compound word joined by "_", "-",
// "." or "/" between letters or digits (max_connections, pg_hba.conf,
// --max-time, v2.1) is a term whole, and its parts are terms too, so that
// an identifier is found whole and by the words it is made of.
//
// Manuals and specifications are made of exact identifiers that stemming
// and splitting lose, and questions of plural and singular forms of the
// same words: the plural stem alone keeps both (see doc/research.md).
func tokens(text string, fn func(term string)) {
	termsOf(text, func(term []byte, _ bool) { fn(string(term)) })
}

// termsOf calls fn with each term of text as tokens does, and whether the
// term is a part of a compound word rather than a word. The term's bytes
// are fn's only during the call: reading a page's words allocates nothing.
func termsOf(text string, fn func(term []byte, part bool)) {
	var buf [64]byte
	word := buf[:0]
	var stemBuf [64]byte
	var partBuf [16][2]int
	parts := partBuf[:0] // the parts of a compound, as offsets in word
	partStart := 0
	flush := func() {
		if len(word) == 0 {
			return
		}
		if len(parts) == 0 {
			fn(stemBytes(word, stemBuf[:0]), false)
		} else {
			fn(word, false)
			parts = append(parts, [2]int{partStart, len(word)})
			for _, p := range parts {
				if p[1] > p[0] {
					fn(stemBytes(word[p[0]:p[1]], stemBuf[:0]), true)
				}
			}
		}
		word, parts, partStart = word[:0], parts[:0], 0
	}
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
			word = append(word, c)
			i++
			continue
		case 'A' <= c && c <= 'Z':
			word = append(word, c+'a'-'A')
			i++
			continue
		case c < utf8.RuneSelf:
			if (c == '_' || c == '-' || c == '.' || c == '/') && len(word) > 0 && i+1 < len(text) && isWordByte(text[i+1]) {
				// A separator between two word characters joins a
				// compound.
				parts = append(parts, [2]int{partStart, len(word)})
				word = append(word, c)
				partStart = len(word)
			} else {
				flush()
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			word = utf8.AppendRune(word, unicode.ToLower(r))
		} else {
			flush()
		}
		i += size
	}
	flush()
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c >= utf8.RuneSelf
}

// stemBytes removes English plural endings, as Harman's S-stemmer does:
// "ies" to "y" (written to scratch), "es" to "e" (but not "aes", "ees",
// "oes"), "s" dropped (but not "us", "ss", "is"). It leaves short words and
// words with digits alone.
func stemBytes(w, scratch []byte) []byte {
	n := len(w)
	if n < 4 || w[n-1] != 's' {
		return w
	}
	for _, c := range w {
		if '0' <= c && c <= '9' {
			return w
		}
	}
	ends := func(s string) bool { return bytes.HasSuffix(w, []byte(s)) }
	switch {
	case ends("ies") && !ends("eies") && !ends("aies"):
		return append(append(scratch, w[:n-3]...), 'y')
	case ends("es") && !ends("aes") && !ends("ees") && !ends("oes"):
		return w[:n-1]
	case ends("us") || ends("ss") || ends("is"):
		return w
	}
	return w[:n-1]
}

// stopWords are the words of a question that say how it is asked, not what
// about: dropped from queries (not from passages), unless a query holds
// nothing else.
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true, "in": true, "on": true,
	"at": true, "by": true, "for": true, "with": true, "from": true, "as": true, "into": true, "about": true,
	"is": true, "are": true, "was": true, "were": true, "be": true, "been": true, "being": true, "am": true,
	"do": true, "doe": true, "does": true, "did": true, "done": true, "have": true, "ha": true, "has": true, "had": true,
	"what": true, "which": true, "who": true, "whom": true, "whose": true, "when": true, "where": true, "why": true, "how": true,
	"i": true, "me": true, "my": true, "we": true, "our": true, "you": true, "your": true, "it": true, "its": true,
	"this": true, "that": true, "these": true, "those": true, "there": true, "their": true, "they": true, "them": true,
	"can": true, "could": true, "should": true, "would": true, "will": true, "shall": true, "may": true, "might": true, "must": true,
	"if": true, "then": true, "than": true, "so": true, "such": true, "any": true, "some": true, "all": true,
	"not": true, "no": true, "yes": true, "please": true,
}

// partWeight is the weight of a query term that is a part of a compound
// word of the query: "work_mem" asks for work_mem, and only a little for
// any work and any mem (maintenance_work_mem, hash_mem_multiplier).
const partWeight = 0.3

// queryTerms returns the distinct terms of a query with their weights: how
// often each is asked for, a part of a compound word counting partWeight;
// stop words are left out unless nothing else is left.
func queryTerms(q string) map[string]float64 {
	all := map[string]float64{}
	termsOf(q, func(t []byte, part bool) {
		if part {
			all[string(t)] += partWeight
		} else {
			all[string(t)]++
		}
	})
	kept := map[string]float64{}
	for t, n := range all {
		if !stopWords[t] {
			kept[t] = n
		}
	}
	if len(kept) == 0 {
		return all
	}
	return kept
}
