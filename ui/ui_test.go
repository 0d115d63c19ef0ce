package ui

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// fake is a Backend in memory: two keys, a few conversations and jobs.
type fake struct {
	open    bool
	keys    map[string]Principal // by secret
	gone    map[string]bool      // key ids removed from the server
	convs   []Conversation
	files   map[string][]File
	jobs    map[string]Job
	deleted []string
	calls   []string
	origins []string
	// signedOut are the sessions signed out; events what Record got.
	signedOut map[string]time.Time
	events    []Event
	provider  Provider
	noKeys    bool
}

func newFake() *fake {
	return &fake{
		keys: map[string]Principal{
			"admin-secret-0123456789":  {ID: "k1", Name: "admin", Write: true, Seal: []byte("seal-one")},
			"tenant-secret-0123456789": {ID: "k2", Name: "tenant", Conversations: []string{"c-tenant"}, Write: true, Seal: []byte("seal-two")},
			"reader-secret-0123456789": {ID: "k3", Name: "reader", Seal: []byte("seal-three")},
		},
		gone:      map[string]bool{},
		signedOut: map[string]time.Time{},
		convs: []Conversation{
			{ID: "c-main", Files: 2, Ready: 1, Failed: 1, Chunks: 7, LastUpload: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)},
			{ID: "c-tenant", Files: 1, Ready: 1, Chunks: 2, LastUpload: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		},
		files: map[string][]File{
			"c-main": {
				{ID: "f1", Conversation: "c-main", Name: "report.pdf", Status: "ready", Pages: 12, Chunks: 6, Size: 123456,
					Note: "pages 3-4 need OCR: tesseract is not installed", Created: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)},
				{ID: "f2", Conversation: "c-main", Name: "broken.docx", Status: "failed", Error: "the file is not a Word document",
					Source: "https://example.com/broken.docx", Created: time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)},
			},
		},
		jobs: map[string]Job{
			"j1": {ID: "j1", Conversation: "c-main", Kind: "upload", Status: "running", Total: 4, Done: 1, Ready: 1, Processing: 3, Chunks: 3, Submitted: true},
			"j2": {ID: "j2", Conversation: "c-tenant", Kind: "url", Status: "succeeded", Total: 1, Done: 1, Ready: 1, Chunks: 2, Submitted: true},
		},
	}
}

func (f *fake) Open() bool         { return f.open }
func (f *fake) Provider() Provider { return f.provider }
func (f *fake) SignOut(_ context.Context, id string, until time.Time) error {
	f.signedOut[id] = until
	return nil
}
func (f *fake) SignedOut(_ context.Context, id string) (bool, error) {
	_, ok := f.signedOut[id]
	return ok, nil
}
func (f *fake) Record(_ context.Context, p Principal, e Event) {
	e.Conversation += "|" + p.Name
	f.events = append(f.events, e)
}
func (f *fake) File(_ context.Context, p Principal, id string) (File, error) {
	for _, fl := range f.files["c-main"] {
		if fl.ID == id && allows(p, fl.Conversation) {
			return fl, nil
		}
	}
	return File{}, &Error{Status: http.StatusNotFound, Message: "There is no such file."}
}
func (f *fake) FileText(_ context.Context, p Principal, fl File) (string, error) {
	return "The harbour report.\n" + strings.Repeat("Line of the report.\n", 2000), nil
}
func (f *fake) FileChunks(_ context.Context, p Principal, fl File, after, limit int) ([]Chunk, error) {
	var out []Chunk
	for i := after + 1; i < 6 && len(out) < limit; i++ {
		out = append(out, Chunk{ID: fmt.Sprintf("ch%d", i), FileID: fl.ID, Ordinal: i, Content: fmt.Sprintf("Chunk number %d.", i),
			CharStart: i * 100, CharEnd: i*100 + 120, Citation: fmt.Sprintf("page %d", i+1)})
	}
	return out, nil
}
func (f *fake) RetryFile(ctx context.Context, p Principal, id string) (File, Job, error) {
	fl, err := f.File(ctx, p, id)
	if err != nil {
		return fl, Job{}, err
	}
	j := Job{ID: "j5", Conversation: fl.Conversation, Kind: "url", Status: "queued", What: fl.Source}
	f.jobs["j5"] = j
	return fl, j, nil
}
func (f *fake) Chunk(_ context.Context, p Principal, id string) (Chunk, error) {
	return Chunk{ID: id, Content: "The harbour pilots charge 412 kroner."}, nil
}
func (f *fake) Source(_ context.Context, p Principal, id string) (Source, error) {
	if id != "s1" || !allows(p, "c-main") {
		return Source{}, &Error{Status: http.StatusNotFound, Message: "There is no such source."}
	}
	return Source{ID: "s1", Conversation: "c-main", Kind: "site", Root: "https://docs.example.com/", Pages: 40, Files: 38,
		Options: CrawlOptions{MaxPages: 50, Include: []string{"/docs/**"}}}, nil
}
func (f *fake) SyncSource(ctx context.Context, p Principal, id string) (Source, Job, error) {
	src, err := f.Source(ctx, p, id)
	if err != nil {
		return src, Job{}, err
	}
	j := Job{ID: "j6", Conversation: src.Conversation, Kind: "sync", Status: "queued"}
	f.jobs["j6"] = j
	return src, j, nil
}
func (f *fake) DeleteSource(ctx context.Context, p Principal, id string) (Source, int, error) {
	src, err := f.Source(ctx, p, id)
	if err != nil {
		return src, 0, err
	}
	if !p.Write {
		return src, 0, &Error{Status: http.StatusForbidden, Message: "Key " + p.Name + " may only read."}
	}
	return src, 37, nil
}
func (f *fake) SignIn(secret string) (Principal, bool) {
	p, ok := f.keys[secret]
	return p, ok && !f.gone[p.ID]
}
func (f *fake) Principal(id string) (Principal, bool) {
	for _, p := range f.keys {
		if p.ID == id && !f.gone[id] {
			return p, true
		}
	}
	return Principal{}, false
}
func (f *fake) Features() Features {
	return Features{Docs: true, Jobs: true, URLs: true, Crawl: true, Writes: true, Audit: true, Keys: !f.noKeys, MaxFileBytes: 50 << 20, Tools: []string{"search_docs", "get_chunk"}}
}
func (f *fake) OriginAllowed(origin string) bool { return slices.Contains(f.origins, origin) }

// allows reports whether p may see conversation conv.
func allows(p Principal, conv string) bool {
	return p.Conversations == nil || slices.Contains(p.Conversations, conv)
}

func forbidden(p Principal, conv string) error {
	if !allows(p, conv) {
		return &Error{Status: http.StatusForbidden, Message: "Key " + p.Name + " may not see conversation " + conv + "."}
	}
	return nil
}

func (f *fake) Conversations(_ context.Context, p Principal, _ ConversationQuery) (ConversationPage, error) {
	var out ConversationPage
	for _, c := range f.convs {
		if allows(p, c.ID) {
			out.Conversations = append(out.Conversations, c)
		}
	}
	out.Total = len(out.Conversations)
	return out, nil
}
func (f *fake) Files(_ context.Context, p Principal, q FileQuery) (FilePage, error) {
	if err := forbidden(p, q.Conversation); err != nil {
		return FilePage{}, err
	}
	return FilePage{Files: f.files[q.Conversation], Total: len(f.files[q.Conversation])}, nil
}
func (f *fake) Sources(_ context.Context, p Principal, conv string) ([]Source, error) {
	if conv != "c-main" {
		return nil, nil
	}
	return []Source{{ID: "s1", Kind: "site", Root: "https://docs.example.com/", Pages: 40, Files: 38,
		LastSync: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), Summary: "3 added, 1 updated"}}, nil
}
func (f *fake) DeleteFile(_ context.Context, p Principal, id string) (File, error) {
	if !p.Write {
		return File{}, &Error{Status: http.StatusForbidden, Message: "Key " + p.Name + " may only read."}
	}
	for _, fl := range f.files["c-main"] {
		if fl.ID == id && allows(p, fl.Conversation) {
			f.deleted = append(f.deleted, id)
			return fl, nil
		}
	}
	return File{}, &Error{Status: http.StatusNotFound, Message: "There is no such file."}
}
func (f *fake) Jobs(_ context.Context, p Principal, q JobQuery) (JobPage, error) {
	var out JobPage
	if q.Source != "" {
		out.Jobs = []Job{{ID: "j7", Conversation: "c-main", Kind: "sync", Status: "succeeded", Total: 30, Done: 30, Ready: 30, Submitted: true,
			Counts: map[string]int{"fetched": 42, "queued": 0, "added": 3, "updated": 1, "unchanged": 26}, Skipped: map[string]int{"robots.txt": 3}}}
		return out, nil
	}
	for _, id := range []string{"j1", "j2"} {
		j := f.jobs[id]
		if allows(p, j.Conversation) && (!q.Active || !j.Final()) && (!q.Ended || j.Final()) {
			out.Jobs = append(out.Jobs, j)
		}
	}
	return out, nil
}
func (f *fake) Job(_ context.Context, p Principal, id string) (Job, error) {
	j, ok := f.jobs[id]
	if !ok || !allows(p, j.Conversation) {
		return Job{}, &Error{Status: http.StatusNotFound, Message: "There is no such job."}
	}
	return j, nil
}
func (f *fake) CancelJob(ctx context.Context, p Principal, id string) (Job, error) {
	j, err := f.Job(ctx, p, id)
	if err != nil {
		return j, err
	}
	if !p.Write {
		return Job{}, &Error{Status: http.StatusForbidden, Message: "Key " + p.Name + " may only read."}
	}
	j.Status = "cancelled"
	f.jobs[id] = j
	return j, nil
}
func (f *fake) AddURL(_ context.Context, p Principal, conv, u string, crawl *CrawlOptions) (Job, error) {
	if err := forbidden(p, conv); err != nil {
		return Job{}, err
	}
	j := Job{ID: "j3", Conversation: conv, Kind: "url", Status: "queued", What: u}
	if crawl != nil {
		j.Kind = "crawl"
	}
	f.jobs["j3"] = j
	return j, nil
}
func (f *fake) Upload(w http.ResponseWriter, r *http.Request, p Principal, conv string) UploadResult {
	writeJSON(w, http.StatusAccepted, map[string]any{"job_id": "j4", "conversation": conv})
	return UploadResult{Status: http.StatusAccepted, JobID: "j4", Files: []UploadedFile{{ID: "f9", Name: "new.pdf", Result: "accepted"}}}
}
func (f *fake) Call(_ context.Context, p Principal, tool string, args map[string]any) (ToolCall, error) {
	f.calls = append(f.calls, tool)
	req, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	switch tool {
	case "search_docs":
		if args["conversation_id"] == "c-empty" {
			out := `{"chunks":[]}`
			return ToolCall{Tool: tool, Request: req, Result: json.RawMessage(`{"structuredContent":` + out + `}`), Structured: json.RawMessage(out),
				Text: `No passages found for "x".`}, nil
		}
		if err := forbidden(p, args["conversation_id"].(string)); err != nil {
			return ToolCall{Tool: tool, Request: req, Failed: true, Error: "this API key may not access that conversation"}, nil
		}
		out := `{"chunks":[{"chunk_id":"ch1","file_id":"f1","file_name":"report.pdf","content":"The harbour pilots charge <b>412</b> kroner.","similarity":0.61,"score":0.8,"location":{"citation":"page 2","page_start":2,"page_end":2,"ocr":true}}]}`
		return ToolCall{Tool: tool, Request: req, Result: json.RawMessage(`{"structuredContent":` + out + `}`), Structured: json.RawMessage(out)}, nil
	case "get_chunk":
		out := `{"chunk_id":"ch1","content":"Before. The harbour pilots charge 412 kroner. After.","metadata":{"file_id":"f1","file_name":"report.pdf","char_start":10,"char_end":60,"location":{"citation":"page 2"}},"chunk_ids":["ch0","ch1","ch2"]}`
		return ToolCall{Tool: tool, Request: req, Result: json.RawMessage(out), Structured: json.RawMessage(out)}, nil
	}
	return ToolCall{}, errors.New("unknown tool")
}
func (f *fake) Audit(_ context.Context, p Principal, q AuditQuery) (AuditPage, error) {
	return AuditPage{Entries: []AuditEntry{{ID: "a1", Tool: "search_docs", Key: "admin", Conversation: "c-main", Transport: "ui",
		Code: "RATE_LIMITED", Error: "rate limit of search_docs exceeded", LatencyMS: 12, Arguments: json.RawMessage(`{"query":"x"}`), Time: time.Now()}}}, nil
}
func (f *fake) Status(_ context.Context, p Principal) Status {
	return Status{Version: "v1.2.3", Ready: true, Checks: []Check{{Name: "database", Status: "ok", MS: 2}}, Embedder: "local", Model: "local-hash-v1-384",
		Dimensions: 384, OCR: OCRStatus{Mode: "auto", Detail: "the tesseract program is not installed"}, Database: "PostgreSQL",
		RateLimits: RateLimits{Store: "memory", Default: RateLimit{PerMinute: 30, Burst: 5}}}
}

// client drives the page's handler like a browser: cookies kept, redirects
// not followed.
type client struct {
	t       *testing.T
	u       *UI
	cookies map[string]*http.Cookie
	tls     bool
}

func newClient(t *testing.T, b Backend) *client {
	u, err := New(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, u: u, cookies: map[string]*http.Cookie{}}
}

func (c *client) do(method, target string, form url.Values, header http.Header) *httptest.ResponseRecorder {
	c.t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req := httptest.NewRequest(method, target, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.tls {
		req.TLS = &tls.ConnectionState{}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	for _, ck := range c.cookies {
		req.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	c.u.ServeHTTP(rec, req)
	for _, ck := range rec.Result().Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck
		}
	}
	return rec
}

func (c *client) get(target string) *httptest.ResponseRecorder {
	return c.do(http.MethodGet, target, nil, nil)
}

// signIn signs in with secret through the form.
func (c *client) signIn(secret string) *httptest.ResponseRecorder {
	c.t.Helper()
	page := c.get("/ui/signin")
	token := hiddenValue(c.t, page.Body.String(), "csrf")
	return c.do(http.MethodPost, "/ui/signin", url.Values{"csrf": {token}, "key": {secret}, "next": {"/ui/jobs"}}, nil)
}

// csrf is the token of the signed-in page.
func (c *client) csrf() string {
	c.t.Helper()
	rec := c.get("/ui/conversations")
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		c.t.Fatalf("no CSRF token on the page: %s", rec.Body.String())
	}
	return m[1]
}

func hiddenValue(t *testing.T, html, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no field %s in %s", name, html)
	}
	return m[1]
}

func TestSignIn(t *testing.T) {
	f := newFake()
	c := newClient(t, f)

	if rec := c.get("/ui/conversations"); rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/ui/signin?next=") {
		t.Fatalf("a page without a session: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	if rec := c.signIn("not-a-key"); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "does not accept that key") {
		t.Fatalf("a wrong key: %d", rec.Code)
	}
	if _, ok := c.cookies[sessionCookie]; ok {
		t.Fatal("a wrong key got a session")
	}
	// The sign-in form's own token is required.
	if rec := c.do(http.MethodPost, "/ui/signin", url.Values{"key": {"admin-secret-0123456789"}}, nil); rec.Code != http.StatusForbidden {
		t.Fatalf("a sign-in without the form's token: %d", rec.Code)
	}
	rec := c.signIn("admin-secret-0123456789")
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/ui/jobs" {
		t.Fatalf("sign-in: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	ck := c.cookies[sessionCookie]
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || ck.Secure || ck.MaxAge <= 0 || ck.MaxAge > int(DefaultSessionTTL.Seconds()) {
		t.Fatalf("session cookie: %+v", ck)
	}
	if rec := c.get("/ui/conversations"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "c-main") {
		t.Fatalf("signed in: %d", rec.Code)
	}

	// Over TLS the cookie is Secure.
	ct := newClient(t, f)
	ct.tls = true
	ct.signIn("admin-secret-0123456789")
	if ck := ct.cookies[sessionCookie]; ck == nil || !ck.Secure {
		t.Fatalf("session cookie over TLS: %+v", ck)
	}

	// Signing out ends the session.
	if rec := c.do(http.MethodPost, "/ui/signout", url.Values{"csrf": {c.csrf()}}, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", rec.Code)
	}
	if rec := c.get("/ui/conversations"); rec.Code != http.StatusSeeOther {
		t.Fatalf("signed out, the page still answers: %d", rec.Code)
	}
}

func TestSessionBoundToKey(t *testing.T) {
	f := newFake()
	c := newClient(t, f)
	c.signIn("admin-secret-0123456789")
	if rec := c.get("/ui/status"); rec.Code != http.StatusOK {
		t.Fatalf("signed in: %d", rec.Code)
	}
	tests := []struct {
		name   string
		change func(u *UI, c *client)
	}{
		{"key removed", func(u *UI, c *client) { f.gone["k1"] = true }},
		{"expired", func(u *UI, c *client) {
			u.now = func() time.Time { return time.Now().Add(DefaultSessionTTL + time.Minute) }
		}},
		{"tampered", func(u *UI, c *client) {
			ck := *c.cookies[sessionCookie]
			// Another key's id with this key's signature.
			ck.Value = strings.Replace(ck.Value, "1.k1.", "1.k2.", 1)
			c.cookies[sessionCookie] = &ck
		}},
		{"seal changed", func(u *UI, c *client) {
			p := f.keys["admin-secret-0123456789"]
			p.Seal = []byte("another secret")
			f.keys["admin-secret-0123456789"] = p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.gone = map[string]bool{}
			f.keys["admin-secret-0123456789"] = Principal{ID: "k1", Name: "admin", Write: true, Seal: []byte("seal-one")}
			c := newClient(t, f)
			c.signIn("admin-secret-0123456789")
			tt.change(c.u, c)
			if rec := c.get("/ui/status"); rec.Code != http.StatusSeeOther {
				t.Fatalf("the session still works: %d", rec.Code)
			}
			if rec := c.get("/ui/api/jobs/j1"); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "sign in") {
				t.Fatalf("the script's request: %d %s", rec.Code, rec.Body.String())
			}
		})
	}
}

func TestCSRFAndOrigin(t *testing.T) {
	f := newFake()
	c := newClient(t, f)
	c.signIn("admin-secret-0123456789")
	token := c.csrf()
	other := newClient(t, f)
	other.signIn("admin-secret-0123456789")

	tests := []struct {
		name   string
		form   url.Values
		header http.Header
		want   int
	}{
		{"no token", url.Values{}, nil, http.StatusForbidden},
		{"wrong token", url.Values{"csrf": {"AAAA"}}, nil, http.StatusForbidden},
		{"another session's token", url.Values{"csrf": {other.csrf()}}, nil, http.StatusForbidden},
		{"token in the form", url.Values{"csrf": {token}}, nil, http.StatusSeeOther},
		{"token in the header", url.Values{}, http.Header{"X-Csrf-Token": {token}}, http.StatusSeeOther},
		{"foreign origin", url.Values{"csrf": {token}}, http.Header{"Origin": {"https://evil.example"}}, http.StatusForbidden},
		{"null origin", url.Values{"csrf": {token}}, http.Header{"Origin": {"null"}}, http.StatusForbidden},
		{"the page's own origin", url.Values{"csrf": {token}}, http.Header{"Origin": {"http://example.com"}}, http.StatusSeeOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.jobs["j1"] = Job{ID: "j1", Conversation: "c-main", Status: "running"}
			rec := c.do(http.MethodPost, "/ui/jobs/j1/cancel", tt.form, tt.header)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body.String())
			}
			cancelled := f.jobs["j1"].Status == "cancelled"
			if cancelled != (tt.want == http.StatusSeeOther) {
				t.Fatalf("cancelled %v with status %d", cancelled, rec.Code)
			}
		})
	}

	// On a server without keys the page's own origin is not enough (a
	// rebound name is the page's own): the server's rules decide.
	open := newFake()
	open.open = true
	oc := newClient(t, open)
	tok := oc.csrf()
	if rec := oc.do(http.MethodPost, "/ui/jobs/j1/cancel", url.Values{"csrf": {tok}}, http.Header{"Origin": {"http://example.com"}}); rec.Code != http.StatusForbidden {
		t.Fatalf("open server, same-host origin: %d", rec.Code)
	}
	open.origins = []string{"http://example.com"}
	if rec := oc.do(http.MethodPost, "/ui/jobs/j1/cancel", url.Values{"csrf": {tok}}, http.Header{"Origin": {"http://example.com"}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("open server, allowed origin: %d %s", rec.Code, rec.Body.String())
	}
}

func TestOpenServerNeedsNoSignIn(t *testing.T) {
	f := newFake()
	f.open = true
	c := newClient(t, f)
	rec := c.get("/ui/conversations")
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "Sign out") || !strings.Contains(rec.Body.String(), "Open server") {
		t.Fatalf("open server: %d", rec.Code)
	}
	if rec := c.get("/ui/signin"); rec.Code != http.StatusSeeOther {
		t.Fatalf("sign-in page of an open server: %d", rec.Code)
	}
	// The session made on the spot carries a token that works.
	if rec := c.do(http.MethodPost, "/ui/files/f1/delete", url.Values{"csrf": {c.csrf()}}, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("delete on an open server: %d %s", rec.Code, rec.Body.String())
	}
}

func TestSecurityHeadersAndNoInlineScript(t *testing.T) {
	c := newClient(t, newFake())
	c.signIn("admin-secret-0123456789")
	for _, p := range []string{"/ui/signin", "/ui/conversations", "/ui/static/app.js", "/ui/nowhere"} {
		rec := c.get(p)
		h := rec.Header()
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", p, h)
		}
	}
	// What the policy forbids is not in the templates: inline scripts,
	// event handler attributes, style attributes, javascript: links.
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<script>|\son[a-z]+=|\sstyle=|javascript:`)
	err := fs.WalkDir(templateFiles, "templates", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := templateFiles.ReadFile(p)
		if m := inline.Find(b); m != nil {
			t.Errorf("%s holds %q, which the Content-Security-Policy forbids", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPages(t *testing.T) {
	f := newFake()
	c := newClient(t, f)
	c.signIn("admin-secret-0123456789")
	tests := []struct {
		path string
		want []string
		not  []string
	}{
		{"/ui/conversations", []string{"c-main", `<time datetime="2026-03-04T05:06:07Z">2026-03-04 05:06:07 UTC</time>`, "2 conversations"}, nil},
		{"/ui/conversations/c-main", []string{"report.pdf", "pages 3-4 need OCR", ">OCR<", "broken.docx", "the file is not a Word document",
			"https://example.com/broken.docx", "120.6 KiB", `aria-label="Delete report.pdf"`, "https://docs.example.com/", "3 added, 1 updated"}, nil},
		{"/ui/conversations/c-empty", []string{"No documents yet", "mcpsearch ingest --conversation c-empty"}, nil},
		{"/ui/add?conversation=c-main", []string{`value="c-main"`, "Drag files here", `<option value="c-tenant">`}, nil},
		{"/ui/jobs", []string{"4 files: 1 stored, 3 processing; 3 chunks", `value="25"`, `action="/ui/jobs/j1/cancel"`, "No job is running"[:0]}, nil},
		{"/ui/jobs/j2", []string{"succeeded", "c-tenant"}, []string{"/cancel"}},
		{"/ui/search?conversation=c-main&q=pilots", []string{"report.pdf</strong>, page 2", ">OCR<", "score 0.8000", "&lt;b&gt;412&lt;/b&gt;",
			"&#34;search_docs&#34;", "/ui/chunks/ch1?", "Similarity</strong> is the passage", "least similarity"}, []string{"<b>412</b>", "hit=", "412+kroner"}},
		{"/ui/search?conversation=c-empty&q=pilots", []string{"No passage found", "No passages found for"}, nil},
		{"/ui/search?conversation=c-main&q=x&top_k=many", []string{"top_k must be a whole number"}, nil},
		{"/ui/chunks/ch1?back=/ui/search%3Fq%3Dx", []string{"<mark>The harbour pilots charge 412 kroner.</mark>",
			"Before. ", `href="/ui/search?q=x"`, "3 chunks merged"}, nil},
		{"/ui/chunks/ch1?back=https://evil.example/", []string{`href="/ui/"`}, []string{"evil.example"}},
		{"/ui/audit", []string{"RATE_LIMITED", "rate limit of search_docs exceeded", "12 ms", "&#34;query&#34;"}, nil},
		{"/ui/status", []string{"v1.2.3", "local-hash-v1-384", "the tesseract program is not installed", "PostgreSQL", "30"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := c.get(tt.path)
			body := rec.Body.String()
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("the page lacks %q", w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(body, n) {
					t.Errorf("the page holds %q", n)
				}
			}
		})
	}
}

func TestScopesAndErrorsInWords(t *testing.T) {
	f := newFake()
	tenant := newClient(t, f)
	tenant.signIn("tenant-secret-0123456789")
	if body := tenant.get("/ui/conversations").Body.String(); strings.Contains(body, "c-main") || !strings.Contains(body, "c-tenant") {
		t.Fatalf("the tenant's conversations: %s", body)
	}
	if rec := tenant.get("/ui/conversations/c-main"); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "may not see conversation c-main") {
		t.Fatalf("the tenant opening another conversation: %d", rec.Code)
	}
	if rec := tenant.get("/ui/api/jobs/j1"); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"error":"There is no such job."`) {
		t.Fatalf("the tenant reading another conversation's job: %d %s", rec.Code, rec.Body.String())
	}

	reader := newClient(t, f)
	reader.signIn("reader-secret-0123456789")
	page := reader.get("/ui/conversations/c-main").Body.String()
	if strings.Contains(page, "Delete report.pdf") {
		t.Fatal("a read-only key is offered deletion")
	}
	if body := reader.get("/ui/add").Body.String(); !strings.Contains(body, "may only read") || strings.Contains(body, "Drag files here") {
		t.Fatal("a read-only key is offered uploads")
	}
	tok := reader.csrf()
	rec := reader.do(http.MethodPost, "/ui/conversations/c-main/files", nil, http.Header{"X-Csrf-Token": {tok}, "Content-Type": {"multipart/form-data; boundary=x"}, "Accept": {"application/json"}})
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "may only read") {
		t.Fatalf("a read-only key uploading: %d %s", rec.Code, rec.Body.String())
	}
	if rec := reader.do(http.MethodPost, "/ui/files/f1/delete", url.Values{"csrf": {tok}}, nil); rec.Code != http.StatusForbidden || len(f.deleted) != 0 {
		t.Fatalf("a read-only key deleting: %d", rec.Code)
	}

	// A failure that is not in words is not shown as it is.
	if rec := reader.get("/ui/chunks/x"); rec.Code != http.StatusOK {
		t.Fatalf("chunk: %d", rec.Code)
	}
	f.calls = nil
	rec = reader.get("/ui/search?conversation=c-main&q=x")
	if rec.Code != http.StatusOK || len(f.calls) != 1 {
		t.Fatalf("search: %d, calls %v", rec.Code, f.calls)
	}
}

func TestUploadNeedsHeaderToken(t *testing.T) {
	f := newFake()
	c := newClient(t, f)
	c.signIn("admin-secret-0123456789")
	tok := c.csrf()
	// The token of a multipart body comes in its header: the body is the
	// upload's to read.
	body := "--x\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n" + tok + "\r\n--x--\r\n"
	req := httptest.NewRequest(http.MethodPost, "/ui/conversations/c-main/files", strings.NewReader(body))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	for _, ck := range c.cookies {
		req.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	c.u.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("an upload with its token in the body: %d", rec.Code)
	}
	rec = c.do(http.MethodPost, "/ui/conversations/c-main/files", nil, http.Header{"X-Csrf-Token": {tok}, "Content-Type": {"multipart/form-data; boundary=x"}})
	if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `"job_id":"j4"`) {
		t.Fatalf("an upload: %d %s", rec.Code, rec.Body.String())
	}
}

func TestAddURLAndJobJSON(t *testing.T) {
	f := newFake()
	c := newClient(t, f)
	c.signIn("admin-secret-0123456789")
	tok := c.csrf()
	rec := c.do(http.MethodPost, "/ui/add/url", url.Values{"csrf": {tok}, "conversation": {"c-main"}, "url": {"https://example.com/a.pdf"}},
		http.Header{"Accept": {"application/json"}})
	var j jobView
	if err := json.Unmarshal(rec.Body.Bytes(), &j); rec.Code != http.StatusAccepted || err != nil || j.ID != "j3" || j.Final {
		t.Fatalf("add URL: %d %s", rec.Code, rec.Body.String())
	}
	// Without script, the form goes on to the job's page.
	rec = c.do(http.MethodPost, "/ui/add/url", url.Values{"csrf": {tok}, "conversation": {"c-main"}, "url": {"https://example.com/a.pdf"}}, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/ui/jobs/j3" {
		t.Fatalf("add URL from the form: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	rec = c.do(http.MethodPost, "/ui/add/url", url.Values{"csrf": {tok}, "url": {"https://example.com/a.pdf"}}, http.Header{"Accept": {"application/json"}})
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "Name the conversation") {
		t.Fatalf("add URL without a conversation: %d %s", rec.Code, rec.Body.String())
	}
	rec = c.get("/ui/api/jobs/j1")
	if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil || j.Percent != 25 || j.Files != "4 files: 1 stored, 3 processing; 3 chunks" || j.Tone != "running" {
		t.Fatalf("job JSON: %s", rec.Body.String())
	}
}

// TestJobTellsTheTruth: a job's bar, colour and words say what happened:
// a crawl under way has no percentage to claim, a failed job is never a
// full bar of the running colour, a job that lost files says how many, a
// duplicate is named as such, and a cancelled job shows how far it got.
func TestJobTellsTheTruth(t *testing.T) {
	tests := []struct {
		name          string
		j             Job
		percent       int
		indeterminate bool
		tone, outcome string
		files, pages  string
	}{
		{"queued", Job{Kind: "upload", Status: "queued"}, 0, false, "queued", "queued", "waiting for its files", ""},
		{"uploading", Job{Kind: "upload", Status: "running", Total: 4, Done: 1, Ready: 1, Processing: 3, Chunks: 3, Submitted: true},
			25, false, "running", "running", "4 files: 1 stored, 3 processing; 3 chunks", ""},
		{"more to come", Job{Kind: "archive", Status: "running", Total: 2, Done: 2, Ready: 2, Chunks: 4}, 95, false, "running", "running",
			"2 files so far: 2 stored; 4 chunks", ""},
		{"fetching", Job{Kind: "url", Status: "running"}, 0, true, "running", "running", "waiting for its files", ""},
		{"crawling", Job{Kind: "crawl", Status: "running", Total: 38, Done: 30, Ready: 30, Processing: 8, Chunks: 120,
			Counts: map[string]int{"fetched": 42, "queued": 17, "added": 30}, Skipped: map[string]int{"robots.txt": 3}},
			0, true, "running", "running", "38 files so far: 30 stored, 8 processing; 120 chunks",
			"42 pages fetched, 17 queued, 30 stored (30 added, 0 updated, 0 removed, 0 unchanged); 3 skipped"},
		{"succeeded", Job{Kind: "upload", Status: "succeeded", Total: 6, Done: 6, Ready: 6, Chunks: 60, Submitted: true},
			100, false, "ok", "succeeded", "6 files: 6 stored; 60 chunks", ""},
		{"files lost", Job{Kind: "upload", Status: "succeeded", Total: 6, Done: 6, Ready: 4, Failed: 1, Refused: 1, Chunks: 40, Submitted: true},
			100, false, "partial", "succeeded, 2 of 6 files failed", "6 files: 4 stored, 1 failed, 1 refused; 40 chunks", ""},
		{"duplicate", Job{Kind: "upload", Status: "succeeded", Total: 1, Done: 1, Duplicates: 1, Submitted: true},
			100, false, "ok", "succeeded: nothing new, 1 duplicate", "1 file: 1 duplicate of a file already there", ""},
		{"failed", Job{Kind: "url", Status: "failed", Error: "fetch: 404"}, 0, false, "failed", "failed", "no files", ""},
		{"every file failed", Job{Kind: "upload", Status: "failed", Total: 2, Done: 2, Failed: 1, Refused: 1, Submitted: true}, 0, false, "failed", "failed",
			"2 files: 1 failed, 1 refused", ""},
		{"cancelled", Job{Kind: "upload", Status: "cancelled", Total: 4, Done: 1, Ready: 1, Chunks: 2, Submitted: true},
			25, false, "cancelled", "cancelled", "4 files: 1 stored; 2 chunks", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := tt.j
			if got := [2]any{j.Percent(), j.Indeterminate()}; got != [2]any{tt.percent, tt.indeterminate} {
				t.Errorf("bar %v, want %d%% indeterminate %v", got, tt.percent, tt.indeterminate)
			}
			if j.Tone() != tt.tone || j.Outcome() != tt.outcome {
				t.Errorf("tone %q outcome %q, want %q %q", j.Tone(), j.Outcome(), tt.tone, tt.outcome)
			}
			if j.Files() != tt.files || j.Pages() != tt.pages {
				t.Errorf("files %q pages %q, want %q %q", j.Files(), j.Pages(), tt.files, tt.pages)
			}
			if j.Final() && j.Tone() == "running" {
				t.Error("an ended job in the running colour")
			}
		})
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/jobs?x=1":          "/ui/jobs?x=1",
		"https://evil.example/": "/ui/",
		"//evil.example/ui/":    "/ui/",
		"/ui/\\evil":            "/ui/",
		"/other":                "/ui/",
		"":                      "/ui/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStaticFiles(t *testing.T) {
	c := newClient(t, newFake())
	for _, name := range []string{"app.js", "app.css", "favicon.svg"} {
		rec := c.get("/ui/static/" + name)
		if rec.Code != http.StatusOK || rec.Body.Len() == 0 || !strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
			t.Errorf("%s: %d %v", name, rec.Code, rec.Header())
		}
	}
	if rec := c.get("/ui/static/"); rec.Code != http.StatusNotFound {
		t.Errorf("the folder is listed: %d", rec.Code)
	}
}
