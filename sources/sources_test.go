package sources

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/crawl"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/pg"
)

// recorder is an embedder that keeps every text it is asked to embed.
type recorder struct {
	embed.Embedder
	mu    sync.Mutex
	texts []string
}

func (r *recorder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	r.mu.Lock()
	r.texts = append(r.texts, texts...)
	r.mu.Unlock()
	return r.Embedder.Embed(ctx, texts)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.texts
	r.texts = nil
	return t
}

// site is a small documentation site served on loopback, whose pages the
// test changes, with validators: ETag and Last-Modified, and 304 answers
// (http.ServeContent). It counts its answers by status.
type site struct {
	mu     sync.Mutex
	pages  map[string]string
	status map[int]int
	srv    *httptest.Server
}

func newSite(t *testing.T) *site {
	s := &site{status: map[int]int{}, pages: map[string]string{
		"/docs/":          page("Manual", `<a href="a">A</a> <a href="b">B</a> <a href="c">C</a> <a href="/private/x">X</a>`),
		"/docs/a":         page("Anchors", "Ships drop anchor in the outer harbour when the tide is low."),
		"/docs/b":         page("Buoys", "Red buoys mark the port side of the channel."),
		"/docs/c":         page("Charts", "Charts are corrected every Friday from the notices to mariners."),
		"/docs/orphan":    page("Orphan", "Only the sitemap names this page about lighthouse keepers."),
		"/private/x":      page("Private", "Robots may not read this."),
		"/docs/a?utm_x=1": "",
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.serve)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func page(title, body string) string {
	return fmt.Sprintf("<!doctype html><html><head><title>%s</title></head><body><h1>%s</h1><p>%s</p></body></html>", title, title, body)
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := &statusWriter{ResponseWriter: w, code: 200}
	defer func() { s.status[rec.code]++ }()
	switch r.URL.Path {
	case "/robots.txt":
		fmt.Fprint(rec, "User-agent: *\nDisallow: /private/\n")
		return
	case "/sitemap.xml":
		var b strings.Builder
		b.WriteString(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for _, p := range []string{"/docs/", "/docs/orphan", "/docs/d"} {
			if _, ok := s.pages[p]; ok {
				fmt.Fprintf(&b, "<url><loc>%s%s</loc></url>", s.srv.URL, p)
			}
		}
		b.WriteString("</urlset>")
		rec.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(rec, b.String())
		return
	}
	body, ok := s.pages[r.URL.Path]
	if !ok {
		rec.WriteHeader(http.StatusNotFound)
		return
	}
	sum := sha256.Sum256([]byte(body))
	rec.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	rec.Header().Set("Content-Type", "text/html; charset=utf-8")
	if strings.HasSuffix(r.URL.Path, ".md") {
		rec.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	}
	http.ServeContent(rec, r, "", time.Time{}, strings.NewReader(body))
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *site) set(path, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if body == "" {
		delete(s.pages, path)
	} else {
		s.pages[path] = body
	}
}

func (s *site) count(code int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.status[code]
	s.status = map[int]int{}
	return n
}

type env struct {
	docs *docs.Store
	in   *docs.Ingester
	r    *jobs.Runner
	svc  *Service
	emb  *recorder
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool, err := pg.Open(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	local, err := embed.NewLocal(64)
	if err != nil {
		t.Fatal(err)
	}
	emb := &recorder{Embedder: local}
	st, err := docs.NewStore(pool, emb, docs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := docs.NewIngester(st, docs.IngestOptions{PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	fc, err := fetch.New(fetch.Options{AllowHosts: []string{"127.0.0.1"}, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	sy := NewSyncer(NewStore(st), fc, crawl.Options{Delay: -1}, nil)
	r := jobs.NewRunner(jobs.NewStore(st), in, jobs.Options{Poll: 100 * time.Millisecond, Check: 100 * time.Millisecond, Kinds: sy.Kinds()})
	t.Cleanup(r.Close)
	return &env{docs: st, in: in, r: r, svc: NewService(sy, r), emb: emb}
}

func (e *env) wait(t *testing.T, id string) jobs.Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := e.r.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if jobs.Final(j.Status) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %+v", id, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// names returns the sorted file names of conversation conv's ready files.
func (e *env) names(t *testing.T, conv string) []string {
	t.Helper()
	files, err := e.docs.ListFiles(context.Background(), conv)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if f.Status != docs.StatusReady {
			t.Fatalf("file %s is %s: %s", f.FileName, f.Status, f.Error)
		}
		out = append(out, strings.TrimPrefix(f.Source, ""))
	}
	slices.Sort(out)
	return out
}

func TestCrawlThenSyncOnlyWhatChanged(t *testing.T) {
	e := newEnv(t)
	s := newSite(t)
	ctx := context.Background()
	j, src, err := e.svc.Crawl(ctx, "c", s.srv.URL+"/docs/", CrawlOptions{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if j.Kind != JobCrawl || src.Kind != KindSite {
		t.Fatalf("first crawl: job %s, source %+v", j.Kind, src)
	}
	j = e.wait(t, j.ID)
	if j.Status != jobs.Succeeded {
		t.Fatalf("crawl: %+v", j)
	}
	base := s.srv.URL
	want := []string{base + "/docs/", base + "/docs/a", base + "/docs/b", base + "/docs/c", base + "/docs/orphan"}
	if got := e.names(t, "c"); !slices.Equal(got, want) {
		t.Fatalf("files after the crawl:\n%v\nwant\n%v", got, want)
	}
	if c := j.Report.Counts; c["added"] != 5 || j.Report.Skipped["scope"] != 1 {
		t.Fatalf("crawl report: %+v", j.Report)
	}
	e.emb.take()
	s.count(0)

	// Change 2 pages, delete 1, add 1 (the sitemap names it).
	s.set("/docs/b", page("Buoys", "Green buoys mark the starboard side of the channel."))
	s.set("/docs/c", page("Charts", "Charts are now corrected every Monday."))
	s.set("/docs/a", "")
	s.set("/docs/d", page("Depths", "Depths are given in metres below chart datum."))
	src, err = e.svc.Get(ctx, src.ID)
	if err != nil {
		t.Fatal(err)
	}
	j, err = e.svc.Sync(ctx, src, "test")
	if err != nil {
		t.Fatal(err)
	}
	j = e.wait(t, j.ID)
	c := j.Report.Counts
	if j.Status != jobs.Succeeded || c["added"] != 1 || c["updated"] != 2 || c["removed"] != 1 || c["unchanged"] != 2 {
		t.Fatalf("sync report: %+v, job %+v", j.Report, j)
	}
	want = []string{base + "/docs/", base + "/docs/b", base + "/docs/c", base + "/docs/d", base + "/docs/orphan"}
	if got := e.names(t, "c"); !slices.Equal(got, want) {
		t.Fatalf("files after the sync:\n%v\nwant\n%v", got, want)
	}
	// The embedder saw the three new or changed pages only.
	texts := e.emb.take()
	joined := strings.Join(texts, "\n")
	if len(texts) != 3 || !strings.Contains(joined, "Green buoys") || !strings.Contains(joined, "every Monday") || !strings.Contains(joined, "chart datum") {
		t.Fatalf("embedded %d texts: %q", len(texts), texts)
	}
	// Unchanged pages were answered 304.
	if n := s.count(http.StatusNotModified); n != 2 {
		t.Fatalf("%d answers 304, want 2 (the index and the orphan)", n)
	}

	// An unchanged site: no file written, nothing embedded.
	before := e.in.IngestStats()
	j, err = e.svc.Sync(ctx, src, "test")
	if err != nil {
		t.Fatal(err)
	}
	j = e.wait(t, j.ID)
	after := e.in.IngestStats()
	if c := j.Report.Counts; c["unchanged"] != 5 || c["added"]+c["updated"]+c["removed"] != 0 {
		t.Fatalf("unchanged sync: %+v", j.Report)
	}
	if after.Embedded != before.Embedded || after.Chunks != before.Chunks || len(e.emb.take()) != 0 {
		t.Fatalf("an unchanged sync embedded %d texts and stored %d chunks", after.Embedded-before.Embedded, after.Chunks-before.Chunks)
	}
	got, err := e.svc.Get(ctx, src.ID)
	if err != nil || got.LastJobID != j.ID || got.LastSummary.Unchanged != 5 || got.Pages != 5 {
		t.Fatalf("source after syncs: %+v %v", got, err)
	}
}

func TestDeleteSourceKeepsOtherFiles(t *testing.T) {
	e := newEnv(t)
	s := newSite(t)
	ctx := context.Background()
	// A file uploaded before holds the same bytes as one page (a
	// Markdown file: what is stored of an HTML page is its main content):
	// it is the upload's, and stays.
	upload := "# Buoy notes\n\nRed buoys to port, green buoys to starboard.\n"
	s.set("/docs/", page("Manual", `<a href="a">A</a> <a href="b">B</a> <a href="c">C</a> <a href="buoys.md">Buoys</a>`))
	s.set("/docs/buoys.md", upload)
	f, err := e.in.Ingest(ctx, "c", "buoys.md", "text/markdown", []byte(upload))
	if err != nil {
		t.Fatal(err)
	}
	j, src, err := e.svc.Crawl(ctx, "c", s.srv.URL+"/docs/", CrawlOptions{MaxDepth: 1}, "test")
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, j.ID)
	list, err := e.svc.List(ctx, "c")
	if err != nil || len(list) != 1 || list[0].Pages != 6 {
		t.Fatalf("sources: %+v %v", list, err)
	}
	n, err := e.svc.Delete(ctx, list[0])
	if err != nil {
		t.Fatal(err)
	}
	files, _ := e.docs.ListFiles(ctx, "c")
	if n != 5 || len(files) != 1 || files[0].ID != f.ID {
		t.Fatalf("deleted %d files, left %+v", n, files)
	}
	if _, err := e.svc.Get(ctx, src.ID); err == nil {
		t.Fatal("the source is still there")
	}
}

func TestCrawlCancelled(t *testing.T) {
	e := newEnv(t)
	slow := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" || r.URL.Path == "/sitemap.xml" || r.URL.Path == "/llms.txt" {
			http.NotFound(w, r)
			return
		}
		select {
		case <-slow:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, page("Slow", "A slow page."))
	}))
	defer srv.Close()
	defer close(slow)
	ctx := context.Background()
	j, _, err := e.svc.Crawl(ctx, "c", srv.URL+"/", CrawlOptions{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := e.r.Get(ctx, j.ID)
		if got.Status == jobs.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl never started: %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	c, err := e.r.Cancel(ctx, j.ID)
	if err != nil || c.Status != jobs.Cancelled {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	// The crawl lets go of the job: its source records the sync as it
	// stood. Its page answers only when the test ends, so only the cancel
	// stops it; the deadline guards against a hang.
	for {
		src, _ := e.svc.List(ctx, "c")
		if len(src) == 1 && src[0].LastJobID == j.ID {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("the crawl did not stop: %+v", src)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the crawl stopped %s after the cancel", time.Since(start).Round(time.Millisecond))
}

func TestPeriodicSyncStartsOneJobPerSource(t *testing.T) {
	e := newEnv(t)
	s := newSite(t)
	ctx := context.Background()
	j, src, err := e.svc.Crawl(ctx, "c", s.srv.URL+"/docs/", CrawlOptions{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, j.ID)
	// Two replicas schedule at once: the advisory lock lets one start the
	// sync, and the other finds it queued or running.
	other := NewService(e.svc.sy, e.r)
	var wg sync.WaitGroup
	for _, svc := range []*Service{e.svc, other} {
		wg.Go(func() {
			if err := svc.syncDue(ctx, time.Nanosecond); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	page, err := e.r.List(ctx, "c", "", 10, "")
	if err != nil {
		t.Fatal(err)
	}
	syncs := 0
	for _, j := range page.Jobs {
		if j.Kind == JobSync && j.Input.SourceID == src.ID {
			syncs++
			e.wait(t, j.ID)
		}
	}
	if syncs != 1 {
		t.Fatalf("%d sync jobs, want 1: %+v", syncs, page.Jobs)
	}
	// A source synced less than the interval ago is not due.
	if err := e.svc.syncDue(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if page, _ := e.r.List(ctx, "c", "", 10, ""); page.Total != 2 {
		t.Fatalf("%d jobs after a sync that was not due, want 2", page.Total)
	}
}

// TestPrivateSiteHeaders crawls a site that answers only requests with its
// cookie: the source keeps the header, a later sync sends it again, and
// what the source shows of it is its name.
func TestPrivateSiteHeaders(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") != "sid=s3cret" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/wiki/":
			fmt.Fprint(w, page("Wiki", `The team's wiki. <a href="ops">Ops</a>`))
		case "/wiki/ops":
			fmt.Fprint(w, page("Ops", "The pager rotates every Monday at nine."))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	opts := CrawlOptions{Headers: map[string]string{"Cookie": "sid=s3cret"}, DelayMS: 5, Render: "never"}
	j, src, err := e.svc.Crawl(ctx, "c", srv.URL+"/wiki/", opts, "test")
	if err != nil {
		t.Fatal(err)
	}
	if j = e.wait(t, j.ID); j.Status != jobs.Succeeded || j.Report.Counts["added"] != 2 {
		t.Fatalf("crawl: %+v", j)
	}
	got, err := e.svc.Get(ctx, src.ID)
	if err != nil || got.Options.Headers["Cookie"] != "sid=s3cret" || got.Options.DelayMS != 5 || got.Options.Render != "never" {
		t.Fatalf("source %+v %v", got.Options, err)
	}
	if names := got.Options.HeaderNames(); !slices.Equal(names, []string{"Cookie"}) {
		t.Errorf("header names %q", names)
	}
	// The options' JSON, which the tools show, leaves the values out.
	raw, _ := json.Marshal(got.Options)
	if strings.Contains(string(raw), "s3cret") || strings.Contains(string(raw), "headers") {
		t.Errorf("options as JSON: %s", raw)
	}
	j, err = e.svc.Sync(ctx, got, "test")
	if err != nil {
		t.Fatal(err)
	}
	if j = e.wait(t, j.ID); j.Status != jobs.Succeeded || j.Report.Counts["unchanged"] != 2 {
		t.Fatalf("sync: %+v", j)
	}
}

func TestCrawlOptionsChecked(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		opts CrawlOptions
		want string
	}{
		{CrawlOptions{DelayMS: -1}, "delay_ms -1 must be between 0 and 60000"},
		{CrawlOptions{DelayMS: 60001}, "delay_ms 60001 must be between 0 and 60000"},
		{CrawlOptions{Render: "sometimes"}, `render "sometimes" must be never, auto or always`},
		{CrawlOptions{Headers: map[string]string{"Cookie": "a\r\nb"}}, "headers: the value of Cookie holds a line break"},
		{CrawlOptions{Headers: map[string]string{"X-Big": strings.Repeat("x", 9000)}}, "headers: 9005 bytes, more than 8192"},
	} {
		_, _, err := e.svc.Crawl(context.Background(), "c", "https://example.com/", tc.opts, "test")
		if !errors.Is(err, docs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.opts, err, tc.want)
		}
	}
	if list, _ := e.svc.List(context.Background(), "c"); len(list) != 0 {
		t.Errorf("refused options recorded a source: %+v", list)
	}
}
