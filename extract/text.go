package extract

import (
	"bytes"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"

	"github.com/mcpsearch/mcpsearch/extract/internal/htmltext"
)

// extractText keeps plain text and Markdown verbatim apart from encoding
// repairs. Markdown stays as written: its markup is readable, and rewriting it
// would complicate the offsets that chunks point into for little gain.
func extractText(data []byte) (*Document, error) {
	return singleDocument(cleanText(decodeBytes(data))), nil
}

// extractMarkdown reads Markdown as extractText does, verbatim, and gives
// each ATX heading ("## Install", outside fenced code blocks) a span
// holding its heading path, as an HTML page's headings have: a chunk of a
// Markdown file, or of a crawled page stored as Markdown, is cited under
// its section.
func extractMarkdown(data []byte) (*Document, error) {
	doc := singleDocument(cleanText(decodeBytes(data)))
	var headings []htmltext.Heading
	offset, fence := 0, ""
	for line := range strings.SplitSeq(doc.Text, "\n") {
		t := strings.TrimLeft(line, " ")
		if len(line)-len(t) > 3 {
			t = "" // indented code
		}
		switch {
		case fence != "":
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
		case strings.HasPrefix(t, "```"), strings.HasPrefix(t, "~~~"):
			fence = t[:3]
		default:
			if level, title := atxHeading(t); level > 0 {
				headings = append(headings, htmltext.Heading{Level: level, Title: title, Offset: offset})
			}
		}
		offset += utf8.RuneCountInString(line) + 1
	}
	doc.Spans = headingSpans(headings, doc.Pages[0].End, nil)
	return doc, nil
}

// atxHeading returns the level and text of a Markdown ATX heading line
// ("## Install ##"), or 0.
func atxHeading(line string) (int, string) {
	level := 0
	for level < len(line) && line[level] == '#' {
		level++
	}
	if level == 0 || level > 6 || level < len(line) && line[level] != ' ' && line[level] != '\t' {
		return 0, ""
	}
	title := strings.TrimSpace(line[level:])
	if t := strings.TrimRight(title, "#"); t == "" || strings.HasSuffix(t, " ") {
		title = strings.TrimSpace(t)
	}
	if title == "" {
		return 0, ""
	}
	return level, title
}

// decodeBytes turns file bytes into a Go string of valid UTF-8. It honours a
// UTF-8 or UTF-16 byte order mark, reads text that has no valid multi-byte
// UTF-8 sequence at all as Windows-1252 (the usual legacy encoding, a superset
// of Latin-1 for printable characters), and otherwise replaces invalid bytes
// with U+FFFD. It never fails.
func decodeBytes(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\xef\xbb\xbf")):
		data = data[3:]
	case bytes.HasPrefix(data, []byte("\xfe\xff")):
		return decodeUTF16(data[2:], true)
	case bytes.HasPrefix(data, []byte("\xff\xfe")):
		return decodeUTF16(data[2:], false)
	}
	if utf8.Valid(data) {
		return string(data)
	}
	if !hasMultiByteUTF8(data) {
		if s, err := charmap.Windows1252.NewDecoder().Bytes(data); err == nil {
			return string(s)
		}
	}
	return strings.ToValidUTF8(string(data), "\uFFFD")
}

// hasMultiByteUTF8 reports whether data holds at least one valid multi-byte
// UTF-8 sequence, the sign of UTF-8 text with a few damaged bytes rather than
// of a single-byte legacy encoding.
func hasMultiByteUTF8(data []byte) bool {
	for i := 0; i < len(data); {
		if data[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(data[i:])
		if r != utf8.RuneError || n > 1 {
			return true
		}
		i++
	}
	return false
}

func decodeUTF16(data []byte, bigEndian bool) string {
	u := make([]uint16, len(data)/2)
	for i := range u {
		if bigEndian {
			u[i] = uint16(data[2*i])<<8 | uint16(data[2*i+1])
		} else {
			u[i] = uint16(data[2*i+1])<<8 | uint16(data[2*i])
		}
	}
	return string(utf16.Decode(u))
}

// cleanText drops NUL characters, which PostgreSQL text columns cannot hold,
// and turns CRLF and lone CR line endings into LF.
func cleanText(s string) string {
	if strings.IndexByte(s, 0) < 0 && strings.IndexByte(s, '\r') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case 0:
		case '\r':
			b.WriteByte('\n')
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func runeCount(s string) int {
	return utf8.RuneCountInString(s)
}
