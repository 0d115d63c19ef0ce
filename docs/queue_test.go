package docs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// spool writes data to a file of the test's temporary directory, as a
// server spools an upload's body, and returns its path.
func spool(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func storedPieces(t testing.TB, s *testStore, fileID string) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM file_bytes WHERE file_id = $1`, fileID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestReserveAndSubmitFile(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	gate := newGatedEmbedder(t)
	s := openStore(t, url, gate, IngestOptions{Workers: 1, QueueSize: 2, MaxFileBytes: 1 << 20})
	ctx := context.Background()
	const conv = "spool"
	// Over a piece long, so the bytes are stored in several.
	big := []byte(prose(51, 60000))
	if len(big) <= pieceBytes {
		t.Fatalf("test file of %d bytes fits in one piece", len(big))
	}
	submit := func(name string, data []byte, src string) (File, error) {
		t.Helper()
		tk, err := s.Reserve()
		if err != nil {
			return File{}, err
		}
		defer tk.Release()
		return s.SubmitFile(ctx, tk, Upload{ConversationID: conv, FileName: name, Source: src, Path: spool(t, name, data)})
	}

	first, err := submit("big.txt", big, "https://example.com/big.txt")
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != StatusProcessing || first.SizeBytes != int64(len(big)) || first.Source != "https://example.com/big.txt" {
		t.Fatalf("SubmitFile = %+v; want processing, %d bytes, with its source", first, len(big))
	}
	<-gate.started // the only worker holds it: its slot is free again
	if want := (len(big) + pieceBytes - 1) / pieceBytes; storedPieces(t, s, first.ID) != want {
		t.Errorf("%d pieces stored, want %d", storedPieces(t, s, first.ID), want)
	}

	// Two slots: two reservations, then the queue is full.
	a, err := s.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(); !errors.Is(err, ErrBusy) || !Retryable(err) {
		t.Fatalf("Reserve with a full queue = %v; want retryable ErrBusy", err)
	}
	if q := s.IngestStats().Queued; q != 2 {
		t.Errorf("Queued = %d with two reservations, want 2", q)
	}
	// Submit refuses new bytes, but answers a duplicate without a slot.
	if _, err := s.Submit(ctx, conv, "new.txt", "", []byte("new bytes")); !errors.Is(err, ErrBusy) {
		t.Errorf("Submit with a full queue = %v; want ErrBusy", err)
	}
	dup, err := s.Submit(ctx, conv, "again.txt", "", big)
	if err != nil || !dup.Duplicate || dup.ID != first.ID {
		t.Errorf("Submit of the same bytes with a full queue = %+v, %v; want file %s as a duplicate", dup, err, first.ID)
	}
	a.Release()
	a.Release() // a second Release gives nothing back twice
	if q := s.IngestStats().Queued; q != 1 {
		t.Errorf("Queued = %d after a release, want 1", q)
	}
	if _, err := s.SubmitFile(ctx, a, Upload{ConversationID: conv, FileName: "x.txt", Path: spool(t, "x.txt", []byte("x"))}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("SubmitFile with a released ticket = %v; want ErrInvalidArgument", err)
	}

	// A duplicate sent through SubmitFile gives its slot back at once.
	d, err := s.SubmitFile(ctx, b, Upload{ConversationID: conv, FileName: "copy.txt", Path: spool(t, "copy.txt", big)})
	if err != nil || !d.Duplicate || d.ID != first.ID {
		t.Errorf("SubmitFile of the same bytes = %+v, %v; want file %s as a duplicate", d, err, first.ID)
	}
	// So does a refused upload.
	for name, data := range map[string][]byte{
		"too-large.txt": make([]byte, 1<<20+1),
		"photo.png":     []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
	} {
		if _, err := submit(name, data, ""); !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("%s: %v; want ErrTooLarge or ErrUnsupportedType", name, err)
		}
	}
	if q := s.IngestStats().Queued; q != 0 {
		t.Errorf("Queued = %d after a duplicate and refused uploads, want 0", q)
	}
	waiting, err := submit("small.txt", []byte(prose(52, 200)), "")
	if err != nil {
		t.Fatal(err)
	}
	if q := s.IngestStats().Queued; q != 1 {
		t.Errorf("Queued = %d with a file waiting for the worker, want 1", q)
	}

	close(gate.release)
	files := waitFiles(t, s, conv, 2)
	for _, f := range files {
		if f.Status != StatusReady || f.ChunkCount == 0 {
			t.Errorf("file %s = %s with %d chunks; want ready", f.FileName, f.Status, f.ChunkCount)
		}
		if n := storedPieces(t, s, f.ID); n != 0 {
			t.Errorf("file %s keeps %d pieces of bytes once ready", f.FileName, n)
		}
	}
	text, err := func() (string, error) { _, text, err := s.FileText(ctx, first.ID); return text, err }()
	if err != nil || text != string(big) {
		t.Errorf("FileText of the spooled file: %d bytes, %v; want the %d bytes sent", len(text), err, len(big))
	}
	// The waiting file's slot came back when the worker took it.
	if q := s.IngestStats().Queued; q != 0 {
		t.Errorf("Queued = %d once every file is processed (last %s), want 0", q, waiting.ID)
	}
}

// trackingEmbedder counts, per text, the Embed calls made and those in
// progress at once; files in these tests are one chunk, so a text stands
// for a file (a call may embed several files together).
type trackingEmbedder struct {
	embed.Embedder
	mu      sync.Mutex
	active  map[string]int
	calls   map[string]int
	overlap []string
}

func (e *trackingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	for _, key := range texts {
		e.active[key]++
		e.calls[key]++
		if e.active[key] > 1 {
			e.overlap = append(e.overlap, key)
		}
	}
	e.mu.Unlock()
	// Long enough for another worker to try the same file meanwhile.
	time.Sleep(5 * time.Millisecond)
	defer func() {
		e.mu.Lock()
		for _, key := range texts {
			e.active[key]--
		}
		e.mu.Unlock()
	}()
	return e.Embedder.Embed(ctx, texts)
}

func TestTwoIngestersNeverProcessAFileTwice(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	local, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	emb := &trackingEmbedder{Embedder: local, active: map[string]int{}, calls: map[string]int{}}
	opts := IngestOptions{Workers: 3, QueueSize: 64, PollInterval: 10 * time.Millisecond}
	replicas := []*testStore{openStore(t, url, emb, opts), openStore(t, url, emb, opts)}
	ctx := context.Background()
	const conv, n = "replicas", 40
	var wg sync.WaitGroup
	var errs collect
	for i := range n {
		wg.Go(func() {
			_, err := replicas[i%2].Submit(ctx, conv, fmt.Sprintf("%d.txt", i), "", []byte(fmt.Sprintf("file %d: %s", i, prose(uint64(60+i), 40))))
			errs.add(err)
		})
	}
	wg.Wait()
	if err := errs.err(); err != nil {
		t.Fatal(err)
	}
	files := waitFiles(t, replicas[0], conv, n)
	for _, f := range files {
		if f.Status != StatusReady || f.ChunkCount != 1 {
			t.Errorf("file %s = %s with %d chunks; want ready, one chunk", f.FileName, f.Status, f.ChunkCount)
		}
	}
	emb.mu.Lock()
	defer emb.mu.Unlock()
	if len(emb.overlap) > 0 {
		t.Errorf("%d files processed by two workers at once", len(emb.overlap))
	}
	if len(emb.calls) != n {
		t.Errorf("%d distinct files embedded, want %d", len(emb.calls), n)
	}
	for text, c := range emb.calls {
		if c != 1 {
			t.Errorf("file %q embedded %d times, want once", strings.SplitN(text, ":", 2)[0], c)
		}
	}
	checkStats(t, replicas[0].Pool(), conv)
}

func TestLostClaimStoresNothing(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	gate := newGatedEmbedder(t)
	stuck := openStore(t, url, gate, IngestOptions{Workers: 1, PollInterval: time.Hour})
	ctx := context.Background()
	f, err := stuck.Submit(ctx, "lost", "a.txt", "", []byte(prose(71, 300)))
	if err != nil {
		t.Fatal(err)
	}
	<-gate.started
	// As if the stuck process had stopped renewing: its lease runs out and
	// another process takes the file over and finishes it.
	if _, err := stuck.Pool().Exec(ctx, `UPDATE files SET claimed_until = now() - interval '1 second' WHERE id = $1`, f.ID); err != nil {
		t.Fatal(err)
	}
	other := openStore(t, url, gate.Embedder, IngestOptions{})
	done := waitFiles(t, other, "lost", 1)[0]
	if done.Status != StatusReady {
		t.Fatalf("file taken over = %s %q; want ready", done.Status, done.Error)
	}
	// The first process then goes on: its outcome must not be stored.
	close(gate.release)
	stuck.Ingester.Close()
	after, err := other.GetFile(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != StatusReady || after.ChunkCount != done.ChunkCount || !after.UpdatedAt.Equal(done.UpdatedAt) {
		t.Errorf("file after the first process went on = %+v; want it as the second stored it", after)
	}
	if n := countChunks(t, other.Pool(), "file_id = $1", f.ID); n != done.ChunkCount {
		t.Errorf("%d chunks stored, want %d", n, done.ChunkCount)
	}
	checkStats(t, other.Pool(), "lost")
}

func TestRepeatedInterruptionsFailTheFile(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	gate := newGatedEmbedder(t) // never released
	s := openStore(t, url, gate, IngestOptions{Workers: 1, PollInterval: time.Hour, ShutdownTimeout: 100 * time.Millisecond})
	ctx := context.Background()
	f, err := s.Submit(ctx, "crash", "a.txt", "", []byte(prose(81, 300)))
	if err != nil {
		t.Fatal(err)
	}
	<-gate.started
	// As if every process that took the file had died with it.
	if _, err := s.Pool().Exec(ctx, `UPDATE files SET attempts = $2, claimed_until = now() - interval '1 second' WHERE id = $1`, f.ID, maxAttempts); err != nil {
		t.Fatal(err)
	}
	next := openStore(t, url, gate.Embedder, IngestOptions{})
	failed := waitFiles(t, next, "crash", 1)[0]
	if failed.Status != StatusFailed || !strings.Contains(failed.Error, "stopped 3 times") {
		t.Errorf("file = %s %q; want failed after %d interruptions", failed.Status, failed.Error, maxAttempts)
	}
	if n := storedPieces(t, next, f.ID); n != 0 {
		t.Errorf("failed file keeps %d pieces of bytes", n)
	}
}

func TestLeaseIsRenewedWhileAFileIsProcessed(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	gate := newGatedEmbedder(t)
	// Renewed every third of it: a renewal late by two seconds, on a
	// loaded machine, still keeps the claim.
	const lease = 3 * time.Second
	slow := openStore(t, url, gate, IngestOptions{Workers: 1, Lease: lease})
	ctx := context.Background()
	f, err := slow.Submit(ctx, "lease", "a.txt", "", []byte(prose(91, 300)))
	if err != nil {
		t.Fatal(err)
	}
	<-gate.started
	claimedBy := func() string {
		t.Helper()
		var by *string
		if err := slow.Pool().QueryRow(ctx, `SELECT claimed_by::text FROM files WHERE id = $1`, f.ID).Scan(&by); err != nil {
			t.Fatal(err)
		}
		if by == nil {
			return ""
		}
		return *by
	}
	holder := claimedBy()
	// Another process looks for work all along, for twice the lease.
	openStore(t, url, gate.Embedder, IngestOptions{PollInterval: 20 * time.Millisecond})
	time.Sleep(2 * lease)
	if got, err := slow.GetFile(ctx, f.ID); err != nil || got.Status != StatusProcessing || claimedBy() != holder {
		t.Fatalf("file after twice its lease = %+v, %v, claimed by %q; want still processing under the first claim %q", got, err, claimedBy(), holder)
	}
	close(gate.release)
	if done := waitFiles(t, slow, "lease", 1)[0]; done.Status != StatusReady {
		t.Errorf("file = %s %q; want ready", done.Status, done.Error)
	}
}

// TestSubmitFileWithTheSpoolersDigest submits spooled uploads whose digest
// the caller took while spooling: the upload is stored from one read of
// the spool file, checked against the digest on the way, and refused when
// the file does not match it.
func TestSubmitFileWithTheSpoolersDigest(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	data := []byte(prose(91, 400) + " quokka")
	sum := sha256.Sum256(data)
	submit := func(name, digest string) (File, error) {
		t.Helper()
		tk, err := s.Reserve()
		if err != nil {
			t.Fatal(err)
		}
		defer tk.Release()
		return s.SubmitFile(ctx, tk, Upload{ConversationID: "digest", FileName: name, Path: spool(t, name, data), SHA256: digest})
	}
	f, err := submit("a.txt", hex.EncodeToString(sum[:]))
	if err != nil || f.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("SubmitFile = %+v, %v", f, err)
	}
	if _, err := submit("b.txt", strings.Repeat("0", 64)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("SubmitFile with a digest the file does not match = %v; want ErrInvalidArgument", err)
	}
	files := waitFiles(t, s, "digest", 1)
	if files[0].Status != StatusReady {
		t.Errorf("file = %+v; want ready", files[0])
	}
	checkStats(t, s.Pool(), "digest")
}

// TestSubmitFilesStoresARequestTogether submits the files of one request
// at once: they are stored in one transaction, a file already in the
// conversation and a file sent twice come back as duplicates without a
// slot, and the files the queue has no room for are refused with ErrBusy.
func TestSubmitFilesStoresARequestTogether(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	gate := newGatedEmbedder(t)
	s := openStore(t, url, gate, IngestOptions{Workers: 1, QueueSize: 4, PollInterval: time.Hour})
	ctx := context.Background()
	old := []byte("an older note about the quokka")
	first, err := s.Submit(ctx, "req", "old.txt", "", old)
	if err != nil {
		t.Fatal(err)
	}
	<-gate.started // the only worker holds it: its slot is free again
	var ups []Upload
	ups = append(ups, Upload{ConversationID: "req", FileName: "old-again.txt", Data: old})
	for i := range 5 {
		ups = append(ups, Upload{ConversationID: "req", FileName: fmt.Sprintf("%d.txt", i), Data: []byte(fmt.Sprintf("note %d %s", i, prose(uint64(300+i), 20)))})
	}
	ups = append(ups, Upload{ConversationID: "req", FileName: "twice.txt", Data: ups[1].Data})
	tk, err := s.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	files, errs := s.SubmitFiles(ctx, tk, ups)
	if !files[0].Duplicate || files[0].ID != first.ID || errs[0] != nil {
		t.Errorf("a file already in the conversation = %+v, %v; want it as a duplicate", files[0], errs[0])
	}
	accepted, busy := 0, 0
	for i := 1; i <= 5; i++ {
		switch {
		case errs[i] == nil && files[i].Status == StatusProcessing && !files[i].Duplicate:
			accepted++
		case errors.Is(errs[i], ErrBusy):
			busy++
		default:
			t.Errorf("upload %d = %+v, %v", i, files[i], errs[i])
		}
	}
	// The queue holds 4: the request's ticket and three more.
	if accepted != 4 || busy != 1 {
		t.Errorf("%d accepted, %d refused as busy; want 4 and 1", accepted, busy)
	}
	if !files[6].Duplicate || files[6].ID != files[1].ID {
		t.Errorf("the same bytes twice in a request = %+v; want the first's file as a duplicate", files[6])
	}
	if q := s.IngestStats().Queued; q != 4 {
		t.Errorf("Queued = %d after the request; want 4", q)
	}
	close(gate.release)
	s.Ingester.wakeWorker()
	for _, f := range waitFiles(t, s, "req", 5) {
		if f.Status != StatusReady {
			t.Errorf("file %s = %s; want ready", f.FileName, f.Status)
		}
	}
	checkStats(t, s.Pool(), "req")
	if q := s.IngestStats().Queued; q != 0 {
		t.Errorf("Queued = %d once every file is processed; want 0", q)
	}
}
