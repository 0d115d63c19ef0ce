// Package extract turns uploaded bytes (PDF, plain text, Markdown, HTML) into
// text with page boundaries: it detects a file's type and dispatches to the
// reader of that type, PDFs to package pdf. It knows nothing of storage or
// MCP.
package extract

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/mcpsearch/mcpsearch/docs/extract/internal/safetext"
	"github.com/mcpsearch/mcpsearch/docs/extract/pdf"
)

// Document is the extracted text of one file.
type Document struct {
	// Text is the whole extracted text, valid UTF-8.
	Text string
	// Pages lists page spans in Text, in order. Offsets are in runes
	// (characters), not bytes. Formats without pages have one page numbered 0
	// covering all of Text; PDF pages are numbered from 1.
	Pages []Page
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
)

var (
	// ErrUnsupported reports a file type that cannot be extracted, such as an
	// image, an office document, an archive or a password-protected PDF.
	ErrUnsupported = errors.New("unsupported file type")
	// ErrTooLarge reports a file larger than the configured limit.
	ErrTooLarge = errors.New("file too large")
	// ErrNoText reports a file that yields no text: an empty file, or a PDF
	// whose pages hold only images or vector graphics (typically a scan).
	// Ingestion marks such a file failed with this error's message as the
	// reason; for PDFs the message reads "no extractable text (scanned PDF?)".
	ErrNoText = errors.New("no extractable text")
	// ErrCorrupt reports a file that cannot be parsed. A panic inside the PDF
	// parser is recovered and reported as ErrCorrupt with a readable reason.
	ErrCorrupt = errors.New("corrupt or unreadable file")
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
}

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
// returned by DetectType (parameters such as charset are ignored).
//
// Plain text and Markdown are kept verbatim apart from repairs; HTML yields its
// visible text, one paragraph per block element; PDF yields the text of every
// page, pages numbered from 1, without the running headers and footers (a
// title, a chapter name, a page number) repeated at the top or bottom of
// most pages, so that passages read on across page ends. All formats are repaired rather than rejected
// for encoding problems: invalid UTF-8 is replaced, NUL bytes are dropped and
// line endings are normalised to "\n".
//
// Errors wrap ErrUnsupported, ErrNoText, ErrCorrupt or ErrTooLarge, or are
// ctx's error when ctx ends during extraction. Their messages are clean as
// CleanMessage makes them, whatever bytes the file holds.
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

func (l Limits) extract(ctx context.Context, mimeType string, data []byte) (*Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mt := normaliseMIME(mimeType)
	switch mt {
	case MIMEPDF, MIMEText, MIMEMarkdown, MIMEHTML:
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, mimeType)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrNoText)
	}
	var (
		doc *Document
		err error
	)
	switch mt {
	case MIMEPDF:
		doc, err = extractPDF(ctx, data, pdf.Options{MaxTextBytes: l.MaxTextBytes,
			MaxStreamBytes: l.MaxPDFStreamBytes, MaxDecodedBytes: l.MaxPDFDecodedBytes})
	case MIMEHTML:
		doc, err = extractHTML(data)
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
	case MIMEText, "text/csv", "text/tab-separated-values", "text/x-log":
		return MIMEText
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

// extractPDF runs the PDF engine and gives its result and errors this
// package's types: each PDF error also matches the sentinel of its kind.
func extractPDF(ctx context.Context, data []byte, opts pdf.Options) (*Document, error) {
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
	doc := &Document{Text: d.Text, Pages: make([]Page, len(d.Pages))}
	for i, p := range d.Pages {
		doc.Pages[i] = Page(p)
	}
	return doc, nil
}

// kindError is err, which also matches the sentinel kind, keeping err's
// message.
type kindError struct{ kind, err error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.kind, e.err} }
