package fetch

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDoReturnsEveryAnswer(t *testing.T) {
	s := newSite(t)
	s.mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("X-UA", r.Header.Get("User-Agent"))
		w.Write([]byte("hello"))
	})
	s.mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	c := newClient(t, Options{AllowPrivate: true, UserAgent: "test-agent/2"})

	req, _ := http.NewRequest(http.MethodGet, s.URL+"/page#part", nil)
	resp, err := c.Do(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello" || resp.Header.Get("X-UA") != "test-agent/2" || resp.Header.Get("ETag") != `"v1"` {
		t.Errorf("first answer %d %q %v", resp.StatusCode, body, resp.Header)
	}

	req.Header.Set("If-None-Match", `"v1"`)
	req.Header.Set("User-Agent", "crawler/1")
	resp, err = c.Do(t.Context(), req)
	if err != nil || resp.StatusCode != http.StatusNotModified {
		t.Fatalf("conditional request: %v %v", resp, err)
	}
	resp.Body.Close()

	for path, status := range map[string]int{"/busy": 429, "/nothing": 404} {
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		resp, err := c.Do(t.Context(), req)
		if err != nil || resp.StatusCode != status {
			t.Fatalf("%s: %v %v", path, resp, err)
		}
		resp.Body.Close()
		if path == "/busy" && resp.Header.Get("Retry-After") != "7" {
			t.Error("Retry-After lost")
		}
	}

	post, _ := http.NewRequest(http.MethodPost, s.URL+"/page", strings.NewReader("x"))
	if _, err := c.Do(t.Context(), post); !errors.Is(err, ErrInvalidURL) {
		t.Errorf("POST: %v", err)
	}
}

// TestDoKeepsTheAddressRules: Do refuses what Download refuses, the
// redirects included.
func TestDoKeepsTheAddressRules(t *testing.T) {
	s := newSite(t)
	s.serve("/page", "text/plain", []byte("ok"))
	s.mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.2:"+s.port()+"/page", http.StatusFound)
	})
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/page", nil)
	if _, err := newClient(t, Options{}).Do(t.Context(), req); !errors.Is(err, ErrBlocked) {
		t.Errorf("loopback without allow-list: %v", err)
	}
	allowed := newClient(t, Options{AllowHosts: []string{"127.0.0.1"}})
	resp, err := allowed.Do(t.Context(), req)
	if err != nil {
		t.Fatalf("allow-listed: %v", err)
	}
	resp.Body.Close()
	away, _ := http.NewRequest(http.MethodGet, s.URL+"/away", nil)
	if _, err := allowed.Do(t.Context(), away); !errors.Is(err, ErrBlocked) {
		t.Errorf("redirect to a refused address: %v", err)
	}
	if hits := s.hits.Load(); hits != 2 {
		t.Errorf("%d requests reached the site, want 2", hits)
	}
}

func TestDoBoundsTheBody(t *testing.T) {
	// slowBody is how long /slow takes to end its body.
	const slowBody = 30 * time.Second
	s := newSite(t)
	s.mux.HandleFunc("/declared", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(1<<20))
		w.Write(make([]byte, 1<<20))
	})
	s.mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		for range 64 {
			w.Write(make([]byte, 16<<10))
			w.(http.Flusher).Flush()
		}
	})
	s.mux.HandleFunc("/exact", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		w.Write(make([]byte, 64<<10))
	})
	s.mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("start"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(slowBody):
		}
	})
	c := newClient(t, Options{AllowPrivate: true, MaxBodyBytes: 64 << 10, Timeout: 300 * time.Millisecond})
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		return c.Do(t.Context(), req)
	}
	if _, err := get("/declared"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("declared size: %v", err)
	}
	resp, err := get("/stream")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !errors.Is(err, ErrTooLarge) || n != 64<<10 {
		t.Errorf("stream: %d bytes, %v", n, err)
	}
	resp, err = get("/exact")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 64<<10 {
		t.Errorf("a body of exactly the limit: %d bytes, %v", len(b), err)
	}
	resp.Body.Close()
	resp, err = get("/slow")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	// Read to its end, the body takes slowBody: an error sooner is the
	// client's time-out.
	if took := time.Since(start); !errors.Is(err, ErrTimeout) || took >= slowBody {
		t.Errorf("slow body: %v after %v", err, took)
	}
}

// TestDoLimit: a request may have a body limit of its own, larger or
// smaller than the client's, or none.
func TestDoLimit(t *testing.T) {
	s := newSite(t)
	s.mux.HandleFunc("/declared", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(1<<20))
		w.Write(make([]byte, 1<<20))
	})
	c := newClient(t, Options{AllowPrivate: true, MaxBodyBytes: 64 << 10})
	get := func(limit int64) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/declared", nil)
		resp, err := c.DoLimit(t.Context(), req, limit)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return len(b), err
	}
	for _, tc := range []struct {
		limit int64
		n     int
		err   error
	}{
		{2 << 20, 1 << 20, nil},
		{0, 1 << 20, nil},
		{1 << 10, 0, ErrTooLarge},
	} {
		if n, err := get(tc.limit); n != tc.n || !errors.Is(err, tc.err) {
			t.Errorf("limit %d: %d bytes, %v; want %d, %v", tc.limit, n, err, tc.n, tc.err)
		}
	}
	if _, err := get(64 << 10); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "65536") {
		t.Errorf("the client's limit: %v", err)
	}
}

// TestDoHeadersStayWithTheirOrigin: the headers a caller sets reach the
// host it asked, through redirects on that host, and not another host (or
// port) a redirect leads to, which gets the user agent and Accept alone.
func TestDoHeadersStayWithTheirOrigin(t *testing.T) {
	got := map[string]http.Header{}
	var mu sync.Mutex
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got[name] = r.Header.Clone()
			mu.Unlock()
			w.Write([]byte("ok"))
		}
	}
	other := newSite(t)
	other.mux.HandleFunc("/landing", record("other"))
	s := newSite(t)
	s.mux.HandleFunc("/here", record("here"))
	s.mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/here", http.StatusFound) })
	s.mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/landing", http.StatusFound)
	})
	c := newClient(t, Options{AllowPrivate: true, UserAgent: "test-agent/2"})
	for _, path := range []string{"/moved", "/away"} {
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set("Cookie", "sid=s3cret")
		req.Header.Set("X-Api-Token", "s3cret")
		resp, err := c.Do(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	here, away := got["here"], got["other"]
	if here.Get("Authorization") != "Bearer s3cret" || here.Get("Cookie") != "sid=s3cret" || here.Get("X-Api-Token") != "s3cret" {
		t.Errorf("the same host lost the headers: %v", here)
	}
	if away == nil || away.Get("User-Agent") != "test-agent/2" || away.Get("Accept") == "" {
		t.Fatalf("the other host got %v", away)
	}
	for name, v := range away {
		if strings.Contains(strings.Join(v, " "), "s3cret") || name == "Referer" {
			t.Errorf("the other host got %s: %q", name, v)
		}
	}
}
