package crawl

import (
	"context"
	"net/url"
	"strings"

	"github.com/mcpsearch/mcpsearch/fetch"
)

// mainContent returns what the crawl stores of an HTML page: what fetch_url
// reads of it (fetch.MainContent), its main content as Markdown under its
// title, without the site's navigation, headers, footers and sidebars
// repeated on every page. It returns "" when the page has no text.
func mainContent(ctx context.Context, body []byte, declared string, u *url.URL) (string, error) {
	title, md, err := fetch.MainContent(ctx, body, declared, u)
	if err != nil {
		return "", err
	}
	md = strings.TrimSpace(md)
	if md == "" {
		return "", nil
	}
	// The title heads the page unless its first heading says it already.
	if title != "" && !strings.EqualFold(firstHeading(md), title) {
		md = "# " + title + "\n\n" + md
	}
	return md + "\n", nil
}

// firstHeading is the text of the first line of md when it is a heading.
func firstHeading(md string) string {
	line, _, _ := strings.Cut(md, "\n")
	if t := strings.TrimLeft(line, "#"); len(t) < len(line) && strings.HasPrefix(t, " ") {
		return strings.TrimSpace(t)
	}
	return ""
}
