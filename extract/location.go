package extract

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// Location says where a passage of a document comes from, in the format's
// own terms, for citations: the pages of a PDF or a scan, the slides of a
// deck and the first one's title, a sheet and its cells, or the heading
// path of a word-processing document or an e-book. Unused fields are zero.
//
// It marshals to compact JSON, without its zero fields, for a database
// column ({"slide_start":3,"slide_end":4,"slide_title":"Results"}), and
// String gives the words a model reads ("slides 3-4 (Results)").
type Location struct {
	// PageStart and PageEnd are the first and last page, numbered from 1
	// (PDF, scans).
	PageStart int `json:"page_start,omitempty"`
	PageEnd   int `json:"page_end,omitempty"`
	// SlideStart and SlideEnd are the first and last slide, numbered from
	// 1 in presentation order; SlideTitle is the first slide's title.
	SlideStart int    `json:"slide_start,omitempty"`
	SlideEnd   int    `json:"slide_end,omitempty"`
	SlideTitle string `json:"slide_title,omitempty"`
	// Sheet is a spreadsheet's sheet name; Cells the range of cells the
	// passage holds, such as "A1:F40" (also for CSV files, which have no
	// sheet name).
	Sheet string `json:"sheet,omitempty"`
	Cells string `json:"cells,omitempty"`
	// Headings is the heading path, outermost first: a document's title or
	// chapter, then its sections.
	Headings []string `json:"headings,omitempty"`
	// OCR is true when some of the passage's text was recognised by OCR
	// from an image of the page rather than read from a text layer.
	OCR bool `json:"ocr,omitempty"`
}

// IsZero reports whether l says nothing.
func (l Location) IsZero() bool {
	return l.PageStart == 0 && l.PageEnd == 0 && l.SlideStart == 0 && l.SlideEnd == 0 &&
		l.SlideTitle == "" && l.Sheet == "" && l.Cells == "" && len(l.Headings) == 0 && !l.OCR
}

// JSON returns l as compact JSON, "{}" for the zero Location.
func (l Location) JSON() []byte {
	b, err := json.Marshal(l)
	if err != nil {
		// A struct of strings, ints and a bool always marshals.
		return []byte("{}")
	}
	return b
}

// ParseLocation reads a Location from the JSON that JSON returns; empty or
// null input gives the zero Location.
func ParseLocation(b []byte) (Location, error) {
	var l Location
	s := strings.TrimSpace(string(b))
	if s == "" || s == "null" {
		return l, nil
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return Location{}, fmt.Errorf("extract: location: %w", err)
	}
	return l, nil
}

// String returns l as words for a citation: "pages 7-8", "page 3 (OCR)",
// "slides 3-4 (Quarterly results)", "sheet Budget, A1:F40",
// "Contract > 2. Scope"; "" for the zero Location.
func (l Location) String() string {
	var parts []string
	if l.PageStart > 0 {
		parts = append(parts, rangeWords("page", "pages", l.PageStart, l.PageEnd))
	}
	if l.SlideStart > 0 {
		s := rangeWords("slide", "slides", l.SlideStart, l.SlideEnd)
		if l.SlideTitle != "" {
			s += " (" + l.SlideTitle + ")"
		}
		parts = append(parts, s)
	}
	switch {
	case l.Sheet != "" && l.Cells != "":
		parts = append(parts, "sheet "+l.Sheet+", "+l.Cells)
	case l.Sheet != "":
		parts = append(parts, "sheet "+l.Sheet)
	case l.Cells != "":
		parts = append(parts, "cells "+l.Cells)
	}
	if len(l.Headings) > 0 {
		parts = append(parts, strings.Join(l.Headings, " > "))
	}
	s := strings.Join(parts, ", ")
	if l.OCR {
		if s == "" {
			return "OCR"
		}
		s += " (OCR)"
	}
	return s
}

func rangeWords(one, many string, first, last int) string {
	if last <= first {
		return one + " " + strconv.Itoa(first)
	}
	return many + " " + strconv.Itoa(first) + "-" + strconv.Itoa(last)
}

// Merge returns the location of a passage that runs from l's into next's,
// such as a chunk and the chunk after it: the page and slide ranges are
// joined, the first title and heading path are kept, and a cell range
// grows to cover both when both lie on the same sheet.
func (l Location) Merge(next Location) Location {
	out := l
	out.PageStart, out.PageEnd = joinRange(l.PageStart, l.PageEnd, next.PageStart, next.PageEnd)
	out.SlideStart, out.SlideEnd = joinRange(l.SlideStart, l.SlideEnd, next.SlideStart, next.SlideEnd)
	if out.SlideTitle == "" && l.SlideStart == 0 {
		out.SlideTitle = next.SlideTitle
	}
	switch {
	case l.Sheet == "" && l.Cells == "":
		out.Sheet, out.Cells = next.Sheet, next.Cells
	case next.Sheet == l.Sheet:
		out.Cells = unionCells(l.Cells, next.Cells)
	}
	if len(out.Headings) == 0 {
		out.Headings = next.Headings
	}
	out.OCR = l.OCR || next.OCR
	return out
}

// joinRange returns the smallest range covering both; a zero start means
// no range.
func joinRange(s1, e1, s2, e2 int) (int, int) {
	switch {
	case s2 == 0:
		return s1, e1
	case s1 == 0:
		return s2, e2
	}
	return min(s1, s2), max(e1, e2, s1, s2)
}

// unionCells returns the smallest A1-style range covering ranges a and b.
func unionCells(a, b string) string {
	ca, ok1 := parseRange(a)
	cb, ok2 := parseRange(b)
	switch {
	case !ok1:
		return b
	case !ok2:
		return a
	}
	return formatRange([4]int{min(ca[0], cb[0]), min(ca[1], cb[1]), max(ca[2], cb[2]), max(ca[3], cb[3])})
}

// parseRange reads "A1:F40" or "B7" as columns and rows from 1: first
// column, first row, last column, last row.
func parseRange(s string) ([4]int, bool) {
	from, to, found := strings.Cut(s, ":")
	if !found {
		to = from
	}
	c1, r1, ok1 := parseCell(from)
	c2, r2, ok2 := parseCell(to)
	if !ok1 || !ok2 {
		return [4]int{}, false
	}
	return [4]int{min(c1, c2), min(r1, r2), max(c1, c2), max(r1, r2)}, true
}

func parseCell(s string) (col, row int, ok bool) {
	i := 0
	for i < len(s) && s[i] >= 'A' && s[i] <= 'Z' {
		col = col*26 + int(s[i]-'A'+1)
		i++
		if col > 1<<20 {
			return 0, 0, false
		}
	}
	row, err := strconv.Atoi(s[i:])
	if i == 0 || err != nil || row < 1 {
		return 0, 0, false
	}
	return col, row, true
}

func formatRange(r [4]int) string {
	first := CellName(r[0], r[1])
	if r[0] == r[2] && r[1] == r[3] {
		return first
	}
	return first + ":" + CellName(r[2], r[3])
}

// CellName returns the A1-style name of the cell at column col and row
// row, both from 1: CellName(28, 3) is "AB3".
func CellName(col, row int) string {
	var b []byte
	for c := col; c > 0; c = (c - 1) / 26 {
		b = append([]byte{byte('A' + (c-1)%26)}, b...)
	}
	return string(b) + strconv.Itoa(row)
}

// Span is a part of Document.Text, in rune offsets [Start, End), and where
// it comes from.
type Span struct {
	Start, End int
	Location   Location
	// Break marks a span no chunk may run into from the span before it:
	// the first rows of another sheet. Chunks prefer to end where any span
	// ends, as at a page end.
	Break bool
}

// Locate returns the location of the runes [start, end) of doc.Text,
// computed from the spans they overlap (see Location.Merge); the zero
// Location when they overlap none.
func (doc *Document) Locate(start, end int) Location {
	spans := doc.Spans
	i := sort.Search(len(spans), func(i int) bool { return spans[i].End > start })
	var loc Location
	first := true
	for ; i < len(spans) && spans[i].Start < end; i++ {
		if spans[i].End <= spans[i].Start {
			continue
		}
		if first {
			loc = spans[i].Location
			first = false
			continue
		}
		loc = loc.Merge(spans[i].Location)
	}
	return loc
}

// fromTextdoc converts a reader's spans.
func fromTextdoc(spans []textdoc.Span) []Span {
	if len(spans) == 0 {
		return nil
	}
	out := make([]Span, len(spans))
	for i, s := range spans {
		out[i] = Span{Start: s.Start, End: s.End, Location: Location(s.Loc), Break: s.Break}
	}
	return out
}
