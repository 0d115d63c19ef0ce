// Package researchtest serves a small documentation site on loopback for
// the tests of reading search results: pages with navigation, headers and
// footers around their content, settings in a definition list, a table, a
// PDF, the same article on two sites, and the pages a crawler meets at
// worst (one that never answers, one that never ends, 404, 500, a redirect
// loop, one too large, an image). Each page can be made to answer after a
// delay, and the site counts the requests it is serving at once.
package researchtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// Site is a running documentation site.
type Site struct {
	// URL is the site's base URL, without a trailing slash.
	URL string

	srv  *httptest.Server
	done chan struct{}

	mu       sync.Mutex
	delay    time.Duration
	inFlight int
	peak     int
	hits     map[string]int
}

// Answers are the facts the site's pages hold, for questions a test asks:
// the question, the page that answers it, and a phrase of the answering
// passage.
var Answers = []struct{ Question, Page, Phrase string }{
	{"What is the default value of quill_max_sessions?", "/settings.html", "The default is 250 sessions"},
	{"How long is the quillfeather cache kept by default?", "/settings.html", "kept for 90 minutes"},
	{"Which port does the Quillfeather daemon listen on?", "/install.html", "listens on port 7311"},
	{"What is the largest document Quillfeather accepts?", "/limits.html", "at most 64 MB"},
}

// page layout: the furniture every page of the site repeats.
const (
	head = `<!DOCTYPE html><html><head><meta charset="utf-8"><title>%s — Quillfeather manual</title></head><body>
<div class="navheader"><table><tr><td><a href="/install.html">Prev</a></td><td><a href="/">Up</a></td><td><a href="/">Home</a></td><td><a href="/limits.html">Next</a></td></tr></table></div>
<nav class="sidebar"><ul><li><a href="/install.html">Installing</a></li><li><a href="/settings.html">Settings</a></li><li><a href="/limits.html">Limits</a></li><li><a href="/history.html">History</a></li></ul></nav>
<div class="content">`
	foot = `</div><footer class="footer">Copyright the Quillfeather authors. Prev Up Home Next.</footer></body></html>`
)

var pages = map[string]string{
	"/install.html": page("Installing Quillfeather", `<h1>1. Installing Quillfeather</h1>
<p>Quillfeather ships as one binary. Unpack the archive and run the installer as root. The installer creates the quill user and a service file.</p>
<h2>1.1. Starting the daemon</h2>
<p>Start the daemon with <code>quillctl start</code>. The daemon listens on port 7311 unless the <code>quill_port</code> setting says otherwise. It writes its log to the journal.</p>
<p>To stop it, run <code>quillctl stop</code>; running sessions are given ten seconds to end.</p>
<h2>1.2. Upgrading</h2>
<p>Stop the daemon, replace the binary and start it again. Settings files of older versions are read as they are.</p>`),
	"/settings.html": page("Settings", `<h1>2. Settings</h1>
<p>Settings are read from quill.conf at start. Each setting below gives its type and default.</p>
<h2>2.1. Sessions</h2>
<dl>
<dt><code>quill_max_sessions</code> (<code>integer</code>)</dt>
<dd><p>Sets the most sessions the daemon serves at once. The default is 250 sessions. A session over the limit waits for a free place.</p></dd>
<dt><code>quill_session_timeout</code> (<code>integer</code>)</dt>
<dd><p>Ends a session idle for longer than this many seconds. The default is 600. Zero keeps idle sessions forever.</p></dd>
</dl>
<h2>2.2. Cache</h2>
<dl>
<dt><code>quill_cache_size</code> (<code>integer</code>)</dt>
<dd><p>Sets the memory the cache may use, in megabytes. The default is 128.</p></dd>
<dt><code>quill_cache_ttl</code> (<code>interval</code>)</dt>
<dd><p>How long an entry of the quillfeather cache is kept. Entries are kept for 90 minutes unless this setting says otherwise.</p></dd>
</dl>`),
	"/limits.html": page("Limits", `<h1>3. Limits</h1>
<p>The table lists the limits of one Quillfeather daemon.</p>
<table><tr><th>Item</th><th>Limit</th><th>Comment</th></tr>
<tr><td>document size</td><td>at most 64 MB</td><td>larger documents are refused</td></tr>
<tr><td>documents per collection</td><td>1,000,000</td><td>a collection holds its documents' text</td></tr>
<tr><td>collections</td><td>10,000</td><td>per daemon</td></tr></table>
<p>Documents larger than the limit are refused with an error that names it.</p>`),
	"/history.html": page("History", `<h1>4. History</h1>
<p>Quillfeather began as a tool to index a library's catalogue. Its sessions, its cache and its settings came later.</p>
<p>Version 2 rewrote the daemon; version 3 added collections.</p>`),
}

// page wraps content in the site's furniture.
func page(title, content string) string {
	return fmt.Sprintf(head, title) + content + foot
}

// Syndicated is the article two sites publish: /news.html here and
// /copy/news.html under another path, word for word.
const syndicated = `<h1>Quillfeather 3.2 released</h1>
<p>Quillfeather 3.2 makes the session limit adjustable at run time. Administrators can raise quill_max_sessions without a restart by running quillctl reload.</p>`

// New starts the site and closes it when the test ends.
func New(t testing.TB) *Site {
	t.Helper()
	s := &Site{done: make(chan struct{}), hits: map[string]int{}}
	mux := http.NewServeMux()
	for path, body := range pages {
		mux.HandleFunc(path, s.serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, body)
		}))
	}
	for _, path := range []string{"/news.html", "/copy/news.html"} {
		mux.HandleFunc(path, s.serve(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, page("News", syndicated))
		}))
	}
	b := pdftest.New()
	b.TextPage("Quillfeather release notes. Version 3 added collections.")
	b.TextPage("Version 3.1 made the daemon listen on port 7311 by default.")
	pdf := b.Bytes()
	mux.HandleFunc("/notes.pdf", s.serve(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		w.Write(pdf)
	}))
	// The worst pages.
	mux.HandleFunc("/hang", s.serve(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	}))
	mux.HandleFunc("/endless", s.serve(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		chunk := []byte(strings.Repeat("<p>more words that never end</p>", 1000))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			select {
			case <-s.done:
				return
			default:
			}
		}
	}))
	mux.HandleFunc("/missing", s.serve(http.NotFound))
	mux.HandleFunc("/broken", s.serve(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "internal error", http.StatusInternalServerError)
	}))
	mux.HandleFunc("/loop", s.serve(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop2", http.StatusFound)
	}))
	mux.HandleFunc("/loop2", s.serve(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	}))
	mux.HandleFunc("/huge", s.serve(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", fmt.Sprint(64<<20))
		w.Write([]byte("<html>"))
	}))
	mux.HandleFunc("/image.png", s.serve(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n"))
	}))
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close stops the site, ending the pages that never answer or never end.
func (s *Site) Close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.srv.Close()
}

// SetDelay makes every page answer after d.
func (s *Site) SetDelay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}

// Peak returns the most requests the site has served at once.
func (s *Site) Peak() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Hits returns how many times path was asked for.
func (s *Site) Hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// serve counts a request while it is served and delays it as SetDelay says.
func (s *Site) serve(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.inFlight++
		s.peak = max(s.peak, s.inFlight)
		s.hits[r.URL.Path]++
		delay := s.delay
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
		}()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			case <-s.done:
				return
			}
		}
		h(w, r)
	}
}
