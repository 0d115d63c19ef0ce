package research

import (
	"strings"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/extract"
)

// PassageSize is the most characters of one passage: a few sentences, the
// size of an answer and its context. Sections shorter than this are one
// passage each; longer ones are cut by the documents' chunker at paragraph,
// line and sentence ends.
const PassageSize = 550

// headingSep joins the headings of a heading path.
const headingSep = " > "

// shown is the passage's text as a reader gets it.
func (p *passage) shown() string {
	if p.context == "" {
		return p.text
	}
	return p.context + "\n" + p.text
}

// passage is a piece of a page's main content, as ranked.
type passage struct {
	// page is the index of the page it comes from, ord its place there.
	page, ord int
	// text is the passage as shown: whole sentences, heading lines
	// dropped (the heading path says them), links reduced to their text.
	text string
	// heading is the heading path of the section holding it.
	heading string
	// title is the page's title: what the whole page is about, scored as
	// one more line of the passage.
	title string
	// context is shown before text but not scored: the header row of the
	// table the passage continues.
	context string
	// linkShare is the part of the passage's characters inside links: a
	// table of contents or a list of related pages is mostly links.
	linkShare float64
}

// split cuts a page's content (Markdown, as fetch writes it) into passages
// of whole sentences under their heading paths. Each section (the text
// under a heading, or a PDF page under its "--- page N ---" line) is a span
// of its own that chunks never cross, and each fenced code block is one too,
// so that a passage cuts one only when it is longer than a passage.
func split(content, title string, page int) []passage {
	doc, info := sections(content)
	if doc.Text == "" {
		return nil
	}
	chunks := chunk.Split(doc, chunk.Options{Size: PassageSize, Sentences: true})
	out := make([]passage, 0, len(chunks))
	for _, c := range chunks {
		sp := spanAt(doc.Spans, c.Start)
		heading := info[sp].heading
		text, linked := clean(c.Content)
		// A label begins its section; the heading path says it.
		text = dropLabel(text, lastHeading(heading))
		if text == "" {
			continue
		}
		p := passage{page: page, ord: len(out), text: text, heading: heading, title: title}
		if head := info[sp].tableHead; head != "" && !strings.HasPrefix(c.Content, head) {
			// A table's rows mean what its header row says: shown with
			// them, not scored by them (every part of the table has it).
			p.context, _ = clean(head)
		}
		p.linkShare = min(float64(linked)/float64(utf8.RuneCountInString(text)), 1)
		out = append(out, p)
	}
	return out
}

// dropLabel removes the lines of label from the start of text.
func dropLabel(text, label string) string {
	if label == "" {
		return text
	}
	rest := text
	var said []string
	for range 3 {
		line, after, _ := strings.Cut(rest, "\n")
		said = append(said, strings.TrimSpace(strings.ReplaceAll(line, "`", "")))
		rest = after
		if strings.Join(said, ", ") == label {
			return strings.TrimSpace(rest)
		}
	}
	return text
}

// lastHeading is the last heading of a heading path.
func lastHeading(path string) string {
	if i := strings.LastIndex(path, headingSep); i >= 0 {
		return path[i+len(headingSep):]
	}
	return path
}

// spanAt returns the index of the span holding rune offset pos.
func spanAt(spans []extract.Span, pos int) int {
	lo, hi := 0, len(spans)
	for lo < hi {
		m := (lo + hi) / 2
		if spans[m].End <= pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return min(lo, len(spans)-1)
}

// labelLevel is the heading level of a label: below every Markdown heading.
const labelLevel = 7

// spanInfo is what a span of a page's content is under.
type spanInfo struct {
	// heading is the span's heading path.
	heading string
	// tableHead is, for a table, its header and delimiter rows, which a
	// passage of its later rows repeats.
	tableHead string
}

// sections reads content's ATX headings ("## Title", outside fenced code),
// labels (see isLabel) and PDF page lines, and returns it as a document with
// one span per section, code block and table, in order and covering the
// text, and what each span is under.
func sections(content string) (*extract.Document, []spanInfo) {
	doc := &extract.Document{Text: content}
	var infos []spanInfo
	tableHead := ""        // the header of the table being read
	var path []string      // the current heading path
	var levels []int       // the level of each entry of path
	heading := ""          // the path of the current section
	spanStart, pos := 0, 0 // rune offsets
	fence := ""            // the open code fence, "" outside one
	// Each section's first span is a Break, where every chunk ends; a code
	// block's is not, so that it may share a passage with the sentences
	// around it.
	newSection := true
	cut := func(at int) {
		if at > spanStart {
			doc.Spans = append(doc.Spans, extract.Span{Start: spanStart, End: at, Break: newSection})
			infos = append(infos, spanInfo{heading: heading, tableHead: tableHead})
			newSection = false
		}
		spanStart = at
	}
	enter := func(level int, title string) {
		cut(pos)
		newSection = true
		for len(levels) > 0 && levels[len(levels)-1] >= level {
			levels, path = levels[:len(levels)-1], path[:len(path)-1]
		}
		if title != "" {
			levels, path = append(levels, level), append(path, title)
		}
		heading = strings.Join(path, headingSep)
	}
	lines := strings.SplitAfter(content, "\n")
	for i, line := range lines {
		n := utf8.RuneCountInString(line)
		trimmed := strings.TrimSpace(line)
		isRow := fence == "" && strings.HasPrefix(trimmed, "|")
		switch {
		case tableHead != "" && !isRow:
			cut(pos)
			tableHead = ""
		case tableHead == "" && isRow && i+1 < len(lines) && isDelimiterRow(lines[i+1]):
			cut(pos)
			tableHead = line + lines[i+1]
		}
		switch {
		case isRow:
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
				cut(pos + n)
			}
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
			cut(pos)
		default:
			if level, title := atxHeading(trimmed); level > 0 {
				if admonitions[strings.ToLower(title)] {
					// A note ends where Markdown no longer says: it is
					// under its section, and what follows is too.
					level = labelLevel
				}
				enter(level, title)
			} else if num, ok := pdfPage(trimmed); ok {
				enter(1, "page "+num)
			} else if label, ok := isLabel(lines, i); ok {
				enter(labelLevel, label)
			}
		}
		pos += n
	}
	cut(pos)
	return doc, infos
}

// isDelimiterRow reports whether line is a Markdown table's delimiter row,
// such as "|---|:--:|".
func isDelimiterRow(line string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, "|") && strings.Contains(t, "-") && strings.Trim(t, "|-: \t") == ""
}

// admonitions are the headings of notes set apart from the text, whose end
// Markdown does not mark.
var admonitions = map[string]bool{"note": true, "tip": true, "warning": true, "caution": true, "important": true}

// isLabel reports whether a label begins at lines[i], and its text: a
// paragraph of one to three short lines without a sentence's end, followed
// by a paragraph, such as the term of a definition list ("max_connections
// (integer)", or "-f file" and "--file=file" on two lines) or a bold
// caption. The text under it, up to the next label or heading, is about
// it: a passage never runs past the next label, and the label ends its
// heading path.
func isLabel(lines []string, i int) (string, bool) {
	blank := func(j int) bool { return j < 0 || j >= len(lines) || strings.TrimSpace(lines[j]) == "" }
	if !blank(i - 1) {
		return "", false
	}
	end := i
	for !blank(end) {
		end++
	}
	if end-i > 3 || end+1 >= len(lines) || blank(end+1) {
		return "", false
	}
	var parts []string
	for _, line := range lines[i:end] {
		t := strings.TrimSpace(line)
		if len(t) > 400 {
			// Longer than a label's words and a link or two can be.
			return "", false
		}
		switch {
		case strings.HasPrefix(t, "**"):
			// Bold: a caption or a term.
		case strings.ContainsRune("+*|><!#", rune(t[0])), strings.HasPrefix(t, "- "):
			// A list item, a table row, a quote, markup or an image.
			return "", false
		}
		text, _ := clean(t)
		text = strings.TrimSpace(strings.ReplaceAll(text, "`", ""))
		if text == "" || strings.ContainsRune(".!?:;,\"", rune(text[len(text)-1])) {
			return "", false
		}
		parts = append(parts, text)
	}
	label := strings.Join(parts, ", ")
	if utf8.RuneCountInString(label) > 100 {
		return "", false
	}
	return label, true
}

// atxHeading returns the level and text of a Markdown ATX heading line, or
// level 0.
func atxHeading(line string) (int, string) {
	if len(line) > 400 {
		// Text, not a heading: no heading is that long.
		return 0, ""
	}
	level := 0
	for level < len(line) && line[level] == '#' {
		level++
	}
	if level == 0 || level > 6 || level < len(line) && line[level] != ' ' && line[level] != '\t' {
		return 0, ""
	}
	title := strings.TrimSpace(line[level:])
	// A closing sequence of #s is not part of the title.
	if t := strings.TrimRight(title, "#"); t != title && (t == "" || strings.HasSuffix(t, " ")) {
		title = strings.TrimSpace(t)
	}
	title, _ = clean(title)
	return level, title
}

// pdfPage reports whether line is the "--- page N ---" line fetch writes
// before each page of a PDF, and N.
func pdfPage(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "--- page ")
	if !ok {
		return "", false
	}
	num, ok := strings.CutSuffix(rest, " ---")
	if !ok || num == "" || strings.Trim(num, "0123456789") != "" {
		return "", false
	}
	return num, true
}

// clean makes a chunk of Markdown readable at the least cost in
// characters: heading lines dropped (the passage's heading path holds
// them), links and images reduced to their text, emphasis markers and
// runs of blank lines removed. It returns the text and how many of the
// chunk's characters were link text.
func clean(md string) (string, int) {
	var b strings.Builder
	b.Grow(len(md))
	linked := 0
	blank := false
	for line := range strings.SplitSeq(md, "\n") {
		t := strings.TrimRight(line, " \t\r")
		if strings.TrimSpace(t) == "" {
			blank = b.Len() > 0
			continue
		}
		if lvl, _ := atxHeading(strings.TrimSpace(t)); lvl > 0 {
			continue
		}
		if _, ok := pdfPage(strings.TrimSpace(t)); ok {
			continue
		}
		if b.Len() > 0 {
			if blank {
				b.WriteString("\n\n")
			} else {
				b.WriteByte('\n')
			}
		}
		blank = false
		linked += writeInline(&b, t)
	}
	return strings.TrimSpace(b.String()), linked
}

// writeInline writes a line of Markdown with links and images reduced to
// their text ("[text](url)" to "text", "![alt](src)" dropped) and bold
// markers removed, and returns how many characters were link text.
func writeInline(b *strings.Builder, s string) int {
	linked := 0
	for len(s) > 0 {
		i := strings.IndexAny(s, "[!*")
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "**"):
			s = s[2:]
		case strings.HasPrefix(s, "!["):
			if _, rest, ok := link(s[1:]); ok {
				s = rest
				continue
			}
			b.WriteByte('!')
			s = s[1:]
		case s[0] == '[':
			if text, rest, ok := link(s); ok {
				b.WriteString(text)
				linked += utf8.RuneCountInString(text)
				s = rest
				continue
			}
			b.WriteByte('[')
			s = s[1:]
		default:
			b.WriteByte(s[0])
			s = s[1:]
		}
	}
	return linked
}

// link parses "[text](target)" at the start of s, brackets nested one deep
// in text, and returns text and what follows.
//
// It looks no further than a link's text and target can be long (the
// Markdown fetch writes keeps both under these bounds), so that a line of
// many "[" is read in linear time.
func link(s string) (text, rest string, ok bool) {
	const maxText, maxTarget = 300, 2000
	depth := 0
	for i := 1; i < len(s) && i <= maxText; i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
				continue
			}
			if i+1 >= len(s) || s[i+1] != '(' {
				return "", "", false
			}
			// The target ends at the ")" that balances its "(": a
			// Wikipedia-style address holds parentheses of its own.
			open := 0
			for j := i + 2; j < len(s) && j <= i+2+maxTarget; j++ {
				switch s[j] {
				case '(':
					open++
				case ')':
					if open == 0 {
						return s[1:i], s[j+1:], true
					}
					open--
				}
			}
			return "", "", false
		}
	}
	return "", "", false
}
