package server

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/extract/ocr"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/migrations"
	"github.com/mcpsearch/mcpsearch/sources"
	"github.com/mcpsearch/mcpsearch/ui"
)

// uiTransport names the web page's tool calls (its search playground) in
// logs, metrics and audit rows.
const uiTransport = "ui"

// uiRoute returns the web page (package ui) over this server: the backend
// below applies each caller's rights with the checks of the upload API and
// the tools. Should its embedded templates not parse (a mistake of the
// build), every page says so.
func (s *Server) uiRoute() http.Handler {
	h, err := ui.New(newUIBackend(s), ui.Options{Logger: s.log})
	if err != nil {
		s.log.Error("web page", "error", err)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "the web page of this build is broken: "+err.Error(), http.StatusInternalServerError)
		})
	}
	return h
}

// uiBackend is ui.Backend over the server.
type uiBackend struct {
	s *Server
	// keys are the API keys by their id on the page.
	keys map[string]*APIKey

	mu sync.Mutex
	// sessions are the in-process MCP sessions of the page's tool calls,
	// one per key.
	sessions map[string]*mcp.ClientSession
	ocr      *ocr.Engine
}

func newUIBackend(s *Server) *uiBackend {
	b := &uiBackend{s: s, keys: map[string]*APIKey{}, sessions: map[string]*mcp.ClientSession{}}
	for i := range s.deps.APIKeys {
		k := &s.deps.APIKeys[i]
		b.keys[uiKeyID(k)] = k
	}
	return b
}

// uiKeyID names a key in the page's sessions: derived from its hash, so
// that it reveals nothing of the key and changes with it.
func uiKeyID(k *APIKey) string {
	m := hmac.New(sha256.New, k.hash[:])
	m.Write([]byte("mcpsearch ui key id"))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

func (b *uiBackend) principal(k *APIKey) ui.Principal {
	m := hmac.New(sha256.New, k.hash[:])
	m.Write([]byte("mcpsearch ui session seal"))
	return ui.Principal{ID: uiKeyID(k), Name: k.Name, Conversations: k.Conversations, Write: k.write, Seal: m.Sum(nil)}
}

// Open: the page asks for no key where the other routes ask for no
// credential. A server whose only credentials are an identity provider's
// tokens is not open: its page asks for a key and accepts none.
func (b *uiBackend) Open() bool { return !b.s.accessControlled() }

func (b *uiBackend) SignIn(secret string) (ui.Principal, bool) {
	if b.Open() || secret == "" {
		return ui.Principal{}, false
	}
	k := b.s.match(secret)
	if k == nil {
		return ui.Principal{}, false
	}
	return b.principal(k), true
}

func (b *uiBackend) Principal(id string) (ui.Principal, bool) {
	k, ok := b.keys[id]
	if !ok || b.Open() {
		return ui.Principal{}, false
	}
	return b.principal(k), true
}

func (b *uiBackend) OriginAllowed(origin string) bool { return b.s.originAllowed(origin) }

func (b *uiBackend) Features() ui.Features {
	s := b.s
	docsOn := s.docsOn()
	jobsOn := docsOn && s.deps.Jobs != nil
	urls := jobsOn && s.deps.Fetch != nil && s.cfg.FetchURLEnabled
	return ui.Features{Docs: docsOn, Jobs: jobsOn, URLs: urls, Crawl: urls && s.deps.Sources != nil, Writes: s.cfg.WritesOn(),
		Audit: s.deps.Audit != nil && s.deps.Audit.Mode() == "database", MaxFileBytes: s.cfg.MaxFileBytes, Tools: s.toolNames()}
}

// identity is the caller p stands for, as the server's other routes know
// it; a key removed since p signed in is refused.
func (b *uiBackend) identity(p ui.Principal) (identity, error) {
	if b.Open() {
		return identity{}, nil
	}
	k, ok := b.keys[p.ID]
	if !ok {
		return identity{}, &ui.Error{Status: http.StatusUnauthorized, Message: "This key is no longer accepted: sign in again."}
	}
	return identity{key: k}, nil
}

// conversation checks that id may see conv.
func (b *uiBackend) conversation(id identity, conv string) error {
	if strings.TrimSpace(conv) == "" {
		return &ui.Error{Status: http.StatusBadRequest, Message: "Name the conversation."}
	}
	if !id.allows(conv) {
		return &ui.Error{Status: http.StatusForbidden, Message: fmt.Sprintf("Key %s may not see conversation %q.", id.name(), conv)}
	}
	return nil
}

// writes says why id may not change documents; nil when it may.
func (b *uiBackend) writes(id identity) error {
	if !b.s.cfg.WritesOn() {
		return &ui.Error{Status: http.StatusForbidden, Message: "This server is read-only (MCP_read_only): it adds, deletes and cancels nothing."}
	}
	if !id.canWrite() {
		return &ui.Error{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"Key %s may only read: it cannot add, delete or cancel. Give it scopes=read,write in the keys file.", id.name())}
	}
	return nil
}

// docs says why the documents store cannot be used; nil when it can.
func (b *uiBackend) docs() error {
	if !b.s.docsOn() {
		return &ui.Error{Status: http.StatusNotFound, Message: "The documents store is off on this server (it needs DATABASE_URL, with MCP_docs_enabled on)."}
	}
	return nil
}

// words turns a failure of the store, jobs or sources into the message
// the other routes give for it.
func (b *uiBackend) words(ctx context.Context, err error) error {
	var ue *ui.Error
	if err == nil || errors.As(err, &ue) {
		return err
	}
	switch {
	case errors.Is(err, jobs.ErrNotFound), errors.Is(err, sources.ErrNotFound):
		return &ui.Error{Status: http.StatusNotFound, Message: "There is no such job or source: it may have been deleted with its conversation."}
	case errors.Is(err, jobs.ErrFinished):
		return &ui.Error{Status: http.StatusConflict, Message: "The job has already ended: there is nothing left to cancel."}
	case errors.Is(err, audit.ErrNoDatabase):
		return &ui.Error{Status: http.StatusNotFound, Message: "This server has no database: its audit rows go to its log."}
	case errors.Is(err, audit.ErrBadFilter):
		return &ui.Error{Status: http.StatusBadRequest, Message: strings.TrimPrefix(err.Error(), "audit: ")}
	case errors.Is(err, context.DeadlineExceeded):
		return err
	}
	te := classify(ctx, err)
	if te.cause != nil || te.Status >= 500 {
		b.s.log.Warn("ui", "error", err)
	}
	msg := te.Message
	if te.Status >= 500 && te.cause == nil && !te.Retryable {
		msg = "The server failed to answer; its log has the details."
	}
	return &ui.Error{Status: te.Status, Message: msg}
}

func (b *uiBackend) Conversations(ctx context.Context, p ui.Principal, q ui.ConversationQuery) (ui.ConversationPage, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.docs()
	}
	if err != nil {
		return ui.ConversationPage{}, err
	}
	var only []string
	if id.key != nil && id.key.Conversations != nil {
		only = id.key.Conversations
	}
	page, err := b.s.deps.Docs.ListConversationsPage(ctx, docs.ConversationQuery{Only: only, Limit: q.Limit, Cursor: q.Cursor})
	if err != nil {
		return ui.ConversationPage{}, b.words(ctx, err)
	}
	out := ui.ConversationPage{Total: page.Total, Next: page.Next, Conversations: make([]ui.Conversation, 0, len(page.Conversations))}
	for _, c := range page.Conversations {
		out.Conversations = append(out.Conversations, ui.Conversation{ID: c.ID, Files: c.Files, Ready: c.Ready, Processing: c.Processing,
			Failed: c.Failed, Chunks: c.Chunks, LastUpload: c.LastUpload})
	}
	return out, nil
}

func uiFile(f docs.File) ui.File {
	return ui.File{ID: f.ID, Conversation: f.ConversationID, Name: f.FileName, MIMEType: f.MIMEType, Status: f.Status, Error: f.Error,
		Source: f.Source, Note: f.Note, JobID: f.JobID, Size: f.SizeBytes, Chunks: f.ChunkCount, Pages: f.PageCount, Created: f.CreatedAt}
}

func (b *uiBackend) Files(ctx context.Context, p ui.Principal, q ui.FileQuery) (ui.FilePage, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.docs()
	}
	if err == nil {
		err = b.conversation(id, q.Conversation)
	}
	if err != nil {
		return ui.FilePage{}, err
	}
	page, err := b.s.deps.Docs.ListFilesPage(ctx, docs.FileQuery{ConversationID: q.Conversation, Status: q.Status, Prefix: q.Prefix,
		Limit: q.Limit, Cursor: q.Cursor})
	if err != nil {
		return ui.FilePage{}, b.words(ctx, err)
	}
	out := ui.FilePage{Total: page.Total, Next: page.Next, Files: make([]ui.File, 0, len(page.Files))}
	for _, f := range page.Files {
		out.Files = append(out.Files, uiFile(f))
	}
	return out, nil
}

func (b *uiBackend) Sources(ctx context.Context, p ui.Principal, conv string) ([]ui.Source, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.conversation(id, conv)
	}
	if err != nil || b.s.deps.Sources == nil || !b.s.docsOn() {
		return nil, err
	}
	list, err := b.s.deps.Sources.List(ctx, conv)
	if err != nil {
		return nil, b.words(ctx, err)
	}
	out := make([]ui.Source, 0, len(list))
	for _, src := range list {
		sum := src.LastSummary
		var words string
		if !src.LastSyncAt.IsZero() {
			words = fmt.Sprintf("%d added, %d updated, %d removed, %d unchanged; %d fetched", sum.Added, sum.Updated, sum.Removed, sum.Unchanged, sum.Fetched)
			if sum.NotModified > 0 {
				words += fmt.Sprintf(" (%d not modified)", sum.NotModified)
			}
			for _, k := range slices.Sorted(maps.Keys(sum.Skipped)) {
				words += fmt.Sprintf("; %d skipped: %s", sum.Skipped[k], k)
			}
			if sum.Limited {
				words += "; stopped at max_pages with pages left"
			}
		}
		out = append(out, ui.Source{ID: src.ID, Kind: src.Kind, Root: src.Root, Pages: src.Pages, Files: src.Files, Created: src.CreatedAt,
			LastSync: src.LastSyncAt, LastJobID: src.LastJobID, Summary: words, Error: sum.Error})
	}
	return out, nil
}

func (b *uiBackend) DeleteFile(ctx context.Context, p ui.Principal, fileID string) (ui.File, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.docs()
	}
	if err == nil {
		err = b.writes(id)
	}
	if err != nil {
		return ui.File{}, err
	}
	f, err := b.s.deps.Docs.GetFile(ctx, fileID)
	if err == nil && !id.allows(f.ConversationID) {
		// Another conversation's file is one that does not exist.
		err = fmt.Errorf("no file %q: %w", fileID, docs.ErrNotFound)
	}
	if err == nil {
		err = b.s.deps.Docs.DeleteFile(ctx, f.ID)
	}
	if err != nil {
		return ui.File{}, b.words(ctx, err)
	}
	return uiFile(f), nil
}

// jobLister lists jobs across conversations (jobs.Runner).
type jobLister interface {
	Recent(ctx context.Context, q jobs.RecentQuery) (jobs.Page, error)
}

func uiJob(j jobs.Job, info *JobInfo) ui.Job {
	what := j.Input.URL
	switch {
	case j.Input.Title != "":
		what = j.Input.Title
	case j.Input.FileName != "":
		what = j.Input.FileName
	case len(j.Input.Files) > 0:
		what = strings.Join(j.Input.Files, ", ")
		if n := j.Total() - len(j.Input.Files); n > 0 && j.Kind == jobs.KindUpload {
			what += fmt.Sprintf(" and %d more", n)
		}
	case j.Input.Folder != "":
		what = j.Input.Folder
	}
	out := ui.Job{ID: j.ID, Conversation: j.ConversationID, Kind: j.Kind, Status: j.Status, Progress: j.Progress(), What: what,
		Caller: j.Caller, Error: j.Error, Total: j.Total(), Done: j.Done(), Ready: j.Files.Ready, Processing: j.Files.Processing,
		Failed: j.Files.Failed, Duplicates: j.Duplicates, Refused: j.Refused, Chunks: j.Files.Chunks, Submitted: j.Submitted,
		Created: j.CreatedAt, Started: j.StartedAt, Finished: j.FinishedAt}
	if info != nil {
		for _, f := range info.Failures {
			out.Failures = append(out.Failures, ui.Failure{FileName: f.FileName, Reason: f.Reason})
		}
	}
	return out
}

func (b *uiBackend) jobsOn() error {
	if err := b.docs(); err != nil {
		return err
	}
	if b.s.deps.Jobs == nil {
		return &ui.Error{Status: http.StatusNotFound, Message: "This server keeps no jobs."}
	}
	return nil
}

func (b *uiBackend) Jobs(ctx context.Context, p ui.Principal, q ui.JobQuery) (ui.JobPage, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.jobsOn()
	}
	if err != nil {
		return ui.JobPage{}, err
	}
	rq := jobs.RecentQuery{Active: q.Active, Ended: q.Ended, Limit: q.Limit, Cursor: q.Cursor}
	if id.key != nil && id.key.Conversations != nil {
		rq.Conversations = id.key.Conversations
	}
	if q.Conversation != "" {
		if err := b.conversation(id, q.Conversation); err != nil {
			return ui.JobPage{}, err
		}
		rq.Conversations = []string{q.Conversation}
	}
	lister, ok := b.s.deps.Jobs.(jobLister)
	if !ok {
		return ui.JobPage{}, &ui.Error{Status: http.StatusNotFound, Message: "This server cannot list its jobs across conversations."}
	}
	page, err := lister.Recent(ctx, rq)
	if err != nil {
		return ui.JobPage{}, b.words(ctx, err)
	}
	out := ui.JobPage{Next: page.Next, Jobs: make([]ui.Job, 0, len(page.Jobs))}
	for _, j := range page.Jobs {
		out.Jobs = append(out.Jobs, uiJob(j, nil))
	}
	return out, nil
}

// ownJob reads job jobID, which id must be allowed to see: another
// conversation's job is one that does not exist.
func (b *uiBackend) ownJob(ctx context.Context, id identity, jobID string) (jobs.Job, error) {
	j, err := b.s.deps.Jobs.Get(ctx, strings.TrimSpace(jobID))
	if err == nil && !id.allows(j.ConversationID) {
		err = jobs.ErrNotFound
	}
	return j, err
}

func (b *uiBackend) jobInfo(ctx context.Context, j jobs.Job) ui.Job {
	info := jobTools{jobs: b.s.deps.Jobs, store: b.s.deps.Docs}.jobInfo(ctx, j)
	return uiJob(j, &info)
}

func (b *uiBackend) Job(ctx context.Context, p ui.Principal, jobID string) (ui.Job, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.jobsOn()
	}
	if err != nil {
		return ui.Job{}, err
	}
	j, err := b.ownJob(ctx, id, jobID)
	if err != nil {
		return ui.Job{}, b.words(ctx, err)
	}
	return b.jobInfo(ctx, j), nil
}

func (b *uiBackend) CancelJob(ctx context.Context, p ui.Principal, jobID string) (ui.Job, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.jobsOn()
	}
	if err == nil {
		err = b.writes(id)
	}
	if err != nil {
		return ui.Job{}, err
	}
	j, err := b.ownJob(ctx, id, jobID)
	if err == nil {
		j, err = b.s.deps.Jobs.Cancel(ctx, j.ID)
	}
	if err != nil {
		return ui.Job{}, b.words(ctx, err)
	}
	return b.jobInfo(ctx, j), nil
}

// caller names who started a job from the page: the key, or "ui".
func uiCaller(id identity) string { return cmp.Or(id.name(), uiTransport) }

func (b *uiBackend) AddURL(ctx context.Context, p ui.Principal, conv, target string, crawl bool) (ui.Job, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.jobsOn()
	}
	if err == nil {
		err = b.writes(id)
	}
	if err == nil {
		err = b.conversation(id, conv)
	}
	if err != nil {
		return ui.Job{}, err
	}
	f := b.Features()
	switch {
	case !strings.HasPrefix(target, "http://") && !strings.HasPrefix(target, "https://"):
		return ui.Job{}, &ui.Error{Status: http.StatusBadRequest, Message: "The address must begin with http:// or https://."}
	case !f.URLs:
		return ui.Job{}, &ui.Error{Status: http.StatusForbidden, Message: "Adding documents by URL is off on this server (MCP_fetch_url_enabled)."}
	case crawl && !f.Crawl:
		return ui.Job{}, &ui.Error{Status: http.StatusForbidden, Message: "Crawling sites is off on this server."}
	}
	var j jobs.Job
	if crawl {
		j, _, err = b.s.deps.Sources.Crawl(ctx, conv, target, sources.CrawlOptions{}, uiCaller(id))
	} else {
		j, err = b.s.deps.Jobs.AddURL(ctx, conv, target, uiCaller(id))
	}
	if err != nil {
		return ui.Job{}, b.words(ctx, err)
	}
	return uiJob(j, nil), nil
}

// Upload answers a multipart upload as POST /v1/conversations/{id}/files
// does, for the key p stands for.
func (b *uiBackend) Upload(w http.ResponseWriter, r *http.Request, p ui.Principal, conv string) {
	id, err := b.identity(p)
	if err == nil {
		err = b.docs()
	}
	if err != nil {
		var ue *ui.Error
		errors.As(err, &ue)
		writeError(w, r, &ToolError{Code: CodeToolError, Status: ue.Status, Message: ue.Message})
		return
	}
	ctx := withIdentity(r.Context(), id)
	// The upload's job names the key, or the page, as its caller.
	ctx = withCall(ctx, &call{Identity: id, Transport: uiTransport})
	r = r.WithContext(ctx)
	r.SetPathValue("id", conv)
	bodyDeadline(uploadBodyTimeout, http.HandlerFunc(b.s.uploadFiles)).ServeHTTP(w, r)
}

// session is the in-process MCP session of id's tool calls from the page:
// they pass the middleware of every call (rate limit, scopes, timeout,
// log, metrics, audit with transport "ui").
func (b *uiBackend) session(ctx context.Context, id identity) (*mcp.ClientSession, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cs, ok := b.sessions[id.name()]; ok {
		return cs, nil
	}
	ct, st := mcp.NewInMemoryTransports()
	bg := context.WithoutCancel(ctx)
	if _, err := b.s.serverFor(uiTransport, id).Connect(bg, st, nil); err != nil {
		return nil, fmt.Errorf("ui: connect: %w", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpsearch-ui", Version: b.s.version}, nil).Connect(bg, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("ui: connect: %w", err)
	}
	b.sessions[id.name()] = cs
	return cs, nil
}

func (b *uiBackend) Call(ctx context.Context, p ui.Principal, tool string, args map[string]any) (ui.ToolCall, error) {
	id, err := b.identity(p)
	if err != nil {
		return ui.ToolCall{}, err
	}
	cs, err := b.session(ctx, id)
	if err != nil {
		return ui.ToolCall{}, err
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	out := ui.ToolCall{Tool: tool}
	out.Request, _ = json.Marshal(params)
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return ui.ToolCall{}, b.words(ctx, err)
	}
	out.Result, _ = json.Marshal(res)
	out.Text = textOf(res)
	if res.StructuredContent != nil {
		out.Structured, _ = json.Marshal(res.StructuredContent)
	}
	if res.IsError {
		out.Failed, out.Error = true, out.Text
		var env envelope
		if json.Unmarshal([]byte(out.Text), &env) == nil && env.Error != nil {
			out.Error = env.Error.Message
		}
	}
	return out, nil
}

func (b *uiBackend) Audit(ctx context.Context, p ui.Principal, q ui.AuditQuery) (ui.AuditPage, error) {
	id, err := b.identity(p)
	if err != nil {
		return ui.AuditPage{}, err
	}
	if b.s.deps.Audit == nil {
		return ui.AuditPage{}, b.words(ctx, audit.ErrNoDatabase)
	}
	if q.Conversation != "" {
		if err := b.conversation(id, q.Conversation); err != nil {
			return ui.AuditPage{}, err
		}
	}
	f := audit.Filter{Tool: q.Tool, APIKey: q.Key, Outcome: q.Outcome, Conversation: q.Conversation, Since: q.Since,
		Cursor: q.Cursor, Limit: q.Limit}
	if id.key != nil && id.key.Conversations != nil {
		// A key limited to some conversations sees their calls, and its
		// own.
		f.Visible, f.VisibleKey = id.key.Conversations, id.key.Name
	}
	page, err := b.s.deps.Audit.Query(ctx, f)
	if err != nil {
		return ui.AuditPage{}, b.words(ctx, err)
	}
	out := ui.AuditPage{Next: page.Next, Entries: make([]ui.AuditEntry, 0, len(page.Entries))}
	for _, e := range page.Entries {
		out.Entries = append(out.Entries, ui.AuditEntry{ID: e.ID.String(), Tool: e.ToolName, Key: e.APIKey, Subject: e.Subject, Conversation: e.ConversationID,
			Transport: e.Transport, Session: e.SessionID, Client: strings.TrimSpace(e.ClientName + " " + e.ClientVersion),
			Code: e.ErrorCode, Error: e.Error, LatencyMS: e.LatencyMS, Arguments: e.Arguments, JobID: e.JobID, Time: e.CreatedAt,
			Sanitised: e.Sanitised})
	}
	return out, nil
}

func (b *uiBackend) Status(ctx context.Context, p ui.Principal) ui.Status {
	s := b.s
	st := ui.Status{Version: s.version, Ready: true}
	checks := s.dependencyChecks(ctx, true)
	for _, name := range slices.Sorted(maps.Keys(checks)) {
		c := checks[name]
		if c.Status == "down" {
			st.Ready = false
		}
		st.Checks = append(st.Checks, ui.Check{Name: name, Status: c.Status, Error: c.Error, Detail: c.Detail, MS: c.MS})
	}
	if d := s.deps.Docs; d != nil && s.docsOn() {
		e := d.Embedder()
		st.Embedder, st.Model, st.Dimensions, st.Semantic, st.Threshold = s.cfg.EmbedProvider, e.Model(), e.Dimensions(), embed.Semantic(e), d.DefaultThreshold()
		st.OCR = b.ocrStatus(ctx)
		st.Database, st.DatabaseDetail = b.database(ctx)
	} else {
		st.OCR = ui.OCRStatus{Mode: "off", Detail: "documents are off on this server"}
	}
	st.RateLimits = b.rateLimits()
	auth := "none: every caller is trusted"
	if !b.Open() {
		auth = fmt.Sprintf("%d API keys", len(s.deps.APIKeys))
	}
	st.Settings = [][2]string{
		{"Transports", strings.Join(s.cfg.Transports, ", ")},
		{"Listening on", s.cfg.Addr},
		{"Access", auth},
		{"Writes", map[bool]string{true: "on", false: "off (MCP_read_only)"}[s.cfg.WritesOn()]},
		{"Write tools", map[bool]string{true: "offered to keys that may write", false: "off"}[s.cfg.WriteToolsOn()]},
		{"Largest upload", fmt.Sprintf("%d MB", s.cfg.MaxFileBytes>>20)},
		{"Workers", fmt.Sprint(s.cfg.Workers)},
		{"Tool timeout", s.cfg.ToolTimeout.String()},
	}
	if len(s.cfg.AllowedOrigins) > 0 {
		st.Settings = append(st.Settings, [2]string{"Allowed origins", strings.Join(s.cfg.AllowedOrigins, ", ")})
	}
	return st
}

// ocrStatus probes tesseract once, with the server's OCR settings.
func (b *uiBackend) ocrStatus(ctx context.Context) ui.OCRStatus {
	b.mu.Lock()
	if b.ocr == nil {
		mode, err := ocr.ParseMode(b.s.cfg.OCRMode)
		if err == nil {
			b.ocr, err = ocr.New(ocr.Options{Mode: mode, Languages: ocr.ParseLanguages(b.s.cfg.OCRLanguages)})
		}
		if err != nil {
			b.mu.Unlock()
			return ui.OCRStatus{Mode: b.s.cfg.OCRMode, Detail: err.Error()}
		}
	}
	engine := b.ocr
	b.mu.Unlock()
	ps := engine.Probe(ctx)
	detail := ps.Reason
	if ps.Available {
		detail = fmt.Sprintf("%s, languages %s", ps.Version, strings.Join(ps.Languages, "+"))
		if ps.Renderer {
			detail += "; scanned PDF pages and images"
		}
		if ps.Reason != "" {
			detail += "; " + ps.Reason
		}
	}
	return ui.OCRStatus{Mode: string(ps.Mode), Available: ps.Available, Detail: detail}
}

// database says what the documents store runs on: a single PostgreSQL
// or a Citus cluster, and its schema.
func (b *uiBackend) database(ctx context.Context) (string, string) {
	pooled, ok := b.s.deps.Docs.(interface{ Pool() *pgxpool.Pool })
	if !ok {
		return "PostgreSQL", ""
	}
	pool := pooled.Pool()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	kind := "PostgreSQL"
	distributed, err := migrations.Distributed(ctx, pool)
	if err != nil {
		return kind, "could not be read: the database does not answer"
	}
	if distributed {
		kind = "Citus (documents distributed by conversation)"
	}
	v, err := migrations.Current(ctx, pool)
	if err != nil {
		return kind, ""
	}
	return kind, fmt.Sprintf("schema %d of %d", v, migrations.Latest())
}

func (b *uiBackend) rateLimits() ui.RateLimits {
	cfg := b.s.cfg
	out := ui.RateLimits{Store: "memory", Default: ui.RateLimit{PerMinute: cfg.RateLimit.PerMinute, Burst: cfg.RateLimit.Burst}}
	if b.s.deps.RateLimits != nil {
		out.Store = "postgres"
	}
	for _, tool := range b.s.toolNames() {
		rl := cfg.RateLimitFor(tool)
		if rl == cfg.RateLimit {
			continue
		}
		out.Tools = append(out.Tools, ui.ToolRateLimit{Tool: tool, RateLimit: ui.RateLimit{PerMinute: rl.PerMinute, Burst: rl.Burst, Global: rl.Global}})
	}
	return out
}
