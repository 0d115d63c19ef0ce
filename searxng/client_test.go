package searxng_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
	"github.com/mcpsearch/mcpsearch/searxng"
)

// newClient returns a client for baseURL and fails the test if New does.
func newClient(t testing.TB, baseURL string, opts ...searxng.Option) *searxng.Client {
	t.Helper()
	c, err := searxng.New(baseURL, opts...)
	if err != nil {
		t.Fatalf("New(%q): %v", baseURL, err)
	}
	return c
}

func intPtr(n int) *int { return &n }

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		baseURL  string
		opts     []searxng.Option
		wantBase string // "" when New must fail
		wantErr  string
	}{
		{name: "plain", baseURL: "http://localhost:8888", wantBase: "http://localhost:8888"},
		{name: "trailing slash", baseURL: "http://localhost:8888/", wantBase: "http://localhost:8888"},
		{name: "path prefix", baseURL: "https://example.org/searxng/", wantBase: "https://example.org/searxng"},
		{name: "surrounding spaces", baseURL: " http://h:1 ", wantBase: "http://h:1"},
		{name: "password redacted", baseURL: "http://user:secret@h/sx", wantBase: "http://user:xxxxx@h/sx"},
		{name: "empty", baseURL: "", wantErr: "scheme"},
		{name: "no scheme", baseURL: "localhost:8888", wantErr: "scheme"},
		{name: "ftp", baseURL: "ftp://h/", wantErr: "scheme"},
		{name: "no host", baseURL: "http:///search", wantErr: "no host"},
		{name: "port only", baseURL: "http://:8888", wantErr: "no host"},
		{name: "query", baseURL: "http://h/?format=json", wantErr: "query or fragment"},
		{name: "fragment", baseURL: "http://h/#x", wantErr: "query or fragment"},
		{name: "unparsable", baseURL: "http://h:port/", wantErr: "base URL"},
		{name: "zero timeout", baseURL: "http://h", opts: []searxng.Option{searxng.WithTimeout(0)}, wantErr: "timeout must be positive"},
		{name: "negative limit", baseURL: "http://h", opts: []searxng.Option{searxng.WithMaxBodyBytes(-1)}, wantErr: "limit must be positive"},
		{name: "nil http client", baseURL: "http://h", opts: []searxng.Option{searxng.WithHTTPClient(nil)}, wantErr: "nil *http.Client"},
		{name: "empty user agent", baseURL: "http://h", opts: []searxng.Option{searxng.WithUserAgent(" ")}, wantErr: "empty user agent"},
		{
			name:    "valid options",
			baseURL: "http://h",
			opts: []searxng.Option{
				searxng.WithTimeout(time.Second), searxng.WithMaxBodyBytes(1),
				searxng.WithHTTPClient(&http.Client{}), searxng.WithUserAgent("x/1"),
			},
			wantBase: "http://h",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := searxng.New(tt.baseURL, tt.opts...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New(%q) error = %v, want one containing %q", tt.baseURL, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tt.baseURL, err)
			}
			if got := c.BaseURL(); got != tt.wantBase {
				t.Errorf("BaseURL() = %q, want %q", got, tt.wantBase)
			}
		})
	}
}

func TestSearchOK(t *testing.T) {
	fake := searxngtest.New(t)
	c := newClient(t, fake.URL)

	const q = "Go generics"
	resp, err := c.Search(t.Context(), searxng.Request{Query: q})
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	if resp.Query != q {
		t.Errorf("Query = %q, want %q", resp.Query, q)
	}
	if len(resp.Results) != searxngtest.PerPage+1 {
		t.Fatalf("got %d results, want %d", len(resp.Results), searxngtest.PerPage+1)
	}
	first := resp.Results[0]
	if first.URL != searxngtest.ResultURL(q, 1) || first.Title != searxngtest.ResultTitle(q, 1) {
		t.Errorf("first result = %+v", first)
	}
	if first.Content == "" || first.Engine == "" || len(first.Engines) != 2 || first.Score <= 0 || first.Category != "general" {
		t.Errorf("first result misses fields: %+v", first)
	}
	dup := resp.Results[len(resp.Results)-1]
	if dup.URL != first.URL || dup.Engine != searxngtest.DuplicateEngine {
		t.Errorf("last result = %+v, want %s repeating the first URL", dup, searxngtest.DuplicateEngine)
	}
	var dated, undated, noContent int
	for _, r := range resp.Results {
		if r.PublishedDate == "" {
			undated++
		} else {
			dated++
		}
		if r.Content == "" {
			noContent++
		}
	}
	if dated == 0 || undated == 0 || noContent != 1 {
		t.Errorf("dated %d, undated %d, without content %d: want a mix and one without content", dated, undated, noContent)
	}
	if len(resp.Answers) != 1 || resp.Answers[0].Answer == "" || resp.Answers[0].URL == "" {
		t.Errorf("Answers = %+v", resp.Answers)
	}
	if len(resp.Corrections) != 1 || len(resp.Suggestions) != 3 {
		t.Errorf("Corrections = %q, Suggestions = %q", resp.Corrections, resp.Suggestions)
	}
	if len(resp.Infoboxes) != 1 {
		t.Fatalf("Infoboxes = %+v", resp.Infoboxes)
	}
	ib := resp.Infoboxes[0]
	if ib.Infobox != q || ib.Engine != "wikipedia" || len(ib.URLs) != 2 || ib.URLs[0].URL == "" ||
		len(ib.Attributes) != 2 || ib.Attributes[0] != (searxng.Attribute{Label: "Inception", Value: "2014"}) {
		t.Errorf("Infobox = %+v", ib)
	}
	want := []searxng.UnresponsiveEngine{{Engine: "wikidata", Reason: "timeout"}}
	if len(resp.UnresponsiveEngines) != 1 || resp.UnresponsiveEngines[0] != want[0] {
		t.Errorf("UnresponsiveEngines = %+v, want %+v", resp.UnresponsiveEngines, want)
	}
}

func TestSearchNoEngines(t *testing.T) {
	fake := searxngtest.New(t)
	fake.SetMode(searxngtest.NoEngines)
	c := newClient(t, fake.URL)
	resp, err := c.Search(t.Context(), searxng.Request{Query: "anything"})
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	if len(resp.Results) != 0 || len(resp.UnresponsiveEngines) < 2 {
		t.Errorf("results %d, unresponsive %+v: want none and every engine", len(resp.Results), resp.UnresponsiveEngines)
	}
	for _, u := range resp.UnresponsiveEngines {
		if u.Engine == "" || u.Reason == "" {
			t.Errorf("unresponsive engine without name or reason: %+v", u)
		}
	}
}

func TestSearchErrors(t *testing.T) {
	tests := []struct {
		name       string
		mode       searxngtest.Mode
		down       bool
		req        searxng.Request
		want       error
		wantStatus int // 0 when the error is not a *StatusError
		retryable  bool
		wantMsg    []string
		sent       bool // whether the request reaches SearXNG
	}{
		{
			name: "format disabled", mode: searxngtest.FormatDisabled, req: searxng.Request{Query: "go"},
			want: searxng.ErrFormatDisabled, wantStatus: 403, sent: true,
			wantMsg: []string{"HTTP 403", "add json to search.formats", "settings.yml"},
		},
		{
			name: "bad request", mode: searxngtest.BadRequest, req: searxng.Request{Query: "go"},
			want: searxng.ErrBadRequest, wantStatus: 400, sent: true,
			wantMsg: []string{"HTTP 400", searxngtest.BadRequestMessage},
		},
		{
			name: "unknown category", req: searxng.Request{Query: "go", Categories: []string{"general", "nope"}},
			want: searxng.ErrBadRequest, wantStatus: 400, sent: true,
			wantMsg: []string{`Invalid value "nope" for parameter categories`},
		},
		{
			name: "server error", mode: searxngtest.ServerError, req: searxng.Request{Query: "go"},
			want: searxng.ErrStatus, wantStatus: 500, retryable: true, sent: true,
			wantMsg: []string{"HTTP 500 Internal Server Error", "search error"},
		},
		{
			name: "rate limited", mode: searxngtest.RateLimited, req: searxng.Request{Query: "go"},
			want: searxng.ErrRateLimited, wantStatus: 429, retryable: true, sent: true,
			wantMsg: []string{"HTTP 429", "server.limiter: false"},
		},
		{
			name: "garbage", mode: searxngtest.Garbage, req: searxng.Request{Query: "go"},
			want: searxng.ErrBadResponse, sent: true,
			wantMsg: []string{"application/json", "<html>"},
		},
		{
			name: "unreachable", down: true, req: searxng.Request{Query: "secret words"},
			want: searxng.ErrUnreachable, retryable: true,
			wantMsg: []string{"connection refused"},
		},
		{name: "empty query", req: searxng.Request{Query: "  "}, want: searxng.ErrBadRequest, wantMsg: []string{"query is empty"}},
		{name: "bad time range", req: searxng.Request{Query: "go", TimeRange: "decade"}, want: searxng.ErrBadRequest, wantMsg: []string{`"decade"`}},
		{name: "negative page", req: searxng.Request{Query: "go", Page: -1}, want: searxng.ErrBadRequest, wantMsg: []string{"page -1"}},
		{name: "bad safe search", req: searxng.Request{Query: "go", SafeSearch: intPtr(3)}, want: searxng.ErrBadRequest, wantMsg: []string{"safe search 3"}},
	}
	sentinels := []error{
		searxng.ErrUnreachable, searxng.ErrTimeout, searxng.ErrFormatDisabled, searxng.ErrRateLimited,
		searxng.ErrBadRequest, searxng.ErrStatus, searxng.ErrBadResponse,
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := searxngtest.New(t)
			fake.SetMode(tt.mode)
			base := fake.URL
			if tt.down {
				base = fake.URLDown()
			}
			c := newClient(t, base)

			resp, err := c.Search(t.Context(), tt.req)
			if err == nil {
				t.Fatalf("Search succeeded with %d results, want %v", len(resp.Results), tt.want)
			}
			for _, s := range sentinels {
				if got := errors.Is(err, s); got != (s == tt.want) {
					t.Errorf("errors.Is(err, %v) = %v; err = %v", s, got, err)
				}
			}
			if got := searxng.Retryable(err); got != tt.retryable {
				t.Errorf("Retryable = %v, want %v; err = %v", got, tt.retryable, err)
			}
			var se *searxng.StatusError
			if errors.As(err, &se) != (tt.wantStatus != 0) || (se != nil && se.StatusCode != tt.wantStatus) {
				t.Errorf("StatusError = %+v, want status %d", se, tt.wantStatus)
			}
			msg := err.Error()
			for _, w := range tt.wantMsg {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "secret") {
				t.Errorf("error %q repeats the search terms", msg)
			}
			// The instance's address is internal: it is kept for logs, out
			// of the message that reaches a model.
			if strings.Contains(msg, strings.TrimPrefix(base, "http://")) {
				t.Errorf("error %q names the instance", msg)
			}
			var ie *searxng.Error
			if tt.mode != searxngtest.OK || tt.down {
				if !errors.As(err, &ie) || ie.Instance != base {
					t.Errorf("err = %#v, want a *searxng.Error for instance %s", err, base)
				}
			}
			if got := fake.Requests() > 0; got != tt.sent {
				t.Errorf("request sent = %v, want %v", got, tt.sent)
			}
		})
	}
}

func TestParameterEncoding(t *testing.T) {
	tests := []struct {
		name   string
		req    searxng.Request
		want   url.Values
		absent []string
	}{
		{
			name:   "minimal",
			req:    searxng.Request{Query: "c++ & go? 100%"},
			want:   url.Values{"q": {"c++ & go? 100%"}, "format": {"json"}},
			absent: []string{"categories", "language", "time_range", "pageno", "safesearch"},
		},
		{
			name: "everything",
			req: searxng.Request{
				Query: "go", Categories: []string{"news", " it ", ""}, Language: "de-CH",
				TimeRange: "week", Page: 3, SafeSearch: intPtr(2),
			},
			want: url.Values{
				"q": {"go"}, "format": {"json"}, "categories": {"news,it"}, "language": {"de-CH"},
				"time_range": {"week"}, "pageno": {"3"}, "safesearch": {"2"},
			},
		},
		{
			name:   "auto language, first page, safe search off",
			req:    searxng.Request{Query: "go", Language: "auto", Page: 1, SafeSearch: intPtr(0)},
			want:   url.Values{"language": {"auto"}, "safesearch": {"0"}},
			absent: []string{"pageno"},
		},
		{
			name:   "category with a space",
			req:    searxng.Request{Query: "go", Categories: []string{"social media"}},
			want:   url.Values{"categories": {"social media"}},
			absent: []string{"language"},
		},
		{
			name:   "only blank categories",
			req:    searxng.Request{Query: "go", Categories: []string{"", " "}},
			absent: []string{"categories"},
		},
	}
	fake := searxngtest.New(t)
	c := newClient(t, fake.URL)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Search(t.Context(), tt.req); err != nil {
				t.Fatalf("Search: %v", err)
			}
			got := fake.LastQuery()
			for k, v := range tt.want {
				if g := got[k]; len(g) != len(v) || (len(v) > 0 && g[0] != v[0]) {
					t.Errorf("%s = %q, want %q", k, g, v)
				}
			}
			for _, k := range tt.absent {
				if got.Has(k) {
					t.Errorf("%s sent as %q, want it absent", k, got[k])
				}
			}
		})
	}
}

func TestPagesDiffer(t *testing.T) {
	fake := searxngtest.New(t)
	c := newClient(t, fake.URL)
	p2, err := c.Search(t.Context(), searxng.Request{Query: "go", Page: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p2.Results[0].URL, searxngtest.ResultURL("go", searxngtest.PerPage+1); got != want {
		t.Errorf("page 2 starts with %q, want %q", got, want)
	}
}

// prefixed serves the fake under /searxng/, as a reverse proxy would.
func prefixed(t *testing.T, fake *searxngtest.Server) string {
	t.Helper()
	target, err := url.Parse(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	mux := http.NewServeMux()
	mux.Handle("/searxng/", http.StripPrefix("/searxng", proxy))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/searxng"
}

func TestPathPrefix(t *testing.T) {
	fake := searxngtest.New(t)
	base := prefixed(t, fake)
	for _, b := range []string{base, base + "/"} {
		t.Run(b, func(t *testing.T) {
			c := newClient(t, b)
			before := fake.Requests()
			resp, err := c.Search(t.Context(), searxng.Request{Query: "prefixed"})
			if err != nil {
				t.Fatalf("Search: %v", err)
			}
			if len(resp.Results) == 0 || fake.Requests() != before+1 {
				t.Errorf("%d results, %d requests: the search did not reach SearXNG", len(resp.Results), fake.Requests()-before)
			}
			if err := c.Ping(t.Context()); err != nil {
				t.Errorf("Ping: %v", err)
			}
		})
	}
	// Without the prefix the proxy answers 404, which must not look like success.
	c := newClient(t, strings.TrimSuffix(base, "/searxng"))
	_, err := c.Search(t.Context(), searxng.Request{Query: "prefixed"})
	var se *searxng.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound || !errors.Is(err, searxng.ErrStatus) {
		t.Errorf("search without prefix: err = %v, want a 404 ErrStatus", err)
	}
}

func TestSizeCap(t *testing.T) {
	fake := searxngtest.New(t)
	// streamed answers without a Content-Length, so the cap must apply while
	// reading rather than to the declared length.
	streamed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"results": [`))
		w.(http.Flusher).Flush()
		for i := range 20 {
			if i > 0 {
				_, _ = w.Write([]byte(","))
			}
			_, _ = w.Write([]byte(`{"url": "https://example.com/` + strings.Repeat("x", 40) + `"}`))
			w.(http.Flusher).Flush()
		}
		_, _ = w.Write([]byte(`]}`))
	}))
	t.Cleanup(streamed.Close)

	tests := []struct {
		name  string
		base  string
		limit int64
		ok    bool
	}{
		{"declared length over the cap", fake.URL, 512, false},
		{"streamed over the cap", streamed.URL, 512, false},
		{"streamed under the cap", streamed.URL, 4096, true},
		{"default", fake.URL, searxng.DefaultMaxBodyBytes, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, tt.base, searxng.WithMaxBodyBytes(tt.limit))
			resp, err := c.Search(t.Context(), searxng.Request{Query: "size"})
			if tt.ok {
				if err != nil {
					t.Fatalf("Search: %v", err)
				}
				if len(resp.Results) == 0 {
					t.Error("no results")
				}
				return
			}
			if !errors.Is(err, searxng.ErrBadResponse) || !strings.Contains(err.Error(), "larger than 512 bytes") {
				t.Errorf("err = %v, want ErrBadResponse naming the limit", err)
			}
			if searxng.Retryable(err) {
				t.Error("an oversized answer is retryable")
			}
		})
	}
}

func TestTimeoutAndCancellation(t *testing.T) {
	const short = 50 * time.Millisecond
	tests := []struct {
		name        string
		opts        []searxng.Option
		ctx         func(t *testing.T) context.Context
		wantTimeout bool
		also        error // another error the result must wrap
	}{
		{
			name:        "client timeout",
			opts:        []searxng.Option{searxng.WithTimeout(short)},
			ctx:         func(t *testing.T) context.Context { return t.Context() },
			wantTimeout: true,
		},
		{
			name:        "http.Client timeout",
			opts:        []searxng.Option{searxng.WithHTTPClient(&http.Client{Timeout: short})},
			ctx:         func(t *testing.T) context.Context { return t.Context() },
			wantTimeout: true,
		},
		{
			name: "caller deadline",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), short)
				t.Cleanup(cancel)
				return ctx
			},
			wantTimeout: true,
			also:        context.DeadlineExceeded,
		},
		{
			name: "caller cancels during the search",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				stop := time.AfterFunc(short, cancel)
				t.Cleanup(func() { stop.Stop(); cancel() })
				return ctx
			},
			also: context.Canceled,
		},
		{
			name: "caller cancelled before the search",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return ctx
			},
			also: context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := searxngtest.New(t)
			fake.SetDelay(time.Hour)
			c := newClient(t, fake.URL, tt.opts...)
			_, err := c.Search(tt.ctx(t), searxng.Request{Query: "slow"})
			if err == nil {
				t.Fatal("Search succeeded against a server that never answers")
			}
			if got := errors.Is(err, searxng.ErrTimeout); got != tt.wantTimeout {
				t.Errorf("errors.Is(err, ErrTimeout) = %v, want %v; err = %v", got, tt.wantTimeout, err)
			}
			if tt.also != nil && !errors.Is(err, tt.also) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.also)
			}
			if errors.Is(err, searxng.ErrUnreachable) {
				t.Errorf("err = %v: a slow server is not unreachable", err)
			}
			if got := searxng.Retryable(err); got != tt.wantTimeout {
				t.Errorf("Retryable = %v, want %v", got, tt.wantTimeout)
			}
		})
	}
}

func TestPing(t *testing.T) {
	status := func(code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(code)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	fake := searxngtest.New(t)
	tests := []struct {
		name    string
		base    string
		want    error
		retries bool
	}{
		{name: "healthy", base: fake.URL},
		{name: "healthz not served", base: status(http.StatusNotFound)},
		{name: "proxy without backend", base: status(http.StatusBadGateway), want: searxng.ErrStatus, retries: true},
		{name: "down", base: fake.URLDown(), want: searxng.ErrUnreachable, retries: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newClient(t, tt.base).Ping(t.Context())
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Ping: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || searxng.Retryable(err) != tt.retries {
				t.Errorf("Ping error = %v, want %v (retryable %v)", err, tt.want, tt.retries)
			}
		})
	}
	if fake.Requests() != 0 {
		t.Errorf("Ping sent %d searches", fake.Requests())
	}
}

func TestHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"results": []}`))
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, searxng.WithUserAgent("probe/2"))
	resp, err := c.Search(t.Context(), searxng.Request{Query: "headers"})
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	if resp.Query != "headers" {
		t.Errorf("Query = %q: a missing query must fall back to the request's", resp.Query)
	}
	h := <-got
	if h.Get("User-Agent") != "probe/2" || h.Get("Accept") != "application/json" {
		t.Errorf("headers = %v", h)
	}
}

func TestRetryableNil(t *testing.T) {
	if searxng.Retryable(nil) {
		t.Error("Retryable(nil) = true")
	}
}

func TestConcurrentSearches(t *testing.T) {
	fake := searxngtest.New(t)
	c := newClient(t, fake.URL)
	const n = 16
	errc := make(chan error, n)
	for range n {
		go func() {
			_, err := c.Search(t.Context(), searxng.Request{Query: "parallel"})
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	if got := fake.Requests(); got != n {
		t.Errorf("fake served %d searches, want %d", got, n)
	}
}

func BenchmarkSearch(b *testing.B) {
	fake := searxngtest.New(b)
	c := newClient(b, fake.URL)
	req := searxng.Request{Query: "benchmark query", Categories: []string{"general"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Search(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}
