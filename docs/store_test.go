package docs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/internal/closedport"
	"github.com/mcpsearch/mcpsearch/internal/pdftest"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

func TestIngestFormats(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	tests := []struct {
		name, fileName, declared string
		data                     []byte
		wantMIME                 string
		wantPages                int
		query, wantInHit         string
		wantPage                 int
	}{
		{
			name: "plain text", fileName: "notes.txt", declared: "text/plain",
			data:     []byte("Shopping list.\n\nThe blue heron nests near the old mill every spring."),
			wantMIME: extract.MIMEText, query: "where does the heron nest", wantInHit: "blue heron",
		},
		{
			name: "markdown", fileName: "guide.md", declared: "",
			data:     []byte("# Setup\n\nRun `make bootstrap` to install the toolchain.\n\n## Usage\n\nCall the frobnicator twice."),
			wantMIME: extract.MIMEMarkdown, query: "frobnicator", wantInHit: "frobnicator",
		},
		{
			name: "html", fileName: "page.html", declared: "text/html; charset=utf-8",
			data:     []byte(`<html><head><title>T</title><script>var hidden = "zebra";</script></head><body><h1>Tides</h1><p>The spring tide peaks at noon.</p></body></html>`),
			wantMIME: extract.MIMEHTML, query: "spring tide", wantInHit: "spring tide",
		},
		{
			name: "pdf", fileName: "report.pdf", declared: "application/octet-stream",
			data: pdftest.Pages(
				append([]string{"Quarterly report"}, slices.Repeat([]string{"Revenue grew in every region and every quarter."}, 18)...),
				append([]string{"Appendix", "The lighthouse keeper logs the weather."}, slices.Repeat([]string{"Shipping lanes stayed open all year."}, 8)...)),
			wantMIME: extract.MIMEPDF, wantPages: 2, query: "lighthouse keeper weather", wantInHit: "lighthouse", wantPage: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conv := "formats-" + tt.name
			f, err := s.Ingest(ctx, conv, tt.fileName, tt.declared, tt.data)
			if err != nil {
				t.Fatalf("Ingest: %v", err)
			}
			if f.Status != StatusReady || f.ChunkCount < 1 || f.MIMEType != tt.wantMIME || f.PageCount != tt.wantPages ||
				f.EmbeddingModel != s.Embedder().Model() || f.SizeBytes != int64(len(tt.data)) || f.Duplicate {
				t.Errorf("Ingest = %+v; want ready, chunks, %s, %d pages", f, tt.wantMIME, tt.wantPages)
			}
			hits, err := s.Search(ctx, Query{Text: tt.query, ConversationID: conv})
			if err != nil {
				t.Fatalf("Search: %v", err)
			}
			if len(hits) == 0 || !strings.Contains(hits[0].Content, tt.wantInHit) {
				t.Fatalf("Search(%q) = %+v; want a hit containing %q", tt.query, hits, tt.wantInHit)
			}
			h := hits[0]
			if h.FileID != f.ID || h.FileName != tt.fileName || h.PageNumber != tt.wantPage {
				t.Errorf("hit %+v; want file %s %s, page %d", h, f.ID, tt.fileName, tt.wantPage)
			}
			if tt.name == "html" && strings.Contains(h.Content, "zebra") {
				t.Error("script content was indexed")
			}

			c, err := s.GetChunk(ctx, h.ChunkID)
			if err != nil {
				t.Fatalf("GetChunk: %v", err)
			}
			if c.Content != h.Content || c.FileName != tt.fileName || c.ConversationID != conv || c.CharStart != h.CharStart || c.CharEnd != h.CharEnd {
				t.Errorf("GetChunk = %+v; want the hit's chunk %+v", c, h)
			}
			got, text, err := s.FileText(ctx, f.ID)
			if err != nil {
				t.Fatalf("FileText: %v", err)
			}
			if got.ID != f.ID || !strings.Contains(text, tt.wantInHit) {
				t.Errorf("FileText = %q; want the text with %q", text, tt.wantInHit)
			}
			if r := []rune(text); string(r[c.CharStart:c.CharEnd]) != c.Content {
				t.Errorf("chunk offsets [%d,%d) do not select its content in the file text", c.CharStart, c.CharEnd)
			}
			checkStats(t, s.Pool(), conv)
		})
	}
}

func TestDuplicateUploadReturnsTheSameFile(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	data := []byte(prose(1, 400))
	first, err := s.Ingest(ctx, "dup", "a.txt", "text/plain", data)
	if err != nil {
		t.Fatal(err)
	}
	chunks := countChunks(t, s.Pool(), "conversation_id = 'dup'")

	again, err := s.Ingest(ctx, "dup", "renamed.txt", "text/plain", data)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || !again.Duplicate || again.FileName != "a.txt" || again.Status != StatusReady {
		t.Errorf("second upload = %+v; want file %s again, marked duplicate", again, first.ID)
	}
	viaSubmit, err := s.Submit(ctx, "dup", "b.txt", "text/plain", data)
	if err != nil {
		t.Fatal(err)
	}
	if viaSubmit.ID != first.ID || !viaSubmit.Duplicate {
		t.Errorf("Submit of the same bytes = %+v; want file %s, marked duplicate", viaSubmit, first.ID)
	}
	if n := countChunks(t, s.Pool(), "conversation_id = 'dup'"); n != chunks {
		t.Errorf("%d chunks after duplicate uploads, want %d", n, chunks)
	}
	other, err := s.Ingest(ctx, "dup-other", "a.txt", "text/plain", data)
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == first.ID || other.Duplicate {
		t.Errorf("the same bytes in another conversation = %+v; want a new file", other)
	}
	checkStats(t, s.Pool(), "dup")
}

func TestFailedFileKeepsNoChunks(t *testing.T) {
	t.Parallel()
	s, url := newStore(t, IngestOptions{})
	ctx := context.Background()
	// Something ready first, so the statistics have something to corrupt.
	if _, err := s.Ingest(ctx, "fail", "ok.txt", "", []byte(prose(2, 300))); err != nil {
		t.Fatal(err)
	}
	local, _ := embed.NewLocal(384)
	broken := openStore(t, url, failingEmbedder{local}, IngestOptions{})
	text := []byte(prose(3, 300))

	tests := []struct {
		name     string
		store    *testStore
		fileName string
		data     []byte
		wantErr  error
		reason   string
	}{
		{"embedder down", broken, "a.txt", text, embed.ErrUnavailable, "embedding failed"},
		{"no text", s, "empty.html", []byte("<html><body><p>  </p></body></html>"), extract.ErrNoText, "no extractable text"},
		{"corrupt pdf", s, "bad.pdf", []byte("%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >> endobj\ntrailer garbage"), extract.ErrCorrupt, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := tt.store.Ingest(ctx, "fail", tt.fileName, "", tt.data)
			if !errors.Is(err, ErrProcessing) || !errors.Is(err, tt.wantErr) {
				t.Fatalf("Ingest error = %v; want ErrProcessing and %v", err, tt.wantErr)
			}
			if f.ID == "" || f.Status != StatusFailed || f.Error == "" || !strings.Contains(f.Error, tt.reason) {
				t.Errorf("Ingest file = %+v; want status failed with a reason containing %q", f, tt.reason)
			}
			stored, err := s.GetFile(ctx, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Status != StatusFailed || stored.Error != f.Error || stored.ChunkCount != 0 {
				t.Errorf("stored file = %+v; want failed with %q and no chunks", stored, f.Error)
			}
			if n := countChunks(t, s.Pool(), "file_id = $1", f.ID); n != 0 {
				t.Errorf("%d chunks stored for a failed file", n)
			}
			if _, _, err := s.FileText(ctx, f.ID); !errors.Is(err, ErrNotReady) {
				t.Errorf("FileText of a failed file = %v; want ErrNotReady", err)
			}
			checkStats(t, s.Pool(), "fail")
		})
	}

	// The same bytes uploaded again once the embedder works are processed
	// again, under the same id.
	failed, err := s.ListFiles(ctx, "fail")
	if err != nil {
		t.Fatal(err)
	}
	var failedID string
	for _, f := range failed {
		if f.FileName == "a.txt" {
			failedID = f.ID
		}
	}
	retried, err := s.Ingest(ctx, "fail", "a.txt", "", text)
	if err != nil {
		t.Fatal(err)
	}
	if retried.ID != failedID || retried.Status != StatusReady || retried.Duplicate || retried.Error != "" {
		t.Errorf("re-upload of a failed file = %+v; want file %s processed again and ready", retried, failedID)
	}
	checkStats(t, s.Pool(), "fail")
}

func TestUploadValidation(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{MaxFileBytes: 1000})
	ctx := context.Background()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	tests := []struct {
		name                 string
		conv, fileName, mime string
		data                 []byte
		want                 []error
	}{
		{"image", "v", "photo.png", "image/png", png, []error{ErrUnsupportedType, extract.ErrUnsupported}},
		{"image named text", "v", "photo.txt", "text/plain", png, []error{ErrUnsupportedType}},
		{"too large", "v", "big.txt", "text/plain", []byte(strings.Repeat("a", 1001)), []error{ErrTooLarge, extract.ErrTooLarge}},
		{"no conversation", " ", "a.txt", "", []byte("hello"), []error{ErrInvalidArgument}},
		{"no file name", "v", "", "", []byte("hello"), []error{ErrInvalidArgument}},
		{"file name with NUL", "v", "a\x00.txt", "", []byte("hello"), []error{ErrInvalidArgument}},
	}
	for _, tt := range tests {
		for _, call := range []struct {
			name string
			fn   func(context.Context, string, string, string, []byte) (File, error)
		}{{"Ingest", s.Ingest}, {"Submit", s.Submit}} {
			_, err := call.fn(ctx, tt.conv, tt.fileName, tt.mime, tt.data)
			for _, want := range tt.want {
				if !errors.Is(err, want) {
					t.Errorf("%s: %s = %v; want %v", tt.name, call.name, err, want)
				}
			}
			if Retryable(err) {
				t.Errorf("%s: %s: %v reported retryable", tt.name, call.name, err)
			}
		}
	}
	files, err := s.ListFiles(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 0 {
		t.Errorf("rejected uploads left files: %+v", files)
	}
}

func TestSubmitAndSearchInParallel(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{Workers: 2, QueueSize: 64})
	ctx := context.Background()
	const conv = "parallel"
	const submitters, perSubmitter = 6, 4
	var (
		wg       sync.WaitGroup
		errs     collect
		submitMu sync.Mutex
		ids      = map[string]bool{}
	)
	for g := range submitters {
		wg.Go(func() {
			for i := range perSubmitter {
				seed := uint64(100 + g*perSubmitter + i)
				f, err := s.Submit(ctx, conv, fmt.Sprintf("doc-%d.txt", seed), "text/plain", []byte(prose(seed, 600)))
				if err != nil {
					errs.add(err)
					continue
				}
				if f.Status != StatusProcessing {
					errs.add(fmt.Errorf("Submit returned status %q, want processing", f.Status))
				}
				submitMu.Lock()
				ids[f.ID] = true
				submitMu.Unlock()
			}
		})
	}
	stop := make(chan struct{})
	var searchers sync.WaitGroup
	for g := range 3 {
		searchers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mode := []Mode{Hybrid, Vector, Keyword}[(g+i)%3]
				if _, err := s.Search(ctx, Query{Text: "database replica failover", ConversationID: conv, Mode: mode}); err != nil {
					errs.add(err)
					return
				}
			}
		})
	}
	wg.Wait()
	files := waitFiles(t, s, conv, submitters*perSubmitter)
	close(stop)
	searchers.Wait()
	if err := errs.err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != submitters*perSubmitter {
		t.Fatalf("%d distinct ids for %d submissions", len(ids), submitters*perSubmitter)
	}
	total := 0
	for _, f := range files {
		if f.Status != StatusReady || !ids[f.ID] {
			t.Errorf("file %+v; want ready", f)
		}
		total += f.ChunkCount
	}
	if n := countChunks(t, s.Pool(), "conversation_id = $1", conv); n != total {
		t.Errorf("%d chunks stored, files report %d", n, total)
	}
	checkStats(t, s.Pool(), conv)
	hits, err := s.Search(ctx, Query{Text: "database replica failover", ConversationID: conv, TopK: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 10 {
		t.Errorf("%d hits, want 10", len(hits))
	}
}

func TestSubmitQueueFullAndClose(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	gate := newGatedEmbedder(t)
	s := openStore(t, url, gate, IngestOptions{Workers: 1, QueueSize: 1})
	ctx := context.Background()
	running, err := s.Submit(ctx, "q", "1.txt", "", []byte("first file"))
	if err != nil {
		t.Fatal(err)
	}
	<-gate.started // the worker holds the first file
	queued, err := s.Submit(ctx, "q", "2.txt", "", []byte("second file"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Submit(ctx, "q", "3.txt", "", []byte("third file"))
	if !errors.Is(err, ErrBusy) || !Retryable(err) {
		t.Fatalf("Submit with a full queue = %v; want retryable ErrBusy", err)
	}
	files, err := s.ListFiles(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Status != StatusProcessing || files[1].Status != StatusProcessing {
		t.Errorf("ListFiles = %+v; want the two accepted files processing, nothing for the refused one", files)
	}

	// Close lets the running file finish and starts no other: the queued
	// file keeps its bytes, for the next Ingester to process.
	closed := make(chan struct{})
	go func() {
		s.Ingester.Close()
		close(closed)
	}()
	for !s.Ingester.isClosed() {
		time.Sleep(time.Millisecond)
	}
	close(gate.release)
	<-closed
	afterClose := map[string]func() error{
		"Submit":  func() error { _, err := s.Submit(ctx, "q", "4.txt", "", []byte("fourth file")); return err },
		"Ingest":  func() error { _, err := s.Ingest(ctx, "q", "4.txt", "", []byte("fourth file")); return err },
		"Reserve": func() error { _, err := s.Reserve(); return err },
	}
	for name, call := range afterClose {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v; want ErrClosed", name, err)
		}
	}
	s.Ingester.Close() // a second Close returns at once
	// The pool is the caller's: the Store still reads after the Ingester
	// closed.
	for id, want := range map[string]string{running.ID: StatusReady, queued.ID: StatusProcessing} {
		f, err := s.GetFile(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if f.Status != want {
			t.Errorf("file %s is %s after Close; want %s", f.FileName, f.Status, want)
		}
	}
	next := openStore(t, s.Pool().Config().ConnString(), gate.Embedder, IngestOptions{})
	for _, f := range waitFiles(t, next, "q", 2) {
		if f.Status != StatusReady {
			t.Errorf("file %s is %s after a restart; want ready", f.FileName, f.Status)
		}
	}
}

func TestCloseTimeoutLeavesUnfinishedFilesToResume(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	gate := newGatedEmbedder(t) // never released: the worker stops mid-file
	s := openStore(t, url, gate, IngestOptions{Workers: 1, QueueSize: 2, ShutdownTimeout: 100 * time.Millisecond})
	ctx := context.Background()
	running, err := s.Submit(ctx, "c", "1.txt", "", []byte(prose(41, 300)))
	if err != nil {
		t.Fatal(err)
	}
	<-gate.started
	queued, err := s.Submit(ctx, "c", "2.txt", "", []byte(prose(42, 300)))
	if err != nil {
		t.Fatal(err)
	}
	s.Ingester.Close()
	for _, id := range []string{running.ID, queued.ID} {
		var status string
		var claimed bool
		var attempts, pieces int
		err := s.Pool().QueryRow(ctx, `SELECT status, claimed_by IS NOT NULL, attempts,
			(SELECT count(*) FROM file_bytes WHERE file_id = $1) FROM files WHERE id = $1`, id).Scan(&status, &claimed, &attempts, &pieces)
		if err != nil {
			t.Fatal(err)
		}
		if status != StatusProcessing || claimed || attempts != 0 || pieces == 0 {
			t.Errorf("file %s after a timed-out Close: %s, claimed %v, %d attempts, %d pieces of bytes; want processing, unclaimed, no attempt counted, bytes kept",
				id, status, claimed, attempts, pieces)
		}
	}
	// A new Ingester on the database, as after a restart, finishes both.
	next := openStore(t, url, gate.Embedder, IngestOptions{})
	for _, f := range waitFiles(t, next, "c", 2) {
		if f.Status != StatusReady || f.ChunkCount == 0 {
			t.Errorf("file %s = %s with %d chunks after a restart; want ready", f.FileName, f.Status, f.ChunkCount)
		}
	}
	var pieces int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM file_bytes`).Scan(&pieces); err != nil {
		t.Fatal(err)
	}
	if pieces != 0 {
		t.Errorf("%d pieces of stored bytes left after the files are ready", pieces)
	}
	checkStats(t, s.Pool(), "c")
}

func TestAbandonedIngestIsReclaimedOrFailed(t *testing.T) {
	t.Parallel()
	// Workers poll once an hour: they look at the database only at start.
	s, url := newStore(t, IngestOptions{PollInterval: time.Hour})
	ctx := context.Background()
	data := []byte("a file whose processing was cut short")
	f, err := s.Ingest(ctx, "stale", "a.txt", "", data)
	if err != nil {
		t.Fatal(err)
	}
	// As if the process running Ingest died mid-way: processing, no
	// chunks, no stored bytes; lease is the claim it left.
	abandon := func(lease string) {
		t.Helper()
		for _, sql := range []string{
			`DELETE FROM chunks WHERE file_id = $1`,
			`UPDATE conversation_stats SET chunk_count = 0, ready_files = 0, processing_files = 1, failed_files = 0 WHERE $1::uuid IS NOT NULL`,
			`DELETE FROM conversation_models WHERE $1::uuid IS NOT NULL`,
			`UPDATE files SET status = 'processing', chunk_count = 0, claimed_by = md5($1::text)::uuid, claimed_until = now() + interval '` + lease + `' WHERE id = $1`,
		} {
			if _, err := s.Pool().Exec(ctx, sql, f.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The store's own workers look at the database when they start, which
	// may be after the file is abandoned: then a worker claims the file
	// before the upload does, which is right too, and the upload is a
	// duplicate of the worker's claim until the worker fails the file. The
	// upload must never stop at the dead claim itself.
	for try := 1; ; try++ {
		abandon("-1 second")
		again, err := s.Ingest(ctx, "stale", "a.txt", "", data)
		if err != nil {
			t.Fatal(err)
		}
		if again.ID == f.ID && !again.Duplicate && again.Status == StatusReady {
			break
		}
		var dead bool
		if err := s.Pool().QueryRow(ctx, `SELECT coalesce(claimed_by = md5($1::text)::uuid, false) FROM files WHERE id = $1`, f.ID).Scan(&dead); err != nil {
			t.Fatal(err)
		}
		if dead || !again.Duplicate || try == 5 {
			t.Fatalf("upload over an abandoned file = %+v (the dead claim still on it: %v); want it processed again", again, dead)
		}
		t.Logf("a worker of the store claimed the abandoned file first: %s", waitFiles(t, s, "stale", 1)[0].Status)
	}
	checkStats(t, s.Pool(), "stale")

	// A file whose claim is live is somebody's work in progress: a
	// duplicate.
	abandon("1 hour")
	dup, err := s.Ingest(ctx, "stale", "a.txt", "", data)
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || dup.Status != StatusProcessing {
		t.Errorf("upload over a file in progress = %+v; want a duplicate, processing", dup)
	}

	// Once the claim has expired a worker takes the file, finds no bytes to
	// process and fails it, asking for the file again.
	abandon("-1 second")
	other := openStore(t, url, s.Embedder(), IngestOptions{})
	failed := waitFiles(t, other, "stale", 1)[0]
	if failed.Status != StatusFailed || !strings.Contains(failed.Error, "upload the file again") {
		t.Errorf("abandoned file = %s %q; want failed, asking for the file again", failed.Status, failed.Error)
	}
}

func TestDeleteFileUpdatesStatistics(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	a, err := s.Ingest(ctx, "del", "a.txt", "", []byte(prose(7, 500)+" unique-alpha zeppelin"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Ingest(ctx, "del", "b.txt", "", []byte(prose(8, 500)))
	if err != nil {
		t.Fatal(err)
	}
	checkStats(t, s.Pool(), "del")

	if err := s.DeleteFile(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	checkStats(t, s.Pool(), "del")
	if n := countChunks(t, s.Pool(), "file_id = $1", a.ID); n != 0 {
		t.Errorf("%d chunks left of a deleted file", n)
	}
	hits, err := s.Search(ctx, Query{Text: "zeppelin", ConversationID: "del", Mode: Keyword})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 0 {
		t.Errorf("keyword search finds the deleted file: %+v", hits)
	}
	if _, err := s.GetFile(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFile of a deleted file = %v; want ErrNotFound", err)
	}
	if err := s.DeleteFile(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second DeleteFile = %v; want ErrNotFound", err)
	}

	if err := s.DeleteFile(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	var convRows int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM conversation_stats`).Scan(&convRows); err != nil {
		t.Fatal(err)
	}
	if convRows != 0 {
		t.Errorf("%d conversation statistics rows left after deleting every file", convRows)
	}
	files, err := s.ListFiles(ctx, "del")
	if err != nil {
		t.Fatal(err)
	}
	if files == nil || len(files) != 0 {
		t.Errorf("ListFiles = %#v; want an empty slice", files)
	}
}

func TestMalformedAndUnknownIDs(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	for _, id := range []string{"", "nope", "1234", "'; DROP TABLE files; --", "00000000-0000-0000-0000-00000000000g"} {
		if _, err := s.GetFile(ctx, id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("GetFile(%q) = %v; want ErrInvalidID", id, err)
		}
		if _, err := s.GetChunk(ctx, id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("GetChunk(%q) = %v; want ErrInvalidID", id, err)
		}
		if err := s.DeleteFile(ctx, id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("DeleteFile(%q) = %v; want ErrInvalidID", id, err)
		}
		if _, _, err := s.FileText(ctx, id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("FileText(%q) = %v; want ErrInvalidID", id, err)
		}
	}
	unknown := "6f1c1e0a-9b1d-4c59-8a53-0d8d3f0b2f11"
	if _, err := s.GetFile(ctx, unknown); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFile(unknown) = %v; want ErrNotFound", err)
	}
	if _, err := s.GetChunk(ctx, unknown); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetChunk(unknown) = %v; want ErrNotFound", err)
	}
	if _, _, err := s.FileText(ctx, strings.ToUpper(unknown)); !errors.Is(err, ErrNotFound) {
		t.Errorf("FileText(unknown) = %v; want ErrNotFound", err)
	}
}

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	emb, _ := embed.NewLocal(384)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := openStore(t, "postgres://u:p@"+closedport.Reserve(t).Addr()+"/db?sslmode=disable&connect_timeout=5", emb, IngestOptions{})
	calls := map[string]func() error{
		"Ping":        func() error { return s.Ping(ctx) },
		"CheckSchema": func() error { return s.CheckSchema(ctx) },
		"ListFiles":   func() error { _, err := s.ListFiles(ctx, "c"); return err },
		"GetFile":     func() error { _, err := s.GetFile(ctx, "6f1c1e0a-9b1d-4c59-8a53-0d8d3f0b2f11"); return err },
		"Search":      func() error { _, err := s.Search(ctx, Query{Text: "x", ConversationID: "c"}); return err },
		"Ingest":      func() error { _, err := s.Ingest(ctx, "c", "a.txt", "", []byte("hello")); return err },
		"Submit":      func() error { _, err := s.Submit(ctx, "c", "a.txt", "", []byte("hello")); return err },
		"DeleteFile":  func() error { return s.DeleteFile(ctx, "6f1c1e0a-9b1d-4c59-8a53-0d8d3f0b2f11") },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrUnavailable) || !Retryable(err) {
			t.Errorf("%s = %v; want retryable ErrUnavailable", name, err)
		}
	}
}

// TestRecoversWhenTheDatabaseComesBack starts a Store while its address
// refuses connections, then puts a relay to the real database on that
// address.
func TestRecoversWhenTheDatabaseComesBack(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	port := closedport.Reserve(t)
	addr := port.Addr()
	down, err := pgtest.WithDatabase(dbURL, cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	down = strings.Replace(down, target, addr, 1)
	if down == dbURL {
		t.Fatalf("could not point %s at %s", dbURL, addr)
	}
	emb, _ := embed.NewLocal(384)
	s := openStore(t, down, emb, IngestOptions{})
	ctx := context.Background()
	if err := s.Ping(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ping while down = %v; want ErrUnavailable", err)
	}

	l, err := port.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go relay(l, target)
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after the database came back = %v", err)
	}
	if err := s.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema = %v", err)
	}
	if _, err := s.Ingest(ctx, "back", "a.txt", "", []byte("the database is back")); err != nil {
		t.Fatalf("Ingest after recovery = %v", err)
	}
}

// relay forwards every connection accepted on l to target.
func relay(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer u.Close()
			done := make(chan struct{}, 2)
			go func() { copyConn(u, c); done <- struct{}{} }()
			go func() { copyConn(c, u); done <- struct{}{} }()
			<-done
		}()
	}
}

func copyConn(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func TestCheckSchema(t *testing.T) {
	t.Parallel()
	emb, _ := embed.NewLocal(384)
	ctx := context.Background()

	empty := openStore(t, pgtest.NewEmptyDatabase(t), emb, IngestOptions{})
	err := empty.CheckSchema(ctx)
	if !errors.Is(err, ErrSchemaOutdated) || !strings.Contains(err.Error(), "mcpsearch migrate") {
		t.Errorf("CheckSchema on an empty database = %v; want ErrSchemaOutdated naming `mcpsearch migrate`", err)
	}
	if _, err := empty.ListFiles(ctx, "c"); !errors.Is(err, ErrSchemaOutdated) {
		t.Errorf("ListFiles on an empty database = %v; want ErrSchemaOutdated", err)
	}
	if err := empty.Ping(ctx); err != nil {
		t.Errorf("Ping on an empty database = %v; want nil (it is reachable)", err)
	}

	migrated := openStore(t, pgtest.NewDatabase(t), emb, IngestOptions{})
	if err := migrated.CheckSchema(ctx); err != nil {
		t.Errorf("CheckSchema on a migrated database = %v", err)
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	t.Parallel()
	local, _ := embed.NewLocal(384)
	pool := openPool(t, "postgres://127.0.0.1/db")
	stores := []struct {
		name string
		pool *pgxpool.Pool
		emb  embed.Embedder
		opts Options
	}{
		{"nil pool", nil, local, Options{}},
		{"nil embedder", pool, nil, Options{}},
		{"unnamed model", pool, wordEmbedder{model: "", dims: 8}, Options{}},
		{"backslash in model", pool, wordEmbedder{model: `a\b`, dims: 8}, Options{}},
		{"zero dimensions", pool, wordEmbedder{model: "m", dims: 0}, Options{}},
		{"negative vector weight", pool, local, Options{VectorWeight: -1}},
		{"vector weight too large", pool, local, Options{VectorWeight: MaxVectorWeight + 1}},
		{"negative k1", pool, local, Options{BM25K1: -1, BM25B: 0.5}},
		{"b above 1", pool, local, Options{BM25K1: 1.2, BM25B: 1.5}},
	}
	for _, tt := range stores {
		if _, err := NewStore(tt.pool, tt.emb, tt.opts); err == nil {
			t.Errorf("NewStore with %s succeeded", tt.name)
		}
	}
	st, err := NewStore(pool, local, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ingesters := []struct {
		name string
		st   *Store
		opts IngestOptions
	}{
		{"nil store", nil, IngestOptions{}},
		{"chunk overlap too large", st, IngestOptions{Chunk: chunk.Options{Size: 200, Overlap: 150}}},
	}
	for _, tt := range ingesters {
		if in, err := NewIngester(tt.st, tt.opts); err == nil {
			in.Close()
			t.Errorf("NewIngester with %s succeeded", tt.name)
		}
	}
}

func TestIngestStats(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	if got := s.IngestStats(); got != (IngestStats{}) {
		t.Fatalf("stats of a new store = %+v, want zero", got)
	}
	data := []byte(prose(4, 500))
	ready, err := s.Ingest(ctx, "stats", "a.txt", "", data)
	if err != nil {
		t.Fatal(err)
	}
	// A duplicate is not processed again, so it is not counted.
	if _, err := s.Ingest(ctx, "stats", "again.txt", "", data); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, "stats", "empty.md", "", []byte("   \n\n ")); !errors.Is(err, ErrProcessing) {
		t.Fatalf("ingest of an empty file = %v, want ErrProcessing", err)
	}
	got := s.IngestStats()
	if got.Ready != 1 || got.Failed != 1 || got.Chunks != int64(ready.ChunkCount) || got.Chunks == 0 ||
		got.Bytes != int64(len(data)) || got.Pages != 0 || got.Duration <= 0 || got.Queued != 0 {
		t.Errorf("stats = %+v; want 1 ready (%d chunks, %d bytes), 1 failed, time spent", got, ready.ChunkCount, len(data))
	}
}

func TestCheckConversationID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id, want string
		ok             bool
	}{
		{"plain", "chat-42", "chat-42", true},
		{"trimmed", "  chat-42\n", "chat-42", true},
		{"longest", strings.Repeat("a", MaxConversationIDLen), strings.Repeat("a", MaxConversationIDLen), true},
		{"multibyte at the limit", strings.Repeat("é", MaxConversationIDLen/2), strings.Repeat("é", MaxConversationIDLen/2), true},
		{"empty", "", "", false},
		{"blank", " \t ", "", false},
		{"too long", strings.Repeat("a", MaxConversationIDLen+1), "", false},
		{"too long in bytes", strings.Repeat("é", MaxConversationIDLen/2+1), "", false},
		{"NUL", "chat\x00", "", false},
		{"control character", "chat\x07bell", "", false},
		{"invalid UTF-8", "chat\xff", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckConversationID(tt.id)
			if tt.ok {
				if err != nil || got != tt.want {
					t.Errorf("CheckConversationID(%q) = %q, %v; want %q", tt.id, got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "send") {
				t.Errorf("CheckConversationID(%q) = %v; want ErrInvalidArgument saying what to send", tt.id, err)
			}
		})
	}
}
