package ooxml

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// Limits of a workbook handed to excelize. Excelize inflates every part it
// is given, keeps all in memory but the large sheets and shared strings
// (read from temporary files), and decodes the workbook, the styles and
// small shared strings into structures several times their size: it is
// given only the parts that hold cells, and those within these limits.
const (
	// maxSharedStrings bounds the shared string table's XML.
	maxSharedStrings = 256 << 20
	// maxStrings bounds the strings of the shared string table: excelize
	// keeps the place of each in a temporary file (about 40 bytes), or
	// decodes a small table whole (some 200 bytes a string).
	maxStrings = 2 << 20
	// streamBytes is the size beyond which excelize reads a sheet, or
	// the shared strings, from a temporary file instead of from memory.
	streamBytes = 1 << 20
	// maxWholePart bounds a part excelize decodes whole: the workbook,
	// the styles.
	maxWholePart = 16 << 20
	// maxInMemory bounds what the parts excelize keeps in memory inflate
	// to, together.
	maxInMemory = 64 << 20
)

// stringLimit is maxStrings, but in tests.
var stringLimit = maxStrings

// cellParts are the kinds of relationship of a workbook whose parts hold
// its cells or what their values need.
var cellParts = []string{"worksheet", "chartsheet", "dialogsheet", "macrosheet", "sharedStrings", "styles"}

// ReadXLSX returns the text of an Excel workbook read with excelize: every
// sheet in workbook order, its cells formatted as Excel shows them (dates
// as dates, numbers with their format), as Markdown tables in blocks of
// about opts.ChunkSize characters, each starting with the sheet's header
// row and each a span naming the sheet and its cell range. a has been
// opened from the file.
func ReadXLSX(ctx context.Context, a *archive.Archive, opts textdoc.Options) (*textdoc.Document, error) {
	parts, err := workbookParts(a)
	if err != nil {
		return nil, err
	}
	// Excelize copies what it is given into memory: it is given the
	// parts as they are written, not a copy of them.
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(a.WriteSubset(pw, parts)) }()
	f, err := excelize.OpenReader(pr, excelize.Options{
		UnzipSizeLimit:    a.Limit(),
		UnzipXMLSizeLimit: streamBytes,
		TmpDir:            os.TempDir(),
	})
	// Unblocks the writer should excelize stop reading early.
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		if errors.Is(err, textdoc.ErrTooLarge) || errors.Is(err, textdoc.ErrCorrupt) {
			return nil, err
		}
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

// workbookParts returns the parts of the workbook excelize is to read: the
// content types, the package's relationships, the workbook, its
// relationships and the parts they name of cellParts. It applies the
// limits above from the parts' declared sizes, and counts the shared
// strings.
func workbookParts(a *archive.Archive) ([]string, error) {
	main, err := mainPart(a, "xl/workbook.xml")
	if err != nil {
		return nil, err
	}
	rels, err := readRels(a, main)
	if err != nil {
		return nil, err
	}
	parts := []string{"[Content_Types].xml", "_rels/.rels", main, relsPath(main)}
	for _, r := range rels {
		if r.External || !a.Has(r.Target) {
			continue
		}
		for _, kind := range cellParts {
			if r.is(kind) {
				parts = append(parts, r.Target)
				break
			}
		}
	}
	var inMemory int64
	for _, name := range parts {
		size := a.Size(name)
		lower := strings.ToLower(strings.TrimPrefix(name, "/"))
		// Excelize streams from a temporary file the parts it takes
		// for sheets and shared strings by their names alone.
		sheet := strings.HasPrefix(lower, "xl/worksheets/sheet")
		strs := lower == "xl/sharedstrings.xml"
		switch {
		case strs && size > maxSharedStrings:
			return nil, fmt.Errorf("%w: the shared strings inflate to %d bytes, more than the limit of %d", textdoc.ErrTooLarge, size, maxSharedStrings)
		case (sheet || strs) && size > streamBytes:
		case !sheet && !strs && size > maxWholePart:
			return nil, fmt.Errorf("%w: %s inflates to %d bytes, more than the %d of a workbook part read whole", textdoc.ErrTooLarge, name, size, maxWholePart)
		default:
			inMemory += size
		}
		if strs {
			if err := countStrings(a, name); err != nil {
				return nil, err
			}
		}
	}
	if inMemory > maxInMemory {
		return nil, fmt.Errorf("%w: the workbook's parts read into memory inflate to %d bytes, more than the limit of %d", textdoc.ErrTooLarge, inMemory, maxInMemory)
	}
	return parts, nil
}

// countStrings fails when the shared string table name holds more than
// maxStrings strings (<si> elements, with any prefix).
func countStrings(a *archive.Archive, name string) error {
	rc, err := a.Open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	r := bufio.NewReaderSize(rc, 64<<10)
	n := 0
	for {
		if _, err := r.ReadSlice('<'); err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		// The element's name: a prefix, then "si", then its end.
		name, _ := r.Peek(64)
		if i := bytes.IndexAny(name, " \t\r\n/>"); i >= 0 {
			name = name[:i]
			if j := bytes.LastIndexByte(name, ':'); j >= 0 {
				name = name[j+1:]
			}
			if string(name) == "si" {
				if n++; n > stringLimit {
					return fmt.Errorf("%w: the shared strings hold more than %d strings (the limit of a workbook's strings)", textdoc.ErrTooLarge, stringLimit)
				}
			}
		}
	}
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
