// Package extract turns uploaded bytes into text with page boundaries and
// citable locations: PDF (package pdf), plain text, Markdown, HTML, Word
// (DOCX), PowerPoint (PPTX), Excel (XLSX), OpenDocument (ODT, ODP, ODS),
// EPUB, CSV/TSV and RTF, and scans and images through OCR (package ocr). It
// detects a file's type by its content and dispatches to the reader of that
// type. It knows nothing of storage or MCP.
package extract

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/safetext"
	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
	"github.com/mcpsearch/mcpsearch/extract/ocr"
	"github.com/mcpsearch/mcpsearch/extract/pdf"
)

// Document is the extracted text of one file.
type Document struct {
	// Text is the whole extracted text, valid UTF-8. Formats with structure
	// (office documents, e-books, sheets) read as light Markdown: headings
	// as "# Title" lines, list items as "- item", tables as pipe tables.
	Text string
	// Pages lists page spans in Text, in order. Offsets are in runes
	// (characters), not bytes. Formats without pages have one page numbered 0
	// covering all of Text; PDF pages, and the pages of scans and images,
	// are numbered from 1.
	Pages []Page
	// Spans says where the parts of Text come from (pages, slides, cells,
	// heading paths), in order and without overlap; nil for plain text.
	// Locate turns them into a passage's Location.
	Spans []Span
	// OCR says which pages were recognised by OCR and which need it but
	// were not (OCR off, unavailable, failing, or beyond the page cap).
	OCR OCRReport
}

// Page is one page's span of Document.Text, in rune offsets [Start, End).
type Page struct {
	Number int
	Start  int
	End    int
}

// The media types DetectType returns and Extract accepts.
const (
	MIMEPDF      = "application/pdf"
	MIMEText     = "text/plain"
	MIMEMarkdown = "text/markdown"
	MIMEHTML     = "text/html"
	MIMECSV      = "text/csv"
	MIMETSV      = "text/tab-separated-values"
	MIMERTF      = "application/rtf"
	MIMEDOCX     = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	MIMEPPTX     = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
	MIMEXLSX     = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	MIMEODT      = "application/vnd.oasis.opendocument.text"
	MIMEODP      = "application/vnd.oasis.opendocument.presentation"
	MIMEODS      = "application/vnd.oasis.opendocument.spreadsheet"
	MIMEEPUB     = "application/epub+zip"
	// The image types are read through OCR: Limits.Detect returns them
	// only when its OCR engine is on.
	MIMEPNG  = "image/png"
	MIMEJPEG = "image/jpeg"
	MIMETIFF = "image/tiff"
)

// Types returns every media type Extract reads, for a listing of what is
// supported.
func Types() []string {
	return []string{MIMEPDF, MIMEText, MIMEMarkdown, MIMEHTML, MIMECSV, MIMETSV, MIMERTF,
		MIMEDOCX, MIMEPPTX, MIMEXLSX, MIMEODT, MIMEODP, MIMEODS, MIMEEPUB, MIMEPNG, MIMEJPEG, MIMETIFF}
}

var (
	// ErrUnsupported reports a file type that cannot be extracted, such as
	// an image without OCR, an archive, a legacy (.doc, .xls, .ppt) or
	// password-protected Office file or PDF, or a file holding only
	// macros. The message says what to do where something can be done
	// ("save it as .docx").
	ErrUnsupported = textdoc.ErrUnsupported
	// ErrTooLarge reports a file beyond a limit: its size, its text, or for
	// containers the entries or inflated bytes they hold (a zip bomb) or
	// the nesting of their XML.
	ErrTooLarge = textdoc.ErrTooLarge
	// ErrNoText reports a file that yields no text: an empty file, or a PDF
	// whose pages hold only images or vector graphics (typically a scan)
	// when OCR does not read them. Ingestion marks such a file failed with
	// this error's message as the reason; for PDFs the message reads "no
	// extractable text (scanned PDF?)", or says which pages need OCR when
	// an OCR engine is configured (see NeedsOCRError).
	ErrNoText = textdoc.ErrNoText
	// ErrCorrupt reports a file that cannot be parsed. A panic inside a
	// reader is recovered and reported as ErrCorrupt with a readable
	// reason.
	ErrCorrupt = textdoc.ErrCorrupt
)

// DefaultMaxBytes is the upload size limit used when Limits.MaxBytes is not
// set: 50 MiB.
const DefaultMaxBytes = 50 << 20

// DefaultMaxTextBytes is the extracted text limit used when
// Limits.MaxTextBytes is not set: 32 MiB.
const DefaultMaxTextBytes = pdf.DefaultMaxTextBytes

// Limits bounds what Extract is asked to process and the memory it may use.
// Zero or negative fields take the defaults.
type Limits struct {
	// MaxBytes is the largest accepted file size in bytes (default
	// DefaultMaxBytes); Check applies it.
	MaxBytes int64
	// MaxTextBytes bounds the text extracted from one file, in bytes, for
	// every format (default DefaultMaxTextBytes). A PDF of a few hundred
	// kilobytes can draw gigabytes of text; beyond the limit extraction
	// fails with ErrTooLarge instead of exhausting memory.
	MaxTextBytes int64
	// MaxPDFStreamBytes bounds what one PDF content stream, form or CMap
	// may decode to (default pdf.DefaultMaxStreamBytes).
	MaxPDFStreamBytes int64
	// MaxPDFDecodedBytes bounds what all streams of one PDF may decode to
	// in total (default pdf.DefaultMaxDecodedBytes).
	MaxPDFDecodedBytes int64
	// MaxArchiveEntries bounds the entries of a ZIP-based document (DOCX,
	// PPTX, XLSX, OpenDocument, EPUB); default DefaultMaxArchiveEntries.
	MaxArchiveEntries int
	// MaxInflatedBytes bounds what the entries read from one ZIP-based
	// document may inflate to in total (default DefaultMaxInflatedBytes).
	// Entries are refused from their declared sizes, before inflating,
	// and an entry inflating more than 200 times beyond 8 MiB is refused
	// as a zip bomb.
	MaxInflatedBytes int64
	// ChunkSize is the size in characters of the chunks the text will be
	// cut into (default DefaultChunkSize). The rows of a sheet or a CSV
	// file are written in blocks of at most that size, each starting with
	// the sheet's header row, so that every chunk of a sheet carries it.
	ChunkSize int
	// OCR recognises scanned PDF pages and images (see package ocr). With
	// nil, or an engine that is off or unavailable, a document keeps the
	// text it has and Document.OCR lists the pages that need OCR; an
	// image, or a PDF with no text at all, then fails with a
	// *NeedsOCRError.
	OCR *ocr.Engine
}

// Defaults of the container limits and of ChunkSize.
const (
	DefaultMaxArchiveEntries = archive.DefaultMaxEntries
	DefaultMaxInflatedBytes  = archive.DefaultMaxTotalBytes
	// DefaultChunkSize matches chunk.DefaultSize.
	DefaultChunkSize = 1000
)

// Check returns an error wrapping ErrTooLarge when size exceeds the limit.
func (l Limits) Check(size int64) error {
	limit := l.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	if size > limit {
		return fmt.Errorf("%w: %d bytes exceeds the limit of %d bytes", ErrTooLarge, size, limit)
	}
	return nil
}

// Extract returns the text of data, which has the media type mimeType as
// returned by DetectType or Detect (parameters such as charset are
// ignored).
//
// Plain text and Markdown are kept verbatim apart from repairs; HTML yields its
// visible text, one paragraph per block element; PDF yields the text of every
// page, pages numbered from 1, without the running headers and footers (a
// title, a chapter name, a page number) repeated at the top or bottom of
// most pages, so that passages read on across page ends, and, with an OCR
// engine in Limits, the recognised text of pages without a text layer.
// Office documents (DOCX, PPTX, XLSX), OpenDocument files, EPUB e-books,
// CSV/TSV and RTF files yield light Markdown (see Document.Text), ZIP-based
// ones read as what their content is whatever mimeType says. Images are
// read through OCR only. All formats are repaired rather than rejected for
// encoding problems: invalid UTF-8 is replaced, NUL bytes are dropped and
// line endings are normalised to "\n".
//
// Errors wrap ErrUnsupported, ErrNoText, ErrCorrupt or ErrTooLarge, or are
// ctx's error when ctx ends during extraction. Their messages are clean as
// CleanMessage makes them, whatever bytes the file holds. A panic in a
// reader fails the file with ErrCorrupt.
//
// Extract uses the default Limits; Limits.Extract takes others.
func Extract(ctx context.Context, mimeType string, data []byte) (*Document, error) {
	return Limits{}.Extract(ctx, mimeType, data)
}

// Extract is the package's Extract within l's memory limits (l.MaxBytes is
// Check's alone).
func (l Limits) Extract(ctx context.Context, mimeType string, data []byte) (*Document, error) {
	doc, err := l.extract(ctx, mimeType, data)
	return doc, safetext.Error(err)
}

// CleanMessage returns s as one line of valid UTF-8 without NUL or other
// control characters, at most 1 KiB long: invalid bytes become U+FFFD,
// line breaks spaces, and control characters Go escapes such as \x00. The
// errors of this package already read so; callers storing an error text
// that may hold file bytes from elsewhere can use it as a last defence.
func CleanMessage(s string) string {
	return safetext.Message(s)
}

func (l Limits) extract(ctx context.Context, mimeType string, data []byte) (doc *Document, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mt := normaliseMIME(mimeType)
	if !slices.Contains(Types(), mt) {
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, mimeType)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrNoText)
	}
	// The PDF engine isolates its own panics; the other readers run here,
	// and a panic in one must fail the file, not the caller.
	defer func() {
		if v := recover(); v != nil {
			doc, err = nil, fmt.Errorf("%w: internal error while reading the file: %v", ErrCorrupt, v)
		}
	}()
	switch mt {
	case MIMEPDF:
		doc, err = l.extractPDF(ctx, data)
	case MIMEHTML:
		doc, err = l.extractHTML(ctx, data)
	case MIMEMarkdown:
		doc, err = extractMarkdown(data)
	case MIMECSV, MIMETSV:
		doc, err = l.extractDelimited(ctx, mt, data)
	case MIMERTF:
		doc, err = l.extractRTF(ctx, data)
	case MIMEPNG, MIMEJPEG, MIMETIFF:
		doc, err = l.extractImage(ctx, data)
	case MIMEDOCX, MIMEPPTX, MIMEXLSX, MIMEODT, MIMEODP, MIMEODS, MIMEEPUB:
		doc, err = l.extractContainer(ctx, data)
	default:
		doc, err = extractText(data)
	}
	if err != nil {
		return nil, err
	}
	if max := l.maxText(); int64(len(doc.Text)) > max {
		return nil, fmt.Errorf("%w: its text exceeds %d bytes (the text limit)", ErrTooLarge, max)
	}
	if strings.TrimSpace(doc.Text) == "" {
		return nil, ErrNoText
	}
	return doc, nil
}

func (l Limits) maxText() int64 {
	if l.MaxTextBytes <= 0 {
		return DefaultMaxTextBytes
	}
	return l.MaxTextBytes
}

// normaliseMIME maps a declared media type and its common aliases to one of
// the MIME* constants, or returns it lower-cased without parameters.
func normaliseMIME(declared string) string {
	mt, _, err := mime.ParseMediaType(declared)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(declared))
		if i := strings.IndexByte(mt, ';'); i >= 0 {
			mt = strings.TrimSpace(mt[:i])
		}
	}
	switch mt {
	case MIMEPDF, "application/x-pdf":
		return MIMEPDF
	case MIMEText, "text/x-log":
		return MIMEText
	case MIMECSV, "application/csv", "text/comma-separated-values":
		return MIMECSV
	case MIMETSV:
		return MIMETSV
	case MIMERTF, "text/rtf":
		return MIMERTF
	case "image/jpg", "image/pjpeg":
		return MIMEJPEG
	case "image/tif":
		return MIMETIFF
	case "application/vnd.ms-word.document.macroenabled.12", "application/vnd.openxmlformats-officedocument.wordprocessingml.template":
		return MIMEDOCX
	case "application/vnd.ms-excel.sheet.macroenabled.12", "application/vnd.openxmlformats-officedocument.spreadsheetml.template":
		return MIMEXLSX
	case "application/vnd.ms-powerpoint.presentation.macroenabled.12", "application/vnd.openxmlformats-officedocument.presentationml.slideshow":
		return MIMEPPTX
	case MIMEMarkdown, "text/x-markdown":
		return MIMEMarkdown
	case MIMEHTML, "application/xhtml+xml":
		return MIMEHTML
	}
	return mt
}

// singleDocument wraps non-paged text as a Document with one page numbered 0.
func singleDocument(text string) *Document {
	return &Document{
		Text:  text,
		Pages: []Page{{Number: 0, Start: 0, End: runeCount(text)}},
	}
}

// runPDF runs the PDF engine and gives its errors this package's types:
// each PDF error also matches the sentinel of its kind.
func runPDF(ctx context.Context, data []byte, opts pdf.Options) (*pdf.Document, error) {
	d, err := pdf.Extract(ctx, data, opts)
	if err != nil {
		for _, k := range []struct{ pdf, kind error }{
			{pdf.ErrCorrupt, ErrCorrupt},
			{pdf.ErrEncrypted, ErrUnsupported},
			{pdf.ErrNoText, ErrNoText},
			{pdf.ErrTooLarge, ErrTooLarge},
		} {
			if errors.Is(err, k.pdf) {
				return nil, kindError{kind: k.kind, err: err}
			}
		}
		return nil, err
	}
	return d, nil
}

// kindError is err, which also matches the sentinel kind, keeping err's
// message.
type kindError struct{ kind, err error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.kind, e.err} }
