package textdoc

import (
	"strconv"
	"strings"
)

// Tables is the stack of tables a word-processing reader is inside: the
// innermost last. Readers of DOCX and OpenDocument text share it: they
// open and close tables, rows and cells as their XML says, and add the text
// of each paragraph to the current cell.
type Tables struct {
	open []*table
}

type table struct {
	rows [][]string
	row  []string
	cell []string
}

// Open starts a table (inside the current cell, if any).
func (t *Tables) Open() { t.open = append(t.open, &table{}) }

// In reports whether a table is open.
func (t *Tables) In() bool { return len(t.open) > 0 }

// StartRow and StartCell begin a row and a cell of the innermost table.
func (t *Tables) StartRow() {
	if tb := t.top(); tb != nil {
		tb.row = nil
	}
}

func (t *Tables) StartCell() {
	if tb := t.top(); tb != nil {
		tb.cell = nil
	}
}

// Add appends a paragraph's text to the current cell.
func (t *Tables) Add(text string) {
	if tb := t.top(); tb != nil {
		tb.cell = append(tb.cell, text)
	}
}

// EndCell and EndRow close the current cell and row.
func (t *Tables) EndCell() {
	if tb := t.top(); tb != nil {
		tb.row = append(tb.row, strings.Join(tb.cell, " "))
		tb.cell = nil
	}
}

func (t *Tables) EndRow() {
	if tb := t.top(); tb != nil {
		tb.rows = append(tb.rows, tb.row)
		tb.row = nil
	}
}

// Close ends the innermost table and returns its rows, unless it was
// inside another table's cell: it then becomes that cell's text, a line
// of its non-empty cells per row, and Close returns false.
func (t *Tables) Close() ([][]string, bool) {
	n := len(t.open)
	if n == 0 {
		return nil, false
	}
	tb := t.open[n-1]
	t.open = t.open[:n-1]
	if n == 1 {
		return tb.rows, true
	}
	outer := t.open[n-2]
	for _, row := range tb.rows {
		outer.cell = append(outer.cell, strings.Join(NonEmpty(row), " | "))
	}
	return nil, false
}

// NonEmpty returns the cells that hold more than white space.
func NonEmpty(cells []string) []string {
	var out []string
	for _, c := range cells {
		if strings.TrimSpace(c) != "" {
			out = append(out, c)
		}
	}
	return out
}

func (t *Tables) top() *table {
	if len(t.open) == 0 {
		return nil
	}
	return t.open[len(t.open)-1]
}

// Letters numbers list items a, b, ..., z, aa, ab, ... from base 'a' or
// 'A'.
func Letters(n int, base byte) string {
	if n <= 0 {
		return string(base)
	}
	var b []byte
	for ; n > 0; n = (n - 1) / 26 {
		b = append([]byte{base + byte((n-1)%26)}, b...)
	}
	return string(b)
}

// Roman numbers list items I, II, III, ...; past 3999 in Arabic figures.
func Roman(n int) string {
	if n <= 0 || n >= 4000 {
		return strconv.Itoa(n)
	}
	vals := []int{1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1}
	syms := []string{"M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"}
	var b strings.Builder
	for i, v := range vals {
		for n >= v {
			b.WriteString(syms[i])
			n -= v
		}
	}
	return b.String()
}
