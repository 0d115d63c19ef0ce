package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/html/charset"

	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/extract/htmlmd"
	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Document is a fetched page as text.
type Document struct {
	// URL is the URL asked for, normalised (fragment dropped); FinalURL is
	// where the page came from after redirects.
	URL, FinalURL string
	// Title is the page title: the HTML <title> (else the article title
	// readability finds) for HTML, the file name otherwise.
	Title string
	// ContentType is the media type the page was read as: one of the
	// extract.MIME* types but the images.
	ContentType string
	// Content is the text: Markdown of the main content for HTML (headings,
	// lists, links, tables and code blocks kept; navigation, scripts and
	// footers dropped), the text of every page with "--- page N ---"
	// markers for PDF, the body itself for plain text and Markdown, and
	// Markdown for office documents, e-books, CSV and RTF files (headings,
	// lists, tables; each slide under "## Slide N: title", each sheet's
	// rows as tables under their header row).
	Content string
	// Body is the body as received, at most Options.MaxBodyBytes long. A
	// Document from Get may be shared through the cache: neither it nor
	// Body may be modified.
	Body []byte

	rawOnce sync.Once
	raw     string
	rawFn   func() string
}

// Raw returns the page's text without main-content extraction: for HTML,
// Markdown of the whole page, navigation and footers included (scripts,
// styles and forms still dropped); for other types, Content. It is computed
// on first use.
func (d *Document) Raw() string {
	d.rawOnce.Do(func() {
		if d.rawFn == nil {
			d.raw = d.Content
			return
		}
		d.raw = d.rawFn()
	})
	return d.raw
}

// Get fetches rawURL, or takes it from the cache when it was fetched within
// Options.CacheTTL, and converts it to text. Errors wrap the package's
// sentinels (ErrBlocked, ErrUnsupportedType, ...), an *HTTPStatusError, or
// the caller's context error.
func (c *Client) Get(ctx context.Context, rawURL string) (d *Document, err error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	ctx, span := telemetry.Start(ctx, "read page", trace.SpanKindInternal)
	cached := false
	defer func() { endRead(span, u, cached, d, err) }()
	key := u.String()
	if d, ok := c.cache.Get(key); ok {
		cached = true
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	res, err := c.download(ctx, u)
	if err != nil {
		return nil, err
	}
	d, err = c.Convert(ctx, res)
	if err != nil {
		return nil, err
	}
	c.cache.Put(key, d)
	return d, nil
}

// endRead ends the span of a page read: its host, whether it came from the
// cache, the type and length of its text, or the class of the failure.
func endRead(span trace.Span, u *url.URL, cached bool, d *Document, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.ServerAddress(u.Hostname()), telemetry.CacheHitKey.Bool(cached))
	if err != nil {
		telemetry.Fail(span, errorClass(err))
		return
	}
	span.SetAttributes(telemetry.ContentTypeKey.String(d.ContentType), telemetry.TextCharsKey.Int(len(d.Content)))
}

// Convert turns a downloaded resource into a Document.
func (c *Client) Convert(ctx context.Context, res *Resource) (_ *Document, err error) {
	ctx, span := telemetry.Start(ctx, "extract", trace.SpanKindInternal)
	defer func() {
		if err != nil {
			telemetry.Fail(span, errorClass(err))
		}
		span.End()
	}()
	if span.IsRecording() {
		span.SetAttributes(telemetry.ContentTypeKey.String(res.ContentType), telemetry.HTTPBodySizeKey.Int(len(res.Body)))
	}
	d := &Document{URL: res.URL, FinalURL: res.FinalURL, ContentType: res.ContentType, Body: res.Body}
	switch res.ContentType {
	case extract.MIMEHTML:
		err = convertHTML(ctx, d, res.DeclaredType)
	case extract.MIMEPDF:
		d.Title = fileTitle(res.FinalURL)
		d.Content, err = convertPDF(ctx, res.Body)
	case extract.MIMEText, extract.MIMEMarkdown:
		d.Title = fileTitle(res.FinalURL)
		d.Content, err = convertText(ctx, res.ContentType, res.Body)
	case extract.MIMEDOCX, extract.MIMEPPTX, extract.MIMEXLSX, extract.MIMEODT, extract.MIMEODP, extract.MIMEODS,
		extract.MIMEEPUB, extract.MIMECSV, extract.MIMETSV, extract.MIMERTF:
		d.Title = fileTitle(res.FinalURL)
		d.Content, err = convertDocument(ctx, res.ContentType, res.Body)
	default:
		return nil, fmt.Errorf("fetch %s: %w: %s", res.URL, ErrUnsupportedType, res.ContentType)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			if errors.Is(ctxErr, context.DeadlineExceeded) {
				return nil, fmt.Errorf("fetch %s: %w: converting the page took longer than the time limit", res.URL, ErrTimeout)
			}
		}
		return nil, fmt.Errorf("fetch %s: %w", res.URL, err)
	}
	return d, nil
}

// fileTitle names a non-HTML page by the last segment of its URL path.
func fileTitle(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	if seg := path.Base(u.Path); seg != "/" && seg != "." {
		if s, err := url.PathUnescape(seg); err == nil {
			return s
		}
		return seg
	}
	return u.Hostname()
}

// convertHTML fills d's Title and Content and arranges for Raw: the page's
// main content as Markdown (package htmlmd), read in one pass over its
// bytes; the whole page when its main content holds no text (an index of
// links, a form).
func convertHTML(ctx context.Context, d *Document, declared string) error {
	pageURL, err := url.Parse(d.FinalURL)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	body, err := utf8Body(d.Body, declared)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	page, err := htmlmd.ConvertBytes(ctx, body, htmlmd.Options{Base: pageURL, Main: true})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, htmlmd.ErrTooLarge):
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	default:
		return fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	d.Title, d.Content = page.Title, page.Markdown
	d.rawFn = func() string {
		// Raw is asked for rarely: converted again rather than kept for
		// every cached page.
		raw, err := htmlmd.ConvertBytes(context.Background(), body, htmlmd.Options{Base: pageURL})
		if err != nil {
			return d.Content
		}
		return raw.Markdown
	}
	if d.Title == "" {
		d.Title = firstHeading(d.Content)
	}
	if strings.TrimSpace(d.Content) == "" {
		d.Content = d.Raw()
	}
	return ctx.Err()
}

// MainContent returns what fetch_url reads of an HTML page, for a reader
// that stores pages as fetch_url shows them (a crawl): its title and its
// main content as Markdown, or the whole page when the main content holds
// no text. declared is the page's Content-Type, which may name its
// charset; its links are made absolute against pageURL.
func MainContent(ctx context.Context, body []byte, declared string, pageURL *url.URL) (title, markdown string, err error) {
	d := &Document{FinalURL: pageURL.String(), Body: body}
	if err := convertHTML(ctx, d, declared); err != nil {
		return "", "", err
	}
	return d.Title, d.Content, nil
}

// firstHeading is the text of the first heading of a page's Markdown, the
// title of a page without a <title>.
func firstHeading(md string) string {
	for line := range strings.SplitSeq(md, "\n") {
		if t := strings.TrimLeft(line, "#"); len(t) < len(line) && strings.HasPrefix(t, " ") {
			return strings.TrimSpace(t)
		}
	}
	return ""
}

// utf8Body decodes body by its declared charset, a byte order mark or a
// <meta> declaration (in that order; UTF-8 when none says).
func utf8Body(body []byte, declared string) ([]byte, error) {
	if _, name, _ := charset.DetermineEncoding(body[:min(len(body), 1024)], declared); name == "utf-8" {
		// Most pages: read as they are, invalid bytes replaced later.
		return body, nil
	}
	r, err := charset.NewReader(bytes.NewReader(body), declared)
	if err != nil {
		// An unknown charset label: read the bytes as they are.
		return body, nil
	}
	return io.ReadAll(r)
}

// convertPDF returns the text of every page, each under a "--- page N ---"
// line so that a reader can cite pages.
func convertPDF(ctx context.Context, body []byte) (string, error) {
	doc, err := extract.Extract(ctx, extract.MIMEPDF, body)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%w: PDF: %w", ErrUnreadable, err)
	}
	var b strings.Builder
	b.Grow(len(doc.Text) + 20*len(doc.Pages))
	// Page spans are in runes; walk the text once, converting offsets.
	text, runePos := doc.Text, 0
	for i, pg := range doc.Pages {
		start := advance(text, pg.Start-runePos)
		text, runePos = text[start:], pg.Start
		end := advance(text, pg.End-runePos)
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("--- page ")
		b.WriteString(strconv.Itoa(pg.Number))
		b.WriteString(" ---\n")
		b.WriteString(strings.TrimSpace(text[:end]))
		text, runePos = text[end:], pg.End
	}
	return b.String(), nil
}

// advance returns the byte offset of the n-th rune of s (len(s) when s is
// shorter), counting runes as utf8.RuneCountInString does. ASCII, most of
// any page, is counted a byte at a time without decoding.
func advance(s string, n int) int {
	i := 0
	for n > 0 && i < len(s) {
		if s[i] < utf8.RuneSelf {
			i++
		} else {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		n--
	}
	return i
}

// convertText repairs encodings and line endings of plain text and
// Markdown, which otherwise pass through.
func convertText(ctx context.Context, mimeType string, body []byte) (string, error) {
	if len(body) == 0 {
		return "", nil
	}
	doc, err := extract.Extract(ctx, mimeType, body)
	if errors.Is(err, extract.ErrNoText) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	return doc.Text, nil
}

// convertDocument reads an office document, an e-book, a CSV or an RTF
// file as the Markdown the extractor writes.
func convertDocument(ctx context.Context, mimeType string, body []byte) (string, error) {
	// A reader wants a sheet's rows in one table, not in blocks of a
	// chunk's size each under the header row, as stored files are.
	doc, err := extract.Limits{ChunkSize: 1 << 20}.Extract(ctx, mimeType, body)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if errors.Is(err, extract.ErrUnsupported) {
			return "", fmt.Errorf("%w: %w", ErrUnsupportedType, err)
		}
		return "", fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	return doc.Text, nil
}
