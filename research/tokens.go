package research

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokens calls fn with each term of text: lowercase runs of letters and
// digits, stemmed for plurals (stem). A compound word joined by "_", "-",
// "." or "/" between letters or digits (max_connections, pg_hba.conf,
// --max-time, v2.1) is a term whole, and its parts are terms too, so that
// an identifier is found whole and by the words it is made of.
//
// Manuals and specifications are made of exact identifiers that stemming
// and splitting lose, and questions of plural and singular forms of the
// same words: the plural stem alone keeps both (see doc/research.md).
func tokens(text string, fn func(term string)) {
	termsOf(text, func(term string, _ bool) { fn(term) })
}

// termsOf calls fn with each term of text as tokens does, and whether the
// term is a part of a compound word rather than a word.
func termsOf(text string, fn func(term string, part bool)) {
	var word strings.Builder
	parts := 0 // separators inside the current word
	partStart := 0
	var partBuf [16]string
	partList := partBuf[:0]
	flush := func() {
		if word.Len() == 0 {
			return
		}
		w := word.String()
		if parts == 0 {
			fn(stem(w), false)
		} else {
			fn(w, false)
			partList = append(partList, w[partStart:])
			for _, p := range partList {
				if p != "" {
					fn(stem(p), true)
				}
			}
		}
		word.Reset()
		parts, partStart, partList = 0, 0, partBuf[:0]
	}
	for i := 0; i < len(text); {
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		switch {
		case 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
			word.WriteByte(byte(r))
		case 'A' <= r && r <= 'Z':
			word.WriteByte(byte(r) + 'a' - 'A')
		case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			word.WriteRune(unicode.ToLower(r))
		case (r == '_' || r == '-' || r == '.' || r == '/') && word.Len() > 0 && i+1 < len(text) && isWordByte(text[i+1]):
			// A separator between two word characters joins a compound.
			w := word.String()
			partList = append(partList, w[partStart:])
			word.WriteByte(byte(r))
			parts++
			partStart = word.Len()
		default:
			flush()
		}
		i += size
	}
	flush()
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c >= utf8.RuneSelf
}

// stem removes English plural endings, as Harman's S-stemmer does: "ies"
// to "y", "es" to "e" (but not "aes", "ees", "oes"), "s" dropped (but not
// "us", "ss", "is"). It leaves short words and words with digits alone.
func stem(w string) string {
	n := len(w)
	if n < 4 || w[n-1] != 's' {
		return w
	}
	for i := 0; i < n; i++ {
		if w[i] >= '0' && w[i] <= '9' {
			return w
		}
	}
	switch {
	case strings.HasSuffix(w, "ies") && !strings.HasSuffix(w, "eies") && !strings.HasSuffix(w, "aies"):
		return w[:n-3] + "y"
	case strings.HasSuffix(w, "es") && !strings.HasSuffix(w, "aes") && !strings.HasSuffix(w, "ees") && !strings.HasSuffix(w, "oes"):
		return w[:n-1]
	case strings.HasSuffix(w, "us") || strings.HasSuffix(w, "ss") || strings.HasSuffix(w, "is"):
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
	termsOf(q, func(t string, part bool) {
		if part {
			all[t] += partWeight
		} else {
			all[t]++
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
