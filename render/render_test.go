package render

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/fetch"
)

// browserPath returns the Chromium to test with, or skips the test when
// none is installed, unless MCPSEARCH_REQUIRE_BROWSER=1 makes that a
// failure (as CI does).
func browserPath(t *testing.T) string {
	t.Helper()
	if p := Find(); p != "" {
		return p
	}
	if os.Getenv("MCPSEARCH_REQUIRE_BROWSER") == "1" {
		t.Fatal("MCPSEARCH_REQUIRE_BROWSER=1 but no chromium is installed (Debian: apt-get install chromium)")
	}
	t.Skip("rendering needs Chromium (Debian: apt-get install chromium); set MCPSEARCH_REQUIRE_BROWSER=1 to make its absence a failure")
	return ""
}

// spa is a single-page application on loopback: its HTML is an empty
// shell, and its script fetches the text from an API and writes it into
// the page. The script also tries to reach what a page must not: an
// address the client refuses, a POST, and another origin with the page's
// credentials.
type spa struct {
	*httptest.Server
	forbidden, other *httptest.Server
	posts            atomic.Int32
	mu               sync.Mutex
	auth             map[string]string // Authorization seen, by path
}

func newSPA(t *testing.T) *spa {
	s := &spa{auth: map[string]string{}}
	// 127.0.0.2 is loopback too, but only 127.0.0.1 is allow-listed: a
	// request reaching it is one the address rules should have stopped.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine: %v", err)
	}
	s.forbidden = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the page reached a refused address: %s", r.URL)
	})}}
	s.forbidden.Start()
	t.Cleanup(s.forbidden.Close)
	s.other = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auth["other"+r.URL.Path] = r.Header.Get("Authorization")
		s.mu.Unlock()
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Write([]byte("{}"))
	}))
	t.Cleanup(s.other.Close)
	mux := http.NewServeMux()
	record := func(r *http.Request) {
		s.mu.Lock()
		s.auth[r.URL.Path] = r.Header.Get("Authorization")
		s.mu.Unlock()
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!DOCTYPE html><html><head><title>Harbour app</title><script src="/app.js"></script></head><body><div id="root"></div></body></html>`))
	})
	mux.HandleFunc("/app.js", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.Header().Set("Content-Type", "text/javascript")
		w.Write([]byte(`
fetch("` + s.forbidden.URL + `/secret").catch(() => {});
fetch("/api/save", {method: "POST", body: "x"}).catch(() => {});
fetch("` + s.other.URL + `/track").catch(() => {});
window.addEventListener("DOMContentLoaded", async () => {
  const r = await fetch("/api/text.json");
  const d = await r.json();
  const h = document.createElement("h1");
  h.textContent = d.title;
  const p = document.createElement("p");
  p.textContent = d.text;
  document.getElementById("root").append(h, p);
});`))
	})
	mux.HandleFunc("/api/text.json", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"title": "Tides", "text": "Ships drop anchor when the tide is low, and the harbour master rings the bell."}`))
	})
	mux.HandleFunc("/api/save", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			s.posts.Add(1)
		}
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func client(t *testing.T) *fetch.Client {
	c, err := fetch.New(fetch.Options{AllowHosts: []string{"127.0.0.1"}, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRenderSPA renders a page whose text exists only once its script has
// run, with the page's own body handed over, and checks what its requests
// could reach.
func TestRenderSPA(t *testing.T) {
	path := browserPath(t)
	s := newSPA(t)
	r := New(client(t), Options{Path: path, Timeout: time.Minute})
	defer r.Close()
	shell := []byte(`<!DOCTYPE html><html><head><title>Harbour app</title><script src="/app.js"></script></head><body><div id="root"></div></body></html>`)
	h := http.Header{}
	h.Set("Authorization", "Bearer s3cret")
	got, err := r.Render(t.Context(), Page{URL: s.URL + "/", Body: shell, ContentType: "text/html", Headers: h})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "<h1>Tides</h1>") || !strings.Contains(string(got), "the harbour master rings the bell") {
		t.Fatalf("rendered page: %s", got)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, asked := s.auth["/"]; asked {
		t.Error("the page was requested again though its body was given")
	}
	if s.auth["/app.js"] != "Bearer s3cret" || s.auth["/api/text.json"] != "Bearer s3cret" {
		t.Errorf("the page's origin did not get its headers: %v", s.auth)
	}
	if a, ok := s.auth["other/track"]; !ok || a != "" {
		t.Errorf("another origin: asked %v, Authorization %q", ok, a)
	}
	if n := s.posts.Load(); n != 0 {
		t.Errorf("%d POST requests reached the site", n)
	}
}

func TestRenderWithoutBrowser(t *testing.T) {
	r := New(client(t), Options{})
	r.path = ""
	if _, err := r.Render(t.Context(), Page{URL: "http://127.0.0.1/"}); !errors.Is(err, ErrNoBrowser) || err.Error() != "needs a browser: install chromium" {
		t.Errorf("%v", err)
	}
}

// TestRenderTimeout: a page whose script never lets it load fails after
// the time limit, not after the script's hour.
func TestRenderTimeout(t *testing.T) {
	path := browserPath(t)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow.js" {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Hour):
			}
			return
		}
		w.Write([]byte(`<html><head><script src="/slow.js"></script></head><body></body></html>`))
	}))
	defer hang.Close()
	r := New(client(t), Options{Path: path, Timeout: 3 * time.Second})
	defer r.Close()
	start := time.Now()
	_, err := r.Render(t.Context(), Page{URL: hang.URL + "/"})
	if err == nil || !strings.Contains(err.Error(), "did not load within 3s") {
		t.Errorf("%v", err)
	}
	t.Logf("failed after %v", time.Since(start).Round(time.Millisecond))
	// The script answers after an hour: failing sooner is the time
	// limit's doing.
	if d := time.Since(start); d >= time.Hour {
		t.Errorf("took %v", d)
	}
}
