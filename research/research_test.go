package research

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/fetch"
)

func TestTokens(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"The connections of max_connections", []string{"the", "connection", "of", "max_connections", "max", "connection"}},
		{"--max-time v2.1 pg_hba.conf", []string{"max-time", "max", "time", "v2.1", "v2", "1", "pg_hba.conf", "pg", "hba", "conf"}},
		{"Queries, classes, status, analysis, boxes", []string{"query", "classe", "status", "analysis", "boxe"}},
		{"Café CRÈME end.", []string{"café", "crème", "end"}},
	} {
		var got []string
		tokens(tc.text, func(term string) { got = append(got, term) })
		if !slices.Equal(got, tc.want) {
			t.Errorf("tokens(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
	q := queryTerms("What is the default value of work_mem?")
	if q["work_mem"] != 1 || q["work"] != partWeight || q["default"] != 1 || q["what"] != 0 || q["the"] != 0 {
		t.Errorf("query terms %v", q)
	}
	if q := queryTerms("what is it"); len(q) == 0 {
		t.Error("a query of stop words only has no terms")
	}
}

func TestSplit(t *testing.T) {
	md := "# Manual\n\nIntro sentence one. Intro sentence two.\n\n## Settings\n\n`port` (`integer`)\n\nThe port; 5432 by default. See [the list](https://x/list).\n\n" +
		"`host` (`string`)\n\nThe host name.\n\n### Note\n\nA note.\n\n**Table 1. Limits**\n\n| Item | Limit |\n|---|---|\n" +
		strings.Repeat("| row item | some limit value |\n", 60) + "\n```\ncode line\n```\n\n--- page 3 ---\nPage three text."
	ps := split(md, "", 0)
	find := func(sub string) passage {
		for _, p := range ps {
			if strings.Contains(p.shown(), sub) {
				return p
			}
		}
		t.Fatalf("no passage holds %q: %+v", sub, ps)
		return passage{}
	}
	if p := find("Intro sentence one."); p.heading != "Manual" {
		t.Errorf("intro heading %q", p.heading)
	}
	p := find("5432 by default")
	if p.heading != "Manual > Settings > port (integer)" || strings.Contains(p.text, "`port`") || strings.Contains(p.text, "https://x/list") || !strings.Contains(p.text, "See the list.") {
		t.Errorf("a label's passage: %+v", p)
	}
	if strings.Contains(p.text, "host") {
		t.Errorf("a passage ran past the next label: %q", p.text)
	}
	if p := find("A note."); p.heading != "Manual > Settings > host (string) > Note" && p.heading != "Manual > Settings > Note" {
		t.Errorf("note heading %q", p.heading)
	}
	// A table's later parts show its header, unscored.
	var parts []passage
	for _, p := range ps {
		if strings.Contains(p.shown(), "row item") {
			parts = append(parts, p)
		}
	}
	if len(parts) < 2 || parts[1].context == "" || !strings.HasPrefix(parts[1].shown(), "| Item | Limit |") || strings.Contains(parts[1].text, "| Item |") {
		t.Errorf("table passages %+v", parts)
	}
	if parts[0].heading != "Manual > Settings > Table 1. Limits" {
		t.Errorf("table heading %q", parts[0].heading)
	}
	if p := find("Page three text."); p.heading != "page 3" {
		t.Errorf("PDF page heading %q", p.heading)
	}
	for _, p := range ps {
		if n := len([]rune(p.text)); n > PassageSize {
			t.Errorf("passage of %d characters: %q", n, p.text)
		}
	}
}

// passages makes a set of passages of pages, the texts given by page.
func passages(pages ...[]string) []passage {
	var all []passage
	for i, texts := range pages {
		for j, tx := range texts {
			all = append(all, passage{page: i, ord: j, text: tx})
		}
	}
	return all
}

func TestChoose(t *testing.T) {
	ctx := context.Background()
	// Page 0 holds five matching passages, page 1 one: three of page 0,
	// then page 1's, then the rest of page 0's as no other page has more.
	all := passages(
		[]string{"alpha one", "alpha two", "alpha three", "alpha four", "alpha five"},
		[]string{"alpha elsewhere", "nothing here"},
	)
	best, _ := Ranking{}.rank(ctx, "alpha", all, 6)
	perPage := map[int]int{}
	for _, b := range best {
		perPage[b.page]++
	}
	if len(best) != 6 || perPage[1] != 1 || perPage[0] != 5 {
		t.Errorf("chose %d: %v", len(best), perPage)
	}
	best, _ = Ranking{}.rank(ctx, "alpha", all, 4)
	perPage = map[int]int{}
	for _, b := range best {
		perPage[b.page]++
	}
	if perPage[0] != 3 || perPage[1] != 1 {
		t.Errorf("with others to give, one page gave %d", perPage[0])
	}
	// The same text on two sites is one passage.
	syndicated := "Quillfeather 3.2 makes the session limit adjustable at run time without a restart."
	all = passages([]string{syndicated}, []string{"Breaking: " + syndicated + " Read more."}, []string{"the session limit is 250"})
	best, _ = Ranking{}.rank(ctx, "session limit", all, 5)
	if len(best) != 2 {
		t.Errorf("near-duplicates kept: %d passages", len(best))
	}
	if best[0].score != 1 {
		t.Errorf("best score %v, want 1", best[0].score)
	}
}

// meaning is an embedder whose vectors carry "meaning": texts about
// dwellings point one way, the rest another.
type meaning struct{ fail bool }

func (meaning) Model() string   { return "test-meaning" }
func (meaning) Dimensions() int { return 2 }
func (m meaning) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if m.fail {
		return nil, errors.New("embedder down")
	}
	out := make([][]float32, len(texts))
	for i, tx := range texts {
		if strings.Contains(tx, "house") || strings.Contains(tx, "home") || strings.Contains(tx, "dwelling") {
			out[i] = []float32{1, 0}
		} else {
			out[i] = []float32{0, 1}
		}
	}
	return out, nil
}

// lexical is the same embedder saying it only matches words.
type lexical struct{ meaning }

func (lexical) Lexical() bool { return true }

type vectors struct{ e embed.Embedder }

func (v vectors) Embedder() embed.Embedder { return v.e }
func (v vectors) VectorWeight() float64    { return 1 }

func TestFuseWithMeaning(t *testing.T) {
	ctx := context.Background()
	all := passages([]string{"a house by the sea", "the sea is blue and wide", "sea birds"}, []string{"a home on the coast, a dwelling of stone"})
	q := "sea house"
	plain, _ := Ranking{}.rank(ctx, q, all, 5)
	if slices.ContainsFunc(plain, func(r ranked) bool { return r.page == 1 }) {
		t.Fatal("BM25 alone found the passage sharing no word")
	}
	fused, note := Ranking{Vectors: vectors{meaning{}}}.rank(ctx, q, all, 5)
	if note != "" || !slices.ContainsFunc(fused, func(r ranked) bool { return r.page == 1 }) {
		t.Errorf("fused ranking %v (%s) lacks the paraphrase", fused, note)
	}
	lex, _ := Ranking{Vectors: vectors{lexical{}}}.rank(ctx, q, all, 5)
	if len(lex) != len(plain) {
		t.Error("a lexical embedder changed the ranking")
	}
	failed, note := Ranking{Vectors: vectors{meaning{fail: true}}}.rank(ctx, q, all, 5)
	if !strings.Contains(note, "embedder failed") || len(failed) != len(plain) {
		t.Errorf("a failing embedder: %d passages, note %q", len(failed), note)
	}
}

// reranker scores a text by its length, or fails.
type reranker struct{ fail bool }

func (r reranker) Rerank(_ context.Context, _ string, texts []string) ([]float64, error) {
	if r.fail {
		return nil, errors.New("rerank: no answer within 2s")
	}
	out := make([]float64, len(texts))
	for i, tx := range texts {
		out[i] = float64(len(tx)) / 100
	}
	return out, nil
}

func TestRerankOrder(t *testing.T) {
	ctx := context.Background()
	all := passages([]string{"port", "the port number, which is 5432 unless set otherwise", "port port port"})
	best, note := Ranking{Reranker: reranker{}}.rank(ctx, "port", all, 3)
	if note != "" || best[0].ord != 1 || best[0].score != 0.51 {
		t.Errorf("reranked %+v %q", best, note)
	}
	plain, _ := Ranking{}.rank(ctx, "port", all, 3)
	failed, note := Ranking{Reranker: reranker{fail: true}}.rank(ctx, "port", all, 3)
	if !strings.Contains(note, "reranker failed") || failed[0].ord != plain[0].ord {
		t.Errorf("a failing reranker: %+v %q", failed, note)
	}
}

// pages is a Pages of documents by URL; an URL absent hangs until ctx ends.
type pages map[string]func() (*fetch.Document, error)

func (p pages) Get(ctx context.Context, u string) (*fetch.Document, error) {
	if f, ok := p[u]; ok {
		return f()
	}
	<-ctx.Done()
	return nil, fmt.Errorf("fetch %s: %w", u, ctx.Err())
}

func TestRead(t *testing.T) {
	doc := &fetch.Document{URL: "https://a.example/1", FinalURL: "https://a.example/1", Title: "One",
		Content: "# One\n\nThe answer is forty-two, as the guide says."}
	r := New(pages{
		"https://a.example/1": func() (*fetch.Document, error) { return doc, nil },
		"https://a.example/404": func() (*fetch.Document, error) {
			return nil, &fetch.HTTPStatusError{Status: http.StatusNotFound, URL: "https://a.example/404"}
		},
		"https://a.example/panic": func() (*fetch.Document, error) { panic("a parser blew up") },
		"https://a.example/big": func() (*fetch.Document, error) {
			return nil, fmt.Errorf("fetch x: %w: the body exceeds the limit of 10485760 bytes", fetch.ErrTooLarge)
		},
	}, Options{Timeout: 500 * time.Millisecond})
	sources := []Source{{URL: "https://a.example/1"}, {URL: "https://a.example/hang"}, {URL: "https://a.example/404"},
		{URL: "https://a.example/panic"}, {URL: "https://a.example/big"}}
	start := time.Now()
	ans, err := r.Read(context.Background(), "what is the answer", sources, 5)
	if err != nil {
		t.Fatal(err)
	}
	// Bounded by what the hanging page would take without the time-out:
	// forever; a minute tells it.
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("Read took %v", took)
	}
	want := []string{"", "time-out", "404 Not Found", "unreadable content", "too large (over 10485760 bytes)"}
	for i, p := range ans.Pages {
		if p.Reason != want[i] || (want[i] == "") != (p.Status == StatusRead) {
			t.Errorf("page %s: %s %q, want %q", p.URL, p.Status, p.Reason, want[i])
		}
	}
	if ans.Pages[1].Took < 400*time.Millisecond {
		t.Errorf("the page that timed out took %v", ans.Pages[1].Took)
	}
	if len(ans.Passages) != 1 || ans.Passages[0].Result != 1 || ans.Passages[0].Heading != "One" || ans.Passages[0].Title != "One" {
		t.Errorf("passages %+v", ans.Passages)
	}
	// A cancelled call fails.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Read(ctx, "q", sources, 5); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Read: %v", err)
	}
}

// BenchmarkPassages measures what a call with read costs once its pages are
// downloaded: eight pages of about 100 KB (manual pages of fetch's fixtures
// put together) converted to their main content, cut into passages and
// ranked, on one goroutine.
//
//	go test -run '^$' -bench Passages -cpu 1 ./research
func BenchmarkPassages(b *testing.B) {
	var docs []*fetch.Resource
	for i := range 8 {
		name := []string{"zlib-how.html", "libffi-simple-example.html"}[i%2]
		page, err := os.ReadFile("../fetch/testdata/" + name)
		if err != nil {
			b.Fatal(err)
		}
		body := string(page)
		start, end := strings.Index(body, "<body"), strings.LastIndex(body, "</body>")
		inner := body[strings.Index(body[start:], ">")+start+1 : end]
		var sb strings.Builder
		sb.WriteString(body[:start] + "<body>")
		for k := 0; sb.Len() < 100<<10; k++ {
			fmt.Fprintf(&sb, "<h2>Part %d</h2>%s", k, inner)
		}
		sb.WriteString("</body></html>")
		u := fmt.Sprintf("https://docs.example/%d/%s", i, name)
		docs = append(docs, &fetch.Resource{URL: u, FinalURL: u, ContentType: extract.MIMEHTML, DeclaredType: "text/html", Body: []byte(sb.String())})
	}
	c, err := fetch.New(fetch.Options{})
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	for _, d := range docs {
		total += len(d.Body)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	ctx := context.Background()
	// CPU time, not the wall clock's, is what the pages cost: a loaded
	// machine stretches the second, not the first.
	before := cpuTime()
	defer func() { b.ReportMetric(float64((cpuTime()-before).Microseconds())/1000/float64(b.N), "cpu-ms/op") }()
	for b.Loop() {
		var all []passage
		for i, res := range docs {
			d, err := c.Convert(ctx, res)
			if err != nil {
				b.Fatal(err)
			}
			all = append(all, split(d.Content, d.Title, i)...)
		}
		if best, _ := (Ranking{}).rank(ctx, "how do I compress a stream with deflate and flush it", all, 8); len(best) == 0 {
			b.Fatal("no passage")
		}
	}
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestRerankDepth: passages the reranker did not see never pass the ones
// it scored, even when the per-page limit leaves room for them.
func TestRerankDepth(t *testing.T) {
	var first, second []string
	for i := range RerankDepth + 5 {
		first = append(first, fmt.Sprintf("port number %d", i))
	}
	for i := range 5 {
		second = append(second, fmt.Sprintf("port %d and other words that dilute it here", i))
	}
	all := passages(first, second)
	best, note := Ranking{Reranker: low{}}.rank(context.Background(), "port number", all, 8)
	if note != "" {
		t.Fatal(note)
	}
	for _, b := range best {
		if b.score != 0.02 {
			t.Errorf("a passage scored %v by the fused ranking beside the reranker's 0.02: %q", b.score, b.text)
		}
	}
}

// low is a reranker that scores every text 0.02.
type low struct{}

func (low) Rerank(_ context.Context, _ string, texts []string) ([]float64, error) {
	out := make([]float64, len(texts))
	for i := range out {
		out[i] = 0.02
	}
	return out, nil
}

// order is Pages that records the order pages are asked for.
type order struct {
	mu   sync.Mutex
	urls []string
}

func (o *order) Get(_ context.Context, u string) (*fetch.Document, error) {
	o.mu.Lock()
	o.urls = append(o.urls, u)
	o.mu.Unlock()
	return &fetch.Document{URL: u, FinalURL: u, Content: "text"}, nil
}

// TestReadHostOrder: a host's pages are read in the order of the results.
func TestReadHostOrder(t *testing.T) {
	o := &order{}
	var sources []Source
	for i := range 8 {
		sources = append(sources, Source{URL: fmt.Sprintf("https://one.example/%d", i)})
	}
	if _, err := New(o, Options{PerHost: 1}).Read(context.Background(), "text", sources, 3); err != nil {
		t.Fatal(err)
	}
	for i, u := range o.urls {
		if u != sources[i].URL {
			t.Fatalf("read in the order %v", o.urls)
		}
	}
}
