package ui

import (
	"context"
	"encoding/json"
	"net/http"
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
	// Features says what the server offers.
	Features() Features
	// OriginAllowed reports whether a browser Origin is accepted by the
	// server's rules (MCP_allowed_origins, loopback on a loopback
	// listener).
	OriginAllowed(origin string) bool

	Conversations(ctx context.Context, p Principal, q ConversationQuery) (ConversationPage, error)
	Files(ctx context.Context, p Principal, q FileQuery) (FilePage, error)
	Sources(ctx context.Context, p Principal, conversation string) ([]Source, error)
	DeleteFile(ctx context.Context, p Principal, id string) (File, error)

	Jobs(ctx context.Context, p Principal, q JobQuery) (JobPage, error)
	Job(ctx context.Context, p Principal, id string) (Job, error)
	CancelJob(ctx context.Context, p Principal, id string) (Job, error)
	// AddURL fetches url into conversation as a job; crawl makes it the
	// start of a site to crawl and keep as a source.
	AddURL(ctx context.Context, p Principal, conversation, url string, crawl bool) (Job, error)
	// Upload answers r, a multipart upload of files to conversation, as
	// the upload API answers POST /v1/conversations/{id}/files: JSON with
	// the job and one result per file.
	Upload(w http.ResponseWriter, r *http.Request, p Principal, conversation string)

	// Call calls a tool as an agent with p's key would, through the same
	// checks, limits and audit, and returns the exchange.
	Call(ctx context.Context, p Principal, tool string, args map[string]any) (ToolCall, error)

	Audit(ctx context.Context, p Principal, q AuditQuery) (AuditPage, error)
	Status(ctx context.Context, p Principal) Status
}

// Principal is the caller a page is for: an API key, or nobody in
// particular on a server that asks for none.
type Principal struct {
	// ID names the key for sessions without revealing it; "" for
	// Anonymous.
	ID string
	// Name is the key's name, shown on the page and in the audit.
	Name string
	// Conversations, when not nil, are the only conversations the key may
	// see and touch.
	Conversations []string
	// Write is set when the key may add, delete and cancel.
	Write bool
	// Seal is a secret of the key's own that signs its sessions: a session
	// outlives neither the key nor a change of its secret.
	Seal []byte
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
	// Audit: the audit is stored in a database the page can read.
	Audit bool
	// MaxFileBytes is the largest upload.
	MaxFileBytes int64
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
	ID, Kind, Root string
	Pages, Files   int
	Created        time.Time
	// LastSync is zero before the first sync ends.
	LastSync  time.Time
	LastJobID string
	// Summary says what the last sync did, in words; Error why it
	// stopped early.
	Summary, Error string
}

// JobQuery selects a page of jobs.
type JobQuery struct {
	// Conversation keeps one conversation's jobs; "" every one the caller
	// may see.
	Conversation string
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
	// Progress says where it stands in words; What what it was asked.
	Progress, What string
	Caller, Error  string
	// Total is every file so far; Done those that reached an end.
	Total, Done, Ready, Processing, Failed, Duplicates, Refused int
	Chunks                                                      int64
	// Submitted is set once every file is stored: Total is final.
	Submitted                  bool
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

// Percent is the share of the job's files that reached an end, 0 to 100;
// a job whose total is not known yet has done none.
func (j Job) Percent() int {
	if j.Final() {
		return 100
	}
	if j.Total == 0 {
		return 0
	}
	p := j.Done * 100 / j.Total
	if !j.Submitted {
		// More files may come: never show it finished.
		p = min(p, 95)
	}
	return p
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

// AuditQuery selects a page of audited tool calls.
type AuditQuery struct {
	Tool, Key, Conversation string
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
