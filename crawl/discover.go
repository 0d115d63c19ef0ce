package crawl

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxLinksPerPage bounds the links taken from one page; a page with more
// (a generated index, a calendar) gives its first ones.
const maxLinksPerPage = 10000

// htmlPage is what the crawler reads from an HTML page besides its text.
type htmlPage struct {
	links     []string // hrefs as written, to resolve against base
	base      string   // <base href>, if any
	canonical string   // <link rel=canonical href>, if any
	noindex   bool     // <meta name=robots content=noindex>
	nofollow  bool     // <meta name=robots content=nofollow>
	scripts   int      // <script> elements
	text      int      // bytes of text in <body>, outside scripts, styles and templates
}

// isShell reports whether a page is a shell its scripts fill: scripts and
// next to no text of its own.
func (p htmlPage) isShell() bool { return p.scripts > 0 && p.text < shellText }

// readHTML tokenises an HTML page for its links: a, area, frame and iframe
// targets, and meta refresh. Links marked rel=nofollow are left out: wikis
// mark their edit, history and login links so, for crawlers to stay away.
func readHTML(body []byte) htmlPage {
	var p htmlPage
	z := html.NewTokenizer(bytes.NewReader(body))
	hidden := 0 // inside a script, style, template, noscript or title
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return p
		}
		switch tt {
		case html.TextToken:
			if hidden == 0 {
				p.text += len(bytes.TrimSpace(z.Text()))
			}
			continue
		case html.EndTagToken:
			name, _ := z.TagName()
			switch atom.Lookup(name) {
			case atom.Script, atom.Style, atom.Template, atom.Noscript, atom.Title:
				hidden = max(hidden-1, 0)
			}
			continue
		case html.StartTagToken, html.SelfClosingTagToken:
		default:
			continue
		}
		name, hasAttr := z.TagName()
		a := atom.Lookup(name)
		switch a {
		case atom.Script:
			p.scripts++
			fallthrough
		case atom.Style, atom.Template, atom.Noscript, atom.Title:
			if tt == html.StartTagToken {
				hidden++
			}
		}
		if !hasAttr {
			continue
		}
		switch a {
		case atom.A, atom.Area, atom.Base, atom.Link, atom.Meta, atom.Frame, atom.Iframe:
		default:
			continue
		}
		attrs := map[string]string{}
		for {
			k, v, more := z.TagAttr()
			key := string(k)
			if _, dup := attrs[key]; !dup {
				attrs[key] = string(v)
			}
			if !more {
				break
			}
		}
		switch a {
		case atom.A, atom.Area:
			href, ok := attrs["href"]
			if !ok || hasToken(attrs["rel"], "nofollow") {
				continue
			}
			if len(p.links) < maxLinksPerPage {
				p.links = append(p.links, href)
			}
		case atom.Frame, atom.Iframe:
			if src := attrs["src"]; src != "" && len(p.links) < maxLinksPerPage {
				p.links = append(p.links, src)
			}
		case atom.Base:
			if href, ok := attrs["href"]; ok && p.base == "" {
				p.base = href
			}
		case atom.Link:
			if hasToken(attrs["rel"], "canonical") && p.canonical == "" {
				p.canonical = attrs["href"]
			}
		case atom.Meta:
			switch strings.ToLower(attrs["name"]) {
			case "robots":
				p.noindex = p.noindex || robotsDirective(attrs["content"], "noindex")
				p.nofollow = p.nofollow || robotsDirective(attrs["content"], "nofollow")
			}
			if strings.EqualFold(attrs["http-equiv"], "refresh") {
				if target := refreshTarget(attrs["content"]); target != "" && len(p.links) < maxLinksPerPage {
					p.links = append(p.links, target)
				}
			}
		}
	}
}

// hasToken reports whether the space-separated list holds token, in any
// case.
func hasToken(list, token string) bool {
	for _, f := range strings.Fields(list) {
		if strings.EqualFold(f, token) {
			return true
		}
	}
	return false
}

// robotsDirective reports whether a robots meta tag or X-Robots-Tag value
// holds directive, "none" meaning both noindex and nofollow. Values naming
// another crawler ("googlebot: noindex") are ignored.
func robotsDirective(content, directive string) bool {
	for _, part := range strings.Split(content, ",") {
		part = strings.ToLower(strings.TrimSpace(part))
		if strings.Contains(part, ":") {
			continue
		}
		if part == directive || part == "none" {
			return true
		}
	}
	return false
}

// headerDirective reads the X-Robots-Tag headers of an answer.
func headerDirective(h http.Header, directive string) bool {
	for _, v := range h.Values("X-Robots-Tag") {
		if robotsDirective(v, directive) {
			return true
		}
	}
	return false
}

// refreshTarget returns the URL of a meta refresh ("0; url=/next").
func refreshTarget(content string) string {
	_, rest, ok := strings.Cut(content, ";")
	if !ok {
		return ""
	}
	rest = strings.TrimSpace(rest)
	if len(rest) < 4 || !strings.EqualFold(rest[:3], "url") {
		return ""
	}
	rest = strings.TrimSpace(rest[3:])
	if !strings.HasPrefix(rest, "=") {
		return ""
	}
	return strings.Trim(strings.TrimSpace(rest[1:]), `'"`)
}

// linkCanonical returns the target of a Link header with rel=canonical,
// which servers send for PDFs and other files without a <head>.
func linkCanonical(h http.Header) string {
	for _, v := range h.Values("Link") {
		for _, part := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(part, ";")
			target = strings.TrimSpace(target)
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(strings.TrimSpace(k), "rel") && hasToken(strings.Trim(val, `"`), "canonical") {
					return target[1 : len(target)-1]
				}
			}
		}
	}
	return ""
}

// Sitemap limits from the sitemaps.org protocol: a file lists at most
// 50,000 URLs and holds at most 50 MB uncompressed.
const (
	maxSitemapURLs  = 50000
	maxSitemapBytes = 50 << 20
	// maxSitemaps bounds the sitemap files one crawl reads, indexes and
	// the sitemaps they name together.
	maxSitemaps = 50
)

var errSitemapTooLarge = errors.New("larger than its limit uncompressed")

// sitemap is what one sitemap file lists.
type sitemap struct {
	pages    []string // <urlset><url><loc>, or lines of a text sitemap
	sitemaps []string // <sitemapindex><sitemap><loc>
	// morePages and moreSitemaps count the URLs past maxSitemapURLs and
	// maxSitemaps, which are not kept.
	morePages, moreSitemaps int
}

// parseSitemap reads a sitemap as it arrives: XML (a urlset or a sitemap
// index), gzip-compressed or not, or plain text with one URL a line. It
// keeps the first maxSitemapURLs pages and maxSitemaps sitemaps and counts
// the others in more. It stops with errSitemapTooLarge past limit bytes
// uncompressed; on that error, a read error or malformed XML, what was
// read before is returned with it.
func parseSitemap(body io.Reader, limit int64) (sitemap, error) {
	br := bufio.NewReaderSize(body, 4096)
	var r io.Reader = br
	if head, _ := br.Peek(2); bytes.Equal(head, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return sitemap{}, fmt.Errorf("not gzip: %w", err)
		}
		r = zr
	}
	var sm sitemap
	addPage := func(u string) {
		if len(sm.pages) < maxSitemapURLs {
			sm.pages = append(sm.pages, u)
		} else {
			sm.morePages++
		}
	}
	pr := newPeekReader(&capReader{r: r, left: limit})
	if !pr.startsWithTag() {
		// Lines longer than the buffer are not URLs: skipped to their end.
		lr := bufio.NewReaderSize(pr, 16<<10)
		long := false
		for {
			line, err := lr.ReadSlice('\n')
			switch {
			case errors.Is(err, bufio.ErrBufferFull):
				long = true
				continue
			case long:
				long = false
			default:
				if l := string(bytes.TrimSpace(line)); strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") {
					addPage(l)
				}
			}
			if err == io.EOF {
				return sm, nil
			}
			if err != nil {
				return sm, err
			}
		}
	}
	d := xml.NewDecoder(pr)
	d.Strict = false
	var (
		stack []string
		loc   strings.Builder
		inLoc bool
	)
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return sm, nil
		}
		if err != nil {
			var syntax *xml.SyntaxError
			if errors.As(err, &syntax) {
				return sm, fmt.Errorf("malformed XML: line %d: %s", syntax.Line, syntax.Msg)
			}
			return sm, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			stack = append(stack, strings.ToLower(t.Name.Local))
			if strings.EqualFold(t.Name.Local, "loc") {
				inLoc = true
				loc.Reset()
			}
		case xml.CharData:
			if inLoc && loc.Len() < 8192 {
				loc.Write(t)
			}
		case xml.EndElement:
			if strings.EqualFold(t.Name.Local, "loc") && inLoc && len(stack) >= 2 {
				u := strings.TrimSpace(loc.String())
				switch stack[len(stack)-2] {
				case "url":
					if u != "" {
						addPage(u)
					}
				case "sitemap":
					if u == "" {
						break
					}
					if len(sm.sitemaps) < maxSitemaps {
						sm.sitemaps = append(sm.sitemaps, u)
					} else {
						sm.moreSitemaps++
					}
				}
				inLoc = false
			}
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
}

// capReader fails once more than left bytes are read.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errSitemapTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return 0, errSitemapTooLarge
	}
	return n, err
}

// peekReader lets parseSitemap look at the first bytes before choosing a
// parser.
type peekReader struct {
	head []byte
	r    io.Reader
	err  error
}

func newPeekReader(r io.Reader) *peekReader {
	head := make([]byte, 512)
	n, err := io.ReadFull(r, head)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	return &peekReader{head: head[:n], r: r, err: err}
}

func (p *peekReader) startsWithTag() bool {
	s := bytes.TrimLeft(bytes.TrimPrefix(p.head, []byte("\xef\xbb\xbf")), " \t\r\n")
	return bytes.HasPrefix(s, []byte("<"))
}

func (p *peekReader) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	if p.err != nil {
		return 0, p.err
	}
	return p.r.Read(b)
}

// llmsLink matches the targets of Markdown links and autolinks.
var llmsLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|<(https?://[^>\s]+)>`)

// parseLLMs returns the link targets of an llms.txt file (llmstxt.org): a
// Markdown file whose sections list a site's pages as "[title](url): notes".
func parseLLMs(body []byte) []string {
	var out []string
	for _, m := range llmsLink.FindAllSubmatch(body, maxLinksPerPage) {
		t := m[1]
		if len(t) == 0 {
			t = m[2]
		}
		out = append(out, string(t))
	}
	return out
}

// retryAfter reads a Retry-After header, seconds or an HTTP date, as a
// wait from now.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, 1<<32)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// resolveAll resolves hrefs against base, dropping those that are not
// http or https URLs.
func resolveAll(base *url.URL, hrefs []string) []*url.URL {
	out := make([]*url.URL, 0, len(hrefs))
	for _, h := range hrefs {
		h = strings.TrimSpace(h)
		if h == "" || strings.HasPrefix(h, "#") {
			continue
		}
		u, err := resolve(base, h)
		if err != nil {
			continue
		}
		out = append(out, u)
	}
	return out
}
