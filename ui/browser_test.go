package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
	"github.com/mcpsearch/mcpsearch/jobs"
)

// browser is a headless Chromium driven over the DevTools protocol, with
// the console errors of its pages collected and its dialogs accepted.
type browser struct {
	ctx  context.Context
	base string
	// shots is where screenshots go.
	shots string

	mu     sync.Mutex
	errors []string
}

// chromium finds the browser: Debian's chromium, or another Chrome.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("MCPSEARCH_REQUIRE_BROWSER") == "1" {
		t.Fatal("MCPSEARCH_REQUIRE_BROWSER=1 but no chromium is installed (Debian: apt-get install chromium)")
	}
	t.Skip("the web page's browser test needs Chromium (Debian: apt-get install chromium); set MCPSEARCH_REQUIRE_BROWSER=1 to make its absence a failure")
	return ""
}

func newBrowser(t *testing.T, base string) *browser {
	path := chromium(t)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Without these Chromium opens connections of its own, which this
		// machine's network refuses.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	ctx, cancelRun := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelRun)
	b := &browser{ctx: ctx, base: base, shots: os.Getenv("MCPSEARCH_UI_SCREENSHOTS")}
	if b.shots == "" {
		b.shots = t.TempDir()
	} else if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, fmt.Sprintf("%s (%s)", m.Text, m.URL))
				b.mu.Unlock()
			}
		}
	}()
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

func (b *browser) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// open navigates to path and waits for its heading.
func (b *browser) open(t *testing.T, path string) {
	t.Helper()
	b.do(t, chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS("h1")))
}

// text is the text of the first element sel finds.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// waitFor waits until the JavaScript expression is true.
func (b *browser) waitFor(t *testing.T, what, expr string, limit time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(limit), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		body, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("%s: %v\npage: %s", what, err, body)
	}
}

// shoot saves a screenshot of the whole page at 1280×800 and at 390 pixels
// wide, as NAME-1280.png and NAME-390.png.
func (b *browser) shoot(t *testing.T, name string) {
	t.Helper()
	for _, w := range []struct {
		width, height int64
	}{{1280, 800}, {390, 844}} {
		b.do(t, chromedp.EmulateViewport(w.width, w.height))
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.shots, fmt.Sprintf("%s-%d.png", name, w.width)), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b.do(t, chromedp.EmulateViewport(1280, 800))
}

// client is an HTTP client carrying the browser's cookies for the page.
func (b *browser) client(t *testing.T) (*http.Client, []*http.Cookie) {
	t.Helper()
	res, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{b.base + "/ui/"}})
	if err != nil {
		t.Fatal(err)
	}
	var cookies []*http.Cookie
	for _, c := range res.Cookies {
		cookies = append(cookies, &http.Cookie{Name: c.Name, Value: c.Value})
	}
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, cookies
}

// takeConsoleErrors returns the console errors so far, and forgets them.
func (b *browser) takeConsoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := b.errors
	b.errors = nil
	return errs
}

// reportPDF is a report of two pages; the second holds the passage
// searched for.
func reportPDF() []byte {
	filler := func(topic string, n int) []string {
		lines := make([]string, n)
		for i := range lines {
			lines[i] = fmt.Sprintf("Line %d on %s: the quays, berths and cranes were kept in good order all year.", i+1, topic)
		}
		return lines
	}
	page2 := append(filler("maintenance", 10), "Pilotage fees: the harbour pilots charge 412 kroner per transit of the inner channel.")
	return pdftest.Pages(
		append([]string{"Annual report of the harbour authority"}, filler("the year", 20)...),
		append(page2, filler("dredging", 10)...),
	)
}

// TestBrowser drives the web page in Chromium as its users do: sign in,
// upload a PDF and follow its job to the end, search and open a passage,
// delete the file, cancel a running job, sign in with a key limited to one
// conversation; with the CSRF token, the Content-Security-Policy and the
// console checked, and a screenshot of every page.
func TestBrowser(t *testing.T) {
	chromium(t)
	s := newStack(t, keysFile)
	s.add(t, "c-main", "handbook.md", "text/markdown", []byte("# Handbook\n\nVessels report to the harbour master on arrival.\n\n## Berths\n\nBerth 4 takes ships up to 200 metres."))
	s.add(t, "c-tenant", "tenant-notes.txt", "text/plain", []byte("Notes of the tenant about the quay cranes."))
	s.add(t, "c-other", "other.txt", "text/plain", []byte("Another tenant's notes about ferries."))
	// A PDF whose bytes are no PDF: it fails, with the reason.
	_, _ = s.ingest.Ingest(context.Background(), "c-main", "broken.pdf", "application/pdf", []byte("%PDF-1.4\nthis is not a PDF at all\n"))

	// The security headers, on every page, for anyone.
	resp, err := http.Get(s.http.URL + "/ui/signin")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("security headers: CSP %q, X-Frame-Options %q", csp, resp.Header.Get("X-Frame-Options"))
	}

	b := newBrowser(t, s.http.URL)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.pdf")
	slow := filepath.Join(dir, "slow-notes.txt")
	if err := os.WriteFile(report, reportPDF(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(slow, []byte("Minutes of the board, "+slowMarker+", taken slowly."), 0o644); err != nil {
		t.Fatal(err)
	}

	// Signing in: the page sends a caller without a session to sign in.
	b.open(t, "/ui/")
	if loc, _ := chromedp.Run(b.ctx, chromedp.Location()); !strings.Contains(loc, "/ui/signin") {
		t.Fatalf("without a session the page went to %s, not the sign-in form", loc)
	}
	b.shoot(t, "signin")
	b.do(t, chromedp.SendKeys(chromedp.ID("key"), "not-a-key-of-this-server"), chromedp.Submit(chromedp.ID("key")), chromedp.WaitVisible(chromedp.CSS(".alert")))
	if msg := b.text(t, ".alert"); !strings.Contains(msg, "does not accept that key") {
		t.Fatalf("wrong key: %q", msg)
	}
	// The refusal is a 401, which the browser notes in the console: that
	// note, and no other, is expected so far.
	if errs := b.takeConsoleErrors(); len(errs) != 1 || !strings.Contains(errs[0], "401") || !strings.Contains(errs[0], "/ui/signin") {
		t.Fatalf("console after a wrong key: %q", errs)
	}
	b.do(t, chromedp.SendKeys(chromedp.ID("key"), adminKey), chromedp.Submit(chromedp.ID("key")), chromedp.WaitVisible(chromedp.CSS("table.rows")))
	if who := b.text(t, ".who"); !strings.Contains(who, "admin") {
		t.Fatalf("signed in as %q", who)
	}
	b.shoot(t, "conversations")

	// Upload a PDF by the file picker, and follow its job to the end.
	b.open(t, "/ui/add?conversation=c-main")
	b.do(t, chromedp.SetUploadFiles(chromedp.ID("file-input"), []string{report}))
	b.waitFor(t, "the upload's job succeeds", `document.querySelector("[data-jobs] li[data-final=true] [data-status]")?.textContent === "succeeded"`, 30*time.Second)
	b.shoot(t, "add")
	b.open(t, "/ui/conversations/c-main")
	row := b.text(t, "tbody tr:first-child")
	if !strings.Contains(row, "report.pdf") || !strings.Contains(row, "ready") {
		t.Fatalf("the uploaded file is not ready on the conversation's page: %q", row)
	}
	if failed := b.text(t, "main"); !strings.Contains(failed, "broken.pdf") || !strings.Contains(failed, "failed") {
		t.Fatalf("the failed file and its reason are not shown: %q", failed)
	}
	b.shoot(t, "conversation")

	// Search as an agent would, and open the passage found.
	b.open(t, "/ui/search?conversation=c-main&q="+url.QueryEscape("harbour pilots kroner transit"))
	b.waitFor(t, "a search result", `document.querySelector(".hit") !== null`, 10*time.Second)
	cite := b.text(t, ".hit .cite")
	if !strings.Contains(cite, "report.pdf") || !strings.Contains(cite, "page 2") {
		t.Fatalf("the first result's citation is %q, want report.pdf, page 2", cite)
	}
	if js := b.text(t, "pre.json"); !strings.Contains(js, `"search_docs"`) {
		t.Fatalf("the call's JSON is not shown: %q", js)
	}
	b.shoot(t, "search")
	b.do(t, chromedp.Click(chromedp.CSS(".hit a[href^='/ui/chunks/']")), chromedp.WaitVisible(chromedp.CSS(".passage")))
	if hit := b.text(t, ".passage mark"); !strings.Contains(hit, "412 kroner") {
		t.Fatalf("the opened chunk marks %q", hit)
	}
	b.shoot(t, "chunk")

	// The file's own page: its text, a page at a time, and its chunks
	// with their places.
	b.open(t, "/ui/conversations/c-main")
	b.do(t, chromedp.Click(chromedp.CSS(`a.name[href^="/ui/files/"]`)), chromedp.WaitVisible(chromedp.CSS(".passage")))
	if text := b.text(t, ".passage"); !strings.Contains(text, "Pilotage fees: the harbour pilots charge 412 kroner") {
		t.Fatalf("the file's text page shows: %q", text)
	}
	b.shoot(t, "file")
	b.do(t, chromedp.Click(chromedp.CSS(`.tabs a[href$="view=chunks"]`)), chromedp.WaitVisible(chromedp.CSS("ol.chunks")))
	if chunks := b.text(t, "ol.chunks"); !strings.Contains(chunks, "page 2") || !strings.Contains(chunks, "characters ") {
		t.Fatalf("the file's chunks: %q", chunks)
	}
	b.shoot(t, "file-chunks")

	// Delete the file.
	b.open(t, "/ui/conversations/c-main")
	b.do(t, chromedp.Click(chromedp.CSS(`button[aria-label="Delete report.pdf"]`)), chromedp.WaitVisible(chromedp.CSS(".notice")))
	if main := b.text(t, "main"); !strings.Contains(main, "Deleted report.pdf") || strings.Contains(strings.ReplaceAll(main, "Deleted report.pdf", ""), "report.pdf") {
		t.Fatalf("after deletion the page shows: %q", main)
	}

	// A job that runs until it is cancelled, cancelled from the jobs page.
	b.open(t, "/ui/add?conversation=c-main")
	b.do(t, chromedp.SetUploadFiles(chromedp.ID("file-input"), []string{slow}))
	b.waitFor(t, "the slow job starts", `document.querySelector("[data-jobs] li[data-job] [data-status]")?.textContent === "running"`, 30*time.Second)
	jobID, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("[data-jobs] li[data-job]").dataset.job`))
	if err != nil {
		t.Fatal(err)
	}
	b.open(t, "/ui/jobs")
	b.waitFor(t, "the running job is listed", fmt.Sprintf(`document.querySelector('#running-h + .scroll tr[data-job=%q]') !== null`, jobID), 5*time.Second)
	b.shoot(t, "jobs")
	b.do(t, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#running-h + .scroll tr[data-job=%q] form[data-cancel] button`, jobID))))
	b.waitFor(t, "the job is cancelled", fmt.Sprintf(`document.querySelector('#running-h + .scroll tr[data-job=%q] [data-status]').textContent === "cancelled"`, jobID), 10*time.Second)
	if j, err := s.jobs.Get(context.Background(), jobID); err != nil || j.Status != jobs.Cancelled {
		t.Fatalf("job after cancel: %+v, %v", j, err)
	}
	b.open(t, "/ui/jobs/"+jobID)
	b.shoot(t, "job")

	// Every change made on the page is in the audit, under the key, with
	// its conversation and outcome; the failed sign-in without a key.
	s.waitAudit(t, []string{"sign_in - AUTH_ERROR -", "sign_in admin ok -", "upload admin ok c-main", "search_docs admin ok c-main",
		"get_chunk admin ok c-main", "delete_document admin ok c-main", "upload admin ok c-main", "cancel_job admin ok c-main"})
	if rows := s.auditRows(t); strings.Contains(strings.Join(rows, " "), adminKey) {
		t.Fatalf("the audit holds the key: %q", rows)
	}
	b.open(t, "/ui/audit?transport=ui&tool=delete_document")
	if rows := b.text(t, "table.audit tbody"); !strings.Contains(rows, "report.pdf") || !strings.Contains(rows, "key admin") || strings.Contains(rows, "cancel_job") {
		t.Fatalf("who deleted report.pdf: %q", rows)
	}

	// The audit shows the page's own calls, with their arguments.
	b.open(t, "/ui/audit?tool=search_docs")
	audit := b.text(t, "table.audit tbody")
	if !strings.Contains(audit, "search_docs") || !strings.Contains(audit, "admin") || strings.Contains(audit, "get_chunk") {
		t.Fatalf("the audit of search_docs shows: %q", audit)
	}
	b.open(t, "/ui/audit")
	b.shoot(t, "audit")
	b.open(t, "/ui/status")
	if st := b.text(t, "main"); !strings.Contains(st, "PostgreSQL") || !strings.Contains(st, "database") || !strings.Contains(st, "test") {
		t.Fatalf("status: %q", st)
	}
	b.shoot(t, "status")

	// A request without the CSRF token is refused, with the session's
	// cookie; with it, it passes.
	client, cookies := b.client(t)
	post := func(path string, form url.Values, header http.Header) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, s.http.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header[k] = v
		}
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Header.Set("X-Body", string(body))
		return resp
	}
	if resp := post("/ui/jobs/"+jobID+"/cancel", nil, nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("X-Body"), "security token") {
		t.Fatalf("a cancel without the CSRF token: %d %s", resp.StatusCode, resp.Header.Get("X-Body"))
	}
	if resp := post("/ui/signout", url.Values{"csrf": {"forged"}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a sign-out with a forged token: %d", resp.StatusCode)
	}
	if resp := post("/ui/jobs/"+jobID+"/cancel", nil, http.Header{"Origin": {"https://evil.example"}}); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(resp.Header.Get("X-Body"), "not accepted") {
		t.Fatalf("a request from another origin: %d", resp.StatusCode)
	}

	// At 390 pixels the tables become cards, and nothing is wider than
	// the screen.
	b.do(t, chromedp.EmulateViewport(390, 844))
	for _, p := range []string{"/ui/conversations", "/ui/conversations/c-main", "/ui/jobs", "/ui/audit", "/ui/status", "/ui/add"} {
		b.open(t, p)
		wide, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		if err != nil || wide {
			t.Errorf("%s is wider than 390 pixels (%v)", p, err)
		}
	}
	b.do(t, chromedp.EmulateViewport(1280, 800))

	// Sign out, and in with a key limited to one conversation: it sees
	// that conversation alone, and reaches no other.
	b.open(t, "/ui/conversations")
	b.do(t, chromedp.Click(chromedp.CSS(".who button")), chromedp.WaitVisible(chromedp.ID("key")))
	b.do(t, chromedp.SendKeys(chromedp.ID("key"), tenantKey), chromedp.Submit(chromedp.ID("key")), chromedp.WaitVisible(chromedp.CSS("table.rows")))
	convs := b.text(t, "table.rows tbody")
	if !strings.Contains(convs, "c-tenant") || strings.Contains(convs, "c-main") || strings.Contains(convs, "c-other") {
		t.Fatalf("the tenant key sees: %q", convs)
	}
	client, cookies = b.client(t)
	get := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, s.http.URL+path, nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/ui/conversations/c-other"); code != http.StatusForbidden || !strings.Contains(body, "may not see conversation") {
		t.Fatalf("the tenant key opening another conversation: %d", code)
	}
	if code, body := get("/ui/jobs"); code != http.StatusOK || strings.Contains(body, "c-main") {
		t.Fatalf("the tenant key's jobs page shows another conversation's jobs (%d)", code)
	}
	if code, body := get("/ui/audit"); code != http.StatusOK || strings.Contains(body, "c-main") {
		t.Fatalf("the tenant key's audit shows another conversation's calls (%d)", code)
	}

	b.open(t, "/ui/conversations")
	b.do(t, chromedp.Click(chromedp.CSS(".who button")), chromedp.WaitVisible(chromedp.ID("key")))
	s.waitAudit(t, []string{"cancel_job admin ok c-main", "sign_out admin ok -", "sign_in tenant ok -", "sign_out tenant ok -"})

	if errs := b.takeConsoleErrors(); len(errs) > 0 {
		t.Fatalf("the pages wrote errors to the console:\n%s", strings.Join(errs, "\n"))
	}
	t.Logf("screenshots in %s", b.shots)
}
