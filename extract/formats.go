package extract

import (
	"bytes"
	"context"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/cfb"
	"github.com/mcpsearch/mcpsearch/extract/internal/delimited"
	"github.com/mcpsearch/mcpsearch/extract/internal/epub"
	"github.com/mcpsearch/mcpsearch/extract/internal/odf"
	"github.com/mcpsearch/mcpsearch/extract/internal/ooxml"
	"github.com/mcpsearch/mcpsearch/extract/internal/rtf"
	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// archiveLimits are the container limits of l.
func (l Limits) archiveLimits() archive.Limits {
	total := l.MaxInflatedBytes
	if total <= 0 {
		total = DefaultMaxInflatedBytes
	}
	return archive.Limits{
		MaxEntries:    l.MaxArchiveEntries,
		MaxEntryBytes: min(total, archive.DefaultMaxEntryBytes),
		MaxTotalBytes: total,
	}
}

// readerOptions are the options every format reader is given.
func (l Limits) readerOptions() textdoc.Options {
	size := l.ChunkSize
	if size <= 0 {
		size = DefaultChunkSize
	}
	return textdoc.Options{MaxTextBytes: l.maxText(), ChunkSize: size}
}

// extractContainer reads a ZIP-based document as what its content is,
// whatever type it was declared as: a .docx that holds a workbook is read
// as a workbook.
func (l Limits) extractContainer(ctx context.Context, data []byte) (*Document, error) {
	if bytes.HasPrefix(data, []byte(cfb.Signature)) {
		// A legacy or encrypted file named as its modern kind.
		_, err := l.Detect("", "", bytes.NewReader(data), int64(len(data)))
		return nil, err
	}
	a, err := archive.Open(bytes.NewReader(data), int64(len(data)), l.archiveLimits())
	if err != nil {
		return nil, containerError(err)
	}
	mt, err := classifyZip(a)
	if err != nil {
		return nil, err
	}
	opts := l.readerOptions()
	var d *textdoc.Document
	switch mt {
	case MIMEDOCX:
		d, err = ooxml.ReadDOCX(ctx, a, opts)
	case MIMEPPTX:
		d, err = ooxml.ReadPPTX(ctx, a, opts)
	case MIMEXLSX:
		d, err = ooxml.ReadXLSX(ctx, a, opts)
	case MIMEODT, MIMEODP, MIMEODS:
		d, err = odf.Read(ctx, a, opts)
	case MIMEEPUB:
		d, err = epub.Read(ctx, a, opts)
	}
	if err != nil {
		return nil, err
	}
	return fromReader(d), nil
}

// extractDelimited reads a CSV or TSV file as a table.
func (l Limits) extractDelimited(ctx context.Context, mt string, data []byte) (*Document, error) {
	comma := ','
	if mt == MIMETSV {
		comma = '\t'
	}
	d, err := delimited.Read(ctx, cleanText(decodeBytes(data)), comma, l.readerOptions())
	if err != nil {
		return nil, err
	}
	return fromReader(d), nil
}

// extractRTF reads an RTF document.
func (l Limits) extractRTF(ctx context.Context, data []byte) (*Document, error) {
	d, err := rtf.Read(ctx, data, l.readerOptions())
	if err != nil {
		return nil, err
	}
	return fromReader(d), nil
}

// fromReader turns a reader's document into a Document of one page
// numbered 0.
func fromReader(d *textdoc.Document) *Document {
	doc := singleDocument(d.Text)
	doc.Spans = fromTextdoc(d.Spans)
	return doc
}
