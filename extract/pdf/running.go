package pdf

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Running headers and footers are the lines a document repeats at the top or
// bottom of its pages: a title, a chapter name, "Page 7 of 40". Left in the
// text they break passages in two at every page end and make every page
// match a search for the document's title, so they are dropped before the
// pages are joined, and the page offsets describe the text without them.
//
// Detection is conservative. Only the first and last edgeLines lines of a
// page are candidates, only in documents of at least runningMinPages pages
// with text, and a line is dropped only when one of two signs holds on at
// least runningShare of those pages:
//
//   - the same line, digits aside ("Page 7 of 40" and "Page 8 of 40" are
//     one line), stands among the edge lines of the page;
//   - the page's outermost line begins or ends with the page's printed
//     number, the PDF page number less a fixed offset: the headers of
//     books whose chapter name changes, such as "Chapter 4: Reference 11".
//     A line that begins with the number must also stand, digits aside,
//     among the edge lines of another page, so that a chapter's title that
//     happens to start with its page's number ("1 Introduction" on page 1)
//     stays; headers that end with it ("3.4. graver 28") need not.
const (
	edgeLines       = 2
	runningMinPages = 3
	runningShare    = 0.6
	// maxPrintedDigits bounds a printed page number.
	maxPrintedDigits = 5
)

// lineSpan is one line of a page text, in byte offsets [start, end) without
// its line feed.
type lineSpan struct{ start, end int }

// pageEdges is a page's candidate lines: the first and last edgeLines
// non-blank lines, in order, each once, with their keys (see lineKey).
type pageEdges struct {
	lines []lineSpan
	keys  []string
	drop  []bool
}

// dropRunningLines returns texts, the page texts of one document in page
// order (page i+1 at index i, "" for a page without text), without their
// running headers and footers. Texts keep their other lines as they were;
// a page that held nothing else becomes "". It returns texts unchanged
// when dropping would leave the document without text.
func dropRunningLines(texts []string) []string {
	edges := make([]pageEdges, len(texts))
	withText := 0
	for i, t := range texts {
		if t == "" {
			continue
		}
		withText++
		e := &edges[i]
		e.lines = edgeSpans(t, edgeLines)
		e.drop = make([]bool, len(e.lines))
		for _, l := range e.lines {
			e.keys = append(e.keys, lineKey(t[l.start:l.end]))
		}
	}
	if withText < runningMinPages {
		return texts
	}
	// pages counts, for each key, the pages with a line of that key among
	// their edge lines.
	pages := make(map[string]int)
	for _, e := range edges {
		for j, k := range e.keys {
			if !slices.Contains(e.keys[:j], k) {
				pages[k]++
			}
		}
	}
	need := max(2, int(float64(withText)*runningShare+0.999))
	dropped := markRepeated(edges, pages, need)
	dropped = markPrintedNumbers(texts, edges, pages, need) || dropped
	if !dropped {
		return texts
	}
	out := make([]string, len(texts))
	empty := true
	for i, t := range texts {
		out[i] = cutLines(t, edges[i])
		empty = empty && strings.TrimSpace(out[i]) == ""
	}
	if empty {
		return texts
	}
	return out
}

// markRepeated marks the edge lines whose key stands among the edge lines
// of at least need pages, and reports whether it marked any.
func markRepeated(edges []pageEdges, pages map[string]int, need int) bool {
	marked := false
	for _, e := range edges {
		for j, k := range e.keys {
			if pages[k] >= need {
				e.drop[j] = true
				marked = true
			}
		}
	}
	return marked
}

// markPrintedNumbers marks the outermost line left at the top and at the
// bottom of each page when it ends with the page's printed number, or
// begins with it and its key stands among the edge lines of another page
// too, provided at least need pages agree on the offset between the printed
// number and the page's place in the file. It reports whether it marked
// any line.
func markPrintedNumbers(texts []string, edges []pageEdges, pages map[string]int, need int) bool {
	// For each page, the outermost lines left and the offsets their
	// numbers suggest.
	type candidate struct {
		edge    int
		offsets []int
	}
	cands := make([][]candidate, len(texts))
	byOffset := make(map[int]int)
	for i, e := range edges {
		seen := make(map[int]bool)
		for _, j := range outermost(e) {
			l := e.lines[j]
			c := candidate{edge: j}
			for _, n := range boundaryNumbers(texts[i][l.start:l.end], pages[e.keys[j]] >= 2) {
				off := i + 1 - n
				c.offsets = append(c.offsets, off)
				if !seen[off] {
					seen[off] = true
					byOffset[off]++
				}
			}
			cands[i] = append(cands[i], c)
		}
	}
	best, bestPages := 0, 0
	for off, n := range byOffset {
		if n > bestPages || n == bestPages && off < best {
			best, bestPages = off, n
		}
	}
	if bestPages < need {
		return false
	}
	marked := false
	for i, cs := range cands {
		for _, c := range cs {
			for _, off := range c.offsets {
				if off == best {
					edges[i].drop[c.edge] = true
					marked = true
				}
			}
		}
	}
	return marked
}

// outermost returns the indexes in e.lines of the first and the last line
// not yet marked, once each.
func outermost(e pageEdges) []int {
	first, last := -1, -1
	for j := range e.lines {
		if !e.drop[j] {
			if first < 0 {
				first = j
			}
			last = j
		}
	}
	switch {
	case first < 0:
		return nil
	case first == last:
		return []int{first}
	}
	return []int{first, last}
}

// edgeSpans returns the first n and the last n non-blank lines of text, in
// order, each once. It reads only the lines it returns and those between
// them that are blank, not the whole page.
func edgeSpans(text string, n int) []lineSpan {
	var head []lineSpan
	pos := 0
	for pos < len(text) && len(head) < n {
		end := strings.IndexByte(text[pos:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += pos
		}
		if strings.TrimSpace(text[pos:end]) != "" {
			head = append(head, lineSpan{pos, end})
		}
		pos = end + 1
	}
	var tail []lineSpan
	end := len(text)
	for end > 0 && len(tail) < n {
		start := strings.LastIndexByte(text[:end], '\n') + 1
		if len(head) > 0 && start <= head[len(head)-1].start {
			break
		}
		if strings.TrimSpace(text[start:end]) != "" {
			tail = append(tail, lineSpan{start, end})
		}
		end = start - 1
	}
	for k := len(tail) - 1; k >= 0; k-- {
		head = append(head, tail[k])
	}
	return head
}

var (
	digitRun = regexp.MustCompile(`[0-9]+`)
	// romanNumeral matches the lower-case Roman numerals front matter is
	// numbered with.
	romanNumeral = regexp.MustCompile(`^[ivxlc]{1,8}$`)
)

// lineKey is what two running lines that differ only in their numbers have
// in common: the line lower-cased, its white space collapsed, every run of
// digits and a line that is only a lower-case Roman numeral read as "#".
func lineKey(line string) string {
	line = strings.Join(strings.Fields(line), " ")
	if romanNumeral.MatchString(line) {
		return "#"
	}
	return digitRun.ReplaceAllString(strings.ToLower(line), "#")
}

// boundaryNumbers returns the numbers that make up the last word of line
// and, when first is true, its first word, punctuation around them aside:
// "17" in "Chapter 3 — 17", "7" in "- 7 -" and, with first, in "7 Preface".
// A line of one word counts as beginning with it.
func boundaryNumbers(line string, first bool) []int {
	var words []string
	for _, f := range strings.Fields(line) {
		if w := strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }); w != "" {
			words = append(words, w)
		}
	}
	var nums []int
	if len(words) > 0 && first {
		if n, ok := printedNumber(words[0]); ok {
			nums = append(nums, n)
		}
	}
	if len(words) > 1 {
		if n, ok := printedNumber(words[len(words)-1]); ok {
			nums = append(nums, n)
		}
	}
	return nums
}

// printedNumber parses w as a page number: ASCII digits only, at most
// maxPrintedDigits of them.
func printedNumber(w string) (int, bool) {
	if len(w) > maxPrintedDigits {
		return 0, false
	}
	n := 0
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return 0, false
		}
		n = n*10 + int(w[i]-'0')
	}
	return n, true
}

// cutLines returns text without the lines e marks, and without the blank
// line left where a line was cut between two others.
func cutLines(text string, e pageEdges) string {
	var b strings.Builder
	pos := 0
	cut := false
	for j, l := range e.lines {
		if !e.drop[j] {
			continue
		}
		b.WriteString(text[pos:l.start])
		pos = l.end
		if pos < len(text) {
			pos++ // the line's line feed
		}
		cut = true
	}
	if !cut {
		return text
	}
	b.WriteString(text[pos:])
	s := b.String()
	// Page text never holds more than one blank line in a row (see
	// textOut.lineBreak); a cut line between two blank lines leaves two.
	for strings.Contains(s, "\n\n\n") {
		s = strings.ReplaceAll(s, "\n\n\n", "\n\n")
	}
	return strings.TrimSpace(s)
}
