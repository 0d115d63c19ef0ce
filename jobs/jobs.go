// Package jobs makes every ingestion a job that lives in PostgreSQL: an
// upload, a document an agent adds, a URL to fetch, an archive to unpack, a
// folder the CLI ingests. Any replica answers for any job (Get, List,
// Cancel), and none is left running by a process that stopped: the part of
// a job that comes before its files exist (fetching, unpacking) runs under
// a lease that another replica takes over once it expires, and the files
// themselves are processed by the documents queue, which resumes them the
// same way (package docs).
//
// A job's progress is read from its files (files.job_id): it is never out
// of step with them. Its own row (migration 013) holds what the files do
// not: what it was asked, by whom, when it started and ended, and whether
// it was cancelled. Whoever waits for a job is told when it may have moved
// (Runner.Watch, see watch.go), on whichever replica it moves.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Job statuses.
const (
	Queued    = "queued"
	Running   = "running"
	Succeeded = "succeeded"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// Statuses lists every status, in a job's order.
var Statuses = []string{Queued, Running, Succeeded, Failed, Cancelled}

// Final reports whether status is one a job does not leave.
func Final(status string) bool {
	return status == Succeeded || status == Failed || status == Cancelled
}

// Job kinds.
const (
	// KindUpload is a request of the upload API.
	KindUpload = "upload"
	// KindDocument is a document an agent added: text, or bytes.
	KindDocument = "document"
	// KindURL is a URL to fetch and store.
	KindURL = "url"
	// KindIngest is a run of `mcpsearch ingest`.
	KindIngest = "ingest"
)

// Errors.
var (
	// ErrNotFound reports a job that does not exist (or whose conversation
	// was deleted).
	ErrNotFound = errors.New("job not found")
	// ErrFinished reports a cancel of a job that had already ended.
	ErrFinished = errors.New("the job has already ended")
)

// Input is what a job was asked, shown with it.
type Input struct {
	URL      string   `json:"url,omitempty"`
	Title    string   `json:"title,omitempty"`
	FileName string   `json:"file_name,omitempty"`
	Files    []string `json:"files,omitempty"`
	// Folder is the folder a CLI run ingests.
	Folder string `json:"folder,omitempty"`
	// SourceID is the source a crawl or sync job reads (package sources).
	SourceID string `json:"source_id,omitempty"`
}

// tracedInput is a job's input as it is stored: with the traceparent of
// the call that started it, when that call was traced, so that the job's
// own trace links to it whichever process runs it (Runner.startSpan).
type tracedInput struct {
	Input
	Traceparent string `json:"traceparent,omitempty"`
}

// storable returns in with its text fit for a jsonb column (storable).
func (in Input) storable() Input {
	in.URL, in.Title, in.FileName, in.Folder = storable(in.URL), storable(in.Title), storable(in.FileName), storable(in.Folder)
	files := make([]string, len(in.Files))
	for i, f := range in.Files {
		files[i] = storable(f)
	}
	if in.Files != nil {
		in.Files = files
	}
	return in
}

// storable replaces NUL, which no text or jsonb value of PostgreSQL may
// hold, with U+FFFD: a hostile file name or URL is kept as the caller
// sent it otherwise.
func storable(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }

// Refusal is a file a job did not store, and why.
type Refusal struct {
	FileName string `json:"file_name"`
	Reason   string `json:"reason"`
}

// maxRefusals bounds the refusals a job's row keeps; Refused counts them
// all.
const maxRefusals = 50

// Job is an ingestion, with what its files have come to.
type Job struct {
	ID             string
	ConversationID string
	Kind           string
	// Status is Queued, Running, Succeeded, Failed or Cancelled.
	Status string
	Input  Input
	// Caller names who started it: an API key's name, "stdio", "cli".
	Caller string
	// Error says why the job failed or was cancelled; "" otherwise.
	Error string
	// Submitted is set once every file of the job is stored.
	Submitted bool
	// Duplicates counts the files found already in the conversation.
	Duplicates int
	// Refused counts the files not stored (unsupported, too large);
	// Refusals says why, for the first of them.
	Refused  int
	Refusals []Refusal
	// Files counts the job's stored files by status, with their chunks
	// and pages.
	Files      docs.JobFiles
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// Attempts counts the claims of the job's first part by a process.
	Attempts int
	// Report is what a job of a registered kind (a crawl, a sync) says of
	// itself while it runs and once it has ended; nil for others.
	Report *Report
	// ended is what the job's files had come to when it ended, as
	// recorded then (migration 018); nil while it runs.
	ended *endedFiles
}

// endedFiles is a job's files as recorded when it ended: Files then reads
// as what happened when the job ran, whatever is deleted later.
type endedFiles struct {
	Stored     int   `json:"stored"`
	Ready      int   `json:"ready"`
	Processing int   `json:"processing"`
	Failed     int   `json:"failed"`
	Chunks     int64 `json:"chunks"`
	Pages      int64 `json:"pages"`
}

func recordOf(f docs.JobFiles) endedFiles {
	return endedFiles{Stored: f.Stored, Ready: f.Ready, Processing: f.Processing, Failed: f.Failed, Chunks: f.Chunks, Pages: f.Pages}
}

func (e endedFiles) files() docs.JobFiles {
	return docs.JobFiles{Stored: e.Stored, Ready: e.Ready, Processing: e.Processing, Failed: e.Failed, Chunks: e.Chunks, Pages: e.Pages, Started: true}
}

// Report is what a long job reports of itself: a line on where it stands,
// and counts by name (pages fetched and queued, files added, updated,
// removed and unchanged; skipped pages by reason).
type Report struct {
	Message string         `json:"message,omitempty"`
	Counts  map[string]int `json:"counts,omitempty"`
	Skipped map[string]int `json:"skipped,omitempty"`
}

// Total is the number of files the job has so far: stored, already there
// and refused. It grows until the job is submitted.
func (j Job) Total() int { return j.Files.Stored + j.Duplicates + j.Refused }

// Done is the number of the job's files that reached an end.
func (j Job) Done() int { return j.Files.Ready + j.Files.Failed + j.Duplicates + j.Refused }

// Progress says where the job stands, in words: "12 of 40 files, 310
// chunks".
func (j Job) Progress() string {
	if j.Report != nil && j.Report.Message != "" && !j.Submitted {
		if j.Total() == 0 {
			return j.Report.Message
		}
		return fmt.Sprintf("%s; %d of %d+ files, %d chunks", j.Report.Message, j.Done(), j.Total(), j.Files.Chunks)
	}
	switch {
	case !j.Submitted && j.Total() == 0 && j.Status == Queued:
		return "waiting to start"
	case !j.Submitted && j.Total() == 0 && j.Kind == KindURL:
		return "fetching " + j.Input.URL
	}
	msg := fmt.Sprintf("%d of %d files, %d chunks", j.Done(), j.Total(), j.Files.Chunks)
	if !j.Submitted {
		msg = fmt.Sprintf("%d of %d+ files, %d chunks", j.Done(), j.Total(), j.Files.Chunks)
	}
	if n := j.Files.Failed + j.Refused; n > 0 {
		msg += fmt.Sprintf(", %d failed", n)
	}
	return msg
}

// Store keeps jobs in PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	docs *docs.Store
}

// NewStore returns a Store over the documents store's database.
func NewStore(d *docs.Store) *Store {
	return &Store{pool: d.Pool(), docs: d}
}

// Docs returns the documents store the jobs' files are in.
func (s *Store) Docs() *docs.Store { return s.docs }

// jobColumns is the select list scanJob reads, on jobs aliased j.
const jobColumns = `j.id::text, j.conversation_id, j.kind, j.status, j.input, j.caller, j.error, j.submitted,
	j.duplicates, j.refused, j.refusals, j.created_at, j.started_at, j.finished_at, j.attempts, j.report, j.ended_files`

func scanJob(row pgx.Row) (Job, error) {
	var j Job
	var input, refusals, report, ended []byte
	var started, finished *time.Time
	err := row.Scan(&j.ID, &j.ConversationID, &j.Kind, &j.Status, &input, &j.Caller, &j.Error, &j.Submitted,
		&j.Duplicates, &j.Refused, &refusals, &j.CreatedAt, &started, &finished, &j.Attempts, &report, &ended)
	if err != nil {
		return Job{}, err
	}
	if started != nil {
		j.StartedAt = *started
	}
	if finished != nil {
		j.FinishedAt = *finished
	}
	// Both columns are written by this package alone.
	_ = json.Unmarshal(input, &j.Input)
	_ = json.Unmarshal(refusals, &j.Refusals)
	if len(report) > 0 {
		j.Report = &Report{}
		_ = json.Unmarshal(report, j.Report)
	}
	if len(ended) > 0 {
		j.ended = &endedFiles{}
		_ = json.Unmarshal(ended, j.ended)
	}
	return j, nil
}

// SetReport records what job j reports of itself, unless it has ended
// (then it wraps ErrFinished, ErrCancelled or ErrNotFound). final writes it
// even on an ended job: the summary of a crawl cancelled half-way.
func (s *Store) SetReport(ctx context.Context, j Job, r Report, final bool) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("jobs: report: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE jobs SET report = $3
		WHERE conversation_id = $1 AND id = $2 AND ($4 OR status IN ('queued', 'running'))`, j.ConversationID, j.ID, raw, final)
	if err != nil {
		return dbError("jobs: report", err)
	}
	if tag.RowsAffected() == 0 {
		return s.gone(ctx, j)
	}
	return nil
}

// Create records a new job of conversation conv, queued, for a Runner to
// take up.
func (s *Store) Create(ctx context.Context, conv, kind string, in Input, caller string) (Job, error) {
	return s.create(ctx, conv, kind, in, caller, "", 0)
}

// CreateHeld records a new job of conversation conv, running, whose files
// its caller stores itself (an upload, a CLI run) holding the job under
// token for lease: it renews the lease with Hold, and should it stop
// before Submit, the job fails once the lease expires.
func (s *Store) CreateHeld(ctx context.Context, conv, kind string, in Input, caller, token string, lease time.Duration) (Job, error) {
	return s.create(ctx, conv, kind, in, caller, token, lease)
}

func (s *Store) create(ctx context.Context, conv, kind string, in Input, caller, token string, lease time.Duration) (Job, error) {
	conv, err := docs.CheckConversationID(conv)
	if err != nil {
		return Job{}, err
	}
	input, err := json.Marshal(tracedInput{in.storable(), telemetry.Traceparent(ctx)})
	if err != nil {
		return Job{}, fmt.Errorf("jobs: create: %w", err)
	}
	id := docs.NewID(conv)
	b := &pgx.Batch{}
	// The conversation's key lets Get find the job by its id alone.
	b.Queue(`INSERT INTO conversation_keys (key, conversation_id) VALUES (conversation_key($1), $1) ON CONFLICT DO NOTHING`, conv)
	if token == "" {
		b.Queue(`INSERT INTO jobs AS j (conversation_id, id, kind, input, caller) VALUES ($1, $2, $3, $4, $5) RETURNING `+jobColumns,
			conv, id, kind, input, caller)
	} else {
		b.Queue(`
			INSERT INTO jobs AS j (conversation_id, id, kind, input, caller, claimed_by, claimed_until, attempts, status, started_at)
			VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7), 1, 'running', now())
			RETURNING `+jobColumns, conv, id, kind, input, caller, token, lease.Seconds())
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return Job{}, dbError("jobs: create", err)
	}
	j, err := scanJob(br.QueryRow())
	if err != nil {
		return Job{}, dbError("jobs: create", err)
	}
	return j, nil
}

// Start marks job j running, now, for a caller that stores its files
// itself.
func (s *Store) Start(ctx context.Context, j *Job) error {
	err := s.pool.QueryRow(ctx, `
		UPDATE jobs SET status = 'running', started_at = least(started_at, now())
		WHERE conversation_id = $1 AND id = $2 AND status IN ('queued', 'running')
		RETURNING started_at`, j.ConversationID, j.ID).Scan(&j.StartedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.gone(ctx, *j)
	}
	if err != nil {
		return dbError("jobs: start", err)
	}
	j.Status = Running
	return nil
}

// gone explains why a job's row did not change: cancelled, ended or
// deleted.
func (s *Store) gone(ctx context.Context, j Job) error {
	var status string
	err := s.pool.QueryRow(ctx, `SELECT status FROM jobs WHERE conversation_id = $1 AND id = $2`, j.ConversationID, j.ID).Scan(&status)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("jobs: job %s: %w", j.ID, ErrNotFound)
	case err != nil:
		return dbError("jobs: read job", err)
	case status == Cancelled:
		return fmt.Errorf("jobs: job %s: %w", j.ID, ErrCancelled)
	}
	return fmt.Errorf("jobs: job %s is %s: %w", j.ID, status, ErrFinished)
}

// ErrCancelled reports work on a job that was cancelled.
var ErrCancelled = errors.New("the job was cancelled")

// Outcome is what a job's caller learnt while storing its files: the files
// it found already there and those it refused.
type Outcome struct {
	Duplicates int
	Refusals   []Refusal
}

// Add records more of a job's outcome while its files are being stored.
func (s *Store) Add(ctx context.Context, j Job, o Outcome) error {
	return s.record(ctx, j, o, false)
}

// Submit records the rest of a job's outcome and that every file of it is
// stored: from then on its status is its files'.
func (s *Store) Submit(ctx context.Context, j Job, o Outcome) error {
	return s.record(ctx, j, o, true)
}

func (s *Store) record(ctx context.Context, j Job, o Outcome, submitted bool) error {
	refusals := make([]Refusal, 0, min(len(o.Refusals), maxRefusals))
	for _, r := range o.Refusals[:min(len(o.Refusals), maxRefusals)] {
		refusals = append(refusals, Refusal{FileName: storable(r.FileName), Reason: storable(r.Reason)})
	}
	raw, err := json.Marshal(refusals)
	if err != nil {
		return fmt.Errorf("jobs: record: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE jobs SET submitted = submitted OR $3, duplicates = duplicates + $4, refused = refused + $5,
		       refusals = CASE WHEN jsonb_array_length(refusals) >= $7 THEN refusals ELSE refusals || $6::jsonb END,
		       status = CASE WHEN status = 'queued' THEN 'running' ELSE status END,
		       started_at = least(started_at, now()), claimed_by = CASE WHEN $3 THEN NULL ELSE claimed_by END,
		       claimed_until = CASE WHEN $3 THEN NULL ELSE claimed_until END
		WHERE conversation_id = $1 AND id = $2 AND status IN ('queued', 'running')`,
		j.ConversationID, j.ID, submitted, o.Duplicates, len(o.Refusals), raw, maxRefusals)
	if err != nil {
		return dbError("jobs: record", err)
	}
	if tag.RowsAffected() == 0 {
		return s.gone(ctx, j)
	}
	if submitted {
		// Its files may all have ended already: the job then has too.
		s.announce(ctx, j.ID)
	}
	return nil
}

// announce tells those waiting for job id (Runner.Watch), here and on the
// other replicas, that it may have moved. Waiters read their jobs again
// now and then anyway, so a failure to announce only delays them.
func (s *Store) announce(ctx context.Context, id string) {
	_ = s.docs.AnnounceJobs(context.WithoutCancel(ctx), id)
}

// Fail ends job j failed, for reason, unless it has ended already, with
// what its files had come to when none is still processing.
func (s *Store) Fail(ctx context.Context, j Job, reason string) error {
	files, err := s.docs.JobFiles(ctx, j.ConversationID, j.ID)
	if err != nil {
		return err
	}
	var ended []byte
	if files.Processing == 0 {
		// Else recorded once they have ended (settle).
		ended, _ = json.Marshal(recordOf(files))
	}
	_, err = s.pool.Exec(ctx, `
		UPDATE jobs SET status = 'failed', error = $3, finished_at = now(), started_at = least(started_at, now()),
		       claimed_by = NULL, claimed_until = NULL, ended_files = $4
		WHERE conversation_id = $1 AND id = $2 AND status IN ('queued', 'running')`, j.ConversationID, j.ID, storable(reason), ended)
	if err != nil {
		return dbError("jobs: fail", err)
	}
	s.announce(ctx, j.ID)
	return nil
}

// recordEnd writes what the files of job j, which has ended, have come
// to, unless that is recorded already: a job that ended before the
// record existed, or whose end was written without it, is recorded the
// first time it is read.
func (s *Store) recordEnd(ctx context.Context, j *Job, files docs.JobFiles) error {
	e := recordOf(files)
	ended, _ := json.Marshal(e)
	_, err := s.pool.Exec(ctx, `
		UPDATE jobs SET ended_files = $3
		WHERE conversation_id = $1 AND id = $2 AND ended_files IS NULL AND status NOT IN ('queued', 'running')`, j.ConversationID, j.ID, ended)
	if err != nil {
		return dbError("jobs: record the end", err)
	}
	j.ended = &e
	return nil
}

// home finds the conversation of job id.
func (s *Store) home(ctx context.Context, id string) (string, string, error) {
	convs, err := s.docs.ConversationsOf(ctx, id)
	if err != nil {
		return "", "", fmt.Errorf("jobs: %w", err)
	}
	if convs == nil {
		// Every job id carries its conversation's key.
		return "", "", fmt.Errorf("jobs: job %s: %w", id, ErrNotFound)
	}
	// canonical form of the id, as parsed by ConversationsOf
	var conv, canon string
	err = s.pool.QueryRow(ctx, `SELECT conversation_id, id::text FROM jobs WHERE id = $1::uuid AND conversation_id = ANY($2::text[])`, id, convs).Scan(&conv, &canon)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("jobs: job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", "", dbError("jobs: find job", err)
	}
	return conv, canon, nil
}

// Get returns job id with its files' progress.
func (s *Store) Get(ctx context.Context, id string) (Job, error) {
	conv, id, err := s.home(ctx, id)
	if err != nil {
		return Job{}, err
	}
	return s.get(ctx, conv, id)
}

func (s *Store) get(ctx context.Context, conv, id string) (Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs j WHERE j.conversation_id = $1 AND j.id = $2`, conv, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, fmt.Errorf("jobs: job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, dbError("jobs: get", err)
	}
	if err := s.settle(ctx, &j); err != nil {
		return Job{}, err
	}
	return j, nil
}

// Failures returns up to limit of the job's files that failed, with their
// reasons.
func (s *Store) Failures(ctx context.Context, j Job, limit int) ([]docs.File, error) {
	return s.docs.ListJobFiles(ctx, j.ConversationID, j.ID, true, limit)
}

// JobFiles returns up to limit of the job's stored files, oldest first.
func (s *Store) JobFiles(ctx context.Context, j Job, limit int) ([]docs.File, error) {
	return s.docs.ListJobFiles(ctx, j.ConversationID, j.ID, false, limit)
}

// settle reads the job's files and, once they are all stored and none is
// processing, ends the job by them: succeeded when something was stored
// or was already there, failed when every file failed. The end is written
// back the first time it is seen, so that List filters by it.
func (s *Store) settle(ctx context.Context, j *Job) error {
	if Final(j.Status) && j.ended != nil {
		// What happened when it ran, whatever was deleted since.
		j.Files = j.ended.files()
		return nil
	}
	files, err := s.docs.JobFiles(ctx, j.ConversationID, j.ID)
	if err != nil {
		return err
	}
	j.Files = files
	if Final(j.Status) {
		if files.Processing > 0 {
			// A cancel still deleting its files, or files of a failed
			// job still being read: not what the job came to yet.
			return nil
		}
		return s.recordEnd(ctx, j, files)
	}
	if !j.Submitted {
		return nil
	}
	if files.Processing > 0 {
		j.Status = Running
		return nil
	}
	status, reason := Succeeded, ""
	if files.Ready == 0 && j.Duplicates == 0 && files.Failed+j.Refused > 0 {
		status, reason = Failed, storable("no file of the job could be stored: "+s.firstReason(ctx, *j))
	}
	finished := files.LastUpdate
	if finished.IsZero() || finished.Before(j.StartedAt) {
		finished = j.StartedAt
	}
	e := recordOf(files)
	ended, _ := json.Marshal(e)
	tag, err := s.pool.Exec(ctx, `
		UPDATE jobs SET status = $3, error = $4, finished_at = $5, ended_files = $6
		WHERE conversation_id = $1 AND id = $2 AND status IN ('queued', 'running')`, j.ConversationID, j.ID, status, reason, finished, ended)
	if err != nil {
		return dbError("jobs: settle", err)
	}
	if tag.RowsAffected() == 0 {
		// Cancelled meanwhile: read it again.
		again, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs j WHERE j.conversation_id = $1 AND j.id = $2`, j.ConversationID, j.ID))
		if err != nil {
			return dbError("jobs: settle", err)
		}
		again.Files = files
		*j = again
		return nil
	}
	j.Status, j.Error, j.FinishedAt, j.ended = status, reason, finished, &e
	return nil
}

// firstReason is why the job's first failed file, or refused one, failed.
func (s *Store) firstReason(ctx context.Context, j Job) string {
	if len(j.Refusals) > 0 {
		return j.Refusals[0].FileName + ": " + j.Refusals[0].Reason
	}
	failed, err := s.Failures(ctx, j, 1)
	if err != nil || len(failed) == 0 {
		return "see the job's failed files"
	}
	return failed[0].FileName + ": " + failed[0].Error
}

// Cancel cancels job id: the part of it before its files (a fetch) stops,
// and its files not yet ready are deleted, so that their processing, on
// whichever replica, stops within a second or two and stores nothing. Its
// ready files stay, whole. Cancelling a job that has ended returns it with
// an error wrapping ErrFinished; cancelling again a cancelled job whose
// files could not all be deleted deletes the rest.
func (s *Store) Cancel(ctx context.Context, id string) (Job, error) {
	conv, id, err := s.home(ctx, id)
	if err != nil {
		return Job{}, err
	}
	j, err := s.get(ctx, conv, id)
	if err != nil {
		return Job{}, err
	}
	if j.Status == Cancelled && j.Files.Processing > 0 {
		// A cancel whose deletion failed half-way: finish it.
		if _, err := s.docs.DeleteJobFiles(ctx, conv, id); err != nil {
			return Job{}, err
		}
		return s.get(ctx, conv, id)
	}
	if Final(j.Status) {
		return j, fmt.Errorf("jobs: job %s is %s: %w", id, j.Status, ErrFinished)
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE jobs SET status = 'cancelled', error = 'cancelled', finished_at = now(), claimed_by = NULL, claimed_until = NULL
		WHERE conversation_id = $1 AND id = $2 AND status IN ('queued', 'running')`, conv, id)
	if err != nil {
		return Job{}, dbError("jobs: cancel", err)
	}
	if tag.RowsAffected() == 0 {
		j, err := s.get(ctx, conv, id)
		if err != nil {
			return Job{}, err
		}
		return j, fmt.Errorf("jobs: job %s is %s: %w", id, j.Status, ErrFinished)
	}
	s.announce(ctx, id)
	if _, err := s.docs.DeleteJobFiles(ctx, conv, id); err != nil {
		return Job{}, err
	}
	return s.get(ctx, conv, id)
}

// Page is a page of a conversation's jobs, newest first.
type Page struct {
	Jobs []Job
	// Total counts the conversation's jobs of the status asked for.
	Total int
	// Next is the cursor of the next page; "" on the last.
	Next string
}

// jobsCursor is the kind of list_jobs' cursors.
const jobsCursor = 'j'

// CursorAfter returns the cursor of the page of conversation conv's jobs
// (of status, "" for any) that follows job j.
func CursorAfter(conv, status string, j Job) string {
	id, _ := uuid.Parse(j.ID)
	return docs.Cursor(jobsCursor, []string{conv, status}, j.CreatedAt, id[:])
}

// List returns a page of the jobs of conversation conv, newest first:
// limit jobs (0 for docs.DefaultListLimit, at most docs.MaxListLimit)
// after cursor ("" for the first page), of status ("" for any).
func (s *Store) List(ctx context.Context, conv, status string, limit int, cursor string) (Page, error) {
	conv, err := docs.CheckConversationID(conv)
	if err != nil {
		return Page{}, err
	}
	if status != "" && !slices.Contains(Statuses, status) {
		return Page{}, fmt.Errorf("jobs: %w: status %q: send one of %s", docs.ErrInvalidArgument, status, strings.Join(Statuses, ", "))
	}
	switch {
	case limit == 0:
		limit = docs.DefaultListLimit
	case limit < 0 || limit > docs.MaxListLimit:
		return Page{}, fmt.Errorf("jobs: %w: limit %d is out of range: send 1 to %d", docs.ErrInvalidArgument, limit, docs.MaxListLimit)
	}
	at, key, after, err := docs.ParseCursor(cursor, jobsCursor, []string{conv, status}, "list_jobs")
	if err != nil {
		return Page{}, err
	}
	var afterAt, afterID any
	if after {
		id, err := uuid.FromBytes(key)
		if err != nil {
			return Page{}, fmt.Errorf("jobs: %w: cursor is not one list_jobs returned", docs.ErrInvalidArgument)
		}
		afterAt, afterID = at, id.String()
	}
	// Jobs whose files may have ended are settled first, so that the
	// filter sees their end.
	if err := s.settleOpen(ctx, conv); err != nil {
		return Page{}, err
	}
	var p Page
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE conversation_id = $1 AND ($2 = '' OR status = $2)`, conv, status).Scan(&p.Total); err != nil {
		return Page{}, dbError("jobs: list", err)
	}
	// Times are compared at PostgreSQL's microseconds, as cursors keep
	// them.
	rows, err := s.pool.Query(ctx, `
		SELECT `+jobColumns+` FROM jobs j
		WHERE j.conversation_id = $1 AND ($2 = '' OR j.status = $2)
		  AND ($3::timestamptz IS NULL OR (j.created_at, j.id) < ($3, $4::uuid))
		ORDER BY j.created_at DESC, j.id DESC LIMIT $5`, conv, status, afterAt, afterID, limit+1)
	if err != nil {
		return Page{}, dbError("jobs: list", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanJob(r) })
	if err != nil {
		return Page{}, dbError("jobs: list", err)
	}
	return s.settlePage(ctx, p, list, limit, func(last Job) string { return CursorAfter(conv, status, last) })
}

// settlePage completes p with the first limit jobs of list, read one
// more than limit: settled, and with the cursor next makes of the last
// one when list held more.
func (s *Store) settlePage(ctx context.Context, p Page, list []Job, limit int, next func(last Job) string) (Page, error) {
	if len(list) > limit {
		list = list[:limit]
		p.Next = next(list[limit-1])
	}
	for i := range list {
		if err := s.settle(ctx, &list[i]); err != nil {
			return Page{}, err
		}
	}
	p.Jobs = list
	if p.Jobs == nil {
		p.Jobs = []Job{}
	}
	return p, nil
}

// settleOpen settles the conversation's jobs whose files are all stored
// but which are not marked ended.
func (s *Store) settleOpen(ctx context.Context, conv string) error {
	rows, err := s.pool.Query(ctx, `
		SELECT `+jobColumns+` FROM jobs j
		WHERE j.conversation_id = $1 AND j.submitted AND j.status IN ('queued', 'running')
		ORDER BY j.created_at LIMIT 1000`, conv)
	if err != nil {
		return dbError("jobs: list", err)
	}
	open, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanJob(r) })
	if err != nil {
		return dbError("jobs: list", err)
	}
	for i := range open {
		if err := s.settle(ctx, &open[i]); err != nil {
			return err
		}
	}
	return nil
}

// dbError wraps a database failure with the documents store's
// classification, so that the server maps it as it maps the store's.
func dbError(op string, err error) error { return docs.DatabaseError(op, err) }
