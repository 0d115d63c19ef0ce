package crawl

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestHeadersStayOnTheSite crawls a private site that answers only
// requests carrying its credentials: they are sent to every request to
// its origin (robots.txt included), and to no other host, neither a
// sitemap named on another host nor the host a redirect leads to.
func TestHeadersStayOnTheSite(t *testing.T) {
	var mu sync.Mutex
	var elsewhere []http.Header
	other := newSite(t)
	other.handle("*", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Clone())
		mu.Unlock()
		if r.URL.Path == "/sitemap.xml" {
			w.Write([]byte("<urlset></urlset>"))
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body><p>Another host.</p></body></html>"))
	})

	s := newSite(t)
	var private []string
	page := func(text string, links ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			private = append(private, r.URL.Path)
			mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("Cookie") != "sid=s3cret" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			if r.URL.Path == "/robots.txt" {
				fmt.Fprintf(w, "User-agent: *\nAllow: /\nSitemap: %s/sitemap.xml\n", other.URL)
				return
			}
			var b strings.Builder
			fmt.Fprintf(&b, "<html><body><p>%s</p>", text)
			for _, l := range links {
				fmt.Fprintf(&b, `<a href="%s">x</a>`, l)
			}
			b.WriteString("</body></html>")
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(b.String()))
		}
	}
	s.handle("/robots.txt", page(""))
	s.handle("/", page("The private wiki's home.", "/a", "/jump", other.u("/linked")))
	s.handle("/a", page("A private page."))
	s.handle("/jump", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.u("/landing"), http.StatusFound)
	})
	h := http.Header{}
	h.Set("Authorization", "Bearer s3cret")
	h.Set("Cookie", "sid=s3cret")
	got := runCrawl(t, newCrawler(t, Options{Headers: h}), s.u("/"), nil)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if urls := s.paths(got.urls(StatusNew)); strings.Join(urls, " ") != "/ /a" {
		t.Errorf("pages %q (private site saw %q)", urls, private)
	}
	mu.Lock()
	defer mu.Unlock()
	// The other host got its robots.txt and the sitemap requested, and
	// the redirect's request; never the link out of scope.
	if len(elsewhere) != 3 {
		t.Errorf("%d requests reached the other host", len(elsewhere))
	}
	for _, hd := range elsewhere {
		for name, v := range hd {
			if strings.Contains(strings.Join(v, " "), "s3cret") {
				t.Errorf("the other host got %s", name)
			}
		}
	}
	for _, sk := range got.sum.Skips {
		if strings.Contains(sk.Detail, "s3cret") {
			t.Errorf("a skip tells a header's value: %+v", sk)
		}
	}
}

func TestCheckHeaders(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       http.Header
		message string // in the error; "" for none
	}{
		{"none", nil, ""},
		{"credentials", http.Header{"Authorization": {"Bearer x"}, "Cookie": {"a=b"}, "X-Api-Key": {"k"}}, ""},
		{"a line break", http.Header{"Cookie": {"a=b\r\nHost: evil"}}, "headers: the value of Cookie holds a line break"},
		{"a bare newline", http.Header{"X-Token": {"a\nb"}}, "line break"},
		{"a control character", http.Header{"X-Token": {"a\x00b"}}, "control character"},
		{"not a name", http.Header{"Bad Name": {"x"}}, `headers: "Bad Name" is not a header name`},
		{"the crawler's own", http.Header{"User-Agent": {"x"}}, "User-Agent is set by the crawler itself"},
		{"over 8 KB", http.Header{"Cookie": {strings.Repeat("a", MaxHeaderBytes)}}, "more than 8192 (8 KB)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckHeaders(tc.h)
			if tc.message == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("%v, want %q", err, tc.message)
			}
			for _, vs := range tc.h {
				for _, v := range vs {
					if len(v) > 3 && strings.Contains(err.Error(), v) {
						t.Errorf("the error tells the value: %v", err)
					}
				}
			}
			if _, err := New(client(t), Options{Headers: tc.h}); !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("New took them: %v", err)
			}
		})
	}
}
