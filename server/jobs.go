package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/crawl"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/sources"
)

// Jobs adds documents as jobs and reads and cancels them (jobs.Runner).
type Jobs interface {
	AddURL(ctx context.Context, conv, url, caller string) (jobs.Job, error)
	// AddFiles stores ups as a job's files; with ticket t they take slots
	// of the queue as uploads do, without they wait in the database.
	AddFiles(ctx context.Context, conv, kind string, in jobs.Input, caller string, ups []docs.Upload, t *docs.Ticket) (jobs.Job, []docs.File, []error, error)
	Get(ctx context.Context, id string) (jobs.Job, error)
	List(ctx context.Context, conv, status string, limit int, cursor string) (jobs.Page, error)
	Cancel(ctx context.Context, id string) (jobs.Job, error)
	// Files returns up to limit of a job's stored files, oldest first, or
	// of its failed ones.
	Files(ctx context.Context, j jobs.Job, failedOnly bool, limit int) ([]docs.File, error)
	// Lease is how long a job whose process stopped waits for another.
	Lease() time.Duration
	// Watch tells, on changed, when a job may have moved, until stop.
	Watch(id string) (changed <-chan struct{}, stop func())
}

// AddDocumentInput is the add_document tool's arguments.
type AddDocumentInput struct {
	ConversationID string `json:"conversation_id,omitempty" jsonschema:"the conversation the document is added to (default: the server's default conversation)"`
	URL            string `json:"url,omitempty" jsonschema:"an http(s) URL of a page or file (PDF, Office, e-book, HTML, text, a .zip or .tar.gz of such files) to fetch and store; give exactly one of url, text or content_base64"`
	Text           string `json:"text,omitempty" jsonschema:"text to store as a document (Markdown or plain text), with title"`
	Title          string `json:"title,omitempty" jsonschema:"the title of text: its file name in list_files and citations"`
	ContentBase64  string `json:"content_base64,omitempty" jsonschema:"a file's bytes in base64 (standard alphabet, padding optional), with file_name; a .zip or .tar.gz is stored as the files it holds"`
	FileName       string `json:"file_name,omitempty" jsonschema:"the name of the file sent in content_base64, with its extension"`
	MIMEType       string `json:"mime_type,omitempty" jsonschema:"the file's media type, if known; the content and the name weigh more"`
	WaitSeconds    int    `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the job to finish before answering, 0 to 120 (default 0: answer at once with the job to follow with get_job)"`
	// Crawl makes url the start of a site to crawl and keep in sync.
	Crawl *CrawlInput `json:"crawl,omitempty" jsonschema:"with url: crawl the site from it (links, sitemap.xml, llms.txt; robots.txt obeyed) and keep it as a source that sync_source re-syncs; {} takes the defaults"`
}

// scope: add_document names its conversation.
func (in AddDocumentInput) scope() scope { return inConversation(strings.TrimSpace(in.ConversationID)) }

func (in *AddDocumentInput) setDefaultConversation(id string) {
	if strings.TrimSpace(in.ConversationID) == "" {
		in.ConversationID = id
	}
}

// JobIDInput names one job.
type JobIDInput struct {
	JobID string `json:"job_id" jsonschema:"a job_id returned by add_document, list_jobs or the upload API"`
}

// scope: a job's conversation is known once the job is read.
func (JobIDInput) scope() scope { return scope{perResult: true} }

// ListJobsInput is the list_jobs tool's arguments.
type ListJobsInput struct {
	ConversationID string `json:"conversation_id,omitempty" jsonschema:"the conversation whose jobs are listed (default: the server's default conversation)"`
	Status         string `json:"status,omitempty" jsonschema:"only jobs in this status: queued, running, succeeded, failed or cancelled (default: all)"`
	Limit          int    `json:"limit,omitempty" jsonschema:"how many jobs per page, newest first, 1 to 500 (default 50)"`
	Cursor         string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page; absent for the first page"`
}

func (in ListJobsInput) scope() scope { return inConversation(strings.TrimSpace(in.ConversationID)) }

func (in *ListJobsInput) setDefaultConversation(id string) {
	if strings.TrimSpace(in.ConversationID) == "" {
		in.ConversationID = id
	}
}

// DeleteDocumentInput is the delete_document tool's arguments.
type DeleteDocumentInput struct {
	FileID string `json:"file_id" jsonschema:"the file_id of the document to delete, from list_files, add_document or search_docs"`
}

func (DeleteDocumentInput) scope() scope { return scope{perResult: true} }

// JobInfo is a job as the tools and the API show it.
type JobInfo struct {
	JobID          string `json:"job_id"`
	ConversationID string `json:"conversation_id"`
	// Kind is upload, document, url or ingest.
	Kind   string `json:"kind"`
	Status string `json:"status" jsonschema:"queued, running, succeeded, failed or cancelled"`
	// Progress says where the job stands in words.
	Progress string `json:"progress"`
	// Input is what the job was asked: a URL, a title, file names.
	Input jobs.Input `json:"input"`
	// Counts counts what the job's files have come to.
	Counts     JobCounts `json:"counts"`
	Error      string    `json:"error,omitempty"`
	CreatedAt  string    `json:"created_at"`
	StartedAt  string    `json:"started_at,omitempty"`
	FinishedAt string    `json:"finished_at,omitempty"`
	// Failures lists files that failed or were refused, with why (the
	// first of them).
	Failures []JobFailure `json:"failures,omitempty"`
	// Report is what a crawl or a sync says of itself: pages fetched and
	// queued, then files added, updated, removed and unchanged, and pages
	// skipped by reason.
	Report *jobs.Report `json:"report,omitempty"`
}

// JobCounts counts a job's files.
type JobCounts struct {
	// Total is every file of the job so far; it grows until the job has
	// stored them all (Submitted).
	Total      int   `json:"total"`
	Done       int   `json:"done"`
	Ready      int   `json:"ready"`
	Processing int   `json:"processing"`
	Failed     int   `json:"failed"`
	Duplicates int   `json:"duplicates" jsonschema:"files whose bytes the conversation already held: not stored again"`
	Refused    int   `json:"refused" jsonschema:"files not stored: unsupported type, too large"`
	Chunks     int64 `json:"chunks"`
	Pages      int64 `json:"pages"`
	// Submitted is true once every file of the job is stored.
	Submitted bool `json:"submitted"`
}

// JobFailure is a file a job could not store, and why.
type JobFailure struct {
	FileID   string `json:"file_id,omitempty"`
	FileName string `json:"file_name"`
	Reason   string `json:"reason"`
}

// JobFile is one file a job stored.
type JobFile struct {
	FileID     string `json:"file_id"`
	FileName   string `json:"file_name"`
	Status     string `json:"status"`
	ChunkCount int    `json:"chunk_count"`
	Duplicate  bool   `json:"duplicate,omitempty"`
	Error      string `json:"error,omitempty"`
}

// AddDocumentOutput is add_document's structured result.
type AddDocumentOutput struct {
	JobInfo
	// Files are the files the job stored or found, as far as it knows when
	// it answers (the first maxJobFilesShown); get_job follows the rest.
	Files []JobFile `json:"files"`
	// SourceID is the site source a crawl records (list_sources,
	// sync_source, delete_source).
	SourceID string `json:"source_id,omitempty"`
}

// ListJobsOutput is list_jobs' structured result.
type ListJobsOutput struct {
	Jobs       []JobInfo `json:"jobs"`
	Total      int       `json:"total"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// DeleteDocumentOutput is delete_document's structured result.
type DeleteDocumentOutput struct {
	FileID   string `json:"file_id"`
	FileName string `json:"file_name"`
	Deleted  bool   `json:"deleted"`
}

const (
	// maxWait bounds add_document's wait_seconds.
	maxWait = 120
	// maxJobFilesShown bounds the files a result lists.
	maxJobFilesShown = 50
	// maxJobFailuresShown bounds the failures a job's result lists.
	maxJobFailuresShown = 20
	// waitRecheck is how often a waiting add_document reads its job
	// unbidden: it is told when the job may have moved (Jobs.Watch), and
	// reads it then; this only bounds what a lost notification delays.
	waitRecheck = 5 * time.Second
	// waitSpacing spaces the reads of a job whose files end in quick
	// succession: the notifications between two reads make one.
	waitSpacing = 20 * time.Millisecond
	// waitOutage is how often a waiting add_document tries to read its
	// job while the database cannot be reached.
	waitOutage = time.Second
	// progressEvery is the longest time between two progress
	// notifications while add_document waits.
	progressEvery = time.Second
)

// jobTools answers the tools that add and follow documents.
type jobTools struct {
	jobs    Jobs
	sources Sources
	store   Documents
	fetch   bool
	maxRaw  int64
	limit   resultLimit
}

func newJobTools(e toolEnv) (jobTools, bool) {
	t := jobTools{jobs: e.deps.Jobs, sources: e.deps.Sources, store: e.deps.Docs, fetch: e.deps.Fetch != nil && e.cfg.FetchURLEnabled, maxRaw: e.cfg.MaxFileBytes,
		limit: newResultLimit(e.cfg)}
	return t, e.deps.Jobs != nil && e.deps.Docs != nil && e.cfg.DocsEnabled && e.cfg.WriteToolsOn()
}

func (t jobTools) ping(ctx context.Context) error { return t.store.Ping(ctx) }

// jobFailures are the failures of the job tools: the documents store's,
// and the jobs'.
func jobFailures() []failure {
	return append(docsFailures(),
		failure{is: []error{jobs.ErrNotFound}, status: http.StatusNotFound},
		failure{is: []error{jobs.ErrFinished}, status: http.StatusConflict},
	)
}

// writeTool declares a tool that changes the documents: it needs the
// write scope, and is hidden where writes are off.
func writeTool[In scoped, Out any](def *mcp.Tool, constrain func(jobTools, *jsonschema.Schema),
	run func(jobTools, context.Context, In) (*mcp.CallToolResult, Out, error), timeout func(config.Config) time.Duration) declared {
	return tool[jobTools, In, Out]{def: def, handler: newJobTools, constrain: constrain, run: run, timeout: timeout,
		failures: jobFailures(), probe: "database", ping: jobTools.ping, write: true}
}

// readJobTool declares a tool that reads jobs: read scope, offered where
// jobs are.
func readJobTool[In scoped, Out any](def *mcp.Tool, constrain func(jobTools, *jsonschema.Schema),
	run func(jobTools, context.Context, In) (*mcp.CallToolResult, Out, error)) declared {
	return tool[jobTools, In, Out]{def: def, handler: func(e toolEnv) (jobTools, bool) {
		t, _ := newJobTools(e)
		return t, e.deps.Jobs != nil && e.deps.Docs != nil && e.cfg.DocsEnabled
	}, constrain: constrain, run: run, failures: jobFailures(), probe: "database", ping: jobTools.ping}
}

var docsWrite = &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(true), IdempotentHint: true}

func addDocumentTool() declared {
	return writeTool(&mcp.Tool{
		Name:  "add_document",
		Title: "Add a document to a conversation",
		Description: "Store a document in a conversation's files so that search_docs finds it later: a web page or file by url, text you write (notes, a summary, an answer to keep) with a title, " +
			"or a file's bytes in content_base64 with file_name (PDF, Office, OpenDocument, EPUB, HTML, Markdown, CSV, text; a .zip or .tar.gz of them adds each file). " +
			"Give exactly one of url, text or content_base64. It starts a job and answers at once with its job_id and status; set wait_seconds (up to 120) to wait for it to finish, " +
			"or follow it with get_job. The same bytes already in the conversation are recognised and not stored twice. " +
			"Files larger than one message can carry go through the upload API (POST /v1/conversations/{id}/files) or a url.",
		Annotations: withTitle(docsWrite, "Add a document to a conversation"),
	}, func(t jobTools, sc *jsonschema.Schema) {
		prop(sc, "conversation_id").MaxLength = ptr(maxConversationIDLen)
		prop(sc, "url").MaxLength = ptr(4096)
		prop(sc, "title").MaxLength = ptr(docs.MaxFileNameRunes)
		prop(sc, "file_name").MaxLength = ptr(docs.MaxFileNameRunes)
		prop(sc, "mime_type").MaxLength = ptr(255)
		w := prop(sc, "wait_seconds")
		w.Minimum, w.Maximum = ptr(0.0), ptr(float64(maxWait))
		c := prop(sc, "crawl")
		mp := prop(c, "max_pages")
		mp.Minimum, mp.Maximum = ptr(0.0), ptr(float64(crawl.MaxPagesLimit))
		md := prop(c, "max_depth")
		md.Minimum, md.Maximum = ptr(0.0), ptr(50.0)
		prop(c, "scope").Enum = enum(string(crawl.ScopePrefix), string(crawl.ScopeHost), string(crawl.ScopeDomain))
		for _, name := range []string{"include", "exclude"} {
			g := prop(c, name)
			g.MaxItems = ptr(50)
			if g.Items != nil {
				g.Items.MaxLength = ptr(512)
			}
		}
		constrainCrawl(c)
	}, jobTools.addDocument, func(c config.Config) time.Duration {
		// The longest wait, and the time to store what was sent.
		return maxWait*time.Second + max(c.ToolTimeout, 30*time.Second)
	})
}

func getJobTool() declared {
	return readJobTool(&mcp.Tool{
		Name:  "get_job",
		Title: "Follow a document job",
		Description: "Read a job of add_document, the upload API or the CLI: its status (queued, running, succeeded, failed, cancelled), how many of its files are done, " +
			"ready, processing or failed (with the reasons), its chunks and pages, and when it started and finished.",
		Annotations: withTitle(docsReadOnly, "Follow a document job"),
	}, jobIDSchema, jobTools.getJob)
}

func listJobsTool() declared {
	return readJobTool(&mcp.Tool{
		Name:        "list_jobs",
		Title:       "List document jobs",
		Description: "List a conversation's document jobs (add_document, uploads, CLI runs), newest first, a page at a time, optionally only those in one status, with their progress.",
		Annotations: withTitle(docsReadOnly, "List document jobs"),
	}, func(_ jobTools, sc *jsonschema.Schema) {
		prop(sc, "conversation_id").MaxLength = ptr(maxConversationIDLen)
		prop(sc, "status").Enum = enum(jobs.Statuses...)
		l := prop(sc, "limit")
		l.Minimum, l.Maximum = ptr(1.0), ptr(500.0)
		prop(sc, "cursor").MaxLength = ptr(512)
	}, jobTools.listJobs)
}

func cancelJobTool() declared {
	return writeTool(&mcp.Tool{
		Name:  "cancel_job",
		Title: "Cancel a document job",
		Description: "Cancel a job that is queued or running: it stops within two seconds. Files it had made ready stay searchable; files not finished are removed. " +
			"A job that has ended cannot be cancelled (its status is returned).",
		Annotations: withTitle(&mcp.ToolAnnotations{DestructiveHint: boolPtr(true), IdempotentHint: true, OpenWorldHint: boolPtr(false)}, "Cancel a document job"),
	}, jobIDSchema, jobTools.cancelJob, nil)
}

func deleteDocumentTool() declared {
	return writeTool(&mcp.Tool{
		Name:  "delete_document",
		Title: "Delete a document",
		Description: "Delete one file of a conversation, with its chunks: search_docs no longer finds it. This cannot be undone; " +
			"the same bytes can be added again.",
		Annotations: withTitle(&mcp.ToolAnnotations{DestructiveHint: boolPtr(true), IdempotentHint: true, OpenWorldHint: boolPtr(false)}, "Delete a document"),
	}, func(_ jobTools, sc *jsonschema.Schema) {
		f := prop(sc, "file_id")
		f.MinLength, f.MaxLength = ptr(1), ptr(64)
	}, jobTools.deleteDocument, nil)
}

func jobIDSchema(_ jobTools, sc *jsonschema.Schema) {
	j := prop(sc, "job_id")
	j.MinLength, j.MaxLength = ptr(1), ptr(64)
}

// caller names who asks, for the job's record: the key, or the transport.
func caller(ctx context.Context) string {
	c := callFrom(ctx)
	if n := c.Identity.name(); n != "" {
		return n
	}
	if c.Transport != "" {
		return c.Transport
	}
	return "api"
}

func (t jobTools) addDocument(ctx context.Context, in AddDocumentInput) (*mcp.CallToolResult, AddDocumentOutput, error) {
	conv := in.scope().conversation
	if conv == "" {
		return nil, AddDocumentOutput{}, badArg("conversation_id is required: this server has no default conversation")
	}
	url, text, b64 := strings.TrimSpace(in.URL), in.Text, strings.TrimSpace(in.ContentBase64)
	given := 0
	for _, s := range []string{url, text, b64} {
		if s != "" {
			given++
		}
	}
	if given != 1 {
		return nil, AddDocumentOutput{}, badArg("give exactly one of url, text (with title) or content_base64 (with file_name)")
	}
	if in.Crawl != nil && url == "" {
		return nil, AddDocumentOutput{}, badArg("crawl goes with url: the start page of the site to crawl")
	}
	var j jobs.Job
	var files []docs.File
	var errs []error
	var err error
	var sourceID string
	switch {
	case url != "":
		if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			return nil, AddDocumentOutput{}, badArg("url must be an http or https URL")
		}
		if !t.fetch {
			return nil, AddDocumentOutput{}, badArg("adding documents by URL is off on this server (MCP_fetch_url_enabled)")
		}
		if in.Crawl != nil {
			if t.sources == nil {
				return nil, AddDocumentOutput{}, badArg("crawling sites is off on this server")
			}
			var src sources.Source
			j, src, err = t.sources.Crawl(ctx, conv, url, in.Crawl.options(), caller(ctx))
			sourceID = src.ID
			break
		}
		j, err = t.jobs.AddURL(ctx, conv, url, caller(ctx))
	case text != "":
		title := strings.TrimSpace(in.Title)
		if title == "" {
			return nil, AddDocumentOutput{}, badArg("title is required with text: it names the document in list_files and citations")
		}
		name := title
		if !hasTextExt(name) {
			name += ".md"
		}
		up := docs.Upload{FileName: name, MIMEType: "text/markdown", Data: []byte(text)}
		j, files, errs, err = t.jobs.AddFiles(ctx, conv, jobs.KindDocument, jobs.Input{Title: title}, caller(ctx), []docs.Upload{up}, nil)
	default:
		name := strings.TrimSpace(in.FileName)
		if name == "" {
			return nil, AddDocumentOutput{}, badArg("file_name is required with content_base64, with its extension (report.pdf)")
		}
		data, derr := decodeBase64(b64)
		if derr != nil {
			return nil, AddDocumentOutput{}, badArg("content_base64 is not base64: %v", derr)
		}
		if int64(len(data)) > t.maxRaw {
			return nil, AddDocumentOutput{}, fmt.Errorf("%s is larger than the %d MB limit (MCP_docs_max_file_mb): %w", name, t.maxRaw>>20, docs.ErrTooLarge)
		}
		up := docs.Upload{FileName: name, MIMEType: in.MIMEType, Data: data}
		j, files, errs, err = t.jobs.AddFiles(ctx, conv, jobs.KindDocument, jobs.Input{FileName: name}, caller(ctx), []docs.Upload{up}, nil)
	}
	if err != nil {
		return nil, AddDocumentOutput{}, fmt.Errorf("add document: %w", err)
	}
	callFrom(ctx).setJob(j.ID)
	// A single file refused (unsupported, too large) is the call's error:
	// nothing was stored.
	if len(errs) == 1 && errs[0] != nil && files[0].Status != "unpacked" {
		return nil, AddDocumentOutput{}, fmt.Errorf("add document (job %s): %w", j.ID, errs[0])
	}
	if w := min(max(in.WaitSeconds, 0), maxWait); w > 0 && !jobs.Final(j.Status) {
		if j, err = t.wait(ctx, j, time.Duration(w)*time.Second); err != nil {
			return nil, AddDocumentOutput{}, err
		}
	}
	out := AddDocumentOutput{JobInfo: t.jobInfo(ctx, j), SourceID: sourceID}
	out.Files, err = t.docFiles(ctx, j, files)
	if err != nil {
		return nil, AddDocumentOutput{}, err
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: addDocumentText(out)}}}
	for _, f := range out.Files {
		if f.FileID == "" {
			continue
		}
		res.Content = append(res.Content, &mcp.ResourceLink{URI: fileURI(j.ConversationID, f.FileID), Name: f.FileName,
			Title: f.FileName, MIMEType: "text/plain", Description: "the extracted text of " + f.FileName + " (" + f.Status + ")"})
	}
	return res, out, nil
}

// hasTextExt reports whether a title already ends like a text file's name.
func hasTextExt(name string) bool {
	l := strings.ToLower(name)
	for _, ext := range []string{".md", ".markdown", ".txt", ".text"} {
		if strings.HasSuffix(l, ext) {
			return true
		}
	}
	return false
}

// decodeBase64 reads standard base64, padded or not, with line breaks
// allowed (what encoders wrap at 76 columns).
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	s = strings.TrimRight(s, "=")
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		if b2, err2 := base64.RawURLEncoding.DecodeString(s); err2 == nil {
			return b2, nil
		}
	}
	return b, err
}

// wait waits for job j to end, or for d to pass, and returns it as it then
// is. It reads the job when told it may have moved (Jobs.Watch), so that it
// answers as soon as the job ends, and sends the caller progress
// notifications when it asked for them (a progressToken): whenever more
// files are done, and at least every progressEvery.
func (t jobTools) wait(ctx context.Context, j jobs.Job, d time.Duration) (jobs.Job, error) {
	changed, stop := t.jobs.Watch(j.ID)
	defer stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	// The job may have moved before the watch began: it is read once at
	// once. due is when read fires.
	due := time.Now()
	read := time.NewTimer(0)
	defer read.Stop()
	var lastRead time.Time
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	notify := progressFrom(ctx)
	var sent time.Time
	last, fraction := -1, 0.0
	for {
		if notify != nil {
			done := j.Done()
			more := done != last
			if more {
				last, fraction = done, 0
			}
			if more || time.Since(sent) >= progressEvery {
				total := 0.0
				if j.Submitted {
					total = float64(j.Total())
				}
				// Progress must grow with every notification: a
				// fraction of a file marks the time that passed.
				notify(ctx, float64(done)+fraction, total, j.Progress())
				fraction = min(fraction+0.01, 0.99)
				sent = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return j, nil
		case <-deadline.C:
			return j, nil
		case <-tick.C:
			continue
		case <-changed:
			if at := lastRead.Add(waitSpacing); at.Before(due) {
				due = at
				read.Reset(time.Until(at))
			}
			continue
		case <-read.C:
		}
		lastRead = time.Now()
		next, err := t.jobs.Get(ctx, j.ID)
		switch {
		case err != nil && ctx.Err() != nil:
			return j, nil
		case errors.Is(err, docs.ErrUnavailable):
			// The database is away for a moment (a restart): the job
			// goes on without it, and is read again once it is back.
			due = time.Now().Add(waitOutage)
			read.Reset(waitOutage)
			continue
		case err != nil:
			return j, err
		}
		j = next
		if jobs.Final(j.Status) {
			return j, nil
		}
		due = time.Now().Add(waitRecheck)
		read.Reset(waitRecheck)
	}
}

// jobInfo renders a job, with its failures.
func (t jobTools) jobInfo(ctx context.Context, j jobs.Job) JobInfo {
	info := JobInfo{JobID: j.ID, ConversationID: j.ConversationID, Kind: j.Kind, Status: j.Status, Progress: j.Progress(), Input: j.Input,
		Error: j.Error, CreatedAt: stamp(j.CreatedAt), StartedAt: stamp(j.StartedAt), FinishedAt: stamp(j.FinishedAt),
		Counts: JobCounts{Total: j.Total(), Done: j.Done(), Ready: j.Files.Ready, Processing: j.Files.Processing, Failed: j.Files.Failed,
			Duplicates: j.Duplicates, Refused: j.Refused, Chunks: j.Files.Chunks, Pages: j.Files.Pages, Submitted: j.Submitted},
		Report: j.Report}
	for _, r := range j.Refusals {
		if len(info.Failures) == maxJobFailuresShown {
			break
		}
		info.Failures = append(info.Failures, JobFailure{FileName: r.FileName, Reason: r.Reason})
	}
	if j.Files.Failed > 0 && len(info.Failures) < maxJobFailuresShown {
		failed, err := t.jobs.Files(ctx, j, true, maxJobFailuresShown-len(info.Failures))
		if err == nil {
			for _, f := range failed {
				info.Failures = append(info.Failures, JobFailure{FileID: f.ID, FileName: f.FileName, Reason: f.Error})
			}
		}
	}
	return info
}

// docFiles lists the files a job stored or found: those the call knows of
// (duplicates included), then the job's own, up to maxJobFilesShown.
func (t jobTools) docFiles(ctx context.Context, j jobs.Job, known []docs.File) ([]JobFile, error) {
	out := []JobFile{}
	seen := map[string]bool{}
	add := func(f docs.File) {
		if f.ID == "" || seen[f.ID] || len(out) == maxJobFilesShown {
			return
		}
		seen[f.ID] = true
		out = append(out, JobFile{FileID: f.ID, FileName: f.FileName, Status: f.Status, ChunkCount: f.ChunkCount, Duplicate: f.Duplicate, Error: f.Error})
	}
	stored, err := t.jobs.Files(ctx, j, false, maxJobFilesShown)
	if err != nil {
		return nil, err
	}
	fresh := map[string]docs.File{}
	for _, f := range stored {
		fresh[f.ID] = f
	}
	for _, f := range known {
		if cur, ok := fresh[f.ID]; ok {
			f = cur
		}
		add(f)
	}
	for _, f := range stored {
		add(f)
	}
	return out, nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func addDocumentText(out AddDocumentOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %s is %s: %s.", out.JobID, out.Status, out.Progress)
	switch out.Status {
	case jobs.Queued, jobs.Running:
		b.WriteString(" Follow it with get_job; search_docs finds its files once they are ready.")
	case jobs.Succeeded:
		b.WriteString(" search_docs finds its files now.")
	}
	if out.Error != "" {
		fmt.Fprintf(&b, " %s", out.Error)
	}
	if out.SourceID != "" {
		fmt.Fprintf(&b, " The site is source %s: sync_source crawls it again for what changed, list_sources shows it.", out.SourceID)
	}
	for _, f := range out.Files {
		fmt.Fprintf(&b, "\n- %s (%s, file_id %s", f.FileName, f.Status, f.FileID)
		if f.Duplicate {
			b.WriteString(", already in the conversation")
		}
		if f.ChunkCount > 0 {
			fmt.Fprintf(&b, ", %d chunks", f.ChunkCount)
		}
		if f.Error != "" {
			fmt.Fprintf(&b, ": %s", f.Error)
		}
		b.WriteString(")")
	}
	if n := out.Counts.Total - len(out.Files); n > 0 && len(out.Files) > 0 {
		fmt.Fprintf(&b, "\n... and %d more files (list_files lists them all).", n)
	}
	return b.String()
}

func jobText(info JobInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %s (%s) is %s: %s.", info.JobID, info.Kind, info.Status, info.Progress)
	if info.Error != "" {
		fmt.Fprintf(&b, " %s", info.Error)
	}
	if r := info.Report; r != nil && len(r.Counts) > 0 && jobs.Final(info.Status) {
		c := r.Counts
		fmt.Fprintf(&b, "\nPages: %d added, %d updated, %d removed, %d unchanged, %d fetched.", c["added"], c["updated"], c["removed"], c["unchanged"], c["fetched"])
		if len(r.Skipped) > 0 {
			b.WriteString(" Skipped:")
			for _, k := range slices.Sorted(maps.Keys(r.Skipped)) {
				fmt.Fprintf(&b, " %s %d", k, r.Skipped[k])
			}
			b.WriteString(".")
		}
	}
	for _, f := range info.Failures {
		fmt.Fprintf(&b, "\n- %s failed: %s", f.FileName, f.Reason)
	}
	return b.String()
}

// ownJob reads job id and checks that the caller may see its conversation;
// a job of another conversation is answered as one that does not exist.
func (t jobTools) ownJob(ctx context.Context, id string) (jobs.Job, error) {
	j, err := t.jobs.Get(ctx, strings.TrimSpace(id))
	if err != nil {
		return jobs.Job{}, err
	}
	callFrom(ctx).setJob(j.ID)
	if !identityFrom(ctx).allows(j.ConversationID) {
		return jobs.Job{}, fmt.Errorf("job %s: %w", id, jobs.ErrNotFound)
	}
	callFrom(ctx).setConversation(j.ConversationID)
	return j, nil
}

func (t jobTools) getJob(ctx context.Context, in JobIDInput) (*mcp.CallToolResult, JobInfo, error) {
	j, err := t.ownJob(ctx, in.JobID)
	if err != nil {
		return nil, JobInfo{}, fmt.Errorf("get job: %w", err)
	}
	info := t.jobInfo(ctx, j)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: jobText(info)}}}, info, nil
}

func (t jobTools) cancelJob(ctx context.Context, in JobIDInput) (*mcp.CallToolResult, JobInfo, error) {
	j, err := t.ownJob(ctx, in.JobID)
	if err != nil {
		return nil, JobInfo{}, fmt.Errorf("cancel job: %w", err)
	}
	j, err = t.jobs.Cancel(ctx, j.ID)
	if err != nil {
		return nil, JobInfo{}, fmt.Errorf("cancel job: %w", err)
	}
	info := t.jobInfo(ctx, j)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: jobText(info) +
		"\nIts ready files stay; files not finished were removed."}}}, info, nil
}

func (t jobTools) listJobs(ctx context.Context, in ListJobsInput) (*mcp.CallToolResult, ListJobsOutput, error) {
	conv := in.scope().conversation
	if conv == "" {
		return nil, ListJobsOutput{}, badArg("conversation_id is required: this server has no default conversation")
	}
	limit := in.Limit
	if limit == 0 {
		limit = 50
	}
	p, err := t.jobs.List(ctx, conv, in.Status, limit, in.Cursor)
	if err != nil {
		return nil, ListJobsOutput{}, fmt.Errorf("list jobs: %w", err)
	}
	out := ListJobsOutput{Jobs: make([]JobInfo, 0, len(p.Jobs)), Total: p.Total, NextCursor: p.Next}
	for _, j := range p.Jobs {
		info := t.jobInfo(ctx, j)
		info.Failures = nil
		out.Jobs = append(out.Jobs, info)
	}
	all := len(out.Jobs)
	keepFitting(t.limit, &out.Jobs, func() (string, any) { return listJobsText(conv, in.Status, out, ""), out })
	note := ""
	if k := len(out.Jobs); k < all {
		out.NextCursor = jobs.CursorAfter(conv, in.Status, p.Jobs[max(k-1, 0)])
		if k == 0 {
			out.NextCursor = in.Cursor
		}
		note = t.limit.note(fmt.Sprintf("%d of the page's %d jobs are listed; call list_jobs again with cursor set to next_cursor, or a smaller limit", k, all))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: listJobsText(conv, in.Status, out, note)}}}, out, nil
}

// listJobsText summarises a page of jobs for the agent: one line each.
func listJobsText(conv, status string, out ListJobsOutput, note string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d jobs in %s", out.Total, conv)
	if status != "" {
		fmt.Fprintf(&b, " %s", status)
	}
	b.WriteString(", newest first:")
	for _, info := range out.Jobs {
		fmt.Fprintf(&b, "\n- %s %s %s, %s: %s", info.CreatedAt, info.JobID, info.Kind, info.Status, info.Progress)
	}
	if out.NextCursor != "" {
		b.WriteString("\nMore: call again with cursor set to next_cursor.")
	}
	if note != "" {
		b.WriteString("\n" + note)
	}
	return b.String()
}

func (t jobTools) deleteDocument(ctx context.Context, in DeleteDocumentInput) (*mcp.CallToolResult, DeleteDocumentOutput, error) {
	f, err := t.store.GetFile(ctx, strings.TrimSpace(in.FileID))
	if err != nil {
		return nil, DeleteDocumentOutput{}, fmt.Errorf("delete document: %w", err)
	}
	callFrom(ctx).setConversation(f.ConversationID)
	if !identityFrom(ctx).allows(f.ConversationID) {
		// As get_chunk does: a file of another conversation does not
		// exist for this caller.
		return nil, DeleteDocumentOutput{}, fmt.Errorf("delete document: file %s: %w", in.FileID, docs.ErrNotFound)
	}
	if err := t.store.DeleteFile(ctx, f.ID); err != nil {
		return nil, DeleteDocumentOutput{}, fmt.Errorf("delete document: %w", err)
	}
	out := DeleteDocumentOutput{FileID: f.ID, FileName: f.FileName, Deleted: true}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Deleted %s (file_id %s) from %s, with its chunks.", f.FileName, f.ID, f.ConversationID)}}}, out, nil
}
