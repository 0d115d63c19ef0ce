package ui

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestActionsAudited: every change made on the page is one audit event
// naming who made it, the conversation, what it touched and its outcome;
// a sign-in is audited without the key, failed or not.
func TestActionsAudited(t *testing.T) {
	f := newFake()
	c := newClient(t, f)
	c.signIn("not-a-key")
	c.signIn("admin-secret-0123456789")
	tok := c.csrf()
	post := func(path string, form url.Values) int {
		t.Helper()
		form.Set("csrf", tok)
		return c.do(http.MethodPost, path, form, nil).Code
	}
	post("/ui/files/f1/delete", url.Values{})
	post("/ui/jobs/j1/cancel", url.Values{})
	post("/ui/add/url", url.Values{"conversation": {"c-main"}, "url": {"https://example.com/a.pdf"}})
	post("/ui/add/url", url.Values{"conversation": {"c-main"}, "url": {"https://docs.example.com/"}, "crawl": {"1"},
		"max_pages": {"40"}, "max_depth": {"2"}, "scope": {"host"}, "include": {"/docs/**\n/guide/*"}, "exclude": {"**/changelog*"}})
	post("/ui/add/url", url.Values{"conversation": {"c-main"}, "url": {"https://docs.example.com/"}, "crawl": {"1"}, "max_pages": {"lots"}})
	post("/ui/files/f2/retry", url.Values{})
	post("/ui/sources/s1/sync", url.Values{})
	post("/ui/sources/s1/delete", url.Values{})
	c.do(http.MethodPost, "/ui/conversations/c-main/files", nil, http.Header{"X-Csrf-Token": {tok}, "Content-Type": {"multipart/form-data; boundary=x"}})
	post("/ui/signout", url.Values{})

	type row struct{ action, conv, touched, job, outcome string }
	var got []row
	for _, e := range f.events {
		outcome := "ok"
		if e.Err != nil {
			outcome = e.Err.Error()
		}
		var keys []string
		for k := range e.Touched {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		got = append(got, row{e.Action, e.Conversation, strings.Join(keys, ","), e.JobID, outcome})
		if e.Start.IsZero() {
			t.Errorf("%s has no time", e.Action)
		}
		for _, v := range e.Touched {
			if s, ok := v.(string); ok && strings.Contains(s, "secret") {
				t.Errorf("%s records a key: %v", e.Action, e.Touched)
			}
		}
	}
	want := []row{
		{"sign_in", "|", "method", "", "This server does not accept that key. Check it for typos: the keys are the server's MCP_API_KEYS or the lines of its keys file."},
		{"sign_in", "|admin", "method", "", "ok"},
		{"delete_document", "c-main|admin", "file_id,file_name", "", "ok"},
		{"cancel_job", "c-main|admin", "job_id", "j1", "ok"},
		{"add_url", "c-main|admin", "url", "j3", "ok"},
		{"crawl", "c-main|admin", "options,url", "j3", "ok"},
		{"crawl", "c-main|admin", "options,url", "", `The page limit (max_pages) must be a whole number from 1 to 20000, not "lots".`},
		{"retry_file", "c-main|admin", "file_id,file_name,url", "j5", "ok"},
		{"sync_source", "c-main|admin", "root,source_id", "j6", "ok"},
		{"delete_source", "c-main|admin", "files_deleted,pages,root,source_id", "", "ok"},
		{"upload", "c-main|admin", "files", "j4", "ok"},
		{"sign_out", "|admin", "", "", "ok"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%q\nwant:\n%q", got, want)
	}
	crawl := f.events[5].Touched["options"].(map[string]any)
	if crawl["max_pages"] != 40 || crawl["max_depth"] != 2 || crawl["scope"] != "host" ||
		!slices.Equal(crawl["include"].([]string), []string{"/docs/**", "/guide/*"}) || !slices.Equal(crawl["exclude"].([]string), []string{"**/changelog*"}) {
		t.Errorf("the crawl's options: %+v", crawl)
	}
}

// TestSignOutEndsTheSession: a copy of the cookie taken before signing
// out is refused afterwards, and the sign-out is kept until the session
// would have expired.
func TestSignOutEndsTheSession(t *testing.T) {
	f := newFake()
	c := newClient(t, f)
	c.signIn("admin-secret-0123456789")
	copied := *c.cookies[sessionCookie]
	if rec := c.do(http.MethodPost, "/ui/signout", url.Values{"csrf": {c.csrf()}}, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", rec.Code)
	}
	if len(f.signedOut) != 1 {
		t.Fatalf("signed-out sessions: %v", f.signedOut)
	}
	for _, until := range f.signedOut {
		if d := time.Until(until); d < DefaultSessionTTL-time.Minute || d > DefaultSessionTTL {
			t.Errorf("the sign-out is kept %s, want until the session would have expired (%s)", d, DefaultSessionTTL)
		}
	}
	thief := newClient(t, f)
	thief.cookies[sessionCookie] = &copied
	if rec := thief.get("/ui/conversations"); rec.Code != http.StatusSeeOther {
		t.Fatalf("the copied cookie after sign-out: %d", rec.Code)
	}
	if rec := thief.get("/ui/api/jobs/j1"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("the copied cookie on the script's route: %d", rec.Code)
	}
}

// TestReadOnlySeesNoWriteLinks: a caller that may only read is offered
// nothing it would be refused.
func TestReadOnlySeesNoWriteLinks(t *testing.T) {
	f := newFake()
	reader := newClient(t, f)
	reader.signIn("reader-secret-0123456789")
	for _, p := range []string{"/ui/conversations", "/ui/conversations/c-main", "/ui/files/f2", "/ui/files/f1", "/ui/sources/s1", "/ui/jobs", "/ui/jobs/j1", "/ui/search?q=x&conversation=c-main"} {
		body := reader.get(p).Body.String()
		for _, w := range []string{`href="/ui/add`, "Delete", "Retry", "Sync now", "/cancel", "Choose the file"} {
			if strings.Contains(body, w) {
				t.Errorf("%s offers a reader %q", p, w)
			}
		}
	}
	admin := newClient(t, f)
	admin.signIn("admin-secret-0123456789")
	for p, w := range map[string]string{"/ui/conversations": `href="/ui/add"`, "/ui/conversations/c-main": `aria-label="Retry broken.docx"`,
		"/ui/sources/s1": "Sync now", "/ui/files/f2": "fetched again from"} {
		if body := admin.get(p).Body.String(); !strings.Contains(body, w) {
			t.Errorf("%s does not offer the admin %q", p, w)
		}
	}
}

// TestFileAndSourcePages: a file's text a page at a time, its chunks with
// their places; a source's options, what deleting it removes, its syncs.
func TestFileAndSourcePages(t *testing.T) {
	f := newFake()
	c := newClient(t, f)
	c.signIn("admin-secret-0123456789")
	for _, tt := range []struct {
		path string
		code int
		want []string
	}{
		{"/ui/files/f1", 200, []string{"The harbour report.", "page 1 of 3", "characters 0–", `href="/ui/files/f1?page=2"`, "Chunks"}},
		{"/ui/files/f1?page=3", 200, []string{"page 3 of 3", `href="/ui/files/f1?page=2"`}},
		{"/ui/files/f1?page=4", 404, []string{"The text has 3 pages."}},
		{"/ui/files/f1?page=x", 400, []string{"numbered from 1"}},
		{"/ui/files/f1?view=chunks", 200, []string{"Chunk 1</strong>, page 1", "characters 0–120", "Chunk number 5.", `id="chunk-5"`}},
		{"/ui/files/f2", 200, []string{"the file is not a Word document", "fetched again from", `action="/ui/files/f2/retry"`}},
		{"/ui/files/nope", 404, []string{"There is no such file."}},
		{"/ui/sources/s1", 200, []string{"https://docs.example.com/", "at most 50 pages", "only /docs/**", "at most 38", "Sync now",
			"42 pages fetched, 0 queued, 30 stored (3 added, 1 updated, 0 removed, 26 unchanged); 3 skipped", "skipped: 3 robots.txt"}},
		{"/ui/sources/s2", 404, []string{"There is no such source."}},
	} {
		rec := c.get(tt.path)
		if rec.Code != tt.code {
			t.Errorf("%s: %d, want %d", tt.path, rec.Code, tt.code)
		}
		for _, w := range tt.want {
			if !strings.Contains(rec.Body.String(), w) {
				t.Errorf("%s lacks %q", tt.path, w)
			}
		}
	}
	// The pages of the text hold it whole, once.
	var all strings.Builder
	for n := 1; n <= 3; n++ {
		body := c.get("/ui/files/f1?page=" + string(rune('0'+n))).Body.String()
		m := regexp.MustCompile(`(?s)<div class="passage" tabindex="0">(.*?)</div>`).FindStringSubmatch(body)
		all.WriteString(m[1])
	}
	want, _ := f.FileText(context.Background(), Principal{}, File{})
	if all.String() != want {
		t.Errorf("the pages hold %d characters, the text %d", len(all.String()), len(want))
	}
}

func TestPageOf(t *testing.T) {
	text := strings.Repeat("x", textPage-10) + "\n" + strings.Repeat("y", 50)
	part, pages, from, to := pageOf(text, 1)
	if pages != 2 || from != 0 || to != textPage-9 || !strings.HasSuffix(part, "\n") {
		t.Errorf("page 1: %d pages, %d..%d", pages, from, to)
	}
	if _, pages, _, _ := pageOf("", 1); pages != 1 {
		t.Errorf("empty text: %d pages", pages)
	}
	long := strings.Repeat("é", textPage*2+5)
	if p, pages, _, _ := pageOf(long, 3); pages != 3 || p != "ééééé" {
		t.Errorf("a text without line breaks: %d pages, last %q", pages, p)
	}
}

// TestRetryUploadedFile: an uploaded file that failed is tried again with
// the file chosen anew; other bytes replace it, in one audited retry.
func TestRetryUploadedFile(t *testing.T) {
	f := newFake()
	c := newClient(t, f)
	c.signIn("admin-secret-0123456789")
	if body := c.get("/ui/files/f2").Body.String(); !strings.Contains(body, "fetched again from") {
		t.Fatalf("a failed file fetched from a URL: %s", body)
	}
	fl := f.files["c-main"][1]
	fl.Source = ""
	f.files["c-main"][1] = fl
	if body := c.get("/ui/files/f2").Body.String(); !strings.Contains(body, "choose the file again") || !strings.Contains(body, `data-action="/ui/files/f2/retry"`) {
		t.Fatalf("a failed upload's page: %s", body)
	}
	rec := c.do(http.MethodPost, "/ui/files/f2/retry", nil, http.Header{"X-Csrf-Token": {c.csrf()}, "Content-Type": {"multipart/form-data; boundary=x"}})
	if rec.Code != http.StatusAccepted || !slices.Equal(f.deleted, []string{"f2"}) {
		t.Fatalf("retry with a corrected file: %d, deleted %v", rec.Code, f.deleted)
	}
	e := f.events[len(f.events)-1]
	if e.Action != "retry_file" || e.Err != nil || e.Touched["replaced"] != true || e.Touched["file_id"] != "f2" || e.JobID != "j4" {
		t.Errorf("the retry's event: %+v", e)
	}
	// A file that did not fail is not tried again.
	rec = c.do(http.MethodPost, "/ui/files/f1/retry", nil, http.Header{"X-Csrf-Token": {c.csrf()}, "Content-Type": {"multipart/form-data; boundary=x"}})
	if rec.Code != http.StatusConflict {
		t.Errorf("retrying a ready file: %d", rec.Code)
	}
}
