package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// site is a local web server whose handlers tests register, counting the
// requests it receives.
type site struct {
	*httptest.Server
	mux  *http.ServeMux
	hits atomic.Int64
}

func newSite(t testing.TB) *site {
	t.Helper()
	s := &site{mux: http.NewServeMux()}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// port returns the site's port, for URLs that name it by another host.
func (s *site) port() string {
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	return port
}

// serve registers a fixed answer under path.
func (s *site) serve(path, contentType string, body []byte) {
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		_, _ = w.Write(body)
	})
}

func newClient(t testing.TB, opts Options) *Client {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// articlePage is a page with the parts a reader must drop around a main
// article with a table, a list and code.
const articlePage = `<!DOCTYPE html>
<html><head><title>Tuning the widget cache</title>
<script>var tracking = "SCRIPT-MARKER";</script>
<style>body { color: red }</style></head>
<body>
<nav class="site-nav"><ul><li><a href="/">Home</a></li><li><a href="/products">Products</a></li>
<li><a href="/about">NAV-MARKER about us</a></li></ul></nav>
<div class="ad banner">Buy now! AD-MARKER</div>
<main><article>
<h1>Tuning the widget cache</h1>
<p>The widget cache keeps recently rendered widgets in memory so that a page that shows the same
widget twice renders it once. This article explains how to size it, how to watch it and when to
turn it off. Most deployments never need to touch it, but large catalogues do.</p>
<h2>Sizing</h2>
<p>Give the cache about a tenth of the memory of the process. The table below lists the settings
and their defaults, which suit a catalogue of up to a hundred thousand widgets.</p>
<table><thead><tr><th>Setting</th><th>Default</th></tr></thead>
<tbody><tr><td>cache_size</td><td>512</td></tr><tr><td>cache_ttl</td><td>60s</td></tr></tbody></table>
<h3>Watching</h3>
<p>Three numbers tell whether the cache works, and each is exported on the metrics page:</p>
<ul><li>hit ratio</li><li>evictions per second</li><li>memory held</li></ul>
<p>Read them with <a href="/docs/metrics">the metrics guide</a> and this command:</p>
<pre><code>curl -s localhost:9090/metrics | grep widget_cache</code></pre>
<h2>Turning it off</h2>
<p>Set cache_size to zero. Rendering then takes longer, but memory use drops, which matters on
small machines where every megabyte counts and where widgets are rarely repeated on a page.</p>
</article></main>
<footer class="site-footer"><p>FOOTER-MARKER Copyright Widget Corp.</p></footer>
</body></html>`

func TestGetHTML(t *testing.T) {
	s := newSite(t)
	s.serve("/libffi/Simple-Example.html", "text/html", fixture(t, "libffi-simple-example.html"))
	s.serve("/zlib_how.html", "text/html; charset=ISO-8859-1", fixture(t, "zlib-how.html"))
	s.serve("/article", "text/html; charset=utf-8", []byte(articlePage))
	c := newClient(t, Options{AllowPrivate: true})

	tests := []struct {
		path      string
		title     string
		want      []string // in Content
		notWant   []string // absent from Content
		rawWant   []string // in Raw
		rawAbsent []string
	}{
		{
			path:  "/libffi/Simple-Example.html",
			title: "Simple Example (libffi: the portable foreign function interface library)",
			want:  []string{"trivial example that calls `puts`", "```\n#include <stdio.h>", "ffi_prep_cif(&cif, FFI_DEFAULT_ABI, 1,"},
			// The texinfo navigation header goes; Raw keeps it, with
			// links made absolute.
			notWant: []string{"Previous:", "Up:"},
			rawWant: []string{"Previous: [The Basics](" + s.URL + "/libffi/The-Basics.html)"},
		},
		{
			path:  "/zlib_how.html",
			title: "zlib Usage Example",
			want: []string{"Z_BUF_ERROR", "[`zpipe.c`](" + s.URL + "/zpipe.c)",
				"```\n", "#define CHUNK 16384", "strm.avail_in = fread(in, 1, CHUNK, source);"},
		},
		{
			path:  "/article",
			title: "Tuning the widget cache",
			want: []string{"## Sizing", "### Watching", "| Setting | Default |", "| cache_size | 512 |",
				"- hit ratio", "[the metrics guide](" + s.URL + "/docs/metrics)",
				"```\ncurl -s localhost:9090/metrics | grep widget_cache\n```"},
			notWant:   []string{"NAV-MARKER", "AD-MARKER", "FOOTER-MARKER", "SCRIPT-MARKER", "color: red"},
			rawWant:   []string{"NAV-MARKER", "FOOTER-MARKER", "| cache_size | 512 |"},
			rawAbsent: []string{"SCRIPT-MARKER", "color: red"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			d, err := c.Get(t.Context(), s.URL+tt.path)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if d.Title != tt.title {
				t.Errorf("Title = %q, want %q", d.Title, tt.title)
			}
			if d.ContentType != extract.MIMEHTML || d.FinalURL != s.URL+tt.path || d.URL != s.URL+tt.path {
				t.Errorf("ContentType %q URL %q FinalURL %q", d.ContentType, d.URL, d.FinalURL)
			}
			for _, w := range tt.want {
				if !strings.Contains(d.Content, w) {
					t.Errorf("Content lacks %q:\n%s", w, d.Content)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(d.Content, w) {
					t.Errorf("Content keeps %q:\n%s", w, d.Content)
				}
			}
			raw := d.Raw()
			for _, w := range tt.rawWant {
				if !strings.Contains(raw, w) {
					t.Errorf("Raw lacks %q:\n%s", w, raw)
				}
			}
			for _, w := range tt.rawAbsent {
				if strings.Contains(raw, w) {
					t.Errorf("Raw keeps %q", w)
				}
			}
			if len(d.Body) == 0 {
				t.Error("Body is empty")
			}
		})
	}
}

func TestGetCharsetAndIndexPage(t *testing.T) {
	s := newSite(t)
	// "Café crème" in ISO-8859-1, declared only in a <meta> element.
	latin1 := []byte("<html><head><meta charset=\"iso-8859-1\"><title>Caf\xe9</title></head><body><p>Caf\xe9 cr\xe8me</p></body></html>")
	s.serve("/latin1", "text/html", latin1)
	// A page with no article at all still yields its text.
	s.serve("/links", "text/html", []byte(`<html><body><ul><li><a href="/a">Alpha</a></li><li><a href="/b">Beta</a></li></ul></body></html>`))
	c := newClient(t, Options{AllowPrivate: true})

	d, err := c.Get(t.Context(), s.URL+"/latin1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Title != "Café" || !strings.Contains(d.Content, "Café crème") {
		t.Errorf("Title %q Content %q", d.Title, d.Content)
	}
	d, err = c.Get(t.Context(), s.URL+"/links")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Content, "[Alpha]("+s.URL+"/a)") || !strings.Contains(d.Content, "Beta") {
		t.Errorf("Content = %q", d.Content)
	}
}

// twoPagePDF returns a PDF whose pages hold the given lines.
func twoPagePDF(page1, page2 string) []byte {
	b := pdftest.New()
	b.TextPage(page1)
	b.TextPage(page2)
	return b.Bytes()
}

func TestGetTypes(t *testing.T) {
	s := newSite(t)
	pdf := twoPagePDF("First page of the report", "Second page with results")
	s.serve("/report.pdf", "application/pdf", pdf)
	s.serve("/download", "application/octet-stream", pdf)
	s.serve("/notes.txt", "text/plain; charset=utf-8", []byte("line one\r\nline two\n"))
	s.serve("/README.md", "text/plain", []byte("# Title\n\nSome *Markdown*.\n"))
	s.serve("/guide", "text/markdown", []byte("## Guide\n\n- step\n"))
	s.serve("/untyped", "", []byte("<!DOCTYPE html><html><head><title>Sniffed</title></head><body><p>Found by sniffing.</p></body></html>"))
	s.serve("/logo.png", "image/png", []byte("\x89PNG\r\n\x1a\nxxxx"))
	s.serve("/blob", "application/octet-stream", []byte("\x89PNG\r\n\x1a\nxxxx"))
	s.serve("/data.json", "application/json", []byte(`{"a":1}`))
	c := newClient(t, Options{AllowPrivate: true})

	tests := []struct {
		path    string
		ctype   string
		title   string
		content string // exact, or substring when contains is set
		sub     []string
		err     error
		errText string
	}{
		{path: "/report.pdf", ctype: extract.MIMEPDF, title: "report.pdf",
			content: "--- page 1 ---\nFirst page of the report\n\n--- page 2 ---\nSecond page with results"},
		{path: "/download", ctype: extract.MIMEPDF, title: "download", sub: []string{"--- page 2 ---\nSecond page"}},
		{path: "/notes.txt", ctype: extract.MIMEText, title: "notes.txt", content: "line one\nline two\n"},
		{path: "/README.md", ctype: extract.MIMEMarkdown, title: "README.md", content: "# Title\n\nSome *Markdown*.\n"},
		{path: "/guide", ctype: extract.MIMEMarkdown, title: "guide", content: "## Guide\n\n- step\n"},
		{path: "/untyped", ctype: extract.MIMEHTML, title: "Sniffed", sub: []string{"Found by sniffing."}},
		{path: "/logo.png", err: ErrUnsupportedType, errText: "image/png"},
		{path: "/blob", err: ErrUnsupportedType, errText: "PNG image"},
		{path: "/data.json", err: ErrUnsupportedType, errText: "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			d, err := c.Get(t.Context(), s.URL+tt.path)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err = %v, want %v naming %q", err, tt.err, tt.errText)
				}
				if Retryable(err) {
					t.Error("unsupported type reported retryable")
				}
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if d.ContentType != tt.ctype || d.Title != tt.title {
				t.Errorf("ContentType %q Title %q, want %q %q", d.ContentType, d.Title, tt.ctype, tt.title)
			}
			if tt.content != "" && d.Content != tt.content {
				t.Errorf("Content = %q, want %q", d.Content, tt.content)
			}
			for _, w := range tt.sub {
				if !strings.Contains(d.Content, w) {
					t.Errorf("Content %q lacks %q", d.Content, w)
				}
			}
			if tt.ctype != extract.MIMEHTML && d.Raw() != d.Content {
				t.Error("Raw differs from Content for a non-HTML page")
			}
		})
	}
}

func TestDownload(t *testing.T) {
	s := newSite(t)
	s.serve("/papers/report.pdf", "application/pdf", twoPagePDF("a", "b"))
	s.serve("/index.php", "text/html", []byte("<p>x</p>"))
	s.serve("/", "text/plain", []byte("root"))
	c := newClient(t, Options{AllowPrivate: true})
	tests := []struct{ path, ctype, name string }{
		{"/papers/report.pdf", extract.MIMEPDF, "report.pdf"},
		{"/index.php", extract.MIMEHTML, "index.php.html"},
		{"/", extract.MIMEText, "127.0.0.1.txt"},
	}
	for _, tt := range tests {
		r, err := c.Download(t.Context(), s.URL+tt.path)
		if err != nil {
			t.Fatalf("Download %s: %v", tt.path, err)
		}
		if r.ContentType != tt.ctype || r.FileName() != tt.name || len(r.Body) == 0 {
			t.Errorf("%s: ContentType %q FileName %q, want %q %q", tt.path, r.ContentType, r.FileName(), tt.ctype, tt.name)
		}
	}
}

func TestLimits(t *testing.T) {
	s := newSite(t)
	big := []byte("<html><body><p>" + strings.Repeat("word ", 40_000) + "</p></body></html>")
	s.serve("/huge", "text/html", big) // sent with Content-Length
	s.mux.HandleFunc("/huge-chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		for range 64 {
			_, _ = w.Write(big[:4096])
			w.(http.Flusher).Flush()
		}
	})
	s.mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body><p>start"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	s.mux.HandleFunc("/slow-headers", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	s.mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.WriteHeader(code)
	})
	for i := range 8 {
		s.mux.HandleFunc(fmt.Sprintf("/hop/%d", i), func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, fmt.Sprintf("/hop/%d", i+1), http.StatusFound)
		})
	}
	s.serve("/hop/8", "text/plain", []byte("arrived"))
	s.mux.HandleFunc("/to-ftp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://files.example/x", http.StatusFound)
	})

	c := newClient(t, Options{AllowPrivate: true, MaxBodyBytes: 64 << 10, Timeout: 300 * time.Millisecond, MaxRedirects: 8})
	short := newClient(t, Options{AllowPrivate: true, MaxRedirects: 3, HeaderTimeout: 100 * time.Millisecond})

	tests := []struct {
		name      string
		c         *Client
		path      string
		err       error
		status    int
		retryable bool
	}{
		{"declared too large", c, "/huge", ErrTooLarge, 0, false},
		{"streamed too large", c, "/huge-chunked", ErrTooLarge, 0, false},
		{"slow body", c, "/slow-body", ErrTimeout, 0, true},
		{"slow headers", short, "/slow-headers", ErrTimeout, 0, true},
		{"not found", c, "/status/404", nil, 404, false},
		{"forbidden", c, "/status/403", nil, 403, false},
		{"rate limited", c, "/status/429", nil, 429, true},
		{"server error", c, "/status/503", nil, 503, true},
		{"too many redirects", short, "/hop/0", ErrTooManyRedirects, 0, false},
		{"redirect to ftp", c, "/to-ftp", ErrInvalidURL, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.c.Get(t.Context(), s.URL+tt.path)
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if tt.status != 0 {
				var se *HTTPStatusError
				if !errors.As(err, &se) || se.Status != tt.status {
					t.Fatalf("err = %v, want HTTP %d", err, tt.status)
				}
			}
			if got := Retryable(err); got != tt.retryable {
				t.Errorf("Retryable(%v) = %v, want %v", err, got, tt.retryable)
			}
		})
	}

	d, err := c.Get(t.Context(), s.URL+"/hop/0")
	if err != nil || d.FinalURL != s.URL+"/hop/8" || d.Content != "arrived" {
		t.Fatalf("8 redirects with a limit of 8: %v, %+v", err, d)
	}
}

func TestInvalidURLs(t *testing.T) {
	c := newClient(t, Options{})
	for _, u := range []string{"file:///etc/passwd", "ftp://example.org/", "gopher://x", "example.org/page", "http:///nohost", "http://%zz/", "javascript:alert(1)"} {
		if _, err := c.Get(t.Context(), u); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("Get(%q) err = %v, want ErrInvalidURL", u, err)
		}
	}
}

func TestCache(t *testing.T) {
	s := newSite(t)
	s.serve("/page", "text/plain", []byte("cached text"))
	c := newClient(t, Options{AllowPrivate: true})
	for _, u := range []string{s.URL + "/page", s.URL + "/page#part", " " + s.URL + "/page"} {
		if _, err := c.Get(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.hits.Load(); got != 1 {
		t.Errorf("%d requests for one page fetched three times, want 1", got)
	}
	// Download never uses the cache: ingesting stores what the site
	// serves now.
	if _, err := c.Download(t.Context(), s.URL+"/page"); err != nil {
		t.Fatal(err)
	}
	off := newClient(t, Options{AllowPrivate: true, CacheTTL: -1})
	for range 2 {
		if _, err := off.Get(t.Context(), s.URL+"/page"); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.hits.Load(); got != 4 {
		t.Errorf("hits = %d, want 4 with the cache off", got)
	}
}

func TestContextCancelled(t *testing.T) {
	s := newSite(t)
	s.serve("/page", "text/plain", []byte("x"))
	c := newClient(t, Options{AllowPrivate: true})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Get(ctx, s.URL+"/page")
	if !errors.Is(err, context.Canceled) || Retryable(err) {
		t.Fatalf("err = %v, want context.Canceled, not retryable", err)
	}
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"zero", Options{}, ""},
		{"allow list", Options{AllowHosts: []string{"wiki.corp.example", "*.corp.example", "10.0.0.0/8", "fd00::1", " "}}, ""},
		{"bad allow entry", Options{AllowHosts: []string{"http://wiki"}}, "allow-list entry"},
		{"bad wildcard", Options{AllowHosts: []string{"*.a..b"}}, "allow-list entry"},
		{"proxy", Options{Proxy: "http://proxy.corp:3128"}, ""},
		{"socks proxy", Options{Proxy: "socks5://127.0.0.1:1080"}, ""},
		{"bad proxy scheme", Options{Proxy: "ftp://proxy"}, "scheme"},
		{"proxy without host", Options{Proxy: "proxy:3128"}, "not a URL"},
		{"negative timeout", Options{Timeout: -1}, "timeout"},
		{"negative limit", Options{MaxBodyBytes: -1}, "body limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("New err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{ErrUnreachable, true},
		{fmt.Errorf("x: %w", ErrTimeout), true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{&HTTPStatusError{Status: 500}, true},
		{&HTTPStatusError{Status: 502}, true},
		{&HTTPStatusError{Status: 408}, true},
		{&HTTPStatusError{Status: 404}, false},
		{&HTTPStatusError{Status: 401}, false},
		{&BlockedError{Addr: netip.MustParseAddr("10.0.0.1"), Class: "private"}, false},
		{ErrTooLarge, false},
		{ErrUnsupportedType, false},
	}
	for _, tt := range tests {
		if got := Retryable(tt.err); got != tt.want {
			t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
