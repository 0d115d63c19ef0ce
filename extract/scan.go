package extract

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/extract/ocr"
	"github.com/mcpsearch/mcpsearch/extract/pdf"
)

// OCRReport says which pages of a document OCR read and which need it.
type OCRReport struct {
	// Read lists the pages whose text was recognised by OCR.
	Read []int `json:"read,omitempty"`
	// Needed lists the pages without a text layer (or with almost none)
	// that OCR did not read; Reason says why: OCR is off or unavailable,
	// the page cap was reached, or recognition failed.
	Needed []int  `json:"needed,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Note returns a sentence for an upload answer or a file's status, such as
// "pages 3-5 need OCR: the tesseract program is not installed (...)"; ""
// when no page needs OCR.
func (r OCRReport) Note() string {
	if len(r.Needed) == 0 {
		return ""
	}
	verb := "needs"
	if len(r.Needed) > 1 {
		verb = "need"
	}
	s := PageList(r.Needed) + " " + verb + " OCR"
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// PageList names pages compactly: "page 4", "pages 1-3, 7".
func PageList(pages []int) string {
	if len(pages) == 0 {
		return ""
	}
	var parts []string
	for i := 0; i < len(pages); {
		j := i
		for j+1 < len(pages) && pages[j+1] == pages[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(pages[i]))
		} else {
			parts = append(parts, strconv.Itoa(pages[i])+"-"+strconv.Itoa(pages[j]))
		}
		i = j + 1
	}
	word := "pages "
	if len(pages) == 1 {
		word = "page "
	}
	return word + strings.Join(parts, ", ")
}

// NeedsOCRError reports a document that yields no text because its pages
// need OCR that did not run. It matches ErrNoText; its message says which
// pages and why ("no extractable text: pages 1-12 need OCR: OCR is off").
type NeedsOCRError struct {
	Pages  []int
	Reason string
}

func (e *NeedsOCRError) Error() string {
	return ErrNoText.Error() + ": " + OCRReport{Needed: e.Pages, Reason: e.Reason}.Note()
}

// Unwrap makes the error match ErrNoText.
func (e *NeedsOCRError) Unwrap() error { return ErrNoText }

// extractPDF reads a PDF's text layer and, with an OCR engine, recognises
// the pages that have none.
func (l Limits) extractPDF(ctx context.Context, data []byte) (*Document, error) {
	opts := pdf.Options{MaxTextBytes: l.MaxTextBytes, MaxStreamBytes: l.MaxPDFStreamBytes,
		MaxDecodedBytes: l.MaxPDFDecodedBytes}
	// Without an engine a PDF without text fails as it always has, with
	// the engine's message; with one, its empty pages are recognised.
	opts.KeepEmpty = l.OCR != nil
	d, err := runPDF(ctx, data, opts)
	if err != nil {
		return nil, err
	}
	texts := pageTexts(d)
	need := l.ocrCandidates(d, texts)
	report := OCRReport{}
	ocrd := map[int]bool{}
	if len(need) > 0 {
		report, err = l.recognisePages(ctx, data, need, texts, ocrd)
		if err != nil {
			return nil, err
		}
	}
	var doc *Document
	if len(ocrd) == 0 {
		// The engine's text and pages as they are.
		doc = &Document{Text: d.Text, Pages: make([]Page, len(d.Pages))}
		for i, p := range d.Pages {
			doc.Pages[i] = Page(p)
		}
		doc.Spans = pageSpans(doc.Pages, nil)
	} else {
		doc = joinPageTexts(texts, ocrd)
	}
	doc.OCR = report
	if strings.TrimSpace(doc.Text) == "" {
		switch {
		case len(report.Needed) > 0:
			return nil, &NeedsOCRError{Pages: report.Needed, Reason: report.Reason}
		case len(report.Read) > 0:
			return nil, fmt.Errorf("%w: OCR found no text on its %d pages", ErrNoText, len(texts))
		}
		return nil, fmt.Errorf("%w: its %d pages show no text and no image (vector graphics only?)", ErrNoText, len(texts))
	}
	return doc, nil
}

// pageTexts returns the text of each page of d, without the separators
// between pages.
func pageTexts(d *pdf.Document) []string {
	texts := make([]string, len(d.Pages))
	rest, pos := d.Text, 0
	for i, p := range d.Pages {
		start := runeOffset(rest, p.Start-pos)
		rest, pos = rest[start:], p.Start
		end := runeOffset(rest, p.End-pos)
		texts[i] = strings.TrimRight(rest[:end], "\n")
		rest, pos = rest[end:], p.End
	}
	return texts
}

// runeOffset returns the byte offset of the n-th rune of s.
func runeOffset(s string, n int) int {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// ocrCandidates returns the pages (from 1) to recognise: in ModeForce every
// page, otherwise those whose text layer holds fewer letters and digits
// than ocr.Options.MinChars while they paint an image or show glyphs whose
// fonts map to no text (a scan, or text drawn with unusable fonts). Blank
// pages are left alone.
func (l Limits) ocrCandidates(d *pdf.Document, texts []string) []int {
	opts := l.OCR.Options()
	var out []int
	for i, t := range texts {
		if l.OCR.Mode() == ocr.ModeForce {
			out = append(out, i+1)
			continue
		}
		if letters(t) >= opts.MinChars || i >= len(d.Info) {
			continue
		}
		info := d.Info[i]
		if info.Images > 0 || info.Glyphs > 2*utf8.RuneCountInString(t) {
			out = append(out, i+1)
		}
	}
	return out
}

func letters(s string) int {
	n := 0
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			n++
		}
	}
	return n
}

// recognisePages runs OCR on the pages need, one at a time, replacing
// their text in texts and marking them in ocrd. Pages beyond the cap, or
// whose recognition failed, are reported as needed. Only the end of ctx
// fails the document.
func (l Limits) recognisePages(ctx context.Context, data []byte, need []int, texts []string, ocrd map[int]bool) (OCRReport, error) {
	var r OCRReport
	if err := l.OCR.Available(ctx, true); err != nil {
		r.Needed, r.Reason = need, unavailableReason(err)
		return r, nil
	}
	doc, err := l.OCR.OpenPDF(ctx, data)
	if err != nil {
		r.Needed, r.Reason = need, unavailableReason(err)
		return r, nil
	}
	defer doc.Close()
	maxPages := l.OCR.Options().MaxPages
	var failures []string
	for i, n := range need {
		if i >= maxPages {
			r.Needed = append(r.Needed, need[i:]...)
			failures = append(failures, fmt.Sprintf("OCR reads at most %d pages of a document (the OCR page limit)", maxPages))
			break
		}
		text, err := doc.Page(ctx, n)
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if err != nil {
			r.Needed = append(r.Needed, n)
			failures = append(failures, fmt.Sprintf("page %d: %v", n, err))
			continue
		}
		r.Read = append(r.Read, n)
		// A text layer OCR cannot better is kept.
		if strings.TrimSpace(text) != "" && (l.OCR.Mode() == ocr.ModeForce || letters(text) > letters(texts[n-1])) {
			texts[n-1] = text
			ocrd[n] = true
		}
	}
	if len(failures) > 0 {
		r.Reason = strings.Join(failures[:min(len(failures), 3)], "; ")
	}
	return r, nil
}

// unavailableReason is the reason of an OCR error, without the sentinel's
// words.
func unavailableReason(err error) string {
	return strings.TrimPrefix(err.Error(), ocr.ErrUnavailable.Error()+": ")
}

// joinPageTexts builds a paged document from page texts as the PDF engine
// does: a blank line between pages with text, owned by the page before;
// one span per page with text, marked OCR for the pages in ocrd.
func joinPageTexts(texts []string, ocrd map[int]bool) *Document {
	var b strings.Builder
	doc := &Document{Pages: make([]Page, 0, len(texts))}
	pos, lastWithText := 0, -1
	for i, text := range texts {
		if text != "" && b.Len() > 0 {
			b.WriteString("\n\n")
			pos += 2
			doc.Pages[lastWithText].End = pos
			for j := lastWithText + 1; j < len(doc.Pages); j++ {
				doc.Pages[j].Start, doc.Pages[j].End = pos, pos
			}
		}
		if text != "" {
			lastWithText = len(doc.Pages)
		}
		start := pos
		b.WriteString(text)
		pos += utf8.RuneCountInString(text)
		doc.Pages = append(doc.Pages, Page{Number: i + 1, Start: start, End: pos})
	}
	doc.Text = b.String()
	doc.Spans = pageSpans(doc.Pages, ocrd)
	return doc
}

// pageSpans returns a span for each page with text, marked OCR for the
// pages in ocrd.
func pageSpans(pages []Page, ocrd map[int]bool) []Span {
	var spans []Span
	for _, p := range pages {
		if p.End > p.Start {
			spans = append(spans, Span{Start: p.Start, End: p.End,
				Location: Location{PageStart: p.Number, PageEnd: p.Number, OCR: ocrd[p.Number]}})
		}
	}
	return spans
}

// extractImage recognises an image upload, its pages numbered from 1.
// Without OCR an image cannot be read at all: it is unsupported, as
// Limits.Detect says.
func (l Limits) extractImage(ctx context.Context, data []byte) (*Document, error) {
	if err := l.OCR.Available(ctx, false); err != nil {
		return nil, fmt.Errorf("%w: %s image: reading images needs OCR: %s", ErrUnsupported, imageKind(data), unavailableReason(err))
	}
	texts, err := l.OCR.Image(ctx, data)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, ocr.ErrTooLarge) {
			return nil, fmt.Errorf("%w: %v", ErrTooLarge, err)
		}
		return nil, fmt.Errorf("%w: OCR: %v", ErrCorrupt, err)
	}
	ocrd := map[int]bool{}
	report := OCRReport{}
	for i := range texts {
		ocrd[i+1] = true
		report.Read = append(report.Read, i+1)
	}
	doc := joinPageTexts(texts, ocrd)
	doc.OCR = report
	if strings.TrimSpace(doc.Text) == "" {
		return nil, fmt.Errorf("%w: OCR found no text in the image", ErrNoText)
	}
	return doc, nil
}
