package ooxml

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/mcpsearch/mcpsearch/docs/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/docs/extract/internal/textdoc"
)

// Limits of a workbook handed to excelize, which reads every part but the
// large sheets into memory.
const (
	// maxSharedStrings bounds the shared string table, which excelize
	// holds in memory whole.
	maxSharedStrings = 256 << 20
	// sheetStreamBytes is the size beyond which excelize reads a sheet
	// from a temporary file, a row at a time, instead of from memory.
	sheetStreamBytes = 16 << 20
)

// ReadXLSX returns the text of an Excel workbook read with excelize: every
// sheet in workbook order, its cells formatted as Excel shows them (dates
// as dates, numbers with their format), as Markdown tables in blocks of
// about opts.ChunkSize characters, each starting with the sheet's header
// row and each a span naming the sheet and its cell range. data is the
// whole file; a has already been opened from it.
func ReadXLSX(ctx context.Context, a *archive.Archive, data []byte, opts textdoc.Options) (*textdoc.Document, error) {
	// Every entry is checked from its declared size first: excelize would
	// inflate them all.
	if err := a.CheckAll(); err != nil {
		return nil, err
	}
	for _, n := range a.Names() {
		if strings.EqualFold(n, "xl/sharedStrings.xml") && a.Size(n) > maxSharedStrings {
			return nil, fmt.Errorf("%w: the shared strings inflate to %d bytes, more than the limit of %d", textdoc.ErrTooLarge, a.Size(n), maxSharedStrings)
		}
	}
	f, err := excelize.OpenReader(bytes.NewReader(data), excelize.Options{
		UnzipSizeLimit:    a.Limit(),
		UnzipXMLSizeLimit: sheetStreamBytes,
		TmpDir:            os.TempDir(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: workbook: %v", textdoc.ErrCorrupt, err)
	}
	defer f.Close()
	b := textdoc.NewBuilder(opts.MaxTextBytes)
	for _, name := range f.GetSheetList() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := readSheet(ctx, f, b, name, opts.ChunkSize); err != nil {
			return nil, err
		}
	}
	doc, err := b.Document()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(doc.Text) == "" {
		return nil, noText(a, "workbook")
	}
	return doc, nil
}

// readSheet writes one sheet; a chart sheet, which has no cells, is
// skipped.
func readSheet(ctx context.Context, f *excelize.File, b *textdoc.Builder, name string, chunkSize int) error {
	rows, err := f.Rows(name)
	if err != nil {
		var notExist excelize.ErrSheetNotExist
		if errors.As(err, &notExist) {
			return nil
		}
		return fmt.Errorf("%w: sheet %s: %v", textdoc.ErrCorrupt, name, err)
	}
	defer rows.Close()
	s := b.Sheet(name, chunkSize)
	for n := 1; rows.Next(); n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		cells, err := rows.Columns()
		if err != nil {
			return fmt.Errorf("%w: sheet %s, row %d: %v", textdoc.ErrCorrupt, name, n, err)
		}
		if !s.Row(n, 1, cells) {
			return b.Err()
		}
	}
	if err := rows.Error(); err != nil {
		return fmt.Errorf("%w: sheet %s: %v", textdoc.ErrCorrupt, name, err)
	}
	s.End()
	return b.Err()
}
