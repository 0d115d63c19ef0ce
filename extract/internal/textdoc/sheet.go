package textdoc

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sheet writes the rows of a sheet (or a CSV file) as Markdown tables in
// blocks of at most about a chunk's size, each starting with the sheet's
// header row (its first row with a value), each a span giving the sheet
// and the cells it holds. The first block of a sheet is a Break, so that
// no chunk holds two sheets.
type Sheet struct {
	b     *Builder
	name  string
	limit int
	// header is the header row, from column headerCol; headerRow its row.
	header    []string
	headerRow int
	headerCol int
	// rows are the rows of the block being filled, with their numbers and
	// first columns; size estimates the block's length in runes.
	rows   []sheetRow
	size   int
	blocks int
	// Cells counts the cells with a value written.
	Cells int
}

type sheetRow struct {
	num, col int
	cells    []string
}

// Sheet starts a sheet named name ("" for a CSV file) whose blocks hold
// about chunkSize characters.
func (b *Builder) Sheet(name string, chunkSize int) *Sheet {
	return &Sheet{b: b, name: oneLine(name), limit: max(chunkSize*9/10, 100)}
}

// Row adds row number num (from 1), whose cells start at column col (from
// 1). Leading and trailing empty cells are trimmed; an empty row is
// skipped. It reports false once the text limit is passed.
func (s *Sheet) Row(num, col int, cells []string) bool {
	if s.b.err != nil {
		return false
	}
	for len(cells) > 0 && strings.TrimSpace(cells[len(cells)-1]) == "" {
		cells = cells[:len(cells)-1]
	}
	for len(cells) > 0 && strings.TrimSpace(cells[0]) == "" {
		cells = cells[1:]
		col++
	}
	if len(cells) == 0 {
		return true
	}
	// Readers reuse their row slices.
	cells = append([]string(nil), cells...)
	for _, c := range cells {
		if strings.TrimSpace(c) != "" {
			s.Cells++
		}
	}
	if s.header == nil {
		s.header, s.headerRow, s.headerCol = cells, num, col
		s.size = s.head()
		return true
	}
	n := rowSize(cells)
	if len(s.rows) > 0 && s.size+n > s.limit {
		s.flush()
	}
	s.rows = append(s.rows, sheetRow{num: num, col: col, cells: cells})
	s.size += n
	return s.b.err == nil
}

// rowSize estimates the runes of a row as a table line.
func rowSize(cells []string) int {
	n := 2
	for _, c := range cells {
		n += utf8.RuneCountInString(c) + 3
	}
	return n
}

// End writes the last block; a sheet with a header row and no other rows
// is written as that row alone.
func (s *Sheet) End() {
	if s.header != nil && (len(s.rows) > 0 || s.blocks == 0) {
		s.flush()
	}
}

// flush writes the block of rows gathered, under the header row.
func (s *Sheet) flush() {
	first, last := s.headerCol, s.headerCol+len(s.header)-1
	for _, r := range s.rows {
		first, last = min(first, r.col), max(last, r.col+len(r.cells)-1)
	}
	startRow, endRow := s.headerRow, s.headerRow
	if s.blocks > 0 && len(s.rows) > 0 {
		startRow = s.rows[0].num
	}
	if len(s.rows) > 0 {
		endRow = s.rows[len(s.rows)-1].num
	}
	cells := CellName(first, startRow) + ":" + CellName(last, endRow)
	s.b.Locate(Location{Sheet: s.name, Cells: cells}, s.blocks == 0)
	s.b.EndBlock()
	if s.blocks == 0 && s.name != "" {
		s.b.Heading(2, "Sheet: "+s.name)
	}
	width := last - first + 1
	s.b.Line(TableRow(spread(s.header, s.headerCol, first, width)))
	s.b.Line(TableRule(width))
	for _, r := range s.rows {
		s.b.Line(TableRow(spread(r.cells, r.col, first, width)))
	}
	s.b.EndBlock()
	s.blocks++
	s.rows, s.size = s.rows[:0], s.head()
}

// head estimates the runes a block spends before its rows: the sheet's
// heading for the first block, the header row and the rule under it.
func (s *Sheet) head() int {
	n := rowSize(s.header) + 4*len(s.header) + 2
	if s.blocks == 0 && s.name != "" {
		n += len("## Sheet: ") + utf8.RuneCountInString(s.name) + 2
	}
	return n
}

// spread places cells starting at column col in a row of width columns
// starting at column first.
func spread(cells []string, col, first, width int) []string {
	row := make([]string, width)
	for i, c := range cells {
		if j := col - first + i; j >= 0 && j < width {
			row[j] = c
		}
	}
	return row
}

// CellName returns the A1-style name of the cell at column col and row
// row, both from 1.
func CellName(col, row int) string {
	var b []byte
	for c := col; c > 0; c = (c - 1) / 26 {
		b = append([]byte{byte('A' + (c-1)%26)}, b...)
	}
	return string(b) + strconv.Itoa(row)
}
