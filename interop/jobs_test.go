package interop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// The tests in this file drive the tools that add documents and the jobs
// that store them (add_document, get_job, list_jobs, cancel_job) and the
// jobs of the upload API, through clients this project did not write: the
// TypeScript SDK and its v2 client adding a PDF and following its job, and
// receiving progress while add_document waits (the scenarios of
// jobs-scenarios.mjs); a job cancelled mid-way; replicas on one database
// answering for each other's jobs, and one killed while it runs a job; and
// keys that may only read. LangChain's adapters add a document in
// langchain_test.go.

// jobLimit bounds how long a job of these tests may take to end.
const jobLimit = 60 * time.Second

// jobCounts restates get_job's files counts on the client side.
type jobCounts struct {
	Total      int   `json:"total"`
	Done       int   `json:"done"`
	Ready      int   `json:"ready"`
	Processing int   `json:"processing"`
	Failed     int   `json:"failed"`
	Duplicates int   `json:"duplicates"`
	Refused    int   `json:"refused"`
	Chunks     int64 `json:"chunks"`
	Pages      int64 `json:"pages"`
	Submitted  bool  `json:"submitted"`
}

// jobInfo restates a job as get_job, cancel_job and add_document show it.
type jobInfo struct {
	JobID          string    `json:"job_id"`
	ConversationID string    `json:"conversation_id"`
	Kind           string    `json:"kind"`
	Status         string    `json:"status"`
	Progress       string    `json:"progress"`
	Counts         jobCounts `json:"counts"`
	Error          string    `json:"error"`
	StartedAt      string    `json:"started_at"`
	FinishedAt     string    `json:"finished_at"`
	Documents      []struct {
		FileID   string `json:"file_id"`
		FileName string `json:"file_name"`
		Status   string `json:"status"`
	} `json:"files"`
}

// final reports whether a job's status is one it does not leave.
func (j jobInfo) final() bool {
	return j.Status == "succeeded" || j.Status == "failed" || j.Status == "cancelled"
}

// notesZip returns a ZIP archive of n text files, notes-NNN.txt, each
// noteText of about size bytes.
func notesZip(n, size int) []byte {
	entries := make([]string, 0, 2*n)
	for i := range n {
		entries = append(entries, fmt.Sprintf("notes-%03d.txt", i), noteText(i, size))
	}
	return zipOf(entries...)
}

// noteText is a small text file of its own words, numbered i, of about
// size bytes: enough chunks to give a worker something to do.
func noteText(i, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Field note %d.\n\n", i)
	for k := 0; b.Len() < size; k++ {
		fmt.Fprintf(&b, "Observation %d of note %d: the tide gauge at station %d read %d centimetres at dawn. ", k, i, i%17, (i*31+k*7)%400)
	}
	return b.String()
}

// addDocument calls add_document with args and returns the job it started.
func addDocument(t *testing.T, s *mcp.ClientSession, args map[string]any) jobInfo {
	t.Helper()
	j, _ := callTool[jobInfo](t, s, "add_document", args)
	if j.JobID == "" {
		t.Fatalf("add_document %v answered no job_id: %+v", clipArgs(args), j)
	}
	return j
}

// clipArgs is args for a failure message, base64 and text cut short.
func clipArgs(args map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range args {
		if s, ok := v.(string); ok && len(s) > 80 {
			v = s[:80] + fmt.Sprintf("... (%d bytes)", len(s))
		}
		out[k] = v
	}
	return out
}

// getJob reads job id with get_job.
func getJob(t *testing.T, s *mcp.ClientSession, id string) jobInfo {
	t.Helper()
	j, _ := callTool[jobInfo](t, s, "get_job", map[string]any{"job_id": id})
	return j
}

// waitJob reads job id until until(job) holds, and returns it; it fails
// the test after limit.
func waitJob(t *testing.T, s *mcp.ClientSession, id string, limit time.Duration, what string, until func(jobInfo) bool) jobInfo {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		j := getJob(t, s, id)
		if until(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: not %s within %v: %+v", id, what, limit, j)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkStopped checks, for span after a cancel, that job id of
// conversation conv stays cancelled without growing: its ready files and
// chunks do not change, none is processing, and list_files shows no file
// processing.
func checkStopped(t *testing.T, s *mcp.ClientSession, id, conv string, span time.Duration) jobInfo {
	t.Helper()
	first := getJob(t, s, id)
	deadline := time.Now().Add(span)
	for {
		j := getJob(t, s, id)
		if j.Status != "cancelled" {
			t.Fatalf("job %s is %s after cancel_job: %+v", id, j.Status, j)
		}
		if j.Counts.Ready != first.Counts.Ready || j.Counts.Chunks != first.Counts.Chunks {
			t.Fatalf("job %s grew after it was cancelled: %d ready files and %d chunks, then %d and %d",
				id, first.Counts.Ready, first.Counts.Chunks, j.Counts.Ready, j.Counts.Chunks)
		}
		if j.Counts.Processing != 0 {
			t.Errorf("job %s was cancelled with %d files processing: %+v", id, j.Counts.Processing, j)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	files, _ := callTool[listFilesOutput](t, s, "list_files", map[string]any{"conversation_id": conv, "limit": 500})
	ready := 0
	for _, f := range files.Files {
		switch f.Status {
		case "processing":
			t.Errorf("list_files shows %s processing %v after its job was cancelled", f.FileName, span)
		case "ready":
			ready++
		}
	}
	if ready != first.Counts.Ready {
		t.Errorf("list_files shows %d ready files, the cancelled job %d", ready, first.Counts.Ready)
	}
	return first
}

// TestJobCancel cancels jobs of many files while their files are being
// processed, with cancel_job (an archive of 200 files added with
// add_document, once some are ready) and with DELETE /v1/jobs/{id} (32
// files uploaded in one request, which a worker is processing): the job
// must end cancelled, its ready files stay, and over the next seconds
// nothing of it grows or stays processing.
func TestJobCancel(t *testing.T) {
	t.Parallel()
	const key = "interop-cancel-key-0123456789"
	fake := searxngtest.New(t)
	// One worker, so that a job of many files runs for seconds.
	cfg := docsConfig(t, fake.URL).with("MCP_API_KEYS="+key, "MCP_docs_workers=1")
	tg := newTarget(t, transportCase{name: "http", transport: "http"}, cfg)
	tg.key = key
	s := connectGo(t, tg)

	t.Run("cancel_job", func(t *testing.T) {
		const conv = "conv-cancel-tool"
		archive := notesZip(200, 3000)
		start := time.Now()
		j := addDocument(t, s, map[string]any{"conversation_id": conv, "file_name": "field-notes.zip",
			"content_base64": base64.StdEncoding.EncodeToString(archive)})
		running := waitJob(t, s, j.JobID, jobLimit, "running with 3 files ready", func(j jobInfo) bool {
			return j.final() || j.Counts.Ready >= 3
		})
		t.Logf("%v after add_document: %s", time.Since(start).Round(time.Millisecond), running.Progress)
		if running.final() {
			t.Fatalf("the job of 200 files ended before it could be cancelled: %+v", running)
		}
		cancelled, _ := callTool[jobInfo](t, s, "cancel_job", map[string]any{"job_id": j.JobID})
		if cancelled.Status != "cancelled" {
			t.Fatalf("cancel_job answered %+v, want cancelled", cancelled)
		}
		got := checkStopped(t, s, j.JobID, conv, 3*time.Second)
		t.Logf("cancelled with %d of %d files ready (%d chunks)", got.Counts.Ready, got.Counts.Total, got.Counts.Chunks)
		if got.Counts.Ready >= 200 {
			t.Errorf("the cancelled job made all 200 files ready: %+v", got)
		}
	})

	t.Run("DELETE /v1/jobs", func(t *testing.T) {
		const conv = "conv-cancel-api"
		api := apiClient{base: tg.srv.base, key: key}
		var parts []uploadPart
		for i := range 32 {
			parts = append(parts, filePart(fmt.Sprintf("report-%02d.txt", i), "text/plain", []byte(noteText(1000+i, 40000))))
		}
		body, ct := multipartBody(parts...)
		status, b := api.do(t, http.MethodPost, "/v1/conversations/"+conv+"/files", ct, bytes.NewReader(body))
		var up struct {
			JobID string         `json:"job_id"`
			Files []uploadedFile `json:"files"`
		}
		if status != http.StatusAccepted || json.Unmarshal(b, &up) != nil || up.JobID == "" || len(up.Files) != 32 {
			t.Fatalf("upload of 32 files: %d %s, want 202 with a job_id and 32 files", status, clipText(string(b)))
		}
		// A worker takes up to 32 files and 2 MiB at a time, and stores
		// them together: the job is cancelled while one holds them all.
		var view jobInfo
		status, b = api.do(t, http.MethodGet, "/v1/jobs/"+up.JobID, "", nil)
		if status != http.StatusOK || json.Unmarshal(b, &view) != nil || view.JobID != up.JobID || view.Kind != "upload" {
			t.Fatalf("GET /v1/jobs/%s: %d %s", up.JobID, status, clipText(string(b)))
		}
		if view.final() {
			t.Fatalf("the upload's job of 32 files ended before it could be cancelled: %+v", view)
		}
		status, b = api.do(t, http.MethodDelete, "/v1/jobs/"+up.JobID, "", nil)
		if status != http.StatusOK || json.Unmarshal(b, &view) != nil || view.Status != "cancelled" {
			t.Fatalf("DELETE /v1/jobs/%s: %d %s, want 200 and cancelled", up.JobID, status, clipText(string(b)))
		}
		got := checkStopped(t, s, up.JobID, conv, 3*time.Second)
		t.Logf("cancelled with %d of %d files ready", got.Counts.Ready, got.Counts.Total)
		if got.Counts.Ready >= 32 {
			t.Errorf("the cancelled upload made all 32 files ready: %+v", got)
		}
		// Cancelling a job that has ended is a conflict, not a success.
		if status, b := api.do(t, http.MethodDelete, "/v1/jobs/"+up.JobID, "", nil); status != http.StatusConflict {
			t.Errorf("DELETE of a cancelled job: %d %s, want 409", status, clipText(string(b)))
		}
	})
	checkJobAudit(t, []string{cfg["DATABASE_URL"]}, 1)
}

// checkJobAudit fails the test unless the audit tables of the databases
// at dbURLs hold want add_document rows that succeeded, each naming its job
// (column job_id), a job of the jobs table. Rows are written in the
// background, so the table is polled for a while.
func checkJobAudit(t *testing.T, dbURLs []string, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var conns []*pgx.Conn
	for _, u := range dbURLs {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatalf("connect to the audit database: %v", err)
		}
		defer conn.Close(context.Background())
		conns = append(conns, conn)
	}
	type row struct {
		job   string
		known bool
	}
	for {
		var got []row
		for _, conn := range conns {
			// Two reads, not a join: on a distributed database the audit
			// (by its id) and the jobs (by conversation) are not co-located.
			rows, err := conn.Query(ctx, `SELECT coalesce(job_id, '') FROM chat_mcp_tool_calls
				WHERE tool_name = 'add_document' AND error_code IS NULL ORDER BY created_at`)
			if err != nil {
				t.Fatalf("read the audit: %v", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatalf("read the audit: %v", err)
			}
			for _, id := range ids {
				x := row{job: id}
				if id != "" {
					var n int
					if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE id = $1::uuid`, id).Scan(&n); err != nil {
						t.Fatalf("read the jobs: %v", err)
					}
					x.known = n == 1
				}
				got = append(got, x)
			}
		}
		if len(got) >= want {
			for i, r := range got {
				if r.job == "" || !r.known {
					t.Errorf("audit row %d of add_document names job %q, want a job of the jobs table", i, r.job)
				}
			}
			if len(got) != want {
				t.Errorf("%d audit rows of add_document calls that succeeded, want %d", len(got), want)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d audit rows of add_document calls that succeeded after 30 s, want %d", len(got), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitAuditedJob waits until the audit table of the database at dbURL
// holds a row of a call of tool that succeeded naming job id (column
// job_id); rows are written in the background, so it polls for a while.
func waitAuditedJob(t *testing.T, dbURL, tool, id string) {
	t.Helper()
	ctx, conn, done := auditConn(t, dbURL)
	defer done()
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM chat_mcp_tool_calls WHERE tool_name = $1 AND error_code IS NULL AND job_id = $2`,
			tool, id).Scan(&n)
		switch {
		case err != nil && ctx.Err() == nil:
			t.Fatalf("read the audit: %v", err)
		case n == 1:
			return
		case n > 1:
			t.Fatalf("%d audit rows of %s name job %s, want 1", n, tool, id)
		case ctx.Err() != nil:
			t.Fatalf("no audit row of %s names job %s after 30 s", tool, id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// slowPages serves the pages URL jobs fetch in the replica tests, on
// loopback: each GET of /slow/NAME is answered by the handler the test
// set for NAME, which may hold it as long as it likes; the server tells
// the test when a request arrives and when it ends.
type slowPages struct {
	srv *httptest.Server
	mu  sync.Mutex
	// pages answers the nth request (from 1) of each name.
	pages map[string]func(n int, w http.ResponseWriter, r *http.Request)
	hits  map[string]int
	// events receives "NAME n start" and "NAME n end" as they happen.
	events chan slowEvent
}

// slowEvent is a request of slowPages arriving or ending.
type slowEvent struct {
	name string
	n    int
	end  bool
	at   time.Time
}

func newSlowPages(t *testing.T) *slowPages {
	t.Helper()
	p := &slowPages{pages: map[string]func(int, http.ResponseWriter, *http.Request){}, hits: map[string]int{},
		events: make(chan slowEvent, 64)}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/slow/")
		p.mu.Lock()
		h := p.pages[name]
		p.hits[name]++
		n := p.hits[name]
		p.mu.Unlock()
		if !ok || h == nil {
			http.NotFound(w, r)
			return
		}
		p.events <- slowEvent{name: name, n: n, at: time.Now()}
		defer func() { p.events <- slowEvent{name: name, n: n, end: true, at: time.Now()} }()
		h(n, w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// handle sets the handler of /slow/name.
func (p *slowPages) handle(name string, h func(n int, w http.ResponseWriter, r *http.Request)) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pages[name] = h
	return p.srv.URL + "/slow/" + name
}

// next waits for the next event of name, skipping those of other names.
func (p *slowPages) next(t *testing.T, name string, limit time.Duration) slowEvent {
	t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case e := <-p.events:
			if e.name == name {
				return e
			}
		case <-deadline:
			t.Fatalf("no request of /slow/%s, or no end of one, within %v", name, limit)
		}
	}
}

// hold keeps a request open until its client goes away (or a minute
// passes): a download that hangs.
func hold(_ int, _ http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(time.Minute):
	}
}

// replicaLease is MCP_jobs_lease_seconds of the replica tests.
const replicaLease = 5 * time.Second

// runnerPoll is how often an idle replica looks for jobs to take over
// (jobs.Options.Poll's default: a third of the lease, at most 5 s).
const runnerPoll = replicaLease / 3

// startReplica starts an mcpsearch serving streamable HTTP with cfg that
// the test may kill: at cleanup it is killed if it still runs, without the
// checks of a graceful stop.
func startReplica(t *testing.T, cfg config) *server {
	t.Helper()
	s, err := tryStart(transportCase{name: "http", transport: "http"}, cfg)
	if err != nil {
		t.Fatalf("start a replica: %v", err)
	}
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
	return s
}

// dialReplica connects the Go SDK's client to replica srv; the session
// is not closed at cleanup, since the replica may be dead by then.
func dialReplica(t *testing.T, srv *server, cfg config) *mcp.ClientSession {
	t.Helper()
	return dialHTTP(t, target{transport: "http", url: srv.base + "/mcp", cfg: cfg, srv: srv})
}

// TestJobReplicas runs mcpsearch as three replicas on one database. A URL
// job started on replica A, whose download hangs, is read on replica B,
// which A's SIGKILL leaves to resume it: once A's lease expires B takes the
// job over, downloads the page and the job succeeds, never left running.
// Then a URL job started on B is read and cancelled on replica C, and B's
// download stops within the cancel's 2 s. Last, on a database of their
// own, replica D is killed while it holds the files of a job, embedding
// them: held under a lease of the heartbeat's length (fileLease), not a
// minute, they move again on replica E once it expires, and the job
// succeeds there.
func TestJobReplicas(t *testing.T) {
	t.Parallel()
	fake := searxngtest.New(t)
	pages := newSlowPages(t)
	cfg := fullConfig(t, fake.URL).with(fmt.Sprintf("MCP_jobs_lease_seconds=%d", int(replicaLease.Seconds())))

	a := startReplica(t, cfg)
	sa := dialReplica(t, a, cfg)
	const conv = "conv-replicas"
	const phrase = "the relief keeper rowed out at slack water"
	takeover := pages.handle("takeover", func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			hold(n, w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><head><title>Relief log</title></head><body><h1>Relief log</h1><p>On Tuesday %s with the mail and fresh water.</p></body></html>", phrase)
	})

	var b *server
	var sb *mcp.ClientSession
	top := t
	t.Run("killed replica's job resumed", func(t *testing.T) {
		j := addDocument(t, sa, map[string]any{"conversation_id": conv, "url": takeover})
		if j.final() || j.Kind != "url" {
			t.Fatalf("add_document by url answered %+v, want a url job not ended", j)
		}
		pages.next(t, "takeover", 30*time.Second)
		// B starts once A holds the job, so that A is the one running it.
		b = startServer(top, transportCase{name: "http", transport: "http"}, cfg)
		sb = connectGo(top, target{transport: "http", url: b.base + "/mcp", cfg: cfg, srv: b})
		if got := getJob(t, sb, j.JobID); got.Status != "running" {
			t.Fatalf("replica B reads the job A runs as %+v, want running", got)
		}
		killed := time.Now()
		if err := a.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-a.exited
		// A's download ends with A; B's starts once the lease expired.
		pages.next(t, "takeover", 10*time.Second)
		resumed := pages.next(t, "takeover", replicaLease+runnerPoll+20*time.Second)
		if resumed.n != 2 || resumed.end {
			t.Fatalf("after A was killed: %+v, want the second download of the page starting", resumed)
		}
		// How soon is a figure, not a test: B is due within the lease
		// and a poll, later on a loaded machine; the wait above bounds it.
		t.Logf("B resumed the job %v after A was killed (lease %v, poll %v)", resumed.at.Sub(killed).Round(time.Millisecond), replicaLease, runnerPoll.Round(time.Millisecond))
		seen := map[string]bool{}
		done := waitJob(t, sb, j.JobID, jobLimit, "ended", func(j jobInfo) bool {
			seen[j.Status] = true
			return j.final()
		})
		if done.Status != "succeeded" || done.Counts.Ready != 1 {
			t.Fatalf("the resumed job ended %+v, want succeeded with its page ready (statuses seen %v)", done, seen)
		}
		out, res := callTool[searchDocsOutput](t, sb, "search_docs", map[string]any{"conversation_id": conv, "query": "relief keeper rowed slack water", "top_k": 1})
		if len(out.Chunks) == 0 || !strings.Contains(out.Chunks[0].Content, phrase) {
			t.Errorf("search_docs does not find the resumed job's page: %s", resultText(res))
		}
	})
	if b == nil {
		t.Fatal("replica B did not start")
	}

	t.Run("read and cancelled on another replica", func(t *testing.T) {
		cancel := pages.handle("cancel", hold)
		j := addDocument(t, sb, map[string]any{"conversation_id": conv + "-cancel", "url": cancel})
		pages.next(t, "cancel", 30*time.Second)
		c := startServer(t, transportCase{name: "http", transport: "http"}, cfg)
		sc := connectGo(t, target{transport: "http", url: c.base + "/mcp", cfg: cfg, srv: c})
		got := getJob(t, sc, j.JobID)
		if got.Status != "running" || got.Kind != "url" || !strings.Contains(got.Progress, "fetching") {
			t.Errorf("replica C reads the job B runs as %+v, want running, fetching", got)
		}
		list, _ := callTool[struct {
			Jobs []jobInfo `json:"jobs"`
		}](t, sc, "list_jobs", map[string]any{"conversation_id": conv + "-cancel"})
		if len(list.Jobs) != 1 || list.Jobs[0].JobID != j.JobID {
			t.Errorf("list_jobs on C = %+v, want the job started on B", list.Jobs)
		}
		cancelled, _ := callTool[jobInfo](t, sc, "cancel_job", map[string]any{"job_id": j.JobID})
		at := time.Now()
		if cancelled.Status != "cancelled" {
			t.Fatalf("cancel_job on C answered %+v, want cancelled", cancelled)
		}
		end := pages.next(t, "cancel", 10*time.Second)
		if !end.end {
			t.Fatalf("another download of the cancelled page started: %+v", end)
		}
		// The page holds for a minute and a download times out after 20 s:
		// stopping within the 10 s waited above is the cancel's doing. How
		// soon is a figure.
		t.Logf("B's download stopped %v after the cancel on C", end.at.Sub(at).Round(time.Millisecond))
		if got := getJob(t, sb, j.JobID); got.Status != "cancelled" || got.Counts.Total != 0 {
			t.Errorf("B reads the job cancelled on C as %+v, want cancelled with no file", got)
		}
	})

	t.Run("killed replica's files resumed", func(t *testing.T) {
		const marker = "tide gauge"
		emb := newHeldEmbedder(t, marker)
		fcfg := heldConfig(docsConfig(t, fake.URL), emb)
		d := startReplica(t, fcfg)
		sd := dialReplica(t, d, fcfg)
		const conv = "conv-killed-files"
		const files = 8
		emb.hold()
		// One worker claims the archive's small files together.
		j := addDocument(t, sd, map[string]any{"conversation_id": conv, "file_name": "field-notes.zip",
			"content_base64": base64.StdEncoding.EncodeToString(notesZip(files, 3000))})
		emb.next(t, emb.arrived, 30*time.Second, "of replica D embedding the job's files")
		processing, claimed, left := claims(t, fcfg["DATABASE_URL"], conv)
		if processing != files || claimed != files {
			t.Fatalf("while D embeds them, %d of the job's %d files are processing, %d claimed; want them all claimed", processing, files, claimed)
		}
		if left > fileLease+time.Second {
			t.Errorf("D's claim on the files runs %v more; want at most the lease of %v, renewed by a heartbeat", left.Round(time.Millisecond), fileLease)
		}
		e := startServer(t, transportCase{name: "http", transport: "http"}, fcfg)
		se := connectGo(t, target{transport: "http", url: e.base + "/mcp", cfg: fcfg, srv: e})
		killed := time.Now()
		if err := d.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-d.exited
		emb.letGo()
		moved := waitJob(t, se, j.JobID, resumeLimit, "moving again on E", func(j jobInfo) bool { return j.Counts.Ready > 0 || j.final() })
		movedAfter := time.Since(killed)
		done := waitJob(t, se, j.JobID, resumeLimit, "ended", func(j jobInfo) bool { return j.final() })
		t.Logf("the files D held moved again on E %v after D was killed (%d ready), the job ended %v after (lease %v)",
			movedAfter.Round(time.Millisecond), moved.Counts.Ready, time.Since(killed).Round(time.Millisecond), fileLease)
		if done.Status != "succeeded" || done.Counts.Ready != files {
			t.Errorf("the job D left ended %+v on E, want succeeded with its %d files ready", done, files)
		}
	})
}

// pdfPage3 is the third page of the PDF the TypeScript clients add with
// add_document; pdfPage3Phrase is on no other page.
var pdfPage3 = []string{
	"Third section: the harbour dredging survey.",
	"Divers charted the silt banks along the northern breakwater,",
	"and the survey vessel sounded every channel at low water.",
	"The pilots agreed to a new leading light on the eastern jetty.",
}

const (
	pdfPage3Phrase = "sounded every channel at low water"
	pdfPage3Query  = "survey vessel sounded the channels at low water"
)

// progressFiles is the number of files in the archive of the progress
// scenario, of 9 chunks each: embedded at slowEmbedDelay a chunk, they
// keep add_document waiting for 3.6 s or more whatever the machine.
const progressFiles = 100

// slowEmbedDelay is how long slowEmbedder takes for each text it embeds.
const slowEmbedDelay = 4 * time.Millisecond

// slowEmbedder is an OpenAI-compatible /embeddings endpoint on loopback
// that answers a request after slowEmbedDelay for each of its texts, with
// vectors of 16 dimensions hashed from each text's words. The progress scenario's
// server embeds with it, so that its job lasts for seconds by the clock,
// not by the speed of the machine.
func slowEmbedder(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if r.URL.Path != "/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "want a POST of /embeddings with input", http.StatusBadRequest)
			return
		}
		time.Sleep(time.Duration(len(req.Input)) * slowEmbedDelay)
		writeVectors(w, req.Model, req.Input)
	}))
	t.Cleanup(s.Close)
	return s
}

// writeVectors answers an /embeddings request for texts of model with
// vectors of 16 dimensions hashed from each text's words.
func writeVectors(w http.ResponseWriter, model string, texts []string) {
	type datum struct {
		Embedding []float32 `json:"embedding"`
		Index     int       `json:"index"`
	}
	out := struct {
		Data  []datum `json:"data"`
		Model string  `json:"model"`
	}{Model: model}
	for i, text := range texts {
		v := make([]float32, 16)
		for _, word := range strings.Fields(strings.ToLower(text)) {
			h := fnv.New32a()
			h.Write([]byte(word))
			v[h.Sum32()%16]++
		}
		v[0] += 0.5 // no zero vector
		out.Data = append(out.Data, datum{Embedding: v, Index: i})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// heldEmbedder is an OpenAI-compatible /embeddings endpoint on loopback,
// with writeVectors's vectors, that holds the requests embedding a text
// with its marker while it is held: the server that sent one waits until
// it is let go, or goes away. Other requests (a query) are answered at
// once.
type heldEmbedder struct {
	*httptest.Server
	marker string
	mu     sync.Mutex
	// gate is open (closed) while requests are let go.
	gate chan struct{}
	// arrived receives a value per request held; answered one per
	// request of the marker answered.
	arrived, answered chan struct{}
}

func newHeldEmbedder(t *testing.T, marker string) *heldEmbedder {
	t.Helper()
	e := &heldEmbedder{marker: marker, gate: make(chan struct{}), arrived: make(chan struct{}, 64), answered: make(chan struct{}, 64)}
	close(e.gate)
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if r.URL.Path != "/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "want a POST of /embeddings with input", http.StatusBadRequest)
			return
		}
		if !slices.ContainsFunc(req.Input, func(s string) bool { return strings.Contains(s, e.marker) }) {
			writeVectors(w, req.Model, req.Input)
			return
		}
		e.mu.Lock()
		gate := e.gate
		e.mu.Unlock()
		select {
		case <-gate:
		default:
			e.arrived <- struct{}{}
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		writeVectors(w, req.Model, req.Input)
		e.answered <- struct{}{}
	}))
	t.Cleanup(e.Close)
	return e
}

// hold holds the requests of the marker from now on.
func (e *heldEmbedder) hold() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gate = make(chan struct{})
}

// letGo answers the requests held, and the next ones at once.
func (e *heldEmbedder) letGo() {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.gate:
	default:
		close(e.gate)
	}
}

// next waits for a value on c, for at most limit.
func (e *heldEmbedder) next(t *testing.T, c chan struct{}, limit time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(limit):
		t.Fatalf("no embedding request %s within %v", what, limit)
	}
}

// heldConfig is a server of cfg with one worker embedding through e.
func heldConfig(cfg config, e *heldEmbedder) config {
	return cfg.with("MCP_docs_workers=1", "MCP_embed_provider=openai", "MCP_embed_base_url="+e.URL,
		"MCP_embed_model=interop-held", "MCP_embed_dimensions=16")
}

// claims reads the processing files of conversation conv in the database
// at dbURL: how many there are, how many a worker holds, and the longest
// a claim has left to run by the database's clock.
func claims(t *testing.T, dbURL, conv string) (processing, claimed int, left time.Duration) {
	t.Helper()
	ctx, conn, done := auditConn(t, dbURL)
	defer done()
	var secs float64
	err := conn.QueryRow(ctx, `
		SELECT count(*), count(claimed_by), coalesce(extract(epoch FROM max(claimed_until) - now()), 0)::float8
		FROM files WHERE conversation_id = $1 AND status = 'processing'`, conv).Scan(&processing, &claimed, &secs)
	if err != nil {
		t.Fatal(err)
	}
	return processing, claimed, time.Duration(secs * float64(time.Second))
}

// fileLease is the lease of a worker's claim on files (docs.DefaultLease),
// renewed every third of it while the worker lives.
const fileLease = 10 * time.Second

// resumeLimit bounds how long the files of a process that died, or that
// lost its database for a moment, take to move again. The bound they are
// due within is fileLease and a quarter of it; before the heartbeat, the
// minute-long lease and a 5 s poll took longer than this limit, which
// leaves the rest to a loaded machine. How soon is a figure the tests log.
const resumeLimit = 45 * time.Second

// TestTypeScriptJobs drives add_document and get_job with the official
// TypeScript SDK (ts-client.mjs) and its v2 client (ts2-client.mjs). Over
// stdio and streamable HTTP, a three-page PDF sent as base64 becomes a job
// the client follows until it succeeds, after which search_docs finds a
// sentence of the third page and cites page 3. Over every transport (each
// SDK taking two), an archive of progressFiles files added with
// wait_seconds and a progress token keeps the call waiting for seconds,
// during which the client receives notifications/progress, growing, at
// least every 2 s, saying how many files and chunks are done. Every
// add_document call's audit row names its job.
func TestTypeScriptJobs(t *testing.T) {
	requireNode(t, "@modelcontextprotocol/client")
	t.Parallel()
	fake := searxngtest.New(t)
	embedder := slowEmbedder(t)
	cfg := docsConfig(t, fake.URL)
	dir := t.TempDir()
	pdf := filepath.Join(dir, "harbour-survey.pdf")
	if err := os.WriteFile(pdf, pdftest.Pages(pdfPage1, pdfPage2, pdfPage3), 0o600); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "field-notes.zip")
	if err := os.WriteFile(archive, notesZip(progressFiles, 3000), 0o600); err != nil {
		t.Fatal(err)
	}
	stdio, sse, streamable, stateless := transportCases[0], transportCases[1], transportCases[2], transportCases[3]
	type client struct{ name, script string }
	v1, v2 := client{"sdk-v1", "ts-client.mjs"}, client{"sdk-v2", "ts2-client.mjs"}
	runs := []struct {
		client
		tc       transportCase
		scenario string
	}{
		{v1, stdio, "add-pdf"},
		{v1, streamable, "add-pdf"},
		{v2, stdio, "add-pdf"},
		{v2, streamable, "add-pdf"},
		{v1, stdio, "progress"},
		{v1, sse, "progress"},
		{v2, streamable, "progress"},
		{v2, stateless, "progress"},
	}
	var mu sync.Mutex
	pdfJobs := 0
	t.Run("clients", func(t *testing.T) {
		// The PDF's servers, which serve both clients: one for each
		// transport, on one database.
		targets := map[string]target{}
		for _, tc := range []transportCase{stdio, streamable} {
			targets[tc.name] = newTarget(t, tc, cfg)
		}
		for _, r := range runs {
			t.Run(r.scenario+"/"+r.name+"/"+r.tc.name, func(t *testing.T) {
				conv := "conv-" + r.scenario + "-" + r.name + "-" + r.tc.name
				var tg target
				flags := []string{"--conversation", conv}
				switch r.scenario {
				case "add-pdf":
					tg = targets[r.tc.name]
					flags = append(flags, "--file", pdf, "--file-name", filepath.Base(pdf), "--doc-query", pdfPage3Query,
						"--expect-phrase", pdfPage3Phrase, "--expect-page", "3", "--expect-pages", "3")
				default:
					// A server of its own, with one worker and the slow
					// embedder, so that the archive keeps the call waiting;
					// on a database of its own, since servers on one
					// database share its queue of files.
					slow := docsConfig(t, fake.URL).with("MCP_docs_workers=1", "MCP_embed_provider=openai",
						"MCP_embed_base_url="+embedder.URL, "MCP_embed_model=interop-slow")
					tg = newTarget(t, r.tc, slow)
					flags = append(flags, "--file", archive, "--file-name", filepath.Base(archive),
						"--expect-files", strconv.Itoa(progressFiles), "--wait-seconds", "100")
				}
				t.Parallel()
				rep := runNodeScript(t, r.script, r.scenario, r.tc.transport, append(tsArgs(tg), flags...))
				ids, _ := rep.Details["job_ids"].([]any)
				if len(ids) == 0 {
					t.Errorf("%s reports no job: %v", r.scenario, rep.Details)
				}
				if r.scenario == "add-pdf" {
					mu.Lock()
					pdfJobs += len(ids)
					mu.Unlock()
					return
				}
				// Over HTTP the audit rows are written within a second; a
				// stdio server's when its client has gone, which it has.
				checkJobAudit(t, []string{tg.cfg["DATABASE_URL"]}, len(ids))
			})
		}
	})
	checkJobAudit(t, []string{cfg["DATABASE_URL"]}, pdfJobs)
}

// The keys of TestWriteScopes, by what they may do.
const (
	readerKey  = "interop-reader-key-0123456789"
	writerKey  = "interop-writer-key-0123456789"
	defaultKey = "interop-unscoped-key-0123456789"
)

// headerClient is an HTTP client that sends key as a bearer token and
// the headers kv (NAME, VALUE, ...) on every request.
func headerClient(key string, kv ...string) *http.Client {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Client{Transport: withHeaders{h: h, base: bearer{key: key, base: http.DefaultTransport}}}
}

// withHeaders adds headers to every request.
type withHeaders struct {
	h    http.Header
	base http.RoundTripper
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.h {
		r.Header[k] = v
	}
	return w.base.RoundTrip(r)
}

// TestWriteScopes checks keys that may only read, keys that may write and
// the X-MCP-Toolsets header, through the Go SDK's client and plain HTTP
// clients of the REST facade and the upload API: a read key sees no write
// tool in tools/list or GET /mcp/tools, and is refused with AUTH_ERROR
// (403 over REST) when it calls one anyway, each refusal audited; the
// header narrows what a key sees (web: web_search and fetch_url) and never
// widens it.
func TestWriteScopes(t *testing.T) {
	t.Parallel()
	fake := searxngtest.New(t)
	keys := filepath.Join(t.TempDir(), "keys")
	lines := fmt.Sprintf("%s name=reader scopes=read\n%s name=writer scopes=read,write\n%s name=unscoped\n", readerKey, writerKey, defaultKey)
	if err := os.WriteFile(keys, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fullConfig(t, fake.URL).with("MCP_API_KEYS_FILE=" + keys)
	srv := startServer(t, transportCase{name: "http", transport: "http"}, cfg)
	const conv = "conv-scopes"

	dial := func(t *testing.T, key string, header ...string) *mcp.ClientSession {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := mcp.NewClient(goClient, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.base + "/mcp", MaxRetries: -1,
			HTTPClient: headerClient(key, header...)}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	listed := func(t *testing.T, s *mcp.ClientSession) []string {
		t.Helper()
		res, err := s.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		return names
	}
	restTools := func(t *testing.T, key string, header ...string) []string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.base+"/mcp/tools", nil)
		resp, err := headerClient(key, header...).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
			t.Fatalf("GET /mcp/tools: %s", resp.Status)
		}
		var names []string
		for _, tool := range body.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		return names
	}
	var readTools []string
	for _, name := range tools.names {
		if !slices.Contains(tools.writes, name) {
			readTools = append(readTools, name)
		}
	}
	web := []string{"fetch_url", "web_search"}

	t.Run("tools/list", func(t *testing.T) {
		cases := []struct {
			name   string
			key    string
			header []string
			want   []string
		}{
			{"read key", readerKey, nil, readTools},
			{"read,write key", writerKey, nil, tools.names},
			{"key without scopes", defaultKey, nil, tools.names},
			{"write key, toolsets web", writerKey, []string{"X-MCP-Toolsets", "web"}, web},
			{"write key, toolsets docs_write", writerKey, []string{"X-MCP-Toolsets", "docs_write"}, tools.writes},
			{"read key, toolsets docs_write", readerKey, []string{"X-MCP-Toolsets", "docs_write"}, nil},
			{"read key, toolsets web,docs_write", readerKey, []string{"X-MCP-Toolsets", "web, docs_write"}, web},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if got := listed(t, dial(t, c.key, c.header...)); !slices.Equal(got, c.want) {
					t.Errorf("tools/list = %v, want %v", got, c.want)
				}
				if got := restTools(t, c.key, c.header...); !slices.Equal(got, c.want) {
					t.Errorf("GET /mcp/tools = %v, want %v", got, c.want)
				}
			})
		}
	})

	// The writer's job, which the reader may read but not cancel.
	writer := dial(t, writerKey)
	job := addDocument(t, writer, map[string]any{"conversation_id": conv, "title": "Tide table", "text": "High water at the harbour mouth is at 06:12 and 18:40."})
	t.Run("write tools refused to a read key", func(t *testing.T) {
		reader := dial(t, readerKey)
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"add_document", map[string]any{"conversation_id": conv, "title": "Sneaked in", "text": "A reader's note."}},
			{"cancel_job", map[string]any{"job_id": job.JobID}},
			{"delete_document", map[string]any{"file_id": job.Documents[0].FileID}},
		} {
			res, err := reader.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				t.Fatalf("%s: %v", c.tool, err)
			}
			wantError(t, searchErr(t, res), "AUTH_ERROR", false, "scopes=read,write")
		}
		// Reading the job is a read.
		if got := getJob(t, reader, job.JobID); got.JobID != job.JobID {
			t.Errorf("get_job with a read key = %+v", got)
		}
		// The REST facade says the same with 403.
		api := apiClient{base: srv.base, key: readerKey}
		status, b := api.do(t, http.MethodPost, "/mcp/tools/add_document", "application/json",
			strings.NewReader(`{"conversation_id":"`+conv+`","title":"Sneaked in","text":"A reader's note."}`))
		var body struct {
			ErrorType string `json:"error_type"`
			Error     string `json:"error"`
		}
		if status != http.StatusForbidden || json.Unmarshal(b, &body) != nil || body.ErrorType != "AUTH_ERROR" {
			t.Errorf("POST /mcp/tools/add_document with a read key: %d %s, want 403 AUTH_ERROR", status, b)
		}
		// So do the upload API and the jobs' cancel.
		up, ct := multipartBody(filePart("notes.txt", "text/plain", []byte("A reader's upload.")))
		if status, b := api.do(t, http.MethodPost, "/v1/conversations/"+conv+"/files", ct, bytes.NewReader(up)); status != http.StatusForbidden {
			t.Errorf("an upload with a read key: %d %s, want 403", status, b)
		}
		if status, b := api.do(t, http.MethodDelete, "/v1/jobs/"+job.JobID, "", nil); status != http.StatusForbidden {
			t.Errorf("DELETE /v1/jobs with a read key: %d %s, want 403", status, b)
		}
	})

	t.Run("toolsets narrow calls too", func(t *testing.T) {
		narrowed := dial(t, writerKey, "X-MCP-Toolsets", "web")
		res, err := narrowed.CallTool(context.Background(), &mcp.CallToolParams{Name: "add_document",
			Arguments: map[string]any{"conversation_id": conv, "title": "Outside the toolset", "text": "Not stored."}})
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, searchErr(t, res), "AUTH_ERROR", false, "X-MCP-Toolsets")
		req, _ := http.NewRequest(http.MethodPost, srv.base+"/mcp/tools/search_docs", strings.NewReader(`{"conversation_id":"`+conv+`","query":"high water"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := headerClient(writerKey, "X-MCP-Toolsets", "web").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST /mcp/tools/search_docs with X-MCP-Toolsets: web = %s, want 403", resp.Status)
		}
	})

	writer.Close()
	srv.stop(t)
	rows := readAuditJobs(t, cfg["DATABASE_URL"])
	var authErrors []string
	for _, r := range rows {
		if r.Code == "AUTH_ERROR" {
			authErrors = append(authErrors, r.Tool+" "+r.Key)
		}
		if r.Tool == "add_document" && r.Code == "" && r.Job != job.JobID {
			t.Errorf("the writer's add_document is audited with job %q, want %s", r.Job, job.JobID)
		}
	}
	slices.Sort(authErrors)
	want := []string{"add_document reader", "add_document reader", "add_document writer", "cancel_job reader", "delete_document reader", "search_docs writer"}
	if !slices.Equal(authErrors, want) {
		t.Errorf("audit rows of AUTH_ERROR (tool key) = %v, want %v", authErrors, want)
	}
}

// auditJobRow is an audit row's tool, outcome, key and job.
type auditJobRow struct {
	Tool, Code, Key, Job string
}

// readAuditJobs returns the tool, error code, key name and job of every
// audit row in the database at dbURL, oldest first.
func readAuditJobs(t *testing.T, dbURL string) []auditJobRow {
	t.Helper()
	ctx, conn, done := auditConn(t, dbURL)
	defer done()
	rows, err := conn.Query(ctx, `SELECT tool_name, coalesce(error_code, ''), coalesce(api_key_name, ''), coalesce(job_id, '')
		FROM chat_mcp_tool_calls ORDER BY created_at, id`)
	if err != nil {
		t.Fatalf("read chat_mcp_tool_calls: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditJobRow, error) {
		var a auditJobRow
		return a, r.Scan(&a.Tool, &a.Code, &a.Key, &a.Job)
	})
	if err != nil {
		t.Fatalf("read chat_mcp_tool_calls: %v", err)
	}
	return out
}

// TestJobsSurviveDatabaseRestart runs mcpsearch on a database of the
// test's own, a PostgreSQL server and a Citus cluster, and stops it while
// the worker embeds the first of a job's files and an add_document call
// waits for the job; the worker ends those files while the database is
// down, then it starts again. Once it is back the files move again within
// seconds (before, they stayed claimed for the minute of their lease), and
// the waiting call answers with the job succeeded, every file ready.
func TestJobsSurviveDatabaseRestart(t *testing.T) {
	t.Parallel()
	fake := searxngtest.New(t)
	pgtest.EachServer(t, func(t *testing.T, srv *pgtest.Server) {
		const marker = "tide gauge"
		emb := newHeldEmbedder(t, marker)
		cfg := heldConfig(baseConfig(fake.URL).with("MCP_docs_enabled=true", "DATABASE_URL="+srv.NewDatabase(t),
			"MCP_docs_chunk_size=400", "MCP_docs_chunk_overlap=40"), emb)
		tg := newTarget(t, transportCase{name: "http", transport: "http"}, cfg)
		s := connectGo(t, tg)
		const conv = "conv-restarted"
		// The worker takes the first 32 up together, then the rest.
		const files = 40
		emb.hold()
		type answer struct {
			job jobInfo
			err error
			at  time.Time
		}
		answered := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "add_document", Arguments: map[string]any{"conversation_id": conv,
				"file_name": "field-notes.zip", "content_base64": base64.StdEncoding.EncodeToString(notesZip(files, 3000)), "wait_seconds": 100}})
			a := answer{err: err, at: time.Now()}
			if err == nil && res.IsError {
				a.err = fmt.Errorf("add_document failed: %s", resultText(res))
			}
			if a.err == nil {
				raw, _ := json.Marshal(res.StructuredContent)
				a.err = json.Unmarshal(raw, &a.job)
			}
			answered <- a
		}()
		emb.next(t, emb.arrived, 30*time.Second, "of the worker embedding the job's first files")

		srv.Stop(t)
		stopped := time.Now()
		// The worker ends the files it holds while the database is
		// down; the pause lets its first attempts to store them fail.
		emb.letGo()
		emb.next(t, emb.answered, 30*time.Second, "answered once let go")
		time.Sleep(time.Second)
		srv.Start(t)
		back := time.Now()

		deadline := back.Add(resumeLimit)
		for {
			ready, _ := callTool[listFilesOutput](t, s, "list_files", map[string]any{"conversation_id": conv, "status": "ready", "limit": 1})
			if len(ready.Files) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no file of the job is ready %v after the database was back", resumeLimit)
			}
			time.Sleep(50 * time.Millisecond)
		}
		moved := time.Since(back)
		var a answer
		select {
		case a = <-answered:
		case <-time.After(time.Until(back.Add(resumeLimit))):
			t.Fatalf("the waiting add_document did not answer %v after the database was back", resumeLimit)
		}
		if a.err != nil {
			t.Fatalf("the waiting add_document: %v", a.err)
		}
		t.Logf("down %v; files moved again %v after the database was back, the waiting call answered %v after",
			back.Sub(stopped).Round(time.Millisecond), moved.Round(time.Millisecond), a.at.Sub(back).Round(time.Millisecond))
		if a.job.Status != "succeeded" || a.job.Counts.Ready != files {
			t.Errorf("the waiting add_document answered %+v, want the job succeeded with its %d files ready", a.job, files)
		}
	})
}
