package readmetest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	heading    = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	fence      = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	inlineLink = regexp.MustCompile(`\]\(<?([^)\s>]+)>?(?:[ \t]+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:[ \t]+<?([^\s>]+)>?`)
	scheme     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// CheckLinks fails t for each relative link of the Markdown files that does
// not resolve: a file or folder that does not exist, or a #fragment that
// names no heading of the target (as GitHub makes heading anchors).
// Links to other sites are not checked.
func CheckLinks(t testing.TB, files ...string) {
	t.Helper()
	for _, err := range checkLinks(files) {
		t.Error(err)
	}
}

func checkLinks(files []string) []error {
	var errs []error
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := Anchors(string(b))
		anchors[path] = a
		return a, nil
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, l := range links(string(b)) {
			target, frag, _ := strings.Cut(l.target, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					errs = append(errs, fmt.Errorf("%s:%d: link %q: no such file %s", file, l.line, l.target, path))
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				errs = append(errs, fmt.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", file, l.line, l.target))
				continue
			}
			a, err := anchorsOf(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: link %q: %w", file, l.line, l.target, err))
				continue
			}
			if !a[frag] {
				errs = append(errs, fmt.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", file, l.line, l.target, path, frag))
			}
		}
	}
	return errs
}

type link struct {
	line   int
	target string
}

// links lists the relative links of a Markdown text, outside code blocks
// and code spans.
func links(md string) []link {
	var out []link
	lines(md, func(n int, s string) {
		s = codeSpan.ReplaceAllString(s, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(s, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(s); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if !scheme.MatchString(t) && !strings.HasPrefix(t, "//") {
				out = append(out, link{n, t})
			}
		}
	})
	return out
}

// Anchors returns the anchors GitHub gives the headings of a Markdown text:
// the heading's text in lower case, without punctuation, spaces made
// hyphens, and -1, -2 ... after the second and later uses of one anchor.
func Anchors(md string) map[string]bool {
	a := map[string]bool{}
	seen := map[string]int{}
	lines(md, func(_ int, s string) {
		m := heading.FindStringSubmatch(s)
		if m == nil {
			return
		}
		slug := Slug(m[2])
		n := seen[slug]
		seen[slug]++
		if n > 0 {
			slug = fmt.Sprintf("%s-%d", slug, n)
		}
		a[slug] = true
	})
	return a
}

// Slug is the anchor GitHub makes of a heading's text.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// lines calls f with each line of md (numbered from 1) that is not inside
// a fenced code block.
func lines(md string, f func(n int, s string)) {
	open := ""
	for i, s := range strings.Split(md, "\n") {
		if m := fence.FindStringSubmatch(s); m != nil {
			switch {
			case open == "":
				open = m[1]
			case m[1][0] == open[0] && len(m[1]) >= len(open):
				open = ""
			}
			continue
		}
		if open == "" {
			f(i+1, s)
		}
	}
}
