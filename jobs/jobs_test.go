package jobs

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/pg"
)

// gate is an embedder that holds every call until it is opened, so that a
// test sees a job while its files are processing.
type gate struct {
	embed.Embedder
	open  chan struct{}
	calls atomic.Int64
}

func newGate(t testing.TB) *gate {
	t.Helper()
	e, err := embed.NewLocal(64)
	if err != nil {
		t.Fatal(err)
	}
	return &gate{Embedder: e, open: make(chan struct{})}
}

func (g *gate) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	g.calls.Add(1)
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	return g.Embedder.Embed(ctx, texts)
}

func (g *gate) release() {
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// env is a database with a documents store, an ingester and a runner on it.
type env struct {
	url  string
	pool *pgxpool.Pool
	st   *docs.Store
	in   *docs.Ingester
	r    *Runner
}

func newEnv(t *testing.T, emb embed.Embedder, opts Options) *env {
	t.Helper()
	return openEnv(t, pgtest.NewDatabase(t), emb, opts)
}

func openEnv(t *testing.T, url string, emb embed.Embedder, opts Options) *env {
	t.Helper()
	pool, err := pg.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := docs.NewStore(pool, emb, docs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := docs.NewIngester(st, docs.IngestOptions{PollInterval: 100 * time.Millisecond, HeldCheck: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	if opts.Poll == 0 {
		opts.Poll = 100 * time.Millisecond
	}
	if opts.Check == 0 {
		opts.Check = 100 * time.Millisecond
	}
	r := NewRunner(NewStore(st), in, opts)
	t.Cleanup(r.Close)
	return &env{url: url, pool: pool, st: st, in: in, r: r}
}

// waitJob polls job id until ok accepts it, or fails the test.
func waitJob(t *testing.T, s *Store, id string, within time.Duration, ok func(Job) bool) Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := s.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s after %s: %+v", id, within, j)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ended(j Job) bool { return Final(j.Status) }

func text(name, body string) docs.Upload {
	return docs.Upload{FileName: name, Data: []byte(body)}
}

func TestAddFilesEndsWithItsFiles(t *testing.T) {
	emb := newGate(t)
	e := newEnv(t, emb, Options{})
	ctx := context.Background()
	j, files, errs, err := e.r.AddFiles(ctx, "c1", KindDocument, Input{Title: "notes"}, "tester",
		[]docs.Upload{text("a.md", "# Alpha\n\nThe alpha document speaks of rivers."), text("b.txt", "The beta document speaks of hills.")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("file %d refused: %v", i, err)
		}
		if files[i].JobID != j.ID {
			t.Errorf("file %d has job %q, want %q", i, files[i].JobID, j.ID)
		}
	}
	if j.Status != Running || !j.Submitted || j.Total() != 2 || j.Done() != 0 {
		t.Fatalf("job while its files wait: %+v (%s)", j, j.Progress())
	}
	emb.release()
	j = waitJob(t, e.r.Store(), j.ID, 30*time.Second, ended)
	if j.Status != Succeeded || j.Files.Ready != 2 || j.Files.Chunks < 2 || j.FinishedAt.IsZero() || j.StartedAt.IsZero() {
		t.Fatalf("job after its files: %+v", j)
	}
	if got := j.Progress(); got != fmt.Sprintf("2 of 2 files, %d chunks", j.Files.Chunks) {
		t.Errorf("progress %q", got)
	}
	// The same bytes again: a job of duplicates, done at once.
	j2, files, _, err := e.r.AddFiles(ctx, "c1", KindDocument, Input{}, "tester", []docs.Upload{text("again.txt", "The beta document speaks of hills.")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !files[0].Duplicate || j2.Status != Succeeded || j2.Duplicates != 1 || j2.Done() != 1 {
		t.Fatalf("duplicate job: %+v, file %+v", j2, files[0])
	}
}

func TestJobOfFailedFilesFails(t *testing.T) {
	emb := newGate(t)
	emb.release()
	e := newEnv(t, emb, Options{})
	j, _, errs, err := e.r.AddFiles(context.Background(), "c1", KindUpload, Input{}, "k",
		[]docs.Upload{text("empty.txt", "   \n\n  "), {FileName: "x.exe", Data: []byte("MZ\x90\x00\x03\x00\x00\x00\x04\x00")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if errs[1] == nil || !errors.Is(errs[1], docs.ErrUnsupportedType) {
		t.Fatalf("executable: %v", errs[1])
	}
	j = waitJob(t, e.r.Store(), j.ID, 30*time.Second, ended)
	if j.Status != Failed || j.Files.Failed != 1 || j.Refused != 1 || !strings.Contains(j.Error, "no file of the job") {
		t.Fatalf("job: %+v", j)
	}
	if len(j.Refusals) != 1 || j.Refusals[0].FileName != "x.exe" {
		t.Fatalf("refusals: %+v", j.Refusals)
	}
}

func TestArchiveIsAJobOfItsFiles(t *testing.T) {
	emb := newGate(t)
	emb.release()
	e := newEnv(t, emb, Options{Unpack: ArchiveUnpacker{MaxFileBytes: 1 << 20}})
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name, body string) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(body))
	}
	add("guide/intro.md", "# Intro\n\nHow to install the widget.")
	add("guide/usage.txt", "Turn the widget clockwise to start it.")
	add("__MACOSX/guide/._intro.md", "resource fork")
	add("big.txt", strings.Repeat("x", 2<<20))
	add("guide/", "")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	j, files, errs, err := e.r.AddFiles(context.Background(), "c1", KindDocument, Input{FileName: "guide.zip"}, "k",
		[]docs.Upload{{FileName: "guide.zip", Data: buf.Bytes()}}, nil)
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs[0])
	}
	if files[0].Status != "unpacked" {
		t.Errorf("archive's own result: %+v", files[0])
	}
	j = waitJob(t, e.r.Store(), j.ID, 30*time.Second, ended)
	if j.Status != Succeeded || j.Files.Ready != 2 || j.Refused != 1 || j.Total() != 3 {
		t.Fatalf("job: %+v", j)
	}
	if !strings.Contains(j.Refusals[0].Reason, "MCP_docs_max_file_mb") || j.Refusals[0].FileName != "big.txt" {
		t.Errorf("refusal: %+v", j.Refusals)
	}
	stored, err := e.r.Store().JobFiles(context.Background(), j, 10)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range stored {
		names = append(names, f.FileName)
	}
	if strings.Join(names, ",") != "guide/intro.md,guide/usage.txt" && strings.Join(names, ",") != "guide/usage.txt,guide/intro.md" {
		t.Errorf("files: %v", names)
	}
}

func TestCancelStopsProcessingAndKeepsReadyFiles(t *testing.T) {
	emb := newGate(t)
	e := newEnv(t, emb, Options{})
	ctx := context.Background()
	// One file made ready first, in its own job.
	emb.release()
	done, _, _, err := e.r.AddFiles(ctx, "c1", KindDocument, Input{}, "k", []docs.Upload{text("kept.txt", "A file stored before the cancel.")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, e.r.Store(), done.ID, 30*time.Second, ended)
	// Then a job whose files cannot finish until cancelled.
	emb2 := newGate(t)
	e2 := openEnv(t, e.url, emb2, Options{})
	var ups []docs.Upload
	for i := range 5 {
		ups = append(ups, text(fmt.Sprintf("f%d.txt", i), fmt.Sprintf("File number %d of the job that is cancelled.", i)))
	}
	e.in.Close() // only the second ingester works now
	j, _, _, err := e2.r.AddFiles(ctx, "c1", KindUpload, Input{}, "k", ups, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for emb2.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no file of the job reached the embedder")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	// Cancelled through the first runner's store: another replica's.
	c, err := e.r.Store().Cancel(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != Cancelled || c.Files.Processing != 0 || c.FinishedAt.IsZero() {
		t.Fatalf("cancelled job: %+v", c)
	}
	// The worker holding the files lets go at its next check. The gate
	// holds them until released, so they stop only for the cancel; the
	// deadline guards against a hang, the time taken is logged.
	for e2.in.IngestStats().Working > 0 {
		if time.Since(start) > time.Minute {
			t.Fatalf("still processing %s after the cancel", time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("processing stopped %s after the cancel", time.Since(start).Round(time.Millisecond))
	files, err := e.st.ListFiles(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].FileName != "kept.txt" || files[0].Status != docs.StatusReady {
		t.Fatalf("files left: %+v", files)
	}
	if _, err := e.r.Store().Cancel(ctx, j.ID); !errors.Is(err, ErrFinished) {
		t.Fatalf("second cancel: %v", err)
	}
	emb2.release()
}

// pages is a Fetcher serving fixed documents, counting its calls.
type pages struct {
	mu    sync.Mutex
	calls int
	block chan struct{}
	body  map[string]string
}

func (p *pages) Download(ctx context.Context, rawURL string) (*fetch.Resource, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	if p.block != nil {
		select {
		case <-p.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b, ok := p.body[rawURL]
	if !ok {
		return nil, fmt.Errorf("fetch %s: HTTP 404 Not Found", rawURL)
	}
	return &fetch.Resource{URL: rawURL, ContentType: "text/plain", Body: []byte(b)}, nil
}

func TestURLJobIsFetchedByAWorker(t *testing.T) {
	emb := newGate(t)
	emb.release()
	p := &pages{body: map[string]string{"https://example.test/a.txt": "The page about lighthouses."}}
	e := newEnv(t, emb, Options{Fetch: p})
	ctx := context.Background()
	j, err := e.r.AddURL(ctx, "c1", "https://example.test/a.txt", "k")
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != Queued || j.Progress() != "waiting to start" {
		t.Fatalf("new URL job: %+v", j)
	}
	j = waitJob(t, e.r.Store(), j.ID, 30*time.Second, ended)
	if j.Status != Succeeded || j.Files.Ready != 1 {
		t.Fatalf("job: %+v", j)
	}
	files, _ := e.r.Store().JobFiles(ctx, j, 5)
	if len(files) != 1 || files[0].Source != "https://example.test/a.txt" {
		t.Fatalf("files: %+v", files)
	}
	bad, err := e.r.AddURL(ctx, "c1", "https://example.test/missing", "k")
	if err != nil {
		t.Fatal(err)
	}
	bad = waitJob(t, e.r.Store(), bad.ID, 30*time.Second, ended)
	if bad.Status != Failed || !strings.Contains(bad.Error, "404") {
		t.Fatalf("failed fetch: %+v", bad)
	}
}

func TestStoppedProcessIsTakenOver(t *testing.T) {
	emb := newGate(t)
	emb.release()
	url := pgtest.NewDatabase(t)
	p := &pages{block: make(chan struct{}), body: map[string]string{"https://example.test/b.txt": "The page about harbours."}}
	// The first replica takes the job and stops without a word: its
	// runner is closed with the fetch blocked, as a killed process would
	// leave it, except that Close gives the lease up; a killed process's
	// lease expires instead, which the lease of a second replica below
	// waits for.
	first := openEnv(t, url, emb, Options{Fetch: p, Lease: time.Second})
	j, err := first.r.AddURL(context.Background(), "c1", "https://example.test/b.txt", "k")
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, first.r.Store(), j.ID, 10*time.Second, func(j Job) bool { return j.Status == Running })
	// Freeze the lease: the row keeps the first claim.
	if _, err := first.pool.Exec(context.Background(), `UPDATE jobs SET claimed_until = now() + interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	kill(first)
	close(p.block)
	second := openEnv(t, url, emb, Options{Fetch: p, Lease: time.Second})
	j = waitJob(t, second.r.Store(), j.ID, 30*time.Second, ended)
	if j.Status != Succeeded || j.Attempts != 2 {
		t.Fatalf("taken over: %+v", j)
	}

	// A job whose files its caller was storing cannot be resumed: it fails,
	// saying so.
	doc, err := second.r.Store().Create(context.Background(), "c1", KindDocument, Input{}, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.pool.Exec(context.Background(), `UPDATE jobs SET claimed_by = $2, claimed_until = now() - interval '1 second', status = 'running' WHERE conversation_id = 'c1' AND id = $1`, doc.ID, docs.NewID("c1")); err != nil {
		t.Fatal(err)
	}
	doc = waitJob(t, second.r.Store(), doc.ID, 30*time.Second, ended)
	if doc.Status != Failed || !strings.Contains(doc.Error, "stopped before") {
		t.Fatalf("stranded job: %+v", doc)
	}
}

// kill stops a replica's runner without giving its leases up, as a killed
// process would.
func kill(e *env) {
	e.r.cancel()
	e.r.once.Do(func() {
		close(e.r.stop)
		e.r.workers.Wait()
	})
}

func TestListPagesNewestFirst(t *testing.T) {
	emb := newGate(t)
	emb.release()
	e := newEnv(t, emb, Options{})
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		j, _, _, err := e.r.AddFiles(ctx, "c1", KindDocument, Input{Title: fmt.Sprint(i)}, "k", []docs.Upload{text("t.txt", fmt.Sprintf("Document %d.", i))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		waitJob(t, e.r.Store(), id, 30*time.Second, ended)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		p, err := e.r.Store().List(ctx, "c1", "", 3, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if p.Total != 7 {
			t.Fatalf("total %d", p.Total)
		}
		for _, j := range p.Jobs {
			got = append(got, j.ID)
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	for i := range ids {
		if got[i] != ids[len(ids)-1-i] {
			t.Fatalf("order: %v, want the reverse of %v", got, ids)
		}
	}
	p, err := e.r.Store().List(ctx, "c1", Failed, 10, "")
	if err != nil || p.Total != 0 || len(p.Jobs) != 0 {
		t.Fatalf("failed jobs: %+v %v", p, err)
	}
	if _, err := e.r.Store().List(ctx, "c1", "", 10, "bogus!"); !errors.Is(err, docs.ErrInvalidArgument) {
		t.Fatalf("bad cursor: %v", err)
	}
	if _, err := e.r.Store().Get(ctx, "not-a-uuid"); !errors.Is(err, docs.ErrInvalidID) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := e.r.Store().Get(ctx, docs.NewID("c1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestEndedJobKeepsItsCounts: a job's counts are what happened when it
// ran: deleting its files later changes neither its counts nor its words
// ("3 of 3 files, 1 failed" stays so), on its own page and in lists.
func TestEndedJobKeepsItsCounts(t *testing.T) {
	emb := newGate(t)
	emb.release()
	e := newEnv(t, emb, Options{})
	ctx := context.Background()
	j, files, _, err := e.r.AddFiles(ctx, "c1", KindUpload, Input{}, "k",
		[]docs.Upload{text("a.md", "# Alpha\n\nRivers of the north."), text("b.md", "# Beta\n\nHills of the south."), text("empty.txt", "  \n ")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, e.r.Store(), j.ID, 30*time.Second, ended)
	before := j.Progress()
	if j.Status != Succeeded || j.Files.Ready != 2 || j.Files.Failed != 1 || !strings.HasSuffix(before, ", 1 failed") {
		t.Fatalf("job: %+v (%s)", j, before)
	}
	for _, f := range files {
		if err := e.st.DeleteFile(ctx, f.ID); err != nil {
			t.Fatal(err)
		}
	}
	again, err := e.r.Store().Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again.Files.Ready != 2 || again.Files.Failed != 1 || again.Files.Chunks != j.Files.Chunks || again.Progress() != before {
		t.Errorf("after its files were deleted the job reads %+v (%s), want %q", again.Files, again.Progress(), before)
	}
	page, err := e.r.Store().List(ctx, "c1", "", 10, "")
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].Progress() != before {
		t.Errorf("listed: %+v %v, want %q", page.Jobs, err, before)
	}
}
