package odf

import (
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
	"github.com/mcpsearch/mcpsearch/extract/internal/xmlsafe"
)

// The largest sheet a spreadsheet application makes; cells beyond are
// ignored, whatever repeat counts a file declares.
const (
	maxColumns = 16384
	maxRows    = 1 << 20
)

// readSpreadsheet streams the sheets of a spreadsheet (office:spreadsheet)
// into b. Repeated empty rows and cells cost a counter; repeated rows
// with values are written as many times as they repeat, up to the text
// limit.
func readSpreadsheet(d *xmlsafe.Decoder, t *ticker, b *textdoc.Builder, opts textdoc.Options) error {
	var (
		sheet  *textdoc.Sheet
		rowNum int
		// row holds the cells of the row being read; empties counts the
		// empty cells waiting for a value after them.
		row     []string
		empties int
		rowRep  int
		cell    *strings.Builder
		cellRep int
		cellVal string
		paras   int
		// rowBytes counts the text of the row being read, which a row
		// holds until it ends.
		rowBytes int64
	)
	for depth := 1; depth > 0; {
		if err := t.tick(); err != nil {
			return err
		}
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch tt := tok.(type) {
		case xml.StartElement:
			depth++
			switch tt.Name.Local {
			case "table":
				if sheet == nil {
					sheet = b.Sheet(attr(tt, "name"), opts.ChunkSize)
					rowNum = 0
				}
			case "table-row":
				row, empties, rowBytes = row[:0], 0, 0
				rowRep = repeat(attr(tt, "number-rows-repeated"), maxRows)
			case "table-cell", "covered-table-cell":
				cell = &strings.Builder{}
				cellRep = repeat(attr(tt, "number-columns-repeated"), maxColumns)
				cellVal = cellValue(tt)
				paras = 0
			case "p":
				if cell != nil && paras > 0 {
					cell.WriteString(" ")
				}
				paras++
			case "s":
				if cell != nil {
					cell.WriteString(strings.Repeat(" ", spaces(attr(tt, "c"))))
				}
			case "tab", "line-break":
				if cell != nil {
					cell.WriteString(" ")
				}
			case "annotation", "table-column", "table-columns", "table-header-columns", "shapes",
				"named-expressions", "database-ranges", "note-citation", "tracked-changes":
				depth--
				if err := d.Skip(); err != nil {
					return err
				}
			}
		case xml.CharData:
			if cell != nil && paras > 0 {
				cell.Write(tt)
				if int64(cell.Len()) > opts.MaxTextBytes {
					return textdoc.TooLarge(opts.MaxTextBytes)
				}
			}
		case xml.EndElement:
			depth--
			switch tt.Name.Local {
			case "table-cell", "covered-table-cell":
				if cell == nil {
					continue
				}
				text := strings.TrimSpace(cell.String())
				if text == "" {
					text = cellVal
				}
				cell = nil
				if text == "" {
					empties += cellRep
					continue
				}
				// Empty cells before a value are written out, within
				// the widest sheet.
				for ; empties > 0 && len(row) < maxColumns; empties-- {
					row = append(row, "")
				}
				empties = 0
				for i := 0; i < cellRep && len(row) < maxColumns; i++ {
					row = append(row, text)
					rowBytes += int64(len(text))
				}
				if rowBytes > opts.MaxTextBytes {
					return textdoc.TooLarge(opts.MaxTextBytes)
				}
			case "table-row":
				if sheet == nil {
					continue
				}
				if len(row) == 0 {
					rowNum += rowRep
					continue
				}
				for i := 0; i < rowRep && rowNum < maxRows; i++ {
					rowNum++
					if !sheet.Row(rowNum, 1, row) {
						return b.Err()
					}
					if i%1024 == 1023 {
						if err := t.ctx.Err(); err != nil {
							return err
						}
					}
				}
			case "table":
				if sheet != nil {
					sheet.End()
					sheet = nil
				}
			}
		}
		if err := b.Err(); err != nil {
			return err
		}
	}
	return nil
}

// repeat reads a repeat count, at least 1 and at most limit.
func repeat(s string, limit int) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 1
	}
	return min(n, limit)
}

// cellValue returns a cell's value from its attributes, for cells written
// without a display paragraph.
func cellValue(t xml.StartElement) string {
	for _, key := range []string{"string-value", "date-value", "time-value", "boolean-value", "value"} {
		if v := attr(t, key); v != "" {
			return v
		}
	}
	return ""
}
