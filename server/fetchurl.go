package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/research"
)

// FetchURLInput is the fetch_url tool's arguments.
type FetchURLInput struct {
	URL        string `json:"url" jsonschema:"the http or https address of the page to read, for example a URL from web_search"`
	MaxLength  int    `json:"max_length,omitempty" jsonschema:"most characters to return (default set by the server, usually 8000); fewer when they would pass the server's result size limit, and next_start_index then reads on"`
	StartIndex int    `json:"start_index,omitempty" jsonschema:"character to start at: send the next_start_index of the previous call to read on (default 0)"`
	Section    string `json:"section,omitempty" jsonschema:"return only the part under the first heading whose text contains this (case-insensitive), e.g. Installation; for a PDF, page 3"`
	Raw        bool   `json:"raw,omitempty" jsonschema:"true for the whole page's text, navigation and footers included, instead of its main content"`
	// Query turns the call into a question about the page: its best
	// passages instead of a window of characters.
	Query       string `json:"query,omitempty" jsonschema:"a question or the words you are looking for: returns the page's passages that best answer it (whole sentences under their headings, best first) instead of its text from start_index; a long page read for one fact answers in a few hundred characters"`
	MaxPassages int    `json:"max_passages,omitempty" jsonschema:"with query: the most passages to return, 1 to 20 (default 8)"`
}

// scope: fetch_url touches no conversation.
func (FetchURLInput) scope() scope { return noConversation() }

// FetchURLOutput is the fetch_url tool's structured result.
type FetchURLOutput struct {
	URL         string `json:"url"`
	FinalURL    string `json:"final_url"`
	Title       string `json:"title"`
	ContentType string `json:"content_type"`
	Content     string `json:"content"`
	StartIndex  int    `json:"start_index"`
	// NextStartIndex is where the next call reads on; absent at the end.
	NextStartIndex *int `json:"next_start_index,omitempty"`
	TotalLength    int  `json:"total_length"`
	Truncated      bool `json:"truncated"`
	// Passages answer the call's query, best first; absent without one.
	Passages []WebPassage `json:"passages,omitempty"`
	// Note says in one line what could not be used to rank the passages.
	Note string `json:"note,omitempty"`
}

// PageFetcher reads web pages (fetch.Client).
type PageFetcher interface {
	// Get fetches and converts a page to text, through a short cache.
	Get(ctx context.Context, rawURL string) (*fetch.Document, error)
	// Download fetches a page's bytes as they are, for ingestion.
	Download(ctx context.Context, rawURL string) (*fetch.Resource, error)
}

func fetchURLTool() declared {
	return tool[fetchURL, FetchURLInput, FetchURLOutput]{
		def: &mcp.Tool{
			Name:  "fetch_url",
			Title: "Read a web page",
			Description: "Fetch a web page (or a PDF, plain text or Markdown file) and return its main content as Markdown: headings, lists, links, tables and code kept; " +
				"navigation, ads and footers dropped. Use it to read a result of web_search in full, or a URL the user gives. " +
				"Long pages come in parts: when the result says there is more, call again with start_index set to next_start_index, " +
				"or ask for one section by its heading. To find one fact in a long page, send query: the passages that answer it come back instead. " +
				"Only public http and https addresses are read.",
			Annotations: &mcp.ToolAnnotations{Title: "Read a web page", ReadOnlyHint: true, OpenWorldHint: boolPtr(true), IdempotentHint: true},
		},
		handler:   newFetchURL,
		constrain: fetchURL.constrain,
		run:       fetchURL.fetch,
		more:      "call fetch_url again with start_index set to next_start_index",
		timeout:   func(c config.Config) time.Duration { return c.FetchURLTimeout },
		failures:  fetchFailures(),
	}
}

// fetchURL answers fetch_url.
type fetchURL struct {
	pages PageFetcher
	// reader finds the passages of a call with query; nil when the
	// server has none.
	reader Researcher
	// maxLength is the characters a call returns without max_length.
	maxLength int
	limit     resultLimit
}

func newFetchURL(e toolEnv) (fetchURL, bool) {
	return fetchURL{pages: e.deps.Fetch, reader: e.deps.Research, maxLength: e.cfg.FetchURLMaxLength, limit: newResultLimit(e.cfg)},
		e.deps.Fetch != nil && e.cfg.FetchURLEnabled
}

// fetchFailures are the failures of reading a page, for fetch_url and
// ingestion by URL.
func fetchFailures() []failure {
	return []failure{
		{is: []error{fetch.ErrTimeout}, code: CodeTimeout, status: http.StatusGatewayTimeout, retryable: always},
		{is: []error{fetch.ErrInvalidURL}, status: http.StatusBadRequest, prefix: "invalid arguments: "},
		// Not AUTH_ERROR: no key would allow it; the operator's allow-list
		// would.
		{is: []error{fetch.ErrBlocked}, status: http.StatusForbidden},
		{is: []error{fetch.ErrUnsupportedType}, status: http.StatusUnsupportedMediaType},
		{is: []error{fetch.ErrTooLarge}, status: http.StatusRequestEntityTooLarge},
		{is: []error{fetch.ErrUnreachable, fetch.ErrTooManyRedirects, fetch.ErrUnreadable}, as: func(err error) bool {
			var se *fetch.HTTPStatusError
			return errors.As(err, &se)
		}, status: http.StatusBadGateway, retryable: fetch.Retryable},
	}
}

func (fetchURL) constrain(sc *jsonschema.Schema) {
	u := prop(sc, "url")
	u.MinLength, u.MaxLength = ptr(1), ptr(4096)
	m := prop(sc, "max_length")
	m.Minimum, m.Maximum = ptr(100.0), ptr(float64(config.MaxFetchLength))
	prop(sc, "start_index").Minimum = ptr(0.0)
	prop(sc, "section").MaxLength = ptr(200)
	q := prop(sc, "query")
	q.MinLength, q.MaxLength = ptr(1), ptr(maxQueryRunes)
	mp := prop(sc, "max_passages")
	mp.Minimum, mp.Maximum = ptr(1.0), ptr(float64(maxPassages))
}

func (f fetchURL) fetch(ctx context.Context, in FetchURLInput) (*mcp.CallToolResult, FetchURLOutput, error) {
	query := strings.Join(strings.Fields(in.Query), " ")
	switch {
	case in.Query != "" && query == "":
		return nil, FetchURLOutput{}, badArg("query is blank: send the question or the words to look for, or leave query out to read the page")
	case query != "" && f.reader == nil:
		return nil, FetchURLOutput{}, badArg("query: this server does not rank passages: leave query out to read the page")
	case query != "" && (in.StartIndex != 0 || in.MaxLength != 0):
		return nil, FetchURLOutput{}, badArg("query returns passages, not a window of the page: leave start_index and max_length out with query")
	case query == "" && in.MaxPassages != 0:
		return nil, FetchURLOutput{}, badArg("max_passages: passages answer a query: set query too, or leave max_passages out")
	}
	if strings.IndexFunc(query, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) >= 0 {
		return nil, FetchURLOutput{}, badArg("query holds a control character or invalid text: send plain words")
	}
	doc, err := f.pages.Get(ctx, strings.TrimSpace(in.URL))
	if err != nil {
		// The fetch package names the URL in its errors.
		return nil, FetchURLOutput{}, err
	}
	content := doc.Content
	if in.Raw {
		content = doc.Raw()
	}
	if sec := strings.TrimSpace(in.Section); sec != "" {
		part, ok := fetch.Section(content, sec)
		if !ok {
			return nil, FetchURLOutput{}, badArg("no heading of %s contains %q: leave section out to read the page from the start", doc.FinalURL, clip(sec, 80))
		}
		content = part
	}
	if query != "" {
		return f.passages(ctx, doc, content, query, in.MaxPassages)
	}
	maxLen := in.MaxLength
	if maxLen == 0 {
		maxLen = f.maxLength
	}
	window := func(maxLen int) FetchURLOutput {
		text, next, total, truncated := fetch.Window(content, in.StartIndex, maxLen)
		out := FetchURLOutput{URL: doc.URL, FinalURL: doc.FinalURL, Title: doc.Title, ContentType: doc.ContentType,
			Content: text, StartIndex: in.StartIndex, TotalLength: total, Truncated: truncated}
		if truncated {
			out.NextStartIndex = &next
		}
		return out
	}
	out := window(maxLen)
	if !f.limit.fits(fetchURLText(out), out) {
		// Fewer characters, so that the part fits the result size limit;
		// next_start_index reads on from where it stops.
		n := f.limit.fitting(utf8.RuneCountInString(out.Content), func(k int) (string, any) {
			o := window(max(k, 1))
			return fetchURLText(o), o
		})
		out = window(max(n, 1))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fetchURLText(out)}}}, out, nil
}

// passages answers a call with query: the passages of content (the page,
// or the section asked for) that best answer it.
func (f fetchURL) passages(ctx context.Context, doc *fetch.Document, content, query string, max int) (*mcp.CallToolResult, FetchURLOutput, error) {
	ans := f.reader.Ask(ctx, query, research.Source{URL: doc.FinalURL, Title: doc.Title}, content, cmp.Or(max, defaultMaxPassages))
	out := FetchURLOutput{URL: doc.URL, FinalURL: doc.FinalURL, Title: doc.Title, ContentType: doc.ContentType,
		TotalLength: utf8.RuneCountInString(content), Passages: webPassages(ans.Passages), Note: ans.Note}
	if out.Passages == nil {
		out.Passages = []WebPassage{}
	}
	render := func() (string, any) { return fetchURLPassagesText(out, query), out }
	if text, _ := render(); !f.limit.fits(text, out) {
		keepFitting(f.limit, &out.Passages, render)
	}
	text, _ := render()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// fetchURLPassagesText is what the model reads of a call with query.
func fetchURLPassagesText(out FetchURLOutput, query string) string {
	var b strings.Builder
	title := out.Title
	if title == "" {
		title = out.FinalURL
	}
	fmt.Fprintf(&b, "# %s\nURL: %s\n%d characters (%s); the passages that answer %q:\n", title, out.FinalURL, out.TotalLength, out.ContentType, query)
	if len(out.Passages) == 0 {
		b.WriteString("\nNo passage matches: try other words, or leave query out to read the page.\n")
	}
	writePassages(&b, out.Passages, 0)
	if out.Note != "" {
		fmt.Fprintf(&b, "\nNote: %s\n", out.Note)
	}
	return b.String()
}

// fetchURLText is what the model reads: where the text came from, the text,
// and how to read on.
func fetchURLText(out FetchURLOutput) string {
	var b strings.Builder
	title := out.Title
	if title == "" {
		title = out.FinalURL
	}
	fmt.Fprintf(&b, "# %s\nURL: %s\n", title, out.FinalURL)
	end := out.StartIndex + len([]rune(out.Content))
	fmt.Fprintf(&b, "Characters %d-%d of %d (%s)\n\n", out.StartIndex, end, out.TotalLength, out.ContentType)
	b.WriteString(out.Content)
	switch {
	case out.NextStartIndex != nil:
		fmt.Fprintf(&b, "\n\n[The page goes on: call fetch_url again with start_index %d to read the next part.]", *out.NextStartIndex)
	case out.StartIndex >= out.TotalLength && out.TotalLength > 0:
		fmt.Fprintf(&b, "\n\n[start_index %d is past the end: the page has %d characters.]", out.StartIndex, out.TotalLength)
	default:
		b.WriteString("\n\n[End of page.]")
	}
	return b.String()
}
