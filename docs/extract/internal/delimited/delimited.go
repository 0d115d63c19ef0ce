// Package delimited reads CSV and TSV files as tables: in blocks of about a
// chunk's size, each starting with the header row, each a span giving the
// rows (cells) it holds.
package delimited

import (
	"context"
	"encoding/csv"
	"errors"
	"io"
	"strings"

	"github.com/mcpsearch/mcpsearch/docs/extract/internal/textdoc"
)

// Read returns text, a decoded CSV (comma ',') or TSV (comma '\t') file,
// as Markdown tables. A CSV file whose first line holds more semicolons
// than commas is read with semicolons, as spreadsheet programs write it in
// locales where the comma is the decimal mark. A file that does not parse
// as delimited records is kept as plain text.
func Read(ctx context.Context, text string, comma rune, opts textdoc.Options) (*textdoc.Document, error) {
	if comma == ',' {
		first, _, _ := strings.Cut(strings.TrimLeft(text, "\n"), "\n")
		if strings.Count(first, ";") > strings.Count(first, ",") {
			comma = ';'
		}
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

// plain keeps text that is not well-formed delimited data as it is.
func plain(text string, opts textdoc.Options) (*textdoc.Document, error) {
	if int64(len(text)) > opts.MaxTextBytes {
		return nil, textdoc.TooLarge(opts.MaxTextBytes)
	}
	return &textdoc.Document{Text: text}, nil
}
