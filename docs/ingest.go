package docs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/docs/extract"
	"github.com/mcpsearch/mcpsearch/embed"
)

// File statuses.
const (
	StatusProcessing = "processing"
	StatusReady      = "ready"
	StatusFailed     = "failed"
)

// Limits on identifiers, in characters.
const (
	MaxConversationIDRunes = 256
	MaxFileNameRunes       = 512
)

const (
	// embedBatch is how many chunks go to the embedder per call, bounding
	// the work lost to a cancellation and the memory of one call.
	embedBatch = 256
	// jobTimeout bounds the processing of one submitted file.
	jobTimeout = 15 * time.Minute
	// staleAfter is when a file still "processing" is taken to be abandoned
	// (its process ended without recording an outcome) and an upload of
	// the same bytes processes it again. It exceeds jobTimeout.
	staleAfter = 30 * time.Minute
)

// File is an uploaded file.
type File struct {
	ID             string
	ConversationID string
	FileName       string
	// MIMEType is the detected media type the file was extracted as.
	MIMEType string
	// SHA256 is the hex digest of the uploaded bytes.
	SHA256 string
	// Status is StatusProcessing, StatusReady or StatusFailed.
	Status string
	// Error says why processing failed, in words for the user; "" unless
	// Status is StatusFailed.
	Error string
	// EmbeddingModel is the model of the file's chunk embeddings; "" until
	// the file is ready.
	EmbeddingModel string
	SizeBytes      int64
	ChunkCount     int
	// PageCount is the number of PDF pages; 0 for formats without pages.
	PageCount int
	// Duplicate is set by Ingest and Submit when the same bytes were
	// already uploaded to the conversation: the existing file is returned
	// and nothing is processed again.
	Duplicate bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// fileColumns is the select list scanFile reads.
const fileColumns = `id::text, conversation_id, file_name, mime_type, sha256, status, error,
	embedding_model, size_bytes, chunk_count, page_count, created_at, updated_at`

func scanFile(row pgx.Row) (File, error) {
	var f File
	err := row.Scan(&f.ID, &f.ConversationID, &f.FileName, &f.MIMEType, &f.SHA256, &f.Status, &f.Error,
		&f.EmbeddingModel, &f.SizeBytes, &f.ChunkCount, &f.PageCount, &f.CreatedAt, &f.UpdatedAt)
	return f, err
}

// upload is a validated upload.
type upload struct {
	conversationID string
	fileName       string
	mimeType       string
	sha256         string
	data           []byte
}

// job is a submitted file waiting for a worker.
type job struct {
	file     File
	mimeType string
	data     []byte
}

// Ingest stores a file synchronously and returns it ready.
//
// It detects the type (ErrUnsupportedType) and checks the size (ErrTooLarge),
// then looks for the same bytes in the conversation: a ready or processing
// file is returned as is with Duplicate set, a failed one is processed again.
// Otherwise it records the file as processing (visible to ListFiles at once),
// extracts the text, chunks and embeds it, and stores the chunks, the BM25
// statistics and the status ready in one transaction.
//
// When processing fails (no text, a damaged file, the embedder or database
// failing) the file is marked failed with a readable reason and no chunk of
// it is kept; Ingest then returns that failed File together with an error
// wrapping ErrProcessing and the cause.
func (s *Store) Ingest(ctx context.Context, conversationID, fileName, mimeType string, data []byte) (File, error) {
	if err := s.checkOpen("docs: ingest"); err != nil {
		return File{}, err
	}
	up, err := s.validate(conversationID, fileName, mimeType, data)
	if err != nil {
		return File{}, err
	}
	f, fresh, err := s.claim(ctx, up)
	if err != nil || !fresh {
		return f, err
	}
	return s.process(ctx, f, up.mimeType, up.data)
}

// Submit validates a file like Ingest, records it as processing and queues it
// for the background workers, returning at once. Processing then continues
// as in Ingest; poll GetFile or ListFiles for the outcome. A duplicate is
// returned as in Ingest. When the queue is full Submit returns ErrBusy and
// records nothing. data must not be modified after Submit returns.
func (s *Store) Submit(ctx context.Context, conversationID, fileName, mimeType string, data []byte) (File, error) {
	up, err := s.validate(conversationID, fileName, mimeType, data)
	if err != nil {
		return File{}, err
	}
	// The read lock keeps Close from closing jobs between the check and the
	// send.
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return File{}, fmt.Errorf("docs: submit: %w", ErrClosed)
	}
	select {
	case s.slots <- struct{}{}:
	default:
		return File{}, fmt.Errorf("docs: submit %s: %w (%d files waiting)", up.fileName, ErrBusy, cap(s.slots))
	}
	queued := false
	defer func() {
		if !queued {
			<-s.slots
		}
	}()
	f, fresh, err := s.claim(ctx, up)
	if err != nil || !fresh {
		return f, err
	}
	// Holding a slot guarantees room in jobs: this send does not block.
	s.jobs <- job{file: f, mimeType: up.mimeType, data: up.data}
	queued = true
	return f, nil
}

func (s *Store) isClosed() bool {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	return s.closed
}

// work processes submitted files until jobs is closed.
func (s *Store) work() {
	for j := range s.jobs {
		<-s.slots
		if s.workCtx.Err() != nil {
			s.markFailed(j.file, "the server shut down before the file was processed; upload it again")
			continue
		}
		ctx, cancel := context.WithTimeout(s.workCtx, jobTimeout)
		f, err := s.process(ctx, j.file, j.mimeType, j.data)
		cancel()
		if err != nil {
			s.log.Warn("docs: processing failed", "file_id", f.ID, "file_name", f.FileName, "error", err)
			continue
		}
		s.log.Info("docs: file ready", "file_id", f.ID, "file_name", f.FileName, "chunks", f.ChunkCount)
	}
}

// validate checks an upload's arguments, size and type before anything is
// stored.
func (s *Store) validate(conversationID, fileName, declaredMIME string, data []byte) (upload, error) {
	if err := checkConversationID(conversationID); err != nil {
		return upload{}, err
	}
	fileName = strings.TrimSpace(fileName)
	switch {
	case fileName == "":
		return upload{}, fmt.Errorf("docs: %w: empty file name", ErrInvalidArgument)
	case !utf8.ValidString(fileName) || strings.ContainsRune(fileName, 0):
		return upload{}, fmt.Errorf("docs: %w: file name is not valid UTF-8 text", ErrInvalidArgument)
	case utf8.RuneCountInString(fileName) > MaxFileNameRunes:
		return upload{}, fmt.Errorf("docs: %w: file name longer than %d characters", ErrInvalidArgument, MaxFileNameRunes)
	}
	if err := (extract.Limits{MaxBytes: s.opts.MaxFileBytes}).Check(int64(len(data))); err != nil {
		return upload{}, fmt.Errorf("docs: %s: %w", fileName, both(ErrTooLarge, err))
	}
	mt, err := extract.DetectType(fileName, declaredMIME, data)
	if err != nil {
		return upload{}, fmt.Errorf("docs: %s: %w", fileName, both(ErrUnsupportedType, err))
	}
	sum := sha256.Sum256(data)
	return upload{
		conversationID: conversationID,
		fileName:       fileName,
		mimeType:       mt,
		sha256:         hex.EncodeToString(sum[:]),
		data:           data,
	}, nil
}

func checkConversationID(id string) error {
	switch {
	case strings.TrimSpace(id) == "":
		return fmt.Errorf("docs: %w: empty conversation id", ErrInvalidArgument)
	case !utf8.ValidString(id) || strings.ContainsRune(id, 0):
		return fmt.Errorf("docs: %w: conversation id is not valid UTF-8 text", ErrInvalidArgument)
	case utf8.RuneCountInString(id) > MaxConversationIDRunes:
		return fmt.Errorf("docs: %w: conversation id longer than %d characters", ErrInvalidArgument, MaxConversationIDRunes)
	}
	return nil
}

// claim records an upload as processing and reports fresh when the caller
// must process it. For bytes the conversation already holds it returns that
// file with Duplicate set, unless it failed or was abandoned, in which case it
// is claimed for processing again.
func (s *Store) claim(ctx context.Context, up upload) (File, bool, error) {
	// Each round either inserts, reclaims or finds the row; a row deleted
	// between those statements sends it round again.
	for range 3 {
		f, err := scanFile(s.pool.QueryRow(ctx, `
			INSERT INTO files (conversation_id, file_name, mime_type, size_bytes, sha256)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (conversation_id, sha256) DO NOTHING
			RETURNING `+fileColumns,
			up.conversationID, up.fileName, up.mimeType, len(up.data), up.sha256))
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return File{}, false, dbError("docs: record upload", err)
		}
		f, err = scanFile(s.pool.QueryRow(ctx, `
			UPDATE files SET status = 'processing', error = '', file_name = $3, mime_type = $4, updated_at = now()
			WHERE conversation_id = $1 AND sha256 = $2
			  AND (status = 'failed' OR (status = 'processing' AND updated_at < now() - make_interval(secs => $5)))
			RETURNING `+fileColumns,
			up.conversationID, up.sha256, up.fileName, up.mimeType, staleAfter.Seconds()))
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return File{}, false, dbError("docs: record upload", err)
		}
		f, err = scanFile(s.pool.QueryRow(ctx, `SELECT `+fileColumns+` FROM files WHERE conversation_id = $1 AND sha256 = $2`,
			up.conversationID, up.sha256))
		if err == nil {
			f.Duplicate = true
			return f, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return File{}, false, dbError("docs: record upload", err)
		}
	}
	return File{}, false, fmt.Errorf("docs: record upload %s: %w: the file kept changing, try again", up.fileName, ErrBusy)
}

// process processes a claimed file and counts the outcome in IngestStats; a
// file deleted meanwhile is not counted.
func (s *Store) process(ctx context.Context, f File, mimeType string, data []byte) (File, error) {
	start := time.Now()
	f, err := s.processFile(ctx, f, mimeType, data)
	if !errors.Is(err, ErrNotFound) {
		s.counters.done(f, err == nil, time.Since(start))
	}
	return f, err
}

// processFile extracts, chunks, embeds and stores a claimed file, or marks
// it failed.
func (s *Store) processFile(ctx context.Context, f File, mimeType string, data []byte) (File, error) {
	emb := s.Embedder()
	doc, chunks, err := s.split(ctx, mimeType, data)
	var vecs [][]float32
	if err == nil {
		vecs, err = embedAll(ctx, emb, chunks)
	}
	if err == nil {
		err = s.EnsureModelIndex(ctx, emb.Model(), emb.Dimensions())
	}
	if err == nil {
		var ready File
		ready, err = s.store(ctx, f, emb.Model(), doc, chunks, vecs)
		if err == nil {
			return ready, nil
		}
		if errors.Is(err, ErrNotFound) {
			// Deleted while processing: nothing left to mark.
			return f, err
		}
	}
	reason := failureReason(err)
	if failed, ok := s.markFailed(f, reason); ok {
		f = failed
	} else {
		f.Status, f.Error = StatusFailed, reason
	}
	return f, fmt.Errorf("docs: %s: %w: %w", f.FileName, ErrProcessing, err)
}

// split extracts and chunks data, turning a panic in either into an error
// wrapping extract.ErrCorrupt: a hostile file must fail, not crash the
// server.
func (s *Store) split(ctx context.Context, mimeType string, data []byte) (doc *extract.Document, chunks []chunk.Chunk, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("docs: panic while reading a file", "mime_type", mimeType, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: internal error while reading the file", extract.ErrCorrupt)
		}
	}()
	doc, err = extract.Extract(ctx, mimeType, data)
	if err != nil {
		return nil, nil, err
	}
	chunks = chunk.Split(doc, s.opts.Chunk)
	if len(chunks) == 0 {
		return nil, nil, extract.ErrNoText
	}
	return doc, chunks, nil
}

// embedAll embeds the chunks' contents in batches and checks what the
// embedder returns.
func embedAll(ctx context.Context, emb embed.Embedder, chunks []chunk.Chunk) ([][]float32, error) {
	vecs := make([][]float32, 0, len(chunks))
	texts := make([]string, 0, min(len(chunks), embedBatch))
	for start := 0; start < len(chunks); start += embedBatch {
		texts = texts[:0]
		for _, c := range chunks[start:min(start+embedBatch, len(chunks))] {
			texts = append(texts, c.Content)
		}
		out, err := emb.Embed(ctx, texts)
		if err != nil {
			return nil, fmt.Errorf("embed: %w", err)
		}
		if err := checkVectors(emb, len(texts), out); err != nil {
			return nil, err
		}
		vecs = append(vecs, out...)
	}
	return vecs, nil
}

func checkVectors(emb embed.Embedder, want int, vecs [][]float32) error {
	if len(vecs) != want {
		return fmt.Errorf("embed: %w: %d vectors for %d texts", embed.ErrBadResponse, len(vecs), want)
	}
	for _, v := range vecs {
		if len(v) != emb.Dimensions() {
			return fmt.Errorf("embed: %w: a vector of %d dimensions from %s, which reports %d",
				embed.ErrBadResponse, len(v), emb.Model(), emb.Dimensions())
		}
	}
	return nil
}

// store commits a processed file: status ready, its chunks and the BM25
// statistics, in one transaction. Rows are locked in the order file,
// conversation_stats, term_stats (sorted), the same order DeleteFile uses, so
// the two cannot deadlock.
func (s *Store) store(ctx context.Context, f File, model string, doc *extract.Document, chunks []chunk.Chunk, vecs [][]float32) (File, error) {
	pages := 0
	for _, p := range doc.Pages {
		if p.Number > 0 {
			pages++
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return f, dbError("docs: store chunks", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	ready, err := scanFile(tx.QueryRow(ctx, `
		UPDATE files SET status = 'ready', error = '', chunk_count = $2, page_count = $3,
			embedding_model = $4, extracted_text = $5, updated_at = now()
		WHERE id = $1 AND status = 'processing'
		RETURNING `+fileColumns,
		f.ID, len(chunks), pages, model, doc.Text))
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("docs: store %s: %w: the file was deleted while it was processed", f.ID, ErrNotFound)
	}
	if err != nil {
		return f, dbError("docs: store chunks", err)
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"chunks"},
		[]string{"file_id", "conversation_id", "ordinal", "content", "page_number", "char_start", "char_end", "embedding_model", "embedding"},
		pgx.CopyFromSlice(len(chunks), func(i int) ([]any, error) {
			c := chunks[i]
			return []any{f.ID, f.ConversationID, c.Ordinal, c.Content, c.Page, c.Start, c.End, model, pgvector.NewVector(vecs[i])}, nil
		}))
	if err != nil {
		return f, dbError("docs: store chunks", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO conversation_stats (conversation_id, chunk_count, total_tokens)
		SELECT $1, count(*), coalesce(sum(token_count), 0) FROM chunks WHERE file_id = $2
		ON CONFLICT (conversation_id) DO UPDATE
		SET chunk_count = conversation_stats.chunk_count + excluded.chunk_count,
		    total_tokens = conversation_stats.total_tokens + excluded.total_tokens`,
		f.ConversationID, f.ID); err != nil {
		return f, dbError("docs: update statistics", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO term_stats (conversation_id, term, df)
		SELECT $1, u.lexeme, count(*) FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u
		WHERE c.file_id = $2
		GROUP BY u.lexeme ORDER BY u.lexeme
		ON CONFLICT (conversation_id, term) DO UPDATE SET df = term_stats.df + excluded.df`,
		f.ConversationID, f.ID); err != nil {
		return f, dbError("docs: update statistics", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return f, dbError("docs: store chunks", err)
	}
	return ready, nil
}

// markFailed records a file's failure; it reports false when that could not
// be recorded (the file is gone or the database is down).
func (s *Store) markFailed(f File, reason string) (File, bool) {
	// The failure is recorded even when the caller's context has ended.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	failed, err := scanFile(s.pool.QueryRow(ctx, `
		UPDATE files SET status = 'failed', error = $2, updated_at = now()
		WHERE id = $1 AND status = 'processing'
		RETURNING `+fileColumns, f.ID, reason))
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			s.log.Error("docs: cannot record a failed file", "file_id", f.ID, "reason", reason, "error", err)
		}
		return f, false
	}
	return failed, true
}

// failureReason says why processing failed, for File.Error.
func failureReason(err error) string {
	switch {
	case errors.Is(err, extract.ErrNoText), errors.Is(err, extract.ErrCorrupt),
		errors.Is(err, extract.ErrUnsupported), errors.Is(err, extract.ErrTooLarge):
		return err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "processing took too long and was stopped"
	case errors.Is(err, context.Canceled):
		return "processing was interrupted; upload the file again"
	case errors.Is(err, ErrUnavailable):
		return "the database became unavailable while the file was stored; upload it again"
	case errors.Is(err, embed.ErrUnavailable), errors.Is(err, embed.ErrRejected),
		errors.Is(err, embed.ErrBadResponse), strings.HasPrefix(err.Error(), "embed: "):
		return "embedding failed: " + strings.TrimPrefix(err.Error(), "embed: ")
	}
	return "processing failed: " + err.Error()
}

// both is an error whose message is cause's and which matches both sentinel
// and cause with errors.Is.
func both(sentinel, cause error) error { return bothError{sentinel, cause} }

type bothError struct{ sentinel, cause error }

func (e bothError) Error() string   { return e.cause.Error() }
func (e bothError) Unwrap() []error { return []error{e.sentinel, e.cause} }
