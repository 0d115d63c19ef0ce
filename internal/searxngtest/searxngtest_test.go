package searxngtest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// get fetches path+query from the fake and returns status, content type and body.
func get(t *testing.T, s *Server, pathQuery string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(s.URL + pathQuery)
	if err != nil {
		t.Fatalf("GET %s: %v", pathQuery, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", pathQuery, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

func TestModes(t *testing.T) {
	tests := []struct {
		name       string
		mode       Mode
		query      string
		wantStatus int
		wantType   string
		wantBody   string // substring
	}{
		{"ok json", OK, "/search?q=go+fmt&format=json", 200, "application/json", `"url":"https://example.com/go-fmt/1"`},
		{"html by default", OK, "/search?q=go", 200, "text/html", "<form"},
		{"unknown format falls back to html", OK, "/search?q=go&format=xml", 200, "text/html", "<form"},
		{"unlisted format", OK, "/search?q=go&format=csv", 403, "text/html", "Forbidden"},
		{"missing q", OK, "/search?format=json", 400, "application/json", `{"error":"No query"}`},
		{"empty q", OK, "/search?q=&format=json", 400, "application/json", `"No query"`},
		{"unknown category", OK, "/search?q=go&format=json&categories=general,nope", 400, "application/json", `for parameter categories`},
		{"bad time_range", OK, "/search?q=go&format=json&time_range=decade", 400, "application/json", `Invalid value \"decade\" for parameter time_range`},
		{"bad pageno", OK, "/search?q=go&format=json&pageno=0", 400, "application/json", `parameter pageno`},
		{"bad safesearch", OK, "/search?q=go&format=json&safesearch=3", 400, "application/json", `parameter safesearch`},
		{"bad language", OK, "/search?q=go&format=json&language=English", 400, "application/json", `parameter language`},
		{"format disabled", FormatDisabled, "/search?q=go&format=json", 403, "text/html", "<title>403 Forbidden</title>"},
		{"format disabled keeps html", FormatDisabled, "/search?q=go", 200, "text/html", "<form"},
		{"bad request", BadRequest, "/search?q=go&format=json", 400, "application/json", "xx-bogus"},
		{"server error", ServerError, "/search?q=go&format=json", 500, "application/json", `{"error":"search error"}`},
		{"rate limited", RateLimited, "/search?q=go&format=json", 429, "text/plain", "Too Many Requests"},
		{"garbage", Garbage, "/search?q=go&format=json", 200, "application/json", "<html>"},
		{"no engines", NoEngines, "/search?q=go&format=json", 200, "application/json", `"results":[]`},
		{"healthz", OK, "/healthz", 200, "text/plain", "OK"},
		{"healthz in error mode", ServerError, "/healthz", 200, "text/plain", "OK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t)
			s.SetMode(tt.mode)
			status, ctype, body := get(t, s, tt.query)
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %q)", status, tt.wantStatus, body)
			}
			if !strings.HasPrefix(ctype, tt.wantType) {
				t.Errorf("Content-Type = %q, want %q", ctype, tt.wantType)
			}
			if !strings.Contains(body, tt.wantBody) {
				t.Errorf("body %q does not contain %q", body, tt.wantBody)
			}
		})
	}
}

// page is the subset of SearXNG's answer the tests below inspect.
type page struct {
	Query   string `json:"query"`
	Results []struct {
		URL           string   `json:"url"`
		Title         string   `json:"title"`
		Engine        string   `json:"engine"`
		Engines       []string `json:"engines"`
		Category      string   `json:"category"`
		PublishedDate *string  `json:"publishedDate"`
	} `json:"results"`
	Answers     []map[string]any `json:"answers"`
	Corrections []string         `json:"corrections"`
	Infoboxes   []struct {
		URLs       []map[string]string `json:"urls"`
		Attributes []map[string]string `json:"attributes"`
	} `json:"infoboxes"`
	Suggestions         []string   `json:"suggestions"`
	UnresponsiveEngines [][]string `json:"unresponsive_engines"`
}

func decodePage(t *testing.T, s *Server, pathQuery string) page {
	t.Helper()
	status, _, body := get(t, s, pathQuery)
	if status != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", pathQuery, status, body)
	}
	var p page
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("decode %s: %v", pathQuery, err)
	}
	return p
}

func TestOKShape(t *testing.T) {
	s := New(t)
	p := decodePage(t, s, "/search?q=Go+Modules!&format=json")

	if p.Query != "Go Modules!" {
		t.Errorf("query = %q", p.Query)
	}
	if len(p.Results) != PerPage+1 {
		t.Fatalf("got %d results, want %d", len(p.Results), PerPage+1)
	}
	seen := map[string][]string{}
	nullDates := 0
	for _, r := range p.Results {
		seen[r.URL] = append(seen[r.URL], r.Engine)
		if r.PublishedDate == nil {
			nullDates++
		}
		if r.Category != "general" {
			t.Errorf("category = %q, want general", r.Category)
		}
	}
	if len(seen) != PerPage {
		t.Errorf("%d distinct URLs, want %d", len(seen), PerPage)
	}
	dup := seen[ResultURL("Go Modules!", 1)]
	if len(dup) != 2 || dup[0] == dup[1] {
		t.Errorf("first URL reported by %v, want two different engines", dup)
	}
	if nullDates == 0 || nullDates == len(p.Results) {
		t.Errorf("%d of %d publishedDate are null, want a mix", nullDates, len(p.Results))
	}
	if got := p.Results[0].URL; got != "https://example.com/go-modules/1" {
		t.Errorf("first URL = %q", got)
	}
	if got := p.Results[1].Title; got != ResultTitle("Go Modules!", 2) {
		t.Errorf("second title = %q", got)
	}
	if len(p.Answers) != 1 || len(p.Corrections) == 0 || len(p.Suggestions) < 2 {
		t.Errorf("answers %v corrections %v suggestions %v", p.Answers, p.Corrections, p.Suggestions)
	}
	if len(p.Infoboxes) != 1 || len(p.Infoboxes[0].URLs) == 0 || len(p.Infoboxes[0].Attributes) == 0 {
		t.Errorf("infoboxes = %+v", p.Infoboxes)
	}
	if len(p.UnresponsiveEngines) != 1 || len(p.UnresponsiveEngines[0]) != 2 {
		t.Errorf("unresponsive_engines = %v", p.UnresponsiveEngines)
	}
}

func TestPagesAndCategories(t *testing.T) {
	s := New(t)
	p2 := decodePage(t, s, "/search?q=go&format=json&pageno=2&categories=it,science")
	if got, want := p2.Results[0].URL, ResultURL("go", PerPage+1); got != want {
		t.Errorf("page 2 first URL = %q, want %q", got, want)
	}
	cats := map[string]bool{}
	for _, r := range p2.Results {
		cats[r.Category] = true
	}
	if !cats["it"] || !cats["science"] || len(cats) != 2 {
		t.Errorf("categories in results = %v, want it and science", cats)
	}
	q := s.LastQuery()
	if q.Get("pageno") != "2" || q.Get("categories") != "it,science" {
		t.Errorf("LastQuery = %v", q)
	}
}

func TestNoEngines(t *testing.T) {
	s := New(t)
	s.SetMode(NoEngines)
	p := decodePage(t, s, "/search?q=go&format=json")
	if len(p.Results) != 0 {
		t.Errorf("%d results, want none", len(p.Results))
	}
	if len(p.UnresponsiveEngines) < 2 {
		t.Errorf("unresponsive_engines = %v, want every engine", p.UnresponsiveEngines)
	}
}

func TestRequestsAndPost(t *testing.T) {
	s := New(t)
	if s.LastQuery() != nil || s.Requests() != 0 {
		t.Fatalf("fresh server: LastQuery %v Requests %d", s.LastQuery(), s.Requests())
	}
	get(t, s, "/healthz")
	get(t, s, "/search?format=json")
	resp, err := http.PostForm(s.URL+"/search", url.Values{"q": {"posted"}, "format": {"json"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST status = %d", resp.StatusCode)
	}
	if got := s.Requests(); got != 2 {
		t.Errorf("Requests = %d, want 2 (healthz is not a search)", got)
	}
	q := s.LastQuery()
	if q.Get("q") != "posted" {
		t.Errorf("LastQuery = %v", q)
	}
	q.Set("q", "changed")
	if s.LastQuery().Get("q") != "posted" {
		t.Error("LastQuery returned the server's own map")
	}
}

func TestDelayHonoursCancellation(t *testing.T) {
	s := New(t)
	s.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/search?q=go&format=json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = http.DefaultClient.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	// Cleanup's Close must return even if the handler were still waiting.
}

func TestCloseReleasesDelayedRequests(t *testing.T) {
	s := NewServer()
	s.SetDelay(time.Hour)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Get(s.URL + "/search?q=go&format=json")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for s.Requests() == 0 {
		time.Sleep(time.Millisecond)
	}
	s.Close()
	s.Close() // a second Close is harmless
	<-errc
}

func TestURLDown(t *testing.T) {
	s := New(t)
	down := s.URLDown()
	_, err := http.Get(down + "/healthz")
	if err == nil {
		t.Fatal("GET on URLDown succeeded")
	}
	if runtime.GOOS != "linux" {
		return
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("GET on URLDown = %v, want connection refused", err)
	}
	// No server can take the port while the fake runs.
	if l, err := net.Listen("tcp", strings.TrimPrefix(down, "http://")); err == nil {
		l.Close()
		t.Errorf("a server could listen on URLDown's %s", down)
	}
}

func TestSlug(t *testing.T) {
	tests := map[string]string{
		"Go Modules!":     "go-modules",
		"  a  b  ":        "a-b",
		"C++ & Rust 2024": "c-rust-2024",
		"日本語":             "query",
		"":                "query",
	}
	for in, want := range tests {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewN(t *testing.T) {
	servers := NewN(t, 3)
	urls := URLs(servers)
	if len(urls) != 3 || urls[0] == urls[1] || urls[1] == urls[2] {
		t.Fatalf("URLs = %v, want three distinct fakes", urls)
	}
	servers[1].SetMode(ServerError)
	for i, s := range servers {
		status, _, _ := get(t, s, "/search?q=go&format=json")
		want := http.StatusOK
		if i == 1 {
			want = http.StatusInternalServerError
		}
		if status != want || s.Requests() != 1 {
			t.Errorf("fake %d: status %d, %d requests; want %d, 1", i, status, s.Requests(), want)
		}
	}
}
