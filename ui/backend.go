package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Backend is what the page needs of the server: who may sign in, the
// documents, jobs, sources and audit as a caller may see them, and the
// server's status. Every method that takes a Principal applies that
// caller's rights (its conversations, whether it may write) exactly as the
// server's other routes do; the page checks them too, to offer only what
// the caller may do.
type Backend interface {
	// Open reports whether the server asks for no key: then every page is
	// for Anonymous, without sign-in.
	Open() bool
	// SignIn returns the caller a secret key stands for; false for a key
	// the server does not accept.
	SignIn(secret string) (Principal, bool)
	// Principal returns the caller of id as the server knows it now; false
	// once its key is gone.
	Principal(id string) (Principal, bool)
	// Provider is the identity provider people sign in to the page
	// through; nil when the page offers none.
	Provider() Provider
	// Features says what the server offers.
	Features() Features
	// OriginAllowed reports whether a browser Origin is accepted by the
	// server's rules (MCP_allowed_origins, loopback on a loopback
	// listener).
	OriginAllowed(origin string) bool

	// SignOut records that session id, which would have lasted until
	// until, was signed out: every replica refuses it from then on.
	SignOut(ctx context.Context, id string, until time.Time) error
	// SignedOut reports whether session id was signed out. An error means
	// it cannot be told, and the session is refused.
	SignedOut(ctx context.Context, id string) (bool, error)
	// Record audits an action of the page: one row of the audit, with
	// transport ui and who did it, and a log line.
	Record(ctx context.Context, p Principal, e Event)

	Conversations(ctx context.Context, p Principal, q ConversationQuery) (ConversationPage, error)
	Files(ctx context.Context, p Principal, q FileQuery) (FilePage, error)
	// File returns one file; FileText its extracted text (a file that is
	// not ready has none); FileChunks up to limit of its chunks after
	// ordinal after (-1 for the first).
	File(ctx context.Context, p Principal, id string) (File, error)
	FileText(ctx context.Context, p Principal, f File) (string, error)
	FileChunks(ctx context.Context, p Principal, f File, after, limit int) ([]Chunk, error)
	DeleteFile(ctx context.Context, p Principal, id string) (File, error)
	// RetryFile fetches again the URL a failed file came from, as a job,
	// the failed file making way for it.
	RetryFile(ctx context.Context, p Principal, id string) (File, Job, error)
	// Chunk returns one chunk, as the file's page lists it.
	Chunk(ctx context.Context, p Principal, id string) (Chunk, error)

	Sources(ctx context.Context, p Principal, conversation string) ([]Source, error)
	Source(ctx context.Context, p Principal, id string) (Source, error)
	// SyncSource starts a sync of a site source as a job.
	SyncSource(ctx context.Context, p Principal, id string) (Source, Job, error)
	// DeleteSource removes a source with the files that came only from
	// it, and says how many files went.
	DeleteSource(ctx context.Context, p Principal, id string) (Source, int, error)

	Jobs(ctx context.Context, p Principal, q JobQuery) (JobPage, error)
	Job(ctx context.Context, p Principal, id string) (Job, error)
	CancelJob(ctx context.Context, p Principal, id string) (Job, error)
	// AddURL fetches url into conversation as a job; crawl, when not nil,
	// makes it the start of a site to crawl with those options and keep
	// as a source.
	AddURL(ctx context.Context, p Principal, conversation, url string, crawl *CrawlOptions) (Job, error)
	// Upload answers r, a multipart upload of files to conversation, as
	// the upload API answers POST /v1/conversations/{id}/files: JSON with
	// the job and one result per file. It returns what it answered.
	Upload(w http.ResponseWriter, r *http.Request, p Principal, conversation string) UploadResult

	// Call calls a tool as an agent with p's key would, through the same
	// checks and audit, and returns the exchange. Calls of the page spend
	// the playground's budget, not the agents'.
	Call(ctx context.Context, p Principal, tool string, args map[string]any) (ToolCall, error)

	Audit(ctx context.Context, p Principal, q AuditQuery) (AuditPage, error)
	Status(ctx context.Context, p Principal) Status
}

// Provider is the identity provider people sign in to the page through:
// the page is its OAuth client (authorization code with PKCE).
type Provider interface {
	// Name names it on the sign-in page.
	Name() string
	// AuthURL is where the browser goes to sign in: the provider's
	// authorization endpoint, asking for a code returned with state, an
	// ID token carrying nonce, and the PKCE challenge of verifier.
	AuthURL(ctx context.Context, state, nonce, verifier string) (string, error)
	// Finish exchanges the code the provider returned, with verifier,
	// checks the tokens (the ID token's signature, issuer, audience and
	// nonce; the access token as the server checks any) and returns who
	// signed in, with what their token allows. Its errors are *Error.
	Finish(ctx context.Context, code, verifier, nonce string) (Principal, error)
	// Seal signs the sessions of people signed in through the provider:
	// a secret every replica shares.
	Seal() []byte
}

// Event is one action of the page, for the audit.
type Event struct {
	// Action names it: sign_in, sign_out, upload, add_url, crawl,
	// delete_document, cancel_job, sync_source, delete_source, retry_file.
	Action string
	// Conversation is the conversation it touched; "" for none.
	Conversation string
	// Touched says what it touched: ids, names, the URL, the options.
	Touched map[string]any
	// JobID is the job it started or touched.
	JobID string
	// Err is why it failed; nil when it succeeded.
	Err error
	// Start is when it began.
	Start time.Time
}

// Principal is the caller a page is for: an API key, a person signed in
// through the identity provider, or nobody in particular on a server that
// asks for none.
type Principal struct {
	// ID names the key for sessions without revealing it; "" for
	// Anonymous and for a person.
	ID string
	// Name is the key's name, or the person's subject, shown on the page.
	Name string
	// Subject is the person's subject (the sub claim) at the identity
	// provider; "" for a key.
	Subject string
	// Conversations, when not nil, are the only conversations the key may
	// see and touch.
	Conversations []string
	// Write is set when the key may add, delete and cancel.
	Write bool
	// Seal is a secret of the key's own that signs its sessions: a session
	// outlives neither the key nor a change of its secret. A person's
	// sessions are signed by the provider's seal.
	Seal []byte
}

// Who names the caller in words: "key admin", "alice".
func (p Principal) Who() string {
	if p.Subject != "" {
		return p.Subject
	}
	return "key " + p.Name
}

// Anonymous is the caller of a server that asks for no key.
var Anonymous = Principal{Write: true}

// Features are what the server offers; the page leaves out the rest.
type Features struct {
	// Docs: the documents store and its tools.
	Docs bool
	// Jobs: documents added as jobs that can be followed and cancelled.
	Jobs bool
	// URLs: documents fetched by URL.
	URLs bool
	// Crawl: sites crawled and kept as sources.
	Crawl bool
	// Writes: anything may change documents (not MCP_read_only).
	Writes bool
	// Keys: API keys sign in (the server has some).
	Keys bool
	// Audit: the audit is stored in a database the page can read.
	Audit bool
	// MaxFileBytes is the largest upload.
	MaxFileBytes int64
	// Threshold is the search's default similarity threshold; Semantic
	// says whether the embedder matches meaning or words alone.
	Threshold float64
	Semantic  bool
	// Playground is the budget of the page's searches, per caller.
	Playground RateLimit
	// Tools are the tools the server offers, for the audit's filter.
	Tools []string
}

// Error is a failure the page shows as it is: Message is written for a
// person, Status is the HTTP status it answers with.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// ConversationQuery selects a page of conversations.
type ConversationQuery struct {
	Cursor string
	Limit  int
}

// Conversation is a conversation holding files.
type Conversation struct {
	ID                               string
	Files, Ready, Processing, Failed int
	Chunks                           int
	LastUpload                       time.Time
}

// ConversationPage is a page of conversations, the most recent upload
// first.
type ConversationPage struct {
	Conversations []Conversation
	Total         int
	Next          string
}

// FileQuery selects a page of a conversation's files.
type FileQuery struct {
	Conversation string
	// Status is processing, ready, failed or "" for every file.
	Status string
	// Prefix keeps files whose name or source URL begins with it.
	Prefix string
	Cursor string
	Limit  int
}

// File is one file of a conversation.
type File struct {
	ID, Conversation, Name, MIMEType string
	// Status is processing, ready or failed; Error says why it failed.
	Status, Error string
	// Source is the URL it was fetched from; Note what to know of it,
	// such as pages that still need OCR.
	Source, Note string
	JobID        string
	Size         int64
	Chunks       int
	Pages        int
	Created      time.Time
}

// FilePage is a page of a conversation's files, newest first.
type FilePage struct {
	Files []File
	Total int
	Next  string
}

// Source is a site or folder a conversation's files come from.
type Source struct {
	ID, Conversation, Kind, Root string
	// Options are a site's crawl options.
	Options      CrawlOptions
	Pages, Files int
	Created      time.Time
	// LastSync is zero before the first sync ends.
	LastSync  time.Time
	LastJobID string
	// Summary says what the last sync did, in words; Error why it
	// stopped early.
	Summary, Error string
}

// CrawlOptions are a site's crawl settings, as the crawl form gives them;
// zero values take the server's defaults.
type CrawlOptions struct {
	MaxPages, MaxDepth int
	// Scope is prefix, host or domain; "" for the default (prefix).
	Scope            string
	Include, Exclude []string
}

// IsZero reports whether o sets nothing.
func (o CrawlOptions) IsZero() bool {
	return o.MaxPages == 0 && o.MaxDepth == 0 && o.Scope == "" && len(o.Include) == 0 && len(o.Exclude) == 0
}

// Chunk is one chunk of a file: its text and where it lies.
type Chunk struct {
	ID, FileID, Conversation string
	Ordinal                  int
	Content                  string
	// CharStart and CharEnd are its place in the file's text, in
	// characters; Citation where it is in the format's own terms (pages,
	// slides, a sheet's cells, headings); OCR marks text read from an
	// image.
	CharStart, CharEnd int
	Citation           string
	OCR                bool
}

// UploadResult is what an upload answered: its status, its job, and each
// file's outcome.
type UploadResult struct {
	Status int
	JobID  string
	Files  []UploadedFile
	// Error is why the upload as a whole was refused.
	Error string
}

// UploadedFile is one file of an upload: accepted, duplicate or refused
// (Reason says why).
type UploadedFile struct {
	ID, Name, Result, Reason string
}

// JobQuery selects a page of jobs.
type JobQuery struct {
	// Conversation keeps one conversation's jobs; "" every one the caller
	// may see.
	Conversation string
	// Source keeps the jobs that crawled or synced one source of
	// Conversation.
	Source string
	// Active keeps the jobs still queued or running; Ended those that
	// have ended.
	Active, Ended bool
	Cursor        string
	Limit         int
}

// Job is an ingestion: files uploaded, a URL fetched, a site crawled.
type Job struct {
	ID, Conversation, Kind string
	// Status is queued, running, succeeded, failed or cancelled.
	Status string
	// What is what it was asked; Report what a crawl or sync says of
	// itself while it runs ("crawling: 12 pages fetched, 30 queued").
	What, Report  string
	Caller, Error string
	// Total is every file so far; Done those that reached an end. When
	// the job has ended they are what happened when it ran.
	Total, Done, Ready, Processing, Failed, Duplicates, Refused int
	Chunks                                                      int64
	// Submitted is set once every file is stored: Total is final.
	Submitted bool
	// Counts are a crawl's or sync's numbers (fetched, queued, added,
	// updated, removed, unchanged); Skipped its pages left out, by reason.
	Counts, Skipped            map[string]int
	Created, Started, Finished time.Time
	// Failures are files that failed or were refused, and why.
	Failures []Failure
}

// Failure is a file a job could not store.
type Failure struct {
	FileName, Reason string
}

// Final reports whether the job has ended.
func (j Job) Final() bool {
	return j.Status == "succeeded" || j.Status == "failed" || j.Status == "cancelled"
}

// Crawls reports whether the job crawls or syncs a site, whose pages are
// not known before it has read them.
func (j Job) Crawls() bool { return j.Kind == "crawl" || j.Kind == "sync" }

// Lost counts the files the job could not store: failed or refused.
func (j Job) Lost() int { return j.Failed + j.Refused }

// Tone is how the job's state is shown: ok (every file stored or already
// there), partial (it ended with files it could not store), failed,
// cancelled, or running and queued.
func (j Job) Tone() string {
	switch {
	case j.Status == "succeeded" && j.Lost() > 0:
		return "partial"
	case j.Status == "succeeded":
		return "ok"
	}
	return j.Status
}

// Outcome is the job's state in words: "running", "succeeded",
// "succeeded, 2 of 6 files failed", "succeeded: nothing new, 1
// duplicate", "failed", "cancelled".
func (j Job) Outcome() string {
	switch {
	case j.Status != "succeeded":
		return j.Status
	case j.Lost() > 0:
		return fmt.Sprintf("succeeded, %d of %d files failed", j.Lost(), j.Total)
	case j.Ready == 0 && j.Duplicates > 0:
		return "succeeded: nothing new, " + plural(j.Duplicates, "duplicate")
	}
	return "succeeded"
}

// Files says what became of the job's files, in words: "6 files: 4
// stored, 2 failed; 310 chunks"; a duplicate is named as such.
func (j Job) Files() string {
	if j.Total == 0 {
		switch {
		case j.Crawls() && !j.Final():
			return "no file stored yet"
		case !j.Final():
			return "waiting for its files"
		}
		return "no files"
	}
	var parts []string
	add := func(n int, s string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	add(j.Ready, "stored")
	add(j.Processing, "processing")
	add(j.Failed, "failed")
	switch {
	case j.Duplicates == 1:
		add(1, "duplicate of a file already there")
	case j.Duplicates > 1:
		add(j.Duplicates, "duplicates of files already there")
	}
	add(j.Refused, "refused")
	total := plural(j.Total, "file")
	if !j.Submitted && !j.Final() {
		total += " so far"
	}
	s := total + ": " + strings.Join(parts, ", ")
	if len(parts) == 0 {
		s = total
	}
	if j.Chunks > 0 || j.Ready > 0 {
		s += "; " + plural(int(j.Chunks), "chunk")
	}
	return s
}

// Pages says where a crawl or sync stands: "42 pages fetched, 17
// queued, 38 stored"; "" for other jobs.
func (j Job) Pages() string {
	if !j.Crawls() || j.Counts == nil {
		return ""
	}
	s := fmt.Sprintf("%s fetched, %d queued, %d stored", plural(j.Counts["fetched"], "page"), j.Counts["queued"], j.Ready)
	if n := j.Counts["added"] + j.Counts["updated"] + j.Counts["removed"] + j.Counts["unchanged"]; n > 0 {
		s += fmt.Sprintf(" (%d added, %d updated, %d removed, %d unchanged)", j.Counts["added"], j.Counts["updated"], j.Counts["removed"], j.Counts["unchanged"])
	}
	skipped := 0
	for _, n := range j.Skipped {
		skipped += n
	}
	if skipped > 0 {
		s += fmt.Sprintf("; %d skipped", skipped)
	}
	return s
}

// SkipReasons are the pages a crawl left out, by reason, in words:
// "3 robots.txt, 1 scope".
func (j Job) SkipReasons() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(j.Skipped)) {
		parts = append(parts, fmt.Sprintf("%d %s", j.Skipped[k], k))
	}
	return strings.Join(parts, ", ")
}

// Indeterminate reports that how far the job is cannot be told: a crawl
// under way, whose pages are found as it goes, or a job whose files are
// not known yet.
func (j Job) Indeterminate() bool {
	if j.Final() {
		return false
	}
	return j.Crawls() && !j.Submitted || j.Status == "running" && j.Total == 0
}

// Percent is the share of the job's files that reached an end, 0 to 100.
// A job that succeeded is full, in the colour of how it ended (Tone); one
// cancelled shows how far it got, and one that failed how much of it was
// kept (stored or already there): never a full bar. A job whose total is
// not known yet has done none.
func (j Job) Percent() int {
	switch {
	case j.Indeterminate():
		return 0
	case j.Status == "cancelled" && j.Total > 0:
		return j.Done * 100 / j.Total
	case j.Status == "failed" && j.Total > 0:
		return (j.Ready + j.Duplicates) * 100 / j.Total
	case j.Status == "cancelled" || j.Status == "failed":
		return 0
	case j.Final():
		return 100
	case j.Total == 0:
		return 0
	}
	p := j.Done * 100 / j.Total
	if !j.Submitted {
		// More files may come: never show it finished.
		p = min(p, 95)
	}
	return p
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// JobPage is a page of jobs, newest first.
type JobPage struct {
	Jobs []Job
	Next string
}

// ToolCall is one tool call as an agent makes it and what it receives.
type ToolCall struct {
	Tool string
	// Request is the tools/call request's params; Result the result, both
	// as JSON on the wire.
	Request, Result json.RawMessage
	// Structured is the result's structured content.
	Structured json.RawMessage
	// Text is the result's text for the model.
	Text string
	// Failed is set for an error result, whose message is Error.
	Failed bool
	Error  string
}

// AuditQuery selects a page of audited tool calls and actions of the page.
type AuditQuery struct {
	Tool, Conversation string
	// Caller keeps the rows of a key's name or a person's subject.
	Caller string
	// Transport keeps the rows of one transport: ui for the page's.
	Transport string
	// Outcome is ok, error, an error code or "".
	Outcome string
	// Since keeps the calls made since then; zero keeps every one.
	Since  time.Time
	Cursor string
	Limit  int
}

// AuditEntry is one audited tool call.
type AuditEntry struct {
	// Key is the API key's name; Subject the person of an identity
	// provider's token.
	ID, Tool, Key, Subject, Conversation string
	Transport, Session, Client           string
	// Code is the error code; "" for a call that succeeded, whose Error
	// is empty too.
	Code, Error string
	LatencyMS   int
	Arguments   json.RawMessage
	JobID       string
	Time        time.Time
	// Sanitised names the values changed to be storable.
	Sanitised []string
}

// Touched says in a few words what an action of the page touched: a
// file's name, a URL, a source's root, the files of an upload; "" for a
// tool call.
func (e AuditEntry) Touched() string {
	if e.Transport != "ui" || !slices.Contains(Actions, e.Tool) || len(e.Arguments) == 0 {
		return ""
	}
	var a struct {
		FileName string `json:"file_name"`
		URL      string `json:"url"`
		Root     string `json:"root"`
		JobID    string `json:"job_id"`
		Method   string `json:"method"`
		Files    []struct {
			FileName string `json:"file_name"`
		} `json:"files"`
	}
	if json.Unmarshal(e.Arguments, &a) != nil {
		return ""
	}
	var names []string
	for _, f := range a.Files {
		names = append(names, f.FileName)
	}
	switch {
	case a.FileName != "":
		return a.FileName
	case a.URL != "":
		return a.URL
	case a.Root != "":
		return a.Root
	case len(names) > 3:
		return strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more", len(names)-3)
	case len(names) > 0:
		return strings.Join(names, ", ")
	case a.JobID != "":
		return "job " + a.JobID
	case a.Method == "identity_provider":
		return "through the identity provider"
	case a.Method == "api_key":
		return "with an API key"
	}
	return ""
}

// AuditPage is a page of audited calls, newest first.
type AuditPage struct {
	Entries []AuditEntry
	Next    string
}

// Status is the server's state as its operator reads it.
type Status struct {
	Version string
	// Ready is what /readyz says: every enabled dependency answers.
	Ready  bool
	Checks []Check
	// Embedder, Model and Dimensions describe the embeddings; Semantic
	// says whether they capture meaning or words only.
	Embedder   string
	Model      string
	Dimensions int
	Semantic   bool
	Threshold  float64
	OCR        OCRStatus
	RateLimits RateLimits
	// Database is "PostgreSQL", "Citus" or "" without one; DatabaseDetail
	// says more (schema version, or why it could not be read).
	Database, DatabaseDetail string
	// Settings are a few of the server's settings, as name and value.
	Settings [][2]string
}

// Check is the readiness of one dependency.
type Check struct {
	Name, Status, Error, Detail string
	MS                          int64
}

// OCRStatus says whether scans and images can be read.
type OCRStatus struct {
	Mode      string
	Available bool
	// Detail names the program, its version and languages, or why OCR is
	// not available.
	Detail string
}

// RateLimits are the rate-limit settings.
type RateLimits struct {
	// Store is memory or postgres.
	Store string
	// Default applies to tools without their own.
	Default RateLimit
	Tools   []ToolRateLimit
	// Playground is the budget of the page's searches, per caller.
	Playground RateLimit
}

// RateLimit is one token bucket: PerMinute refill, Burst size; Global a
// ceiling for all callers together (0: none).
type RateLimit struct {
	PerMinute, Burst, Global int
}

// ToolRateLimit is a tool's own bucket.
type ToolRateLimit struct {
	Tool string
	RateLimit
}
