package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/internal/oidctest"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/ui"
)

func TestUIMountedBySetting(t *testing.T) {
	for _, on := range []bool{true, false} {
		h := newHarnessDeps(t, func(c *config.Config) {
			c.Transports = []string{"http"}
			c.UIEnabled = on
		}, nil)
		hs := httptest.NewServer(h.srv.Handler())
		resp, err := http.Get(hs.URL + "/ui/status")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		hs.Close()
		switch {
		case on && (resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "mcpsearch <strong>test</strong>")):
			t.Errorf("MCP_ui_enabled=true: %d %s", resp.StatusCode, body)
		case on && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'"):
			t.Errorf("no Content-Security-Policy: %v", resp.Header)
		case !on && resp.StatusCode != http.StatusNotFound:
			t.Errorf("MCP_ui_enabled=false: %d", resp.StatusCode)
		}
	}
}

// uiKeys are a key that may do anything, one limited to conversation c1,
// and one that may only read.
const uiKeys = "admin-0123456789abcdef name=admin\ntenant-0123456789abcdef name=tenant conversations=c1\nreader-0123456789abcdef name=reader scopes=read\n"

func TestUIBackendAppliesEachKeysRights(t *testing.T) {
	keys, err := LoadAPIKeys(nil, strings.NewReader(uiKeys))
	if err != nil {
		t.Fatal(err)
	}
	var aw *audit.Writer
	h := newDocsHarness(t, nil, func(d *Deps) {
		d.APIKeys = keys
		aw = audit.NewWriter(d.Docs.(*docs.Store).Pool(), audit.Options{FlushInterval: 10 * time.Millisecond})
		d.Audit = aw
	})
	t.Cleanup(func() { _ = aw.Close(context.Background()) })
	ctx := context.Background()
	b := newUIBackend(h.srv)
	if b.Open() {
		t.Fatal("a server with keys is open")
	}
	mine, err := h.ingest.Ingest(ctx, "c1", "mine.md", "text/markdown", []byte("# Mine\n\nThe quay cranes of c1."))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := h.ingest.Ingest(ctx, "c2", "theirs.md", "text/markdown", []byte("# Theirs\n\nThe ferries of c2."))
	if err != nil {
		t.Fatal(err)
	}
	theirJob, _, _, err := h.srv.deps.Jobs.AddFiles(ctx, "c2", jobs.KindDocument, jobs.Input{Title: "t"}, "test",
		[]docs.Upload{{FileName: "more.md", Data: []byte("More about ferries.")}}, nil)
	if err != nil {
		t.Fatal(err)
	}

	if _, ok := b.SignIn("not-a-key-of-this-server"); ok {
		t.Fatal("a wrong key signs in")
	}
	admin, ok1 := b.SignIn("admin-0123456789abcdef")
	tenant, ok2 := b.SignIn("tenant-0123456789abcdef")
	reader, ok3 := b.SignIn("reader-0123456789abcdef")
	if !ok1 || !ok2 || !ok3 || admin.Name != "admin" || !admin.Write || reader.Write || len(tenant.Conversations) != 1 || len(admin.Seal) == 0 {
		t.Fatalf("principals: %+v %+v %+v", admin, tenant, reader)
	}
	if p, ok := b.Principal(tenant.ID); !ok || p.Name != "tenant" || !bytes.Equal(p.Seal, tenant.Seal) {
		t.Fatalf("the tenant's principal by its id: %+v", p)
	}
	if bytes.Equal(admin.Seal, tenant.Seal) || admin.ID == tenant.ID {
		t.Fatal("two keys share a seal or an id")
	}

	// A key removed from the keys file (the server started again without
	// it) is no longer anyone's.
	fewer := h.srv.deps
	fewer.APIKeys = keys[:1]
	restarted := newUIBackend(New(h.srv.cfg, fewer, slog.New(slog.DiscardHandler), "test"))
	if _, ok := restarted.Principal(tenant.ID); ok {
		t.Fatal("a removed key's sessions still work")
	}
	if _, ok := restarted.Principal(admin.ID); !ok {
		t.Fatal("a kept key's sessions stop working")
	}

	status := func(err error) int {
		var ue *ui.Error
		if !errors.As(err, &ue) {
			t.Fatalf("not an error in words: %v", err)
		}
		return ue.Status
	}
	page, err := b.Conversations(ctx, tenant, ui.ConversationQuery{})
	if err != nil || len(page.Conversations) != 1 || page.Conversations[0].ID != "c1" {
		t.Fatalf("the tenant's conversations: %+v %v", page, err)
	}
	if page, _ := b.Conversations(ctx, admin, ui.ConversationQuery{}); page.Total != 2 {
		t.Fatalf("the admin's conversations: %+v", page)
	}
	if _, err := b.Files(ctx, tenant, ui.FileQuery{Conversation: "c2"}); status(err) != http.StatusForbidden {
		t.Fatalf("the tenant listing c2: %v", err)
	}
	if _, err := b.DeleteFile(ctx, tenant, theirs.ID); status(err) != http.StatusNotFound {
		t.Fatalf("the tenant deleting c2's file: %v", err)
	}
	if _, err := b.DeleteFile(ctx, reader, mine.ID); status(err) != http.StatusForbidden {
		t.Fatalf("the reader deleting: %v", err)
	}
	if _, err := h.store.GetFile(ctx, theirs.ID); err != nil {
		t.Fatalf("c2's file is gone: %v", err)
	}
	if _, err := b.Job(ctx, tenant, theirJob.ID); status(err) != http.StatusNotFound {
		t.Fatalf("the tenant reading c2's job: %v", err)
	}
	if _, err := b.CancelJob(ctx, reader, theirJob.ID); status(err) != http.StatusForbidden {
		t.Fatalf("the reader cancelling: %v", err)
	}
	if _, err := b.AddURL(ctx, admin, "c1", "https://example.com/", nil); status(err) != http.StatusForbidden {
		t.Fatalf("a URL without fetching: %v", err)
	}
	if jp, err := b.Jobs(ctx, tenant, ui.JobQuery{}); err != nil || len(jp.Jobs) != 0 {
		t.Fatalf("the tenant's jobs: %+v %v", jp, err)
	}
	if jp, err := b.Jobs(ctx, admin, ui.JobQuery{}); err != nil || len(jp.Jobs) != 1 || jp.Jobs[0].ID != theirJob.ID {
		t.Fatalf("the admin's jobs: %+v %v", jp, err)
	}
	if j, err := b.Job(ctx, admin, theirJob.ID); err != nil || j.Conversation != "c2" || j.What != "t" {
		t.Fatalf("the admin's job: %+v %v", j, err)
	}

	// Uploads take the upload API's path, with its checks.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "a.txt")
	fw.Write([]byte("An upload from the page."))
	mw.Close()
	upload := func(p ui.Principal, conv string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/ui/conversations/"+conv+"/files", bytes.NewReader(body.Bytes()))
		req.Header.Set("Content-Type", mw.FormDataContentType())
		rec := httptest.NewRecorder()
		b.Upload(rec, req, p, conv)
		return rec
	}
	if rec := upload(reader, "c1"); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "may only read") {
		t.Fatalf("the reader uploading: %d %s", rec.Code, rec.Body.String())
	}
	if rec := upload(tenant, "c2"); rec.Code != http.StatusForbidden {
		t.Fatalf("the tenant uploading to c2: %d %s", rec.Code, rec.Body.String())
	}
	rec := upload(tenant, "c1")
	if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `"job_id"`) {
		t.Fatalf("the tenant uploading to c1: %d %s", rec.Code, rec.Body.String())
	}

	// The playground calls tools as the key, audited as the page's.
	call, err := b.Call(ctx, tenant, "search_docs", map[string]any{"conversation_id": "c2", "query": "ferries"})
	if err != nil || !call.Failed || !strings.Contains(call.Error, "may not access") {
		t.Fatalf("the tenant searching c2: %+v %v", call, err)
	}
	call, err = b.Call(ctx, admin, "search_docs", map[string]any{"conversation_id": "c1", "query": "quay cranes"})
	if err != nil || call.Failed || !strings.Contains(string(call.Structured), mine.ID) || !strings.Contains(string(call.Request), `"search_docs"`) {
		t.Fatalf("the admin searching c1: %+v %v", call, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ap, err := b.Audit(ctx, admin, ui.AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ap.Entries) == 2 {
			if e := ap.Entries[0]; e.Transport != uiTransport || e.Key != "admin" || e.Tool != "search_docs" {
				t.Fatalf("the audit of the page's call: %+v", e)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit rows: %+v", ap.Entries)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The tenant sees the calls on c1 and its own (refused on c2): both.
	ap, err := b.Audit(ctx, tenant, ui.AuditQuery{})
	if err != nil || len(ap.Entries) != 2 {
		t.Fatalf("the tenant's audit: %+v %v", ap.Entries, err)
	}
	if _, err := b.Audit(ctx, tenant, ui.AuditQuery{Conversation: "c2"}); status(err) != http.StatusForbidden {
		t.Fatalf("the tenant filtering the audit on c2: %v", err)
	}
	if ap, _ := b.Audit(ctx, reader, ui.AuditQuery{Tool: "get_chunk"}); len(ap.Entries) != 0 {
		t.Fatalf("the audit filtered on get_chunk: %+v", ap.Entries)
	}

	// A file's page: its text and chunks for who may see its
	// conversation, nothing for another tenant.
	if _, err := b.File(ctx, tenant, theirs.ID); status(err) != http.StatusNotFound {
		t.Fatalf("the tenant opening c2's file: %v", err)
	}
	f, err := b.File(ctx, tenant, mine.ID)
	if err != nil {
		t.Fatal(err)
	}
	if text, err := b.FileText(ctx, tenant, f); err != nil || !strings.Contains(text, "quay cranes") {
		t.Fatalf("the file's text: %q %v", text, err)
	}
	chunks, err := b.FileChunks(ctx, tenant, f, -1, 10)
	if err != nil || len(chunks) != f.Chunks || chunks[0].Ordinal != 0 || chunks[0].CharEnd == 0 {
		t.Fatalf("the file's chunks: %+v %v", chunks, err)
	}
	if _, err := b.FileText(ctx, tenant, ui.File{ID: theirs.ID}); status(err) != http.StatusNotFound {
		t.Fatalf("the tenant reading c2's text through another file's page: %v", err)
	}
	if c, err := b.Chunk(ctx, admin, chunks[0].ID); err != nil || c.Content != chunks[0].Content {
		t.Fatalf("a chunk: %+v %v", c, err)
	}
	if _, _, err := b.RetryFile(ctx, admin, mine.ID); status(err) != http.StatusConflict {
		t.Fatalf("retrying a ready file: %v", err)
	}

	// An id that is no id, or a job's that is gone, is said in words.
	for _, bad := range []func() error{
		func() error { _, err := b.Job(ctx, admin, "job"); return err },
		func() error { _, err := b.File(ctx, admin, "not-a-file-id"); return err },
		func() error { _, err := b.Job(ctx, admin, "3f1c0000-0000-4000-8000-000000000000"); return err },
	} {
		err := bad()
		var ue *ui.Error
		if !errors.As(err, &ue) || ue.Status != http.StatusNotFound || strings.Contains(ue.Message, "invalid") || strings.Contains(ue.Message, "docs:") {
			t.Errorf("a bad id: %v", err)
		}
	}

	st := b.Status(ctx, admin)
	if !st.Ready || st.Version != "test" || st.Database == "" || st.Model == "" || len(st.Checks) == 0 || st.RateLimits.Playground.PerMinute != 60 {
		t.Fatalf("status: %+v", st)
	}
	if f := b.Features(); !f.Docs || !f.Jobs || f.URLs || !f.Audit || !f.Writes {
		t.Fatalf("features: %+v", f)
	}
}

// TestUISignInThroughProvider signs people in to the page through a real
// OpenID provider, as a browser would (cookies kept, redirects followed):
// each has what their token grants, one without the read scope is turned
// away in words, and every sign-in is audited under the person, never
// with a token.
func TestUISignInThroughProvider(t *testing.T) {
	o := newOAuthHarness(t, oidctest.Options{}, func(c *config.Config) {
		c.UIOAuthClientID, c.UIOAuthClientSecret = "mcpsearch-page", "page-secret"
	}, nil)
	o.op.AddWebClient("mcpsearch-page", "page-secret", o.base+"/ui/oauth/callback")
	o.op.LimitScopes("reader", "mcpsearch:read")
	o.op.AddUser("nobody", nil)
	o.op.LimitScopes("nobody")
	if _, err := o.pool.Exec(context.Background(), `INSERT INTO conversation_keys (key, conversation_id) VALUES (conversation_key('conv-a'), 'conv-a') ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}

	signIn := func(subject string) (*http.Client, int, string) {
		t.Helper()
		o.op.SignInAs(subject)
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.Get(o.base + "/ui/signin")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(page), `href="/ui/oauth/start?next=`) {
			t.Fatalf("the sign-in page offers no provider: %s", page)
		}
		resp, err = c.Get(o.base + "/ui/oauth/start?next=%2Fui%2Fconversations")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return c, resp.StatusCode, string(body)
	}
	get := func(c *http.Client, path string) string {
		t.Helper()
		resp, err := c.Get(o.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}

	alice, code, body := signIn("alice")
	if code != http.StatusOK || !strings.Contains(body, `content="0;url=/ui/conversations"`) {
		t.Fatalf("alice's sign-in: %d %s", code, body)
	}
	if page := get(alice, "/ui/conversations"); !strings.Contains(page, "Signed in as <strong>alice</strong> · 1 conversation") || strings.Contains(page, "read only") {
		t.Fatalf("alice's page: %s", page)
	}
	if page := get(alice, "/ui/conversations/conv-b"); !strings.Contains(page, "alice may not see conversation") {
		t.Fatalf("alice opening bob's conversation: %s", page)
	}
	reader, code, _ := signIn("reader")
	if page := get(reader, "/ui/conversations"); code != http.StatusOK || !strings.Contains(page, "Signed in as <strong>reader</strong> · read only") {
		t.Fatalf("the reader's page: %d %s", code, page)
	}
	_, code, body = signIn("nobody")
	if code != http.StatusForbidden || !strings.Contains(body, "lacks the scope mcpsearch:read") {
		t.Fatalf("a person without the read scope: %d %s", code, body)
	}

	rows := o.auditRows(t)
	want := []string{"alice - sign_in ok -", "reader - sign_in ok -", "- - sign_in AUTH_ERROR -"}
	var signIns []string
	for _, r := range rows {
		if strings.Contains(r, "sign_in") {
			signIns = append(signIns, r)
		}
	}
	if !slices.Equal(signIns, want) {
		t.Errorf("sign-ins audited:\n%s\nwant:\n%s", strings.Join(signIns, "\n"), strings.Join(want, "\n"))
	}
	if o.log.holds("page-secret") {
		t.Error("the client secret reached the log")
	}
}
