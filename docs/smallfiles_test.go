package docs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// smallUploads returns n one-chunk uploads to conv, each holding a word
// of its own ("marker<i>") for searches to find it by.
func smallUploads(conv string, n int) []Upload {
	out := make([]Upload, n)
	for i := range out {
		out[i] = Upload{ConversationID: conv, FileName: fmt.Sprintf("note-%04d.txt", i),
			Data: []byte(fmt.Sprintf("Note %d: marker%04d %s", i, i, prose(uint64(5000+i), 30)))}
	}
	return out
}

// ingestAll runs IngestAll over uploads and returns the files by name.
func ingestAll(ctx context.Context, t testing.TB, s *testStore, uploads []Upload) (map[string]File, error) {
	t.Helper()
	var mu sync.Mutex
	got := map[string]File{}
	var failed []error
	i := 0
	err := s.IngestAll(ctx, func() (Upload, bool) {
		if i == len(uploads) {
			return Upload{}, false
		}
		i++
		return uploads[i-1], true
	}, func(u Upload, f File, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", u.FileName, err))
			return
		}
		got[u.FileName] = f
	})
	if err == nil {
		err = errors.Join(failed...)
	}
	return got, err
}

// TestIngestAllStoresSmallFilesTogether checks that many small files are
// stored several per transaction, each searchable, and that a run
// interrupted half way and run again stores every file once.
func TestIngestAllStoresSmallFilesTogether(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	const n = 300
	uploads := smallUploads("notes", n)

	// The first run is cut short once about a third of the files have
	// been read.
	cut, cancel := context.WithCancel(ctx)
	i := 0
	err := s.IngestAll(cut, func() (Upload, bool) {
		if i == n/3 {
			cancel()
		}
		if i == len(uploads) {
			return Upload{}, false
		}
		i++
		return uploads[i-1], true
	}, func(Upload, File, error) {})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted IngestAll = %v; want context.Canceled", err)
	}
	stored, err := s.ListFiles(ctx, "notes")
	if err != nil {
		t.Fatal(err)
	}
	// Files already processed when the run was cut short are stored whole;
	// none is stored in part.
	if len(stored) == 0 || len(stored) > n/2 {
		t.Fatalf("%d files stored by the run interrupted after reading %d of %d", len(stored), n/3, n)
	}
	checkStats(t, s.Pool(), "notes")

	// Run again: the files stored are recognised, the others stored once.
	before := s.IngestStats()
	got, err := ingestAll(ctx, t, s, uploads)
	if err != nil {
		t.Fatal(err)
	}
	present := 0
	for _, f := range got {
		if f.Duplicate {
			present++
		} else if f.Status != StatusReady || f.ChunkCount != 1 {
			t.Errorf("file %s = %s with %d chunks; want ready with one", f.FileName, f.Status, f.ChunkCount)
		}
	}
	if len(got) != n || present != len(stored) {
		t.Errorf("second run: %d files, %d already present; want %d and %d", len(got), present, n, len(stored))
	}
	if c := countChunks(t, s.Pool(), "conversation_id = 'notes'"); c != n {
		t.Errorf("%d chunks stored for %d one-chunk files", c, n)
	}
	after := s.IngestStats()
	if files, batches := after.Ready-before.Ready, after.Batches-before.Batches; batches == 0 || batches > files/4 {
		t.Errorf("%d files stored in %d transactions; want several files per transaction", files, batches)
	}
	checkStats(t, s.Pool(), "notes")
	for _, k := range []int{0, 137, n - 1} {
		hits, err := s.Search(ctx, Query{Text: fmt.Sprintf("marker%04d", k), ConversationID: "notes", Mode: Keyword})
		if err != nil || len(hits) != 1 || hits[0].FileName != uploads[k].FileName {
			t.Errorf("search for file %d = %+v, %v", k, hits, err)
		}
	}
}

// TestKeywordIndexReadsOnlyWhatChanged checks that a keyword index behind
// the database reads the files made ready and the files removed since its
// generation, and nothing else.
func TestKeywordIndexReadsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	files, err := ingestAll(ctx, t, s, smallUploads("inc", 40))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Search(ctx, Query{Text: "marker0001", ConversationID: "inc", Mode: Keyword}); err != nil {
		t.Fatal(err)
	}
	have := s.keywords.Get("inc").Generation()
	full, err := s.readChanges(ctx, "inc", -1)
	if err != nil || len(full.Added) != 40 || full.Generation != have {
		t.Fatalf("a new index reads %d files at generation %d, %v; want 40 at %d", len(full.Added), full.Generation, err, have)
	}

	added, err := s.Ingest(ctx, "inc", "late.txt", "", []byte("A late note about the quokka."))
	if err != nil {
		t.Fatal(err)
	}
	gone := files["note-0007.txt"]
	if err := s.DeleteFile(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	ch, err := s.readChanges(ctx, "inc", have)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Added) != 1 || ch.Added[0].ID.String() != added.ID {
		t.Errorf("changes since %d add %v; want only %s", have, ch.Added, added.ID)
	}
	if !slices.Equal(ch.Removed, []uuid.UUID{uuid.MustParse(gone.ID)}) {
		t.Errorf("changes since %d remove %v; want only %s", have, ch.Removed, gone.ID)
	}
	for word, want := range map[string]int{"quokka": 1, "marker0007": 0, "marker0008": 1} {
		hits, err := s.Search(ctx, Query{Text: word, ConversationID: "inc", Mode: Keyword})
		if err != nil || len(hits) != want {
			t.Errorf("search for %s = %d hits, %v; want %d", word, len(hits), err, want)
		}
	}
	// The search applied the changes to the cached index rather than
	// building another.
	if ix := s.keywords.Get("inc"); ix == nil || ix.Chunks() != 40 {
		t.Errorf("the cached index holds %v chunks; want 40", ix)
	}
}

// TestConversationStateReadsNoFile checks, through the plans PostgreSQL
// picks, that what a search reads first about a conversation comes from
// its counters: no statement of it scans files or chunks.
func TestConversationStateReadsNoFile(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	if _, err := ingestAll(ctx, t, s, smallUploads("plan", 50)); err != nil {
		t.Fatal(err)
	}
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for name, sql := range map[string]string{
		"conversation state": `
			SELECT s.chunk_count, s.generation, s.epoch, s.removal_floor, s.write_floor,
			       coalesce(v.watermark, -1), coalesce(m.covered, 0)
			FROM conversation_stats s
			LEFT JOIN conversation_models m ON m.conversation_id = s.conversation_id AND m.embedding_model = 'local-hash-v1-384'
			LEFT JOIN vector_indexes v ON v.embedding_model = 'local-hash-v1-384'
			WHERE s.conversation_id = 'plan'`,
		"list conversations": `
			SELECT conversation_id FROM conversation_stats
			WHERE ready_files + processing_files + failed_files > 0
			ORDER BY last_upload_at DESC, conversation_id LIMIT 50`,
		"index check": `
			SELECT EXISTS (SELECT FROM conversation_models
				WHERE embedding_model = 'local-hash-v1-384' AND chunks > covered AND chunks - covered >= 2000 AND chunks > 2000)`,
	} {
		rows, err := conn.Query(ctx, "EXPLAIN "+sql)
		if err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if p := plan.String(); strings.Contains(p, " files") || strings.Contains(p, " chunks") {
			t.Errorf("%s reads files or chunks:\n%s", name, p)
		}
	}
}

// TestCountersUnderConcurrentWrites uploads, ingests, deletes files and
// deletes conversations at the same time from two stores, then checks that
// every conversation's counters agree with its files.
func TestCountersUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	a, b := newStoreOn(t, url), newStoreOn(t, url)
	ctx := context.Background()
	convs := []string{"c0", "c1", "c2"}
	var wg sync.WaitGroup
	var errs collect
	for w, s := range []*testStore{a, b} {
		wg.Go(func() {
			for round := range 4 {
				conv := convs[(w+round)%len(convs)]
				ups := smallUploads(conv, 30)
				for k := range ups {
					// Both stores upload some of the same bytes.
					if k%3 != 0 {
						ups[k].Data = append(ups[k].Data, fmt.Sprintf(" from %d/%d", w, round)...)
					}
				}
				// Files of a conversation the other store deletes
				// meanwhile are refused as deleted: that is allowed.
				got := map[string]File{}
				var mu sync.Mutex
				k := 0
				errs.add(s.IngestAll(ctx, func() (Upload, bool) {
					if k == len(ups) {
						return Upload{}, false
					}
					k++
					return ups[k-1], true
				}, func(u Upload, f File, err error) {
					mu.Lock()
					defer mu.Unlock()
					switch {
					case errors.Is(err, ErrNotFound):
					case err != nil:
						errs.add(fmt.Errorf("%s: %w", u.FileName, err))
					default:
						got[u.FileName] = f
					}
				}))
				n := 0
				for _, f := range got {
					if n%4 == 0 && !f.Duplicate {
						if err := s.DeleteFile(ctx, f.ID); err != nil && !errors.Is(err, ErrNotFound) {
							errs.add(err)
						}
					}
					n++
				}
				if _, err := s.Submit(ctx, conv, fmt.Sprintf("queued-%d-%d.txt", w, round), "", []byte(prose(uint64(9000+10*w+round), 50))); err != nil {
					errs.add(err)
				}
				if round == 2 {
					if _, err := s.DeleteConversation(ctx, convs[w]); err != nil {
						errs.add(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := errs.err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range convs {
		waitFiles(t, a, c, len(mustList(t, a, c)))
	}
	if err := a.Purge(ctx, nil); err != nil {
		t.Fatal(err)
	}
	listed, err := a.ListConversations(ctx, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range convs {
		checkStats(t, a.Pool(), c)
		files := mustList(t, a, c)
		i := slices.IndexFunc(listed, func(x Conversation) bool { return x.ID == c })
		switch {
		case len(files) == 0 && i >= 0:
			t.Errorf("conversation %s listed without files", c)
		case len(files) > 0 && (i < 0 || listed[i].Files != len(files)):
			t.Errorf("conversation %s has %d files; listed as %+v", c, len(files), listed)
		}
	}
}

// newStoreOn opens a store with the local embedder on url, whose workers
// look for files every 20 ms.
func newStoreOn(t testing.TB, url string) *testStore {
	t.Helper()
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	return openStore(t, url, emb, IngestOptions{PollInterval: 20 * time.Millisecond})
}

func mustList(t testing.TB, s *testStore, conv string) []File {
	t.Helper()
	files, err := s.ListFiles(context.Background(), conv)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestConversationDeletedWhileItsFileIsProcessed deletes a conversation
// while a worker embeds one of its files: the file does not come back when
// the worker is done, the conversation can be filled again with the same
// bytes before the purge, and the purge leaves only the new file.
func TestConversationDeletedWhileItsFileIsProcessed(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	gate := newGatedEmbedder(t)
	s := openStore(t, url, gate, IngestOptions{Workers: 1})
	ctx := context.Background()
	data := []byte("A contract about the zeppelin hangar. " + prose(77, 40))
	f, err := s.Submit(ctx, "doomed", "contract.txt", "", data)
	if err != nil {
		t.Fatal(err)
	}
	<-gate.started
	if n, err := s.DeleteConversation(ctx, "doomed"); err != nil || n != 1 {
		t.Fatalf("DeleteConversation = %d, %v; want 1 file", n, err)
	}
	close(gate.release)
	// The worker's outcome is refused: nothing of the deleted conversation
	// is listed, found or counted.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var claimed bool
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) > 0 FROM files WHERE id = $1 AND claimed_by IS NOT NULL`, f.ID).Scan(&claimed); err != nil {
			t.Fatal(err)
		}
		if !claimed || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if files := mustList(t, s, "doomed"); len(files) != 0 {
		t.Errorf("the deleted conversation lists %+v", files)
	}
	if _, err := s.GetFile(ctx, f.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFile of the deleted conversation's file = %v; want ErrNotFound", err)
	}
	hits, err := s.Search(ctx, Query{Text: "zeppelin", ConversationID: "doomed", Mode: Hybrid})
	if err != nil || len(hits) != 0 {
		t.Errorf("search of the deleted conversation = %+v, %v", hits, err)
	}
	checkStats(t, s.Pool(), "doomed")

	// Filled again with the same bytes, before the purge.
	again, err := s.Ingest(ctx, "doomed", "contract.txt", "", data)
	if err != nil || again.Duplicate || again.ID == f.ID {
		t.Fatalf("upload of the same bytes after the deletion = %+v, %v; want a new file", again, err)
	}
	hits, err = s.Search(ctx, Query{Text: "zeppelin", ConversationID: "doomed", Mode: Hybrid, Threshold: new(0.0)})
	if err != nil || len(hits) == 0 {
		t.Fatalf("search after filling it again = %+v, %v", hits, err)
	}
	for _, h := range hits {
		if h.FileID != again.ID {
			t.Errorf("search after filling it again finds file %s; only %s is the conversation's", h.FileID, again.ID)
		}
	}
	if err := s.Purge(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM files WHERE conversation_id = 'doomed'`).Scan(&left); err != nil || left != 1 {
		t.Errorf("%d files of the conversation after the purge, %v; want the new one", left, err)
	}
	checkStats(t, s.Pool(), "doomed")
}

// TestPurgeWaitsForAWriteNumberedBeforeTheDeletion finishes a purge while a
// write numbered before the deletion holds the conversation's lock: the
// write commits a file of the deleted conversation, which the purge must
// still find and delete rather than hand to the conversation's new
// incarnation, ready and without chunks.
func TestPurgeWaitsForAWriteNumberedBeforeTheDeletion(t *testing.T) {
	t.Parallel()
	// No background purge: the test runs the purge.
	s, _ := newStore(t, IngestOptions{PollInterval: time.Hour})
	ctx := context.Background()
	if _, err := s.Ingest(ctx, "late", "first.txt", "", []byte(prose(1, 40))); err != nil {
		t.Fatal(err)
	}
	// The write takes its number, then the conversation is deleted.
	seq, err := nextWrite(ctx, s.Pool())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteConversation(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	floors, err := lockConversations(ctx, tx, []string{"late"})
	if err != nil {
		t.Fatal(err)
	}
	if seq > floors["late"] {
		t.Fatalf("write %d above the deletion's floor %d", seq, floors["late"])
	}
	// What commitBatch leaves of a file it finds deleted meanwhile: its
	// row, for the purge, and no chunk.
	data := []byte(prose(2, 40))
	sum := sha256.Sum256(data)
	if _, err := recordFiles(ctx, tx, []newFile{{
		up:     upload{conversationID: "late", fileName: "late.txt", mimeType: "text/plain", sha256: hex.EncodeToString(sum[:]), size: int64(len(data))},
		status: StatusReady, chunks: 1, pages: 1, model: s.Embedder().Model(), text: string(data),
	}}, seq); err != nil {
		t.Fatal(err)
	}
	purged := make(chan error, 1)
	go func() { purged <- s.Purge(ctx, nil) }()
	// The purge has deleted what it saw and waits for the lock: its
	// statement is the one active on the conversation's statistics row
	// (locking it, or inserting it as the write did).
	for waiting := false; !waiting; {
		select {
		case err := <-purged:
			t.Fatalf("the purge ended (%v) while a write held the conversation's lock", err)
		case <-time.After(10 * time.Millisecond):
		}
		if err := s.Pool().QueryRow(ctx, `
			SELECT count(*) > 0 FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
			  AND query LIKE '%conversation_stats%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-purged; err != nil {
		t.Fatal(err)
	}
	var files, chunks int
	if err := s.Pool().QueryRow(ctx, `
		SELECT (SELECT count(*) FROM files WHERE conversation_id = 'late'),
		       (SELECT count(*) FROM chunks WHERE conversation_id = 'late')`).Scan(&files, &chunks); err != nil {
		t.Fatal(err)
	}
	if files != 0 || chunks != 0 {
		t.Errorf("after the purge the deleted conversation keeps %d files and %d chunks; want none", files, chunks)
	}
	if got := mustList(t, s, "late"); len(got) != 0 {
		t.Errorf("the deleted conversation lists %+v", got)
	}
	checkStats(t, s.Pool(), "late")
}
