// Package delimited reads CSV and TSV files as tables: in blocks of about a
// chunk's size, each starting with the header row, each a span giving the
// rows (cells) it holds.
package delimited

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// MaxColumns bounds the fields of one record, as the columns of a sheet
// are bounded. The CSV reader holds every field of a record at once, some
// 40 bytes each for as little as one byte of input.
const MaxColumns = 16384

// Read returns text, a decoded CSV (comma ',') or TSV (comma '\t') file,
// as Markdown tables. A CSV file whose first line holds more semicolons
// than commas is read with semicolons, as spreadsheet programs write it in
// locales where the comma is the decimal mark. A file that does not parse
// as delimited records is kept as plain text; one with a record of more
// than MaxColumns fields fails with textdoc.ErrTooLarge.
func Read(ctx context.Context, text string, comma rune, opts textdoc.Options) (*textdoc.Document, error) {
	if comma == ',' {
		first, _, _ := strings.Cut(strings.TrimLeft(text, "\n"), "\n")
		if strings.Count(first, ";") > strings.Count(first, ",") {
			comma = ';'
		}
	}
	if row := widerThan(text, byte(comma), MaxColumns); row > 0 {
		return nil, fmt.Errorf("%w: row %d holds more than %d columns (the column limit)", textdoc.ErrTooLarge, row, MaxColumns)
	}
	r := csv.NewReader(strings.NewReader(text))
	r.Comma = comma
	r.LazyQuotes = true
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	b := textdoc.NewBuilder(opts.MaxTextBytes)
	sheet := b.Sheet("", opts.ChunkSize)
	for n := 1; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return plain(text, opts)
		}
		if !sheet.Row(n, 1, rec) {
			return nil, b.Err()
		}
	}
	sheet.End()
	return b.Document()
}

// widerThan returns the number (from 1) of the first record of text that
// holds more than max fields, 0 when none does. It follows the CSV
// reader's quoting, lazy quotes included, closely enough to count fields.
func widerThan(text string, comma byte, max int) int {
	row, fields := 1, 1
	fieldStart, quoted := true, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if quoted {
			if c != '"' {
				continue
			}
			switch next := byte('\n'); {
			case i+1 < len(text) && text[i+1] == '"':
				i++
			default:
				if i+1 < len(text) {
					next = text[i+1]
				}
				// A quote before anything but a comma or a line end
				// is a quote of the field's text.
				quoted = next != comma && next != '\n' && next != '\r'
			}
			continue
		}
		switch {
		case c == comma:
			if fields++; fields > max {
				return row
			}
			fieldStart = true
			continue
		case c == '\n':
			row, fields, fieldStart = row+1, 1, true
			continue
		case c == '"' && fieldStart:
			quoted = true
		}
		fieldStart = false
	}
	return 0
}

// plain keeps text that is not well-formed delimited data as it is.
func plain(text string, opts textdoc.Options) (*textdoc.Document, error) {
	if int64(len(text)) > opts.MaxTextBytes {
		return nil, textdoc.TooLarge(opts.MaxTextBytes)
	}
	return &textdoc.Document{Text: text}, nil
}
