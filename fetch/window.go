package fetch

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Window returns the part of content that starts at rune start and holds at
// most maxLen runes, for reading a long page in several calls. When the
// page goes on past the window, the cut is moved back to the last paragraph
// break, line break or space in the window's final fifth, so that a word is
// not split, and truncated is true; next is the start of the following
// window (equal to total when nothing follows). total is the length of
// content in runes. A negative start counts as 0; maxLen below 1 counts as 1.
func Window(content string, start, maxLen int) (text string, next int, total int, truncated bool) {
	total = utf8.RuneCountInString(content)
	start = max(start, 0)
	maxLen = max(maxLen, 1)
	if start >= total {
		return "", total, total, false
	}
	from := advance(content, start)
	rest := content[from:]
	if total-start <= maxLen {
		return rest, total, total, false
	}
	end := advance(rest, maxLen)
	cut := end
	floor := advance(rest, maxLen-maxLen/5)
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(rest[floor:end], sep); i >= 0 {
			cut = floor + i + len(sep)
			break
		}
	}
	text = rest[:cut]
	return text, start + utf8.RuneCountInString(text), total, true
}

// Section returns the part of Markdown content under the first heading
// whose text contains heading (case-insensitive, Markdown emphasis, code
// and link syntax ignored): the heading line and everything up to the next
// heading of the same or a higher level. ATX ("## Install") and setext
// (underlined) headings count; lines in fenced code blocks do not. The
// "--- page N ---" markers of PDF text count as top-level headings, so
// heading "page 3" selects a page. It returns false when no heading matches.
func Section(content, heading string) (string, bool) {
	want := headingKey(heading)
	if want == "" {
		return "", false
	}
	lines := strings.SplitAfter(content, "\n")
	startLine, level := -1, 0
	var fence string
	offset := 0
	starts := make([]int, len(lines)) // byte offset of each line
	for i, line := range lines {
		starts[i] = offset
		offset += len(line)
	}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\r\n")
		if fence != "" {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := fenceMarker(line); f != "" {
			fence = f
			continue
		}
		lvl, text, first := headingAt(lines, i)
		if lvl == 0 {
			continue
		}
		if startLine >= 0 {
			if lvl <= level {
				return strings.TrimRight(content[starts[startLine]:starts[first]], " \t\r\n"), true
			}
			continue
		}
		if strings.Contains(headingKey(text), want) {
			startLine, level = first, lvl
		}
	}
	if startLine < 0 {
		return "", false
	}
	return strings.TrimRight(content[starts[startLine]:], " \t\r\n"), true
}

var (
	atxHeading  = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	pageMarker  = regexp.MustCompile(`^--- (page \d+) ---$`)
	setextLine  = regexp.MustCompile(`^ {0,3}(=+|-{2,})[ \t]*$`)
	listOrQuote = regexp.MustCompile(`^ {0,3}([-*+>]|\d+[.)])(\s|$)`)
)

// headingAt reports whether line i is a heading, or the underline of a
// setext heading; first is the heading's first line.
func headingAt(lines []string, i int) (level int, text string, first int) {
	line := strings.TrimRight(lines[i], "\r\n")
	if m := pageMarker.FindStringSubmatch(line); m != nil {
		return 1, m[1], i
	}
	if m := atxHeading.FindStringSubmatch(line); m != nil {
		return len(m[1]), m[2], i
	}
	if i > 0 {
		if m := setextLine.FindStringSubmatch(line); m != nil {
			prev := strings.TrimRight(lines[i-1], "\r\n")
			if strings.TrimSpace(prev) != "" && !listOrQuote.MatchString(prev) && !atxHeading.MatchString(prev) &&
				fenceMarker(prev) == "" && !setextLine.MatchString(prev) {
				if m[1][0] == '=' {
					return 1, prev, i - 1
				}
				return 2, prev, i - 1
			}
		}
	}
	return 0, "", 0
}

// fenceMarker returns "```" or "~~~" when line opens or closes a fenced
// code block.
func fenceMarker(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return ""
	}
	for _, f := range []string{"```", "~~~"} {
		if strings.HasPrefix(t, f) {
			return f
		}
	}
	return ""
}

var mdLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// headingKey normalises heading text for matching: link targets, emphasis
// and code marks dropped, spaces collapsed, lower case.
func headingKey(s string) string {
	s = mdLink.ReplaceAllString(s, "$1")
	s = strings.NewReplacer("*", "", "_", " ", "`", "", "\\", "").Replace(s)
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}
