package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/sources"
	"github.com/mcpsearch/mcpsearch/ui"
)

// The web page's documents, jobs, sources, playground and audit, each
// through the checks of the server's other routes (uiBackend.identity).

func (b *uiBackend) Conversations(ctx context.Context, p ui.Principal, q ui.ConversationQuery) (ui.ConversationPage, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.docs()
	}
	if err != nil {
		return ui.ConversationPage{}, err
	}
	page, err := b.s.deps.Docs.ListConversationsPage(ctx, docs.ConversationQuery{Only: id.conversations(), Limit: q.Limit, Cursor: q.Cursor})
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

// ownFile reads file fileID, which id must be allowed to see: another
// conversation's file is one that does not exist.
func (b *uiBackend) ownFile(ctx context.Context, id identity, fileID string) (docs.File, error) {
	if err := b.docs(); err != nil {
		return docs.File{}, err
	}
	f, err := b.s.deps.Docs.GetFile(ctx, strings.TrimSpace(fileID))
	if err == nil && !id.allows(f.ConversationID) {
		err = fmt.Errorf("no file %q: %w", fileID, docs.ErrNotFound)
	}
	if err != nil {
		return docs.File{}, b.words(ctx, err)
	}
	return f, nil
}

func (b *uiBackend) File(ctx context.Context, p ui.Principal, fileID string) (ui.File, error) {
	id, err := b.identity(p)
	if err != nil {
		return ui.File{}, err
	}
	f, err := b.ownFile(ctx, id, fileID)
	if err != nil {
		return ui.File{}, err
	}
	return uiFile(f), nil
}

func (b *uiBackend) FileText(ctx context.Context, p ui.Principal, f ui.File) (string, error) {
	id, err := b.identity(p)
	if err != nil {
		return "", err
	}
	if _, err := b.ownFile(ctx, id, f.ID); err != nil {
		return "", err
	}
	_, text, err := b.s.deps.Docs.FileText(ctx, f.ID)
	if errors.Is(err, docs.ErrNotReady) {
		return "", &ui.Error{Status: http.StatusConflict, Message: "The file is not ready: it has no text to show yet."}
	}
	return text, b.words(ctx, err)
}

// fileChunks reads a file's chunks in order (docs.Store).
type fileChunks interface {
	FileChunks(ctx context.Context, f docs.File, after, limit int) ([]docs.Chunk, error)
}

func uiChunk(c docs.Chunk) ui.Chunk {
	return ui.Chunk{ID: c.ID, FileID: c.FileID, Conversation: c.ConversationID, Ordinal: c.Ordinal, Content: c.Content,
		CharStart: c.CharStart, CharEnd: c.CharEnd, Citation: c.Location.String(), OCR: c.Location.OCR}
}

func (b *uiBackend) FileChunks(ctx context.Context, p ui.Principal, f ui.File, after, limit int) ([]ui.Chunk, error) {
	id, err := b.identity(p)
	if err != nil {
		return nil, err
	}
	df, err := b.ownFile(ctx, id, f.ID)
	if err != nil {
		return nil, err
	}
	fc, ok := b.s.deps.Docs.(fileChunks)
	if !ok {
		return nil, &ui.Error{Status: http.StatusNotFound, Message: "This server cannot list a file's chunks."}
	}
	chunks, err := fc.FileChunks(ctx, df, after, limit)
	if err != nil {
		return nil, b.words(ctx, err)
	}
	out := make([]ui.Chunk, 0, len(chunks))
	for _, c := range chunks {
		out = append(out, uiChunk(c))
	}
	return out, nil
}

func (b *uiBackend) Chunk(ctx context.Context, p ui.Principal, chunkID string) (ui.Chunk, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.docs()
	}
	if err != nil {
		return ui.Chunk{}, err
	}
	c, err := b.s.deps.Docs.GetChunk(ctx, strings.TrimSpace(chunkID))
	if err == nil && !id.allows(c.ConversationID) {
		err = fmt.Errorf("no chunk %q: %w", chunkID, docs.ErrNotFound)
	}
	if err != nil {
		return ui.Chunk{}, b.words(ctx, err)
	}
	return uiChunk(c), nil
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
		return ui.File{ID: fileID}, err
	}
	f, err := b.ownFile(ctx, id, fileID)
	if err != nil {
		return ui.File{ID: fileID}, err
	}
	if err := b.s.deps.Docs.DeleteFile(ctx, f.ID); err != nil {
		return uiFile(f), b.words(ctx, err)
	}
	return uiFile(f), nil
}

// RetryFile fetches again the URL a failed file came from: the failed
// file is deleted, and the URL becomes a job, which stores what it finds.
func (b *uiBackend) RetryFile(ctx context.Context, p ui.Principal, fileID string) (ui.File, ui.Job, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.jobsOn()
	}
	if err == nil {
		err = b.writes(id)
	}
	if err != nil {
		return ui.File{ID: fileID}, ui.Job{}, err
	}
	f, err := b.ownFile(ctx, id, fileID)
	switch {
	case err != nil:
		return ui.File{ID: fileID}, ui.Job{}, err
	case f.Status != docs.StatusFailed:
		return uiFile(f), ui.Job{}, &ui.Error{Status: http.StatusConflict, Message: fmt.Sprintf("%s is %s: only a failed file is tried again.", f.FileName, f.Status)}
	case f.Source == "":
		return uiFile(f), ui.Job{}, &ui.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(
			"%s was uploaded, and its bytes are not kept once it failed: choose the file again on its page.", f.FileName)}
	case !b.Features().URLs:
		return uiFile(f), ui.Job{}, &ui.Error{Status: http.StatusForbidden, Message: "Adding documents by URL is off on this server (MCP_fetch_url_enabled)."}
	}
	if err := b.s.deps.Docs.DeleteFile(ctx, f.ID); err != nil && !errors.Is(err, docs.ErrNotFound) {
		return uiFile(f), ui.Job{}, b.words(ctx, err)
	}
	j, err := b.s.deps.Jobs.AddURL(ctx, f.ConversationID, f.Source, uiCaller(id))
	if err != nil {
		return uiFile(f), ui.Job{}, b.words(ctx, err)
	}
	return uiFile(f), uiJob(j, nil), nil
}

func (b *uiBackend) sourcesOn() error {
	if err := b.docs(); err != nil {
		return err
	}
	if b.s.deps.Sources == nil {
		return &ui.Error{Status: http.StatusNotFound, Message: "This server keeps no sources: crawling is off."}
	}
	return nil
}

// syncWords says what a sync did, in words.
func syncWords(src sources.Source) string {
	if src.LastSyncAt.IsZero() {
		return ""
	}
	sum := src.LastSummary
	words := fmt.Sprintf("%d added, %d updated, %d removed, %d unchanged; %d fetched", sum.Added, sum.Updated, sum.Removed, sum.Unchanged, sum.Fetched)
	if sum.NotModified > 0 {
		words += fmt.Sprintf(" (%d not modified)", sum.NotModified)
	}
	for _, k := range slices.Sorted(maps.Keys(sum.Skipped)) {
		words += fmt.Sprintf("; %d skipped: %s", sum.Skipped[k], k)
	}
	if sum.Limited {
		words += "; stopped at max_pages with pages left"
	}
	return words
}

func uiSource(src sources.Source) ui.Source {
	o := src.Options
	return ui.Source{ID: src.ID, Conversation: src.ConversationID, Kind: src.Kind, Root: src.Root, Pages: src.Pages, Files: src.Files,
		Created: src.CreatedAt, LastSync: src.LastSyncAt, LastJobID: src.LastJobID, Summary: syncWords(src), Error: src.LastSummary.Error,
		Options: ui.CrawlOptions{MaxPages: o.MaxPages, MaxDepth: o.MaxDepth, Scope: o.Scope, Include: o.Include, Exclude: o.Exclude}}
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
		out = append(out, uiSource(src))
	}
	return out, nil
}

// ownSource reads source srcID, which id must be allowed to see.
func (b *uiBackend) ownSource(ctx context.Context, id identity, srcID string) (sources.Source, error) {
	if err := b.sourcesOn(); err != nil {
		return sources.Source{}, err
	}
	src, err := b.s.deps.Sources.Get(ctx, strings.TrimSpace(srcID))
	if err == nil && !id.allows(src.ConversationID) {
		err = sources.ErrNotFound
	}
	if err != nil {
		return sources.Source{}, b.words(ctx, err)
	}
	return src, nil
}

func (b *uiBackend) Source(ctx context.Context, p ui.Principal, srcID string) (ui.Source, error) {
	id, err := b.identity(p)
	if err != nil {
		return ui.Source{}, err
	}
	src, err := b.ownSource(ctx, id, srcID)
	if err != nil {
		return ui.Source{}, err
	}
	return uiSource(src), nil
}

func (b *uiBackend) SyncSource(ctx context.Context, p ui.Principal, srcID string) (ui.Source, ui.Job, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.writes(id)
	}
	if err != nil {
		return ui.Source{ID: srcID}, ui.Job{}, err
	}
	src, err := b.ownSource(ctx, id, srcID)
	if err != nil {
		return ui.Source{ID: srcID}, ui.Job{}, err
	}
	j, err := b.s.deps.Sources.Sync(ctx, src, uiCaller(id))
	if err != nil {
		return uiSource(src), ui.Job{}, b.words(ctx, err)
	}
	return uiSource(src), uiJob(j, nil), nil
}

func (b *uiBackend) DeleteSource(ctx context.Context, p ui.Principal, srcID string) (ui.Source, int, error) {
	id, err := b.identity(p)
	if err == nil {
		err = b.writes(id)
	}
	if err != nil {
		return ui.Source{ID: srcID}, 0, err
	}
	src, err := b.ownSource(ctx, id, srcID)
	if err != nil {
		return ui.Source{ID: srcID}, 0, err
	}
	n, err := b.s.deps.Sources.Delete(ctx, src)
	if err != nil {
		return uiSource(src), n, b.words(ctx, err)
	}
	return uiSource(src), n, nil
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
	out := ui.Job{ID: j.ID, Conversation: j.ConversationID, Kind: j.Kind, Status: j.Status, What: what,
		Caller: j.Caller, Error: j.Error, Total: j.Total(), Done: j.Done(), Ready: j.Files.Ready, Processing: j.Files.Processing,
		Failed: j.Files.Failed, Duplicates: j.Duplicates, Refused: j.Refused, Chunks: j.Files.Chunks, Submitted: j.Submitted,
		Created: j.CreatedAt, Started: j.StartedAt, Finished: j.FinishedAt}
	if r := j.Report; r != nil {
		out.Report, out.Counts, out.Skipped = r.Message, r.Counts, r.Skipped
	}
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
	rq := jobs.RecentQuery{Active: q.Active, Ended: q.Ended, Limit: q.Limit, Cursor: q.Cursor, Conversations: id.conversations(), Source: q.Source}
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
		return ui.Job{ID: j.ID, Conversation: j.ConversationID}, b.words(ctx, err)
	}
	return b.jobInfo(ctx, j), nil
}

// uiCaller names who started a job from the page: the key or the person,
// or "ui".
func uiCaller(id identity) string { return cmp.Or(id.name(), uiTransport) }

func (b *uiBackend) AddURL(ctx context.Context, p ui.Principal, conv, target string, crawl *ui.CrawlOptions) (ui.Job, error) {
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
	case crawl != nil && !f.Crawl:
		return ui.Job{}, &ui.Error{Status: http.StatusForbidden, Message: "Crawling sites is off on this server."}
	}
	var j jobs.Job
	if crawl != nil {
		opts := sources.CrawlOptions{MaxPages: crawl.MaxPages, MaxDepth: crawl.MaxDepth, Scope: crawl.Scope, Include: crawl.Include, Exclude: crawl.Exclude}
		j, _, err = b.s.deps.Sources.Crawl(ctx, conv, target, opts, uiCaller(id))
	} else {
		j, err = b.s.deps.Jobs.AddURL(ctx, conv, target, uiCaller(id))
	}
	if err != nil {
		return ui.Job{}, b.words(ctx, err)
	}
	return uiJob(j, nil), nil
}

// Upload answers a multipart upload as POST /v1/conversations/{id}/files
// does, for the caller p stands for, and returns what it answered.
func (b *uiBackend) Upload(w http.ResponseWriter, r *http.Request, p ui.Principal, conv string) ui.UploadResult {
	id, err := b.identity(p)
	if err == nil {
		err = b.docs()
	}
	if err == nil {
		err = b.conversation(id, conv)
	}
	if err != nil {
		var ue *ui.Error
		errors.As(err, &ue)
		writeError(w, r, &ToolError{Code: CodeToolError, Status: ue.Status, Message: ue.Message})
		return ui.UploadResult{Status: ue.Status, Error: ue.Message}
	}
	ctx := withIdentity(r.Context(), id)
	// The upload's job names the key, or the person, as its caller.
	ctx = withCall(ctx, &call{Identity: id, Transport: uiTransport})
	r = r.WithContext(ctx)
	r.SetPathValue("id", conv)
	// The answer is small (one line per file): it is kept to be read back
	// as well as sent.
	rec := httptest.NewRecorder()
	bodyDeadline(uploadBodyTimeout, http.HandlerFunc(b.s.uploadFiles)).ServeHTTP(&teeWriter{ResponseWriter: w, rec: rec}, r)
	var out uploadResponse
	res := ui.UploadResult{Status: rec.Code}
	if json.Unmarshal(rec.Body.Bytes(), &out) != nil {
		var env envelope
		if json.Unmarshal(rec.Body.Bytes(), &env) == nil && env.Error != nil {
			res.Error = env.Error.Message
		}
		return res
	}
	res.JobID = out.JobID
	if out.Error != nil && len(out.Files) == 0 {
		res.Error = out.Error.Message
	}
	for _, f := range out.Files {
		uf := ui.UploadedFile{ID: f.ID, Name: f.FileName, Result: f.Result}
		if f.Refusal != nil {
			uf.Reason = f.Refusal.Message
		}
		res.Files = append(res.Files, uf)
	}
	return res
}

// teeWriter answers through its ResponseWriter and keeps a copy of the
// answer.
type teeWriter struct {
	http.ResponseWriter
	rec *httptest.ResponseRecorder
}

func (t *teeWriter) WriteHeader(code int) {
	t.rec.WriteHeader(code)
	t.ResponseWriter.WriteHeader(code)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if t.rec.Body.Len() < 1<<20 {
		t.rec.Body.Write(p)
	}
	return t.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (the body's
// read deadline).
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// session is the in-process MCP session of id's tool calls from the page:
// they pass the middleware of every call (scopes, timeout, log, metrics,
// audit with transport "ui"; the playground's own budget).
func (b *uiBackend) session(ctx context.Context, id identity) (*mcp.ClientSession, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := id.serverKey(uiTransport)
	if cs, ok := b.sessions[key]; ok {
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
	b.sessions[key] = cs
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
	f := audit.Filter{Tool: q.Tool, Caller: q.Caller, Transport: q.Transport, Outcome: q.Outcome, Conversation: q.Conversation, Since: q.Since,
		Cursor: q.Cursor, Limit: q.Limit}
	if only := id.conversations(); only != nil {
		// A caller limited to some conversations sees their calls, and
		// its own.
		f.Visible, f.VisibleKey, f.VisibleSubject = only, id.keyName(), id.subject()
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
