// Package searxngtest provides a fake SearXNG for tests: an httptest.Server
// that answers /search?format=json with the response shape of a real SearXNG
// and reproduces its failure modes (JSON format disabled, bad parameters,
// search errors, the limiter, broken bodies, every engine failing).
//
// Results are deterministic: they derive from the query and page only, so
// tests can compute what they expect with ResultURL and ResultTitle.
package searxngtest

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/closedport"
)

// Mode selects how the fake answers /search requests.
type Mode int

const (
	// OK answers like a healthy SearXNG.
	OK Mode = iota
	// FormatDisabled answers format=json with 403 and an HTML page, as
	// SearXNG does when json is missing from search.formats.
	FormatDisabled
	// BadRequest answers every JSON search with 400 and
	// {"error": BadRequestMessage}, as SearXNG does for an invalid parameter.
	BadRequest
	// ServerError answers every JSON search with 500 and
	// {"error": "search error"}, as SearXNG does when the search blows up.
	ServerError
	// RateLimited answers with 429 and a plain-text body, as SearXNG's
	// limiter (server.limiter: true) does.
	RateLimited
	// Garbage answers 200 with a JSON content type but a body that is not
	// JSON, as a misconfigured proxy in front of SearXNG may.
	Garbage
	// NoEngines answers 200 with no results and every engine listed in
	// unresponsive_engines, as an instance whose engines all fail does.
	NoEngines
)

// String names the mode, for test failure messages.
func (m Mode) String() string {
	switch m {
	case OK:
		return "OK"
	case FormatDisabled:
		return "FormatDisabled"
	case BadRequest:
		return "BadRequest"
	case ServerError:
		return "ServerError"
	case RateLimited:
		return "RateLimited"
	case Garbage:
		return "Garbage"
	case NoEngines:
		return "NoEngines"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// PerPage is the number of distinct result URLs on every page in OK mode.
// Each page also carries one more entry that repeats the URL of its first
// result under another engine, so a page holds PerPage+1 result objects.
const PerPage = 8

// BadRequestMessage is the "error" text of the 400 answer in BadRequest mode.
const BadRequestMessage = `Invalid value "xx-bogus" for parameter language`

// DuplicateEngine is the engine that reports the repeated URL of each page.
const DuplicateEngine = "brave"

// knownCategories lists the categories the fake knows; any other requested
// category is rejected with 400, like an invalid parameter.
var knownCategories = map[string]bool{
	"general": true, "images": true, "videos": true, "news": true, "map": true,
	"music": true, "it": true, "science": true, "files": true, "social media": true,
}

// engines is the rotation of engine names reported in results; NoEngines
// mode lists them all as unresponsive.
var engines = []string{"duckduckgo", "google", "bing", "wikipedia", "brave", "qwant", "startpage", "mojeek"}

// languageCode matches the language codes SearXNG accepts besides "auto"
// and "all" (for example "en", "en-US").
var languageCode = regexp.MustCompile(`^[a-z]{2,3}(-[a-zA-Z]{2})?$`)

// Server is a running fake SearXNG.
type Server struct {
	// URL is the base URL of the fake, without a trailing slash.
	URL string

	srv       *httptest.Server
	done      chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	down      []*closedport.Port // the ports of URLDown, released by Close
	mode      Mode
	delay     time.Duration
	requests  int
	lastQuery url.Values
	// results are the results of queries set with SetResults.
	results map[string][]Result
}

// Result is a search result set with SetResults.
type Result struct {
	URL, Title, Content string
}

// SetResults makes the fake answer query (exactly as sent) with results,
// in order, instead of the results it derives from the query: pages of a
// site the test serves, say. The rest of the answer is as usual.
func (s *Server) SetResults(query string, results []Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.results == nil {
		s.results = map[string][]Result{}
	}
	s.results[query] = results
}

// New starts a fake SearXNG in OK mode and closes it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := NewServer()
	t.Cleanup(s.Close)
	return s
}

// NewN starts n independent fakes in OK mode, for tests of failover across
// instances, and closes them when the test ends.
func NewN(t testing.TB, n int) []*Server {
	t.Helper()
	out := make([]*Server, n)
	for i := range out {
		out[i] = New(t)
	}
	return out
}

// URLs returns the base URLs of servers, in order.
func URLs(servers []*Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.URL
	}
	return out
}

// NewServer starts a fake SearXNG in OK mode outside of a test. The caller
// must Close it.
func NewServer() *Server {
	s := &Server{done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/search", s.search)
	mux.HandleFunc("/healthz", healthz)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Close stops the server. Requests held by SetDelay are released first so
// that Close never waits for a slow answer. Close may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range s.down {
			p.Close()
		}
		s.down = nil
	})
}

// SetMode changes how later /search requests are answered.
func (s *Server) SetMode(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = m
}

// SetDelay makes every later /search request wait d before it is answered,
// like a slow SearXNG. The wait ends early when the client gives up or the
// server closes, so tests of timeouts never hang.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Requests reports how many /search requests the server has received,
// whatever their outcome.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// LastQuery returns a copy of the parameters (query string and form body)
// of the last /search request, or nil before the first one.
func (s *Server) LastQuery() url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastQuery == nil {
		return nil
	}
	out := make(url.Values, len(s.lastQuery))
	for k, v := range s.lastQuery {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// URLDown returns a loopback base URL that refuses connections, to model an
// unreachable SearXNG. Its port stays held until the server closes, so no
// other server, of this test or another, can answer on it.
func (s *Server) URLDown() string {
	p, err := closedport.New()
	if err != nil {
		// Port 1 is privileged and never served in a test environment.
		return "http://127.0.0.1:1"
	}
	s.mu.Lock()
	s.down = append(s.down, p)
	s.mu.Unlock()
	return "http://" + p.Addr()
}

// ResultURL is the URL of result n (counting from 1 across pages) for query q.
func ResultURL(q string, n int) string {
	return "https://example.com/" + slug(q) + "/" + strconv.Itoa(n)
}

// ResultTitle is the title of result n (counting from 1 across pages) for query q.
func ResultTitle(q string, n int) string {
	return "Result " + strconv.Itoa(n) + " for " + q
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("OK"))
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	// SearXNG reads parameters from the query string and from a POST form alike.
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests++
	s.lastQuery = r.Form
	mode, delay := s.mode, s.delay
	set, isSet := s.results[r.Form.Get("q")]
	s.mu.Unlock()

	if delay > 0 {
		timer := time.NewTimer(delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}

	if mode == RateLimited {
		// The limiter runs before the search view, whatever the format.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte("Too Many Requests"))
		return
	}

	// SearXNG falls back to html for unknown formats and refuses (403) a
	// known format that settings.yml does not list; this instance lists
	// html and json unless the JSON format is disabled.
	format := r.Form.Get("format")
	switch format {
	case "json":
		if mode == FormatDisabled {
			forbidden(w)
			return
		}
	case "csv", "rss":
		forbidden(w)
		return
	default:
		htmlPage(w, r.Form.Get("q"))
		return
	}

	q := r.Form.Get("q")
	if q == "" {
		jsonError(w, http.StatusBadRequest, "No query")
		return
	}
	p, msg := parseParams(r.Form)
	if msg != "" {
		jsonError(w, http.StatusBadRequest, msg)
		return
	}

	switch mode {
	case BadRequest:
		jsonError(w, http.StatusBadRequest, BadRequestMessage)
	case ServerError:
		jsonError(w, http.StatusInternalServerError, "search error")
	case Garbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("<html><body>upstream answered something else {\"results\": [</body></html>"))
	case NoEngines:
		writeJSON(w, noEngines(q))
	default:
		resp := answer(q, p)
		if isSet {
			resp.Results = resp.Results[:0]
			for i, r := range set {
				content := r.Content
				resp.Results = append(resp.Results, wireResult{URL: r.URL, Title: r.Title, Content: &content,
					Engine: engines[i%len(engines)], Engines: []string{engines[i%len(engines)]}, Positions: []int{i + 1},
					Score: float64(len(set) - i), Category: p.categories[0], Template: "default.html"})
			}
		}
		writeJSON(w, resp)
	}
}

// params are the validated search parameters the fake's answer depends on.
type params struct {
	page       int
	categories []string
}

// parseParams validates parameters the way SearXNG does and returns the
// message of its 400 answer when one is invalid.
func parseParams(form url.Values) (params, string) {
	p := params{page: 1, categories: []string{"general"}}
	if v := form.Get("pageno"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, invalid("pageno", v)
		}
		p.page = n
	}
	if v := form.Get("categories"); v != "" {
		var cats []string
		for _, c := range strings.Split(v, ",") {
			c = strings.TrimSpace(c)
			if c == "" {
				continue
			}
			if !knownCategories[c] {
				return p, invalid("categories", c)
			}
			cats = append(cats, c)
		}
		if len(cats) > 0 {
			p.categories = cats
		}
	}
	switch v := form.Get("time_range"); v {
	case "", "None", "day", "week", "month", "year":
	default:
		return p, invalid("time_range", v)
	}
	switch v := form.Get("safesearch"); v {
	case "", "0", "1", "2":
	default:
		return p, invalid("safesearch", v)
	}
	if v := form.Get("language"); v != "" && v != "auto" && v != "all" && !languageCode.MatchString(v) {
		return p, invalid("language", v)
	}
	return p, ""
}

func invalid(name, value string) string {
	return `Invalid value "` + value + `" for parameter ` + name
}

// The wire types below mirror SearXNG's JSON answer, including keys that
// clients are expected to ignore.

type wireResult struct {
	URL           string   `json:"url"`
	Title         string   `json:"title"`
	Content       *string  `json:"content,omitempty"`
	Engine        string   `json:"engine"`
	Engines       []string `json:"engines"`
	Positions     []int    `json:"positions"`
	Score         float64  `json:"score"`
	Category      string   `json:"category"`
	PublishedDate *string  `json:"publishedDate"`
	Thumbnail     string   `json:"thumbnail,omitempty"`
	ParsedURL     []string `json:"parsed_url"`
	Template      string   `json:"template"`
	Priority      string   `json:"priority"`
}

type wireAnswer struct {
	Answer   string `json:"answer"`
	URL      string `json:"url"`
	Engine   string `json:"engine"`
	Template string `json:"template"`
}

type wireLink struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

type wireAttribute struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

type wireInfobox struct {
	Infobox    string          `json:"infobox"`
	ID         string          `json:"id"`
	Content    string          `json:"content"`
	Engine     string          `json:"engine"`
	Engines    []string        `json:"engines"`
	ImgSrc     *string         `json:"img_src"`
	URLs       []wireLink      `json:"urls"`
	Attributes []wireAttribute `json:"attributes"`
}

type wireResponse struct {
	Query               string        `json:"query"`
	Results             []wireResult  `json:"results"`
	Answers             []wireAnswer  `json:"answers"`
	Corrections         []string      `json:"corrections"`
	Infoboxes           []wireInfobox `json:"infoboxes"`
	Suggestions         []string      `json:"suggestions"`
	UnresponsiveEngines [][2]string   `json:"unresponsive_engines"`
}

func answer(q string, p params) wireResponse {
	sl := slug(q)
	first := (p.page-1)*PerPage + 1
	results := make([]wireResult, 0, PerPage+1)
	for i := range PerPage {
		n := first + i
		r := wireResult{
			URL:       ResultURL(q, n),
			Title:     ResultTitle(q, n),
			Engine:    engines[i%len(engines)],
			Engines:   []string{engines[i%len(engines)], engines[(i+2)%len(engines)]},
			Positions: []int{i + 1, i + 2},
			Score:     float64(PerPage-i) * 1.5,
			Category:  p.categories[i%len(p.categories)],
			ParsedURL: []string{"https", "example.com", "/" + sl + "/" + strconv.Itoa(n), "", "", ""},
			Template:  "default.html",
		}
		content := "Snippet " + strconv.Itoa(n) + " about " + q + "."
		// Some engines send no snippet, no date or no thumbnail: vary them.
		if i != PerPage-1 {
			r.Content = &content
		}
		if i%2 == 0 {
			d := time.Date(2025, time.January, 1+n%28, 12, 0, 0, 0, time.UTC).Format("2006-01-02T15:04:05")
			r.PublishedDate = &d
		}
		if i%3 == 0 {
			r.Thumbnail = "https://example.com/" + sl + "/" + strconv.Itoa(n) + ".png"
		}
		results = append(results, r)
	}
	dupContent := "Another engine's snippet about " + q + "."
	results = append(results, wireResult{
		URL:       ResultURL(q, first),
		Title:     ResultTitle(q, first) + " (" + DuplicateEngine + ")",
		Content:   &dupContent,
		Engine:    DuplicateEngine,
		Engines:   []string{DuplicateEngine},
		Positions: []int{PerPage + 1},
		Score:     0.5,
		Category:  p.categories[0],
		ParsedURL: []string{"https", "example.com", "/" + sl + "/" + strconv.Itoa(first), "", "", ""},
		Template:  "default.html",
	})
	return wireResponse{
		Query:   q,
		Results: results,
		Answers: []wireAnswer{{
			Answer:   "A short answer about " + q + ".",
			URL:      "https://example.com/" + sl + "/answer",
			Engine:   "duckduckgo",
			Template: "answer/legacy.html",
		}},
		Corrections: []string{q + " corrected"},
		Infoboxes: []wireInfobox{{
			Infobox: q,
			ID:      "https://en.wikipedia.org/wiki/" + sl,
			Content: "An encyclopedic summary of " + q + ".",
			Engine:  "wikipedia",
			Engines: []string{"wikipedia", "wikidata"},
			URLs: []wireLink{
				{Title: "Wikipedia", URL: "https://en.wikipedia.org/wiki/" + sl},
				{Title: "Official website", URL: "https://example.org/" + sl},
			},
			Attributes: []wireAttribute{
				{Label: "Inception", Value: "2014"},
				{Label: "License", Value: "AGPL-3.0"},
			},
		}},
		Suggestions:         []string{q + " tutorial", q + " examples", q + " alternatives"},
		UnresponsiveEngines: [][2]string{{"wikidata", "timeout"}},
	}
}

func noEngines(q string) wireResponse {
	reasons := []string{"timeout", "Suspended: too many requests", "HTTP error", "CAPTCHA", "unexpected crash"}
	un := make([][2]string, 0, len(engines))
	for i, e := range engines {
		un = append(un, [2]string{e, reasons[i%len(reasons)]})
	}
	return wireResponse{
		Query:               q,
		Results:             []wireResult{},
		Answers:             []wireAnswer{},
		Corrections:         []string{},
		Infoboxes:           []wireInfobox{},
		Suggestions:         []string{},
		UnresponsiveEngines: un,
	}
}

// slug turns a query into a URL path segment: lower-case letters and digits
// separated by single dashes.
func slug(q string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(q) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	if b.Len() == 0 {
		return "query"
	}
	return b.String()
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func jsonError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func forbidden(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write([]byte("<!doctype html>\n<html lang=en>\n<title>403 Forbidden</title>\n" +
		"<h1>Forbidden</h1>\n<p>Access to the requested resource is not allowed.</p>\n"))
}

func htmlPage(w http.ResponseWriter, q string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html><head><title>%s - SearXNG</title></head>"+
		"<body><form action=\"/search\"><input name=\"q\"></form></body></html>\n", html.EscapeString(q))
}
