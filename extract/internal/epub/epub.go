// Package epub reads EPUB e-books (2 and 3): the chapters in spine order,
// each chapter's XHTML through the HTML text writer, titled from the
// book's table of contents (the EPUB 3 navigation document, else the EPUB 2
// NCX). Books whose chapters are encrypted (DRM) are refused.
package epub

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/htmltext"
	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
	"github.com/mcpsearch/mcpsearch/extract/internal/xmlsafe"
)

// maxChapter bounds one chapter's XHTML, and the XML parts read whole.
const maxChapter = 64 << 20

// fontObfuscation names the encryption algorithms that only hide embedded
// fonts; any other algorithm on a chapter is DRM.
var fontObfuscation = map[string]bool{
	"http://www.idpf.org/2008/embedding": true,
	"http://ns.adobe.com/pdf/enc#RC":     true,
}

// Read returns the text of the e-book in a: its chapters in spine order,
// each a span whose heading path starts with the chapter's title.
func Read(ctx context.Context, a *archive.Archive, opts textdoc.Options) (*textdoc.Document, error) {
	opf, err := packagePath(a)
	if err != nil {
		return nil, err
	}
	pkg, err := parse(a, opf)
	if err != nil {
		return nil, err
	}
	type item struct{ href, mediaType, properties string }
	items := map[string]item{}
	var navPath string
	for _, it := range pkg.Child("manifest").Children("item") {
		href := archive.Resolve(opf, it.A("href"))
		items[it.A("id")] = item{href: href, mediaType: it.A("media-type"), properties: it.A("properties")}
		if strings.Contains(" "+it.A("properties")+" ", " nav ") {
			navPath = href
		}
	}
	spine := pkg.Child("spine")
	if err := checkDRM(a); err != nil {
		return nil, err
	}
	titles := map[string]string{}
	if navPath != "" {
		titles = navTitles(ctx, a, navPath)
	}
	if len(titles) == 0 {
		if ncx, ok := items[spine.A("toc")]; ok {
			titles = ncxTitles(a, ncx.href)
		}
	}
	b := textdoc.NewBuilder(opts.MaxTextBytes)
	for _, ref := range spine.Children("itemref") {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		it, ok := items[ref.A("idref")]
		if !ok || !(strings.Contains(it.mediaType, "html") || strings.HasSuffix(it.href, "htm") || strings.HasSuffix(it.href, "html")) {
			continue
		}
		if err := writeChapter(ctx, a, b, it.href, titles[it.href], opts.MaxTextBytes); err != nil {
			return nil, err
		}
		if err := b.Err(); err != nil {
			return nil, err
		}
	}
	doc, err := b.Document()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(doc.Text) == "" {
		return nil, fmt.Errorf("%w: the e-book holds no text", textdoc.ErrNoText)
	}
	return doc, nil
}

// packagePath returns the package document named by the container.
func packagePath(a *archive.Archive) (string, error) {
	c, err := parse(a, "META-INF/container.xml")
	if err != nil {
		return "", fmt.Errorf("%w: e-book without a readable META-INF/container.xml: %w", textdoc.ErrCorrupt, err)
	}
	for _, rf := range c.FindAll("rootfile") {
		if p := rf.A("full-path"); p != "" && a.Has(p) {
			return archive.Resolve("", p), nil
		}
	}
	return "", fmt.Errorf("%w: the e-book names no package document", textdoc.ErrCorrupt)
}

func parse(a *archive.Archive, name string) (*xmlsafe.Node, error) {
	if a.Size(name) > maxChapter {
		return nil, fmt.Errorf("%w: %s inflates to more than %d bytes", textdoc.ErrTooLarge, name, maxChapter)
	}
	rc, err := a.Open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return xmlsafe.Parse(rc, name)
}

// checkDRM refuses books whose content is encrypted with anything but
// font obfuscation.
func checkDRM(a *archive.Archive) error {
	if !a.Has("META-INF/encryption.xml") {
		return nil
	}
	enc, err := parse(a, "META-INF/encryption.xml")
	if err != nil {
		return err
	}
	for _, ed := range enc.FindAll("EncryptedData") {
		alg := ed.Child("EncryptionMethod").A("Algorithm")
		uri := ed.Find("CipherReference").A("URI")
		if fontObfuscation[alg] {
			continue
		}
		if ext := strings.ToLower(path.Ext(uri)); ext == ".xhtml" || ext == ".html" || ext == ".htm" || ext == ".xml" {
			return fmt.Errorf("%w: the e-book is DRM-protected (its chapters are encrypted): upload a DRM-free copy", textdoc.ErrUnsupported)
		}
	}
	return nil
}

// navTitles reads the table of contents of an EPUB 3 navigation document:
// the first title given to each chapter file. The document is read token by
// token.
func navTitles(ctx context.Context, a *archive.Archive, nav string) map[string]string {
	titles := map[string]string{}
	r, done, err := openHTML(a, nav)
	if err != nil {
		return titles
	}
	defer done()
	z := html.NewTokenizer(r)
	z.SetMaxBuf(htmltext.MaxToken)
	// depth counts the <nav> elements open inside the table of contents;
	// target is the chapter of the link being read, text its words.
	depth := 0
	var target string
	var text strings.Builder
	for n := 0; ; n++ {
		if n&1023 == 0 && ctx.Err() != nil {
			return titles
		}
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return titles
		case html.StartTagToken:
			name, hasAttr := z.TagName()
			switch atom.Lookup(name) {
			case atom.Nav:
				if depth > 0 || hasAttr && attrHas(z, "type", "toc") {
					depth++
				}
			case atom.A:
				// A book has no more chapters than entries: more
				// titles are no use.
				if depth > 0 && hasAttr && len(titles) < archive.DefaultMaxEntries {
					if href, ok := attr(z, "href"); ok {
						target = archive.Resolve(nav, href)
						text.Reset()
					}
				}
			}
		case html.TextToken:
			if target != "" && text.Len() < maxTitleBytes {
				text.Write(z.Text())
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch atom.Lookup(name) {
			case atom.A:
				if _, ok := titles[target]; !ok && target != "" {
					if t := strings.Join(strings.Fields(text.String()), " "); t != "" {
						titles[target] = t
					}
				}
				target = ""
			case atom.Nav:
				if depth > 0 {
					depth--
					if depth == 0 {
						return titles
					}
				}
			}
		}
	}
}

// maxTitleBytes bounds the text of a table of contents entry that is kept.
const maxTitleBytes = 1 << 10

// attrHas reports whether the tag z holds has an attribute whose name ends
// with key and whose value holds the word word.
func attrHas(z *html.Tokenizer, key, word string) bool {
	for {
		k, v, more := z.TagAttr()
		if strings.HasSuffix(string(k), key) && strings.Contains(" "+string(v)+" ", " "+word+" ") {
			return true
		}
		if !more {
			return false
		}
	}
}

// attr returns the value of the attribute key of the tag z holds.
func attr(z *html.Tokenizer, key string) (string, bool) {
	for {
		k, v, more := z.TagAttr()
		if string(k) == key {
			return string(v), true
		}
		if !more {
			return "", false
		}
	}
}

// ncxTitles reads the table of contents of an EPUB 2 NCX file.
func ncxTitles(a *archive.Archive, ncx string) map[string]string {
	titles := map[string]string{}
	root, err := parse(a, ncx)
	if err != nil {
		return titles
	}
	for _, np := range root.FindAll("navPoint") {
		src := np.Child("content").A("src")
		label := strings.Join(strings.Fields(np.Child("navLabel").Child("text").AllText()), " ")
		if src == "" || label == "" {
			continue
		}
		target := archive.Resolve(ncx, src)
		if _, ok := titles[target]; !ok {
			titles[target] = label
		}
	}
	return titles
}

// openHTML opens a chapter, or the navigation document, for reading as
// UTF-8, decoding the encoding it declares.
func openHTML(a *archive.Archive, name string) (io.Reader, func(), error) {
	if a.Size(name) > maxChapter {
		return nil, nil, fmt.Errorf("%w: %s inflates to more than %d bytes", textdoc.ErrTooLarge, name, maxChapter)
	}
	rc, err := a.Open(name)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReader(rc)
	var r io.Reader = br
	if cr, err := charset.NewReader(br, "application/xhtml+xml"); err == nil {
		r = cr
	}
	return r, func() { rc.Close() }, nil
}

// writeChapter writes one chapter: its text, with a span for the chapter
// (heading path: its title) and one for each heading inside it. A chapter
// that does not open with its title (as given by the table of contents)
// gets it as a heading first.
func writeChapter(ctx context.Context, a *archive.Archive, b *textdoc.Builder, name, title string, limit int64) error {
	if !a.Has(name) {
		return nil
	}
	r, done, err := openHTML(a, name)
	if err != nil {
		if errors.Is(err, textdoc.ErrTooLarge) {
			return err
		}
		return fmt.Errorf("%w: chapter %s: %v", textdoc.ErrCorrupt, name, err)
	}
	defer done()
	page, err := htmltext.Read(ctx, r, htmltext.Options{MaxTextBytes: limit})
	if err != nil {
		if errors.Is(err, textdoc.ErrTooLarge) || ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%w: chapter %s: %v", textdoc.ErrCorrupt, name, err)
	}
	text, headings := page.Text, page.Headings
	if strings.TrimSpace(text) == "" {
		return nil
	}
	if title == "" {
		title = page.Title
	}
	if title == "" && len(headings) > 0 {
		title = headings[0].Title
	}
	// short is the title as a heading path holds it.
	short := textdoc.Title(title)
	var prefix []string
	if title != "" {
		prefix = []string{short}
	}
	spans := []textdoc.Span{{Loc: textdoc.Location{Headings: prefix}}}
	if title != "" && !strings.HasPrefix(text, title) {
		// The chapter does not open with its title: it is written as a
		// heading, starting the chapter's span.
		b.Locate(spans[0].Loc, false)
		b.Heading(1, title)
		spans = spans[:0]
	}
	var o textdoc.Outline
	for i, h := range headings {
		path := o.Enter(h.Level, h.Title)
		// The chapter's first heading usually repeats its title.
		if i == 0 && len(path) == 1 && path[0] == short {
			continue
		}
		full := append(append([]string(nil), prefix...), path...)
		if len(path) > 0 && path[0] == short {
			full = path
		}
		spans = append(spans, textdoc.Span{Start: h.Offset, Loc: textdoc.Location{Headings: full}})
	}
	b.BlockWithSpans(text, spans)
	return nil
}
