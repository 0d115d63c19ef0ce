package ui_test

import (
	"context"

	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/internal/oidctest"
	"github.com/mcpsearch/mcpsearch/sources"
)

// site is a small site on loopback: a guide under /docs/ with a
// changelog and a link out of it, a file that reads as a broken PDF the
// first time it is fetched and as text afterwards, and a missing one.
func site(t *testing.T) *httptest.Server {
	t.Helper()
	var notes atomic.Int32
	pages := map[string]string{
		"/docs/":          `<html><head><title>Harbour guide</title></head><body><h1>Harbour guide</h1><p>Start with the rules of the harbour.</p><a href="rules">Rules</a> <a href="berths">Berths</a> <a href="changelog">Changelog</a> <a href="/blog/news">News</a></body></html>`,
		"/docs/rules":     `<html><head><title>Rules</title></head><body><h1>Rules</h1><p>Vessels give way to the pilot boat at the breakwater.</p></body></html>`,
		"/docs/berths":    `<html><head><title>Berths</title></head><body><h1>Berths</h1><p>Berth 4 takes ships up to 200 metres.</p></body></html>`,
		"/docs/changelog": `<html><body><h1>Changelog</h1><p>Version 2 of the guide.</p></body></html>`,
		"/blog/news":      `<html><body><h1>News</h1><p>Not part of the guide.</p></body></html>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/files/notes.txt" {
			if notes.Add(1) == 1 {
				w.Header().Set("Content-Type", "application/pdf")
				io.WriteString(w, "%PDF-1.4\nthis is not a PDF at all\n")
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "Notes of the harbour master: the dredging starts in May.")
			return
		}
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		http.ServeContent(w, r, "", time.Unix(1700000000, 0), strings.NewReader(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// waitJobPage waits on a job's page until the job has ended, and returns
// its outcome in words.
func (b *browser) waitJobPage(t *testing.T) string {
	t.Helper()
	b.do(t, chromedp.WaitVisible(chromedp.CSS(".card[data-job]")))
	b.waitFor(t, "the job ends", `document.querySelector(".card[data-job]")?.dataset.final === "true"`, 60*time.Second)
	return b.text(t, "[data-status]")
}

// TestBrowserSitesAndFiles manages a conversation's web documents from the
// page alone: a site crawled with the form's options (which reach the
// job), its source's page, a sync, a URL that fails and is retried, a URL
// that is missing (a failed job shown as such), the source deleted; each
// change in the audit under the key.
func TestBrowserSitesAndFiles(t *testing.T) {
	chromium(t)
	s := newStackWith(t, stackOptions{keys: keysFile, web: true})
	web := site(t)
	b := newBrowser(t, s.base)
	b.open(t, "/ui/signin")
	b.do(t, chromedp.SendKeys(chromedp.ID("key"), adminKey), chromedp.Submit(chromedp.ID("key")), chromedp.WaitVisible(chromedp.CSS(".who")))

	// The crawl form: its options show when a crawl is asked for.
	b.open(t, "/ui/add?conversation=c-site")
	if hidden, _ := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.querySelector("#crawl-options").hidden`)); !hidden {
		t.Fatal("the crawl's options show before a crawl is asked for")
	}
	b.do(t, chromedp.SendKeys(chromedp.ID("url"), web.URL+"/docs/"), chromedp.Click(chromedp.ID("crawl")), chromedp.WaitVisible(chromedp.ID("max_pages")),
		chromedp.SendKeys(chromedp.ID("max_pages"), "5"), chromedp.SendKeys(chromedp.ID("max_depth"), "2"),
		chromedp.SendKeys(chromedp.ID("include"), "/docs/**"), chromedp.SendKeys(chromedp.ID("exclude"), "**/changelog*"))
	b.shoot(t, "add")
	b.do(t, chromedp.Click(chromedp.CSS("#url-form button[type=submit]")))
	b.waitFor(t, "the crawl ends", `document.querySelector("[data-jobs] li[data-final=true]") !== null`, 60*time.Second)
	if st := b.text(t, "[data-jobs] li [data-status]"); st != "succeeded" {
		t.Fatalf("the crawl's card says %q", st)
	}
	if pages := b.text(t, "[data-jobs] li [data-pages]"); !strings.Contains(pages, "3 stored") {
		t.Fatalf("the crawl's card says %q", pages)
	}
	// The form's options reached the job: they are its source's.
	list, err := sources.NewStore(s.store).List(context.Background(), "c-site")
	if err != nil || len(list) != 1 {
		t.Fatalf("sources: %+v %v", list, err)
	}
	if o := list[0].Options; o.MaxPages != 5 || o.MaxDepth != 2 || !slices.Equal(o.Include, []string{"/docs/**"}) || !slices.Equal(o.Exclude, []string{"**/changelog*"}) {
		t.Fatalf("the source's options: %+v", o)
	}
	b.open(t, "/ui/conversations/c-site")
	if files := b.text(t, "main"); strings.Contains(files, "changelog") || strings.Contains(files, "news") || !strings.Contains(files, "berths.md") {
		t.Fatalf("the crawl stored: %q", files)
	}

	// The source's page: its options, what deleting it removes, its
	// syncs; Sync now starts one.
	b.do(t, chromedp.Click(chromedp.CSS(`a[href^="/ui/sources/"]`)), chromedp.WaitVisible(chromedp.CSS("#syncs-h")))
	if facts := b.text(t, "main"); !strings.Contains(facts, "at most 5 pages") || !strings.Contains(facts, "only /docs/**") ||
		!strings.Contains(facts, "not **/changelog*") || !strings.Contains(facts, "3 pages in 3 files") {
		t.Fatalf("the source's page: %q", facts)
	}
	b.do(t, chromedp.Click(chromedp.CSS(`form[action$="/sync"] button`)))
	if st := b.waitJobPage(t); st != "succeeded" {
		t.Fatalf("the sync: %q", st)
	}
	if pages := b.text(t, "[data-pages]"); !strings.Contains(pages, "3 unchanged") {
		t.Fatalf("the sync's page: %q", pages)
	}
	b.open(t, "/ui/sources/"+list[0].ID)
	b.waitFor(t, "two syncs listed", `document.querySelectorAll("#syncs-h + .scroll tbody tr").length === 2`, 10*time.Second)
	b.shoot(t, "source")

	// A URL whose file cannot be read fails; retried, it is read.
	addURL := func(u string) {
		t.Helper()
		b.open(t, "/ui/add?conversation=c-site")
		b.do(t, chromedp.SendKeys(chromedp.ID("url"), u), chromedp.Click(chromedp.CSS("#url-form button[type=submit]")))
		b.waitFor(t, "the job ends", `document.querySelector("[data-jobs] li[data-final=true]") !== null`, 60*time.Second)
	}
	addURL(web.URL + "/files/notes.txt")
	if st := b.text(t, "[data-jobs] li [data-status]"); st != "failed" {
		t.Fatalf("a URL whose file fails: %q", st)
	}
	b.open(t, "/ui/conversations/c-site?status=failed")
	b.do(t, chromedp.Click(chromedp.CSS(`button[aria-label="Retry notes.txt"]`)))
	if st := b.waitJobPage(t); st != "succeeded" {
		t.Fatalf("the retry: %q", st)
	}
	b.open(t, "/ui/conversations/c-site?prefix=notes")
	n, _ := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll("section[aria-labelledby=files-h] table.rows tbody tr").length`))
	if row := b.text(t, "table.rows tbody"); !strings.Contains(row, "ready") || n != 1 {
		t.Fatalf("after the retry, %d files: %q", n, row)
	}

	// A missing URL: a failed job, shown as one, its bar in the failed
	// colour rather than a full bar of the running one.
	addURL(web.URL + "/files/missing.pdf")
	b.do(t, chromedp.Click(chromedp.CSS("[data-jobs] li .name a")), chromedp.WaitVisible(chromedp.CSS(".card[data-job]")))
	if st := b.waitJobPage(t); st != "failed" {
		t.Fatalf("a missing URL: %q", st)
	}
	class, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector(".card[data-job] progress").className`))
	if err != nil || class != "failed" {
		t.Fatalf("the failed job's bar: class %q (%v)", class, err)
	}
	if why := b.text(t, "[data-error]"); !strings.Contains(why, "404") {
		t.Fatalf("why the job failed: %q", why)
	}
	b.shoot(t, "job-failed")

	// Deleting the source removes its files, and says so.
	b.open(t, "/ui/sources/"+list[0].ID)
	b.do(t, chromedp.Click(chromedp.CSS(`form[action$="/delete"] button`)), chromedp.WaitVisible(chromedp.CSS(".notice")))
	if n := b.text(t, ".notice"); !strings.Contains(n, "Deleted the source "+web.URL+"/docs/ and 3 files") {
		t.Fatalf("after deleting the source: %q", n)
	}

	s.waitAudit(t, []string{"sign_in admin ok -", "crawl admin ok c-site", "sync_source admin ok c-site", "add_url admin ok c-site",
		"retry_file admin ok c-site", "add_url admin ok c-site", "delete_source admin ok c-site"})
	b.open(t, "/ui/audit?transport=ui")
	b.shoot(t, "audit")
	if errs := b.takeConsoleErrors(); len(errs) > 0 {
		t.Fatalf("the pages wrote errors to the console:\n%s", strings.Join(errs, "\n"))
	}
}

// TestBrowserSignInThroughProvider signs a person in to the page through a
// real OpenID provider (zitadel/oidc's, on another site than the page),
// as Chromium does it: the button, the provider's redirects, the page's
// callback; she sees what her token grants, her changes are audited under
// her name, and signing out ends her session.
func TestBrowserSignInThroughProvider(t *testing.T) {
	chromium(t)
	op := oidctest.New(t, oidctest.Options{})
	op.AddUser("alice", []string{"c-tenant"})
	op.SignInAs("alice")
	s := newStackWith(t, stackOptions{keys: keysFile, op: op})
	s.add(t, "c-tenant", "tenant-notes.txt", "text/plain", []byte("Notes of the tenant about the quay cranes."))
	s.add(t, "c-main", "handbook.md", "text/markdown", []byte("# Handbook\n\nVessels report to the harbour master."))
	b := newBrowser(t, s.base)

	b.open(t, "/ui/")
	b.shoot(t, "signin")
	b.do(t, chromedp.Click(chromedp.ID("provider")), chromedp.WaitVisible(chromedp.CSS("table.rows")))
	if who := b.text(t, ".who"); !strings.Contains(who, "Signed in as alice") {
		t.Fatalf("signed in as %q", who)
	}
	if convs := b.text(t, "table.rows tbody"); !strings.Contains(convs, "c-tenant") || strings.Contains(convs, "c-main") {
		t.Fatalf("alice sees %q", convs)
	}
	for _, path := range []string{"/authorize", "/oauth/token", "/keys"} {
		if op.Hits(path) == 0 {
			t.Errorf("the sign-in never reached the provider's %s", path)
		}
	}
	b.open(t, "/ui/conversations/c-tenant")
	b.do(t, chromedp.Click(chromedp.CSS(`button[aria-label="Delete tenant-notes.txt"]`)), chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.do(t, chromedp.Click(chromedp.CSS(".who button")), chromedp.WaitVisible(chromedp.ID("provider")))
	s.waitAudit(t, []string{"sign_in alice ok -", "delete_document alice ok c-tenant", "sign_out alice ok -"})
	if rows := strings.Join(s.auditRows(t), "\n"); strings.Contains(rows, pageClientSecret) {
		t.Fatal("the audit holds the client's secret")
	}
	if errs := b.takeConsoleErrors(); len(errs) > 0 {
		t.Fatalf("the pages wrote errors to the console:\n%s", strings.Join(errs, "\n"))
	}
}

// TestBrowserSignOutOnEveryReplica: a session made on one replica works on
// another; signed out on the first, a copy of its cookie is refused by the
// second on the very next request.
func TestBrowserSignOutOnEveryReplica(t *testing.T) {
	chromium(t)
	a := newStack(t, keysFile)
	other := a.replica(t)
	b := newBrowser(t, a.base)
	b.open(t, "/ui/signin")
	b.do(t, chromedp.SendKeys(chromedp.ID("key"), adminKey), chromedp.Submit(chromedp.ID("key")), chromedp.WaitVisible(chromedp.CSS(".who")))
	client, cookies := b.client(t)
	on := func(st *stack) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, st.base+"/ui/conversations", nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := on(other); code != http.StatusOK {
		t.Fatalf("the session on the other replica: %d", code)
	}
	b.do(t, chromedp.Click(chromedp.CSS(".who button")), chromedp.WaitVisible(chromedp.ID("key")))
	signedOut := time.Now()
	// The sign-out was committed before its answer: the other replica's
	// next request sees it.
	if code := on(other); code != http.StatusSeeOther {
		t.Fatalf("the copied cookie on the other replica after sign-out: %d, want 303 to sign in", code)
	}
	if code := on(a); code != http.StatusSeeOther {
		t.Fatalf("the copied cookie on the first replica after sign-out: %d", code)
	}
	t.Logf("refused by the other replica %s after the sign-out's answer", time.Since(signedOut))
}

// TestBrowserPlaygroundOwnBudget: an agent spending its search_docs budget
// leaves the page's playground searching, with a budget of its own whose
// end is said in words; the threshold and scores are explained.
func TestBrowserPlaygroundOwnBudget(t *testing.T) {
	chromium(t)
	s := newStackWith(t, stackOptions{keys: keysFile, tweak: func(c *config.Config) {
		c.RateLimits["search_docs"] = config.RateLimit{PerMinute: 1, Burst: 2}
		c.UISearch = config.RateLimit{PerMinute: 1, Burst: 3}
	}})
	s.add(t, "c-main", "handbook.md", "text/markdown", []byte("# Handbook\n\nVessels report to the harbour master on arrival.\n\n## Berths\n\nBerth 4 takes ships up to 200 metres."))
	agent := func() int {
		req, _ := http.NewRequest(http.MethodPost, s.base+"/mcp/tools/search_docs", strings.NewReader(`{"conversation_id":"c-main","query":"berths"}`))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var codes []int
	for range 3 {
		codes = append(codes, agent())
	}
	if !slices.Equal(codes, []int{200, 200, 429}) {
		t.Fatalf("the agent's searches: %v, want its burst of 2 then 429", codes)
	}

	b := newBrowser(t, s.base)
	b.open(t, "/ui/signin")
	b.do(t, chromedp.SendKeys(chromedp.ID("key"), adminKey), chromedp.Submit(chromedp.ID("key")), chromedp.WaitVisible(chromedp.CSS(".who")))
	for i, q := range []string{"berths", "harbour master", "ships up to 200 metres"} {
		b.open(t, "/ui/search?conversation=c-main&q="+url.QueryEscape(q))
		if n, _ := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll(".hit").length`)); n == 0 {
			t.Fatalf("playground search %d, after the agent's budget was spent: %q", i+1, b.text(t, "main"))
		}
	}
	if help := b.text(t, "#threshold-help"); !strings.Contains(help, "least similarity") || !strings.Contains(help, "default") {
		t.Fatalf("the threshold is not explained: %q", help)
	}
	if help := b.text(t, "#results-h + p"); !strings.Contains(help, "Score") || !strings.Contains(help, "Similarity") {
		t.Fatalf("the scores are not explained: %q", help)
	}
	b.shoot(t, "search")
	b.open(t, "/ui/search?conversation=c-main&q=arrival")
	if msg := b.text(t, ".alert"); !strings.Contains(msg, "playground's limit (MCP_ui_search_per_minute) is spent") {
		t.Fatalf("the playground past its own budget says %q", msg)
	}
	s.waitAudit(t, []string{"search_docs admin ok c-main", "search_docs admin ok c-main", "search_docs admin ok c-main", "search_docs admin RATE_LIMITED c-main"})
	var rest int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_mcp_tool_calls WHERE transport = 'rest' AND error_code = 'RATE_LIMITED'`).Scan(&rest); err != nil || rest != 1 {
		t.Fatalf("the agent's refusals audited: %d %v", rest, err)
	}
}
