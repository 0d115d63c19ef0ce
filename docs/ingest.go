package docs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode"
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

// Limits on identifiers.
const (
	// MaxConversationIDLen is the longest conversation id, in bytes.
	MaxConversationIDLen = 256
	// MaxFileNameRunes is the longest file name, in characters.
	MaxFileNameRunes = 512
	// MaxSourceLen is the longest source URL, in bytes.
	MaxSourceLen = 4096
)

// Defaults applied by NewIngester to zero IngestOptions fields.
const (
	DefaultWorkers         = 2
	DefaultShutdownTimeout = 30 * time.Second
)

// IngestOptions tunes an Ingester. The zero value is usable.
type IngestOptions struct {
	// Chunk sets chunk size and overlap; zero means chunk.DefaultOptions().
	Chunk chunk.Options
	// MaxFileBytes is the largest accepted upload; zero means 50 MB.
	MaxFileBytes int64
	// MaxTextBytes bounds the text extracted from one file; zero means
	// extract.DefaultMaxTextBytes. A file yielding more fails.
	MaxTextBytes int64
	// MaxPDFStreamBytes and MaxPDFDecodedBytes bound what one PDF stream,
	// and all streams of one PDF, may decode to; zero means the defaults of
	// extract.Limits. Together with MaxTextBytes they bound the memory a
	// worker spends on one file.
	MaxPDFStreamBytes, MaxPDFDecodedBytes int64
	// Workers is the number of files Submit's pool processes at once;
	// zero means DefaultWorkers.
	Workers int
	// QueueSize is how many submitted files may wait for a worker before
	// Submit returns ErrBusy; zero means 4 × Workers. At most QueueSize +
	// Workers uploads are held in memory.
	QueueSize int
	// ShutdownTimeout bounds how long Close waits for queued and running
	// files; what is left then is cancelled and marked failed. Zero means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives background processing events; nil discards them.
	Logger *slog.Logger
}

// Ingester runs the upload pipeline on a Store: it detects, extracts,
// chunks and embeds files, then has the Store commit each one in one
// transaction. Ingest does that synchronously; Submit queues the file for a
// bounded pool of background workers. It is safe for concurrent use; Close
// drains it.
type Ingester struct {
	st   *Store
	opts IngestOptions
	log  *slog.Logger

	// Submit's worker pool. slots bounds queued jobs so that sending on
	// jobs never blocks; closeMu orders Submit's sends before Close closes
	// jobs.
	jobs       chan job
	slots      chan struct{}
	closeMu    sync.RWMutex
	closed     bool
	workCtx    context.Context
	cancelWork context.CancelFunc
	workers    sync.WaitGroup
	closeOnce  sync.Once

	counters ingestCounters
}

// NewIngester starts an Ingester's workers over st. Close stops them.
func NewIngester(st *Store, opts IngestOptions) (*Ingester, error) {
	if st == nil {
		return nil, errors.New("docs: new ingester: nil store")
	}
	if opts.Chunk == (chunk.Options{}) {
		opts.Chunk = chunk.DefaultOptions()
	}
	if err := opts.Chunk.Validate(); err != nil {
		return nil, fmt.Errorf("docs: new ingester: %w", err)
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = extract.DefaultMaxBytes
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4 * opts.Workers
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Logger == nil {
		opts.Logger = st.log
	}
	in := &Ingester{
		st:    st,
		opts:  opts,
		log:   opts.Logger,
		jobs:  make(chan job, opts.QueueSize),
		slots: make(chan struct{}, opts.QueueSize),
	}
	// Background work outlives the requests that submit it.
	in.workCtx, in.cancelWork = context.WithCancel(context.Background())
	for range opts.Workers {
		in.workers.Go(in.work)
	}
	return in, nil
}

// Store returns the Store the Ingester writes to.
func (in *Ingester) Store() *Store { return in.st }

// Close stops accepting files, waits up to IngestOptions.ShutdownTimeout for
// queued and running files, and cancels and marks failed what is left. It
// does not close the Store's pool. Calls after the first return at once.
func (in *Ingester) Close() {
	in.closeOnce.Do(func() {
		in.closeMu.Lock()
		in.closed = true
		close(in.jobs)
		in.closeMu.Unlock()

		done := make(chan struct{})
		go func() {
			in.workers.Wait()
			close(done)
		}()
		timer := time.NewTimer(in.opts.ShutdownTimeout)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			in.log.Warn("docs: shutdown timeout: cancelling unfinished files", "timeout", in.opts.ShutdownTimeout)
			in.cancelWork()
			<-done
		}
		in.cancelWork()
	})
}

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
	// Source is the URL the file was fetched from; "" for a file uploaded
	// directly.
	Source string
	// Duplicate is set by Ingest and Submit when the same bytes were
	// already uploaded to the conversation: the existing file is returned
	// and nothing is processed again.
	Duplicate bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// fileColumns is the select list scanFile reads.
const fileColumns = `id::text, conversation_id, file_name, mime_type, sha256, status, error,
	embedding_model, size_bytes, chunk_count, page_count, source_url, created_at, updated_at`

// scanFile reads a row of fileColumns followed by the extra columns, if
// any, into extra.
func scanFile(row pgx.Row, extra ...any) (File, error) {
	var f File
	dest := []any{&f.ID, &f.ConversationID, &f.FileName, &f.MIMEType, &f.SHA256, &f.Status, &f.Error,
		&f.EmbeddingModel, &f.SizeBytes, &f.ChunkCount, &f.PageCount, &f.Source, &f.CreatedAt, &f.UpdatedAt}
	err := row.Scan(append(dest, extra...)...)
	return f, err
}

// Upload is a file to store, for IngestUpload.
type Upload struct {
	ConversationID string
	FileName       string
	// MIMEType is the media type the sender declared, if any; the content
	// and the file name weigh more (see extract.DetectType).
	MIMEType string
	// Source is the URL the file was fetched from, kept with the file and
	// shown with it and its search results; "" for a direct upload. At most
	// MaxSourceLen bytes of printable UTF-8.
	Source string
	// Data holds the file's bytes.
	Data []byte
}

// upload is a validated upload.
type upload struct {
	conversationID string
	fileName       string
	mimeType       string
	source         string
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
func (in *Ingester) Ingest(ctx context.Context, conversationID, fileName, mimeType string, data []byte) (File, error) {
	return in.IngestUpload(ctx, Upload{ConversationID: conversationID, FileName: fileName, MIMEType: mimeType, Data: data})
}

// IngestUpload is Ingest of an Upload, which may name the file's source.
func (in *Ingester) IngestUpload(ctx context.Context, u Upload) (File, error) {
	if in.isClosed() {
		return File{}, fmt.Errorf("docs: ingest: %w", ErrClosed)
	}
	up, err := in.validate(u)
	if err != nil {
		return File{}, err
	}
	f, fresh, err := in.st.claim(ctx, up)
	if err != nil || !fresh {
		return f, err
	}
	return in.process(ctx, f, up.mimeType, up.data)
}

// Submit validates a file like Ingest, records it as processing and queues it
// for the background workers, returning at once. Processing then continues
// as in Ingest; poll GetFile or ListFiles for the outcome. A duplicate is
// returned as in Ingest. When the queue is full Submit returns ErrBusy and
// records nothing. data must not be modified after Submit returns.
func (in *Ingester) Submit(ctx context.Context, conversationID, fileName, mimeType string, data []byte) (File, error) {
	return in.SubmitUpload(ctx, Upload{ConversationID: conversationID, FileName: fileName, MIMEType: mimeType, Data: data})
}

// SubmitUpload is Submit of an Upload, which may name the file's source.
func (in *Ingester) SubmitUpload(ctx context.Context, u Upload) (File, error) {
	up, err := in.validate(u)
	if err != nil {
		return File{}, err
	}
	// The read lock keeps Close from closing jobs between the check and the
	// send.
	in.closeMu.RLock()
	defer in.closeMu.RUnlock()
	if in.closed {
		return File{}, fmt.Errorf("docs: submit: %w", ErrClosed)
	}
	select {
	case in.slots <- struct{}{}:
	default:
		return File{}, fmt.Errorf("docs: submit %s: %w (%d files waiting)", up.fileName, ErrBusy, cap(in.slots))
	}
	queued := false
	defer func() {
		if !queued {
			<-in.slots
		}
	}()
	f, fresh, err := in.st.claim(ctx, up)
	if err != nil || !fresh {
		return f, err
	}
	// Holding a slot guarantees room in jobs: this send does not block.
	in.jobs <- job{file: f, mimeType: up.mimeType, data: up.data}
	queued = true
	return f, nil
}

func (in *Ingester) isClosed() bool {
	in.closeMu.RLock()
	defer in.closeMu.RUnlock()
	return in.closed
}

// work processes submitted files until jobs is closed.
func (in *Ingester) work() {
	for j := range in.jobs {
		<-in.slots
		if in.workCtx.Err() != nil {
			in.st.markFailed(j.file, "the server shut down before the file was processed; upload it again")
			continue
		}
		ctx, cancel := context.WithTimeout(in.workCtx, jobTimeout)
		f, err := in.process(ctx, j.file, j.mimeType, j.data)
		cancel()
		if err != nil {
			in.log.Warn("docs: processing failed", "file_id", f.ID, "file_name", f.FileName, "error", err)
			continue
		}
		in.log.Info("docs: file ready", "file_id", f.ID, "file_name", f.FileName, "chunks", f.ChunkCount)
	}
}

// validate checks an upload's arguments, size and type before anything is
// stored.
func (in *Ingester) validate(u Upload) (upload, error) {
	conversationID, err := CheckConversationID(u.ConversationID)
	if err != nil {
		return upload{}, err
	}
	source, err := checkSource(u.Source)
	if err != nil {
		return upload{}, err
	}
	fileName, declaredMIME, data := strings.TrimSpace(u.FileName), u.MIMEType, u.Data
	switch {
	case fileName == "":
		return upload{}, fmt.Errorf("docs: %w: empty file name", ErrInvalidArgument)
	case !utf8.ValidString(fileName) || strings.ContainsRune(fileName, 0):
		return upload{}, fmt.Errorf("docs: %w: file name is not valid UTF-8 text", ErrInvalidArgument)
	case strings.ContainsFunc(fileName, unprintable):
		// Names are shown to models and people as stored: an escape
		// sequence or a bidirectional override would make one read as
		// another ("invoice\u202etxt.exe").
		return upload{}, fmt.Errorf("docs: %w: file name holds a control or bidirectional formatting character: send a plain file name", ErrInvalidArgument)
	case utf8.RuneCountInString(fileName) > MaxFileNameRunes:
		return upload{}, fmt.Errorf("docs: %w: file name longer than %d characters", ErrInvalidArgument, MaxFileNameRunes)
	}
	if err := in.limits().Check(int64(len(data))); err != nil {
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
		source:         source,
		sha256:         hex.EncodeToString(sum[:]),
		data:           data,
	}, nil
}

// unprintable reports control characters and the bidirectional formatting
// characters that make text display differently from what it holds.
func unprintable(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// checkSource validates a source URL and returns it without surrounding
// spaces.
func checkSource(src string) (string, error) {
	src = strings.TrimSpace(src)
	switch {
	case len(src) > MaxSourceLen:
		return "", fmt.Errorf("docs: %w: source URL is %d bytes long; the limit is %d", ErrInvalidArgument, len(src), MaxSourceLen)
	case !utf8.ValidString(src) || strings.ContainsFunc(src, unicode.IsControl):
		return "", fmt.Errorf("docs: %w: source URL is not printable UTF-8 text", ErrInvalidArgument)
	}
	return src, nil
}

// CheckConversationID validates a conversation id and returns it without
// surrounding spaces. An empty id, one longer than MaxConversationIDLen
// bytes, or one holding invalid UTF-8 or control characters is refused with
// an error wrapping ErrInvalidArgument that says what to send.
func CheckConversationID(id string) (string, error) {
	id = strings.TrimSpace(id)
	switch {
	case id == "":
		return "", fmt.Errorf("docs: %w: empty conversation id: send the id of the conversation the files belong to", ErrInvalidArgument)
	case len(id) > MaxConversationIDLen:
		return "", fmt.Errorf("docs: %w: conversation id is %d bytes long; send at most %d", ErrInvalidArgument, len(id), MaxConversationIDLen)
	case !utf8.ValidString(id):
		return "", fmt.Errorf("docs: %w: conversation id is not valid UTF-8: send plain text", ErrInvalidArgument)
	case strings.ContainsFunc(id, unprintable):
		return "", fmt.Errorf("docs: %w: conversation id holds a control character: send printable text", ErrInvalidArgument)
	}
	return id, nil
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
			INSERT INTO files (conversation_id, file_name, mime_type, size_bytes, sha256, source_url)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (conversation_id, sha256) DO NOTHING
			RETURNING `+fileColumns,
			up.conversationID, up.fileName, up.mimeType, len(up.data), up.sha256, up.source))
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return File{}, false, dbError("docs: record upload", err)
		}
		f, err = scanFile(s.pool.QueryRow(ctx, `
			UPDATE files SET status = 'processing', error = '', file_name = $3, mime_type = $4, source_url = $6, updated_at = now()
			WHERE conversation_id = $1 AND sha256 = $2
			  AND (status = 'failed' OR (status = 'processing' AND updated_at < now() - make_interval(secs => $5)))
			RETURNING `+fileColumns,
			up.conversationID, up.sha256, up.fileName, up.mimeType, staleAfter.Seconds(), up.source))
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
func (in *Ingester) process(ctx context.Context, f File, mimeType string, data []byte) (File, error) {
	start := time.Now()
	f, err := in.processFile(ctx, f, mimeType, data)
	if !errors.Is(err, ErrNotFound) {
		in.counters.done(f, err == nil, time.Since(start))
	}
	return f, err
}

// processFile extracts, chunks, embeds and stores a claimed file, or marks
// it failed.
func (in *Ingester) processFile(ctx context.Context, f File, mimeType string, data []byte) (File, error) {
	emb := in.st.Embedder()
	doc, chunks, err := in.split(ctx, mimeType, data)
	var vecs [][]float32
	if err == nil {
		texts := make([]string, len(chunks))
		for i, c := range chunks {
			texts[i] = c.Content
		}
		vecs, err = embedAll(ctx, emb, texts)
	}
	if err == nil {
		err = in.st.EnsureModelIndex(ctx, emb.Model(), emb.Dimensions())
	}
	if err == nil {
		var ready File
		ready, err = in.st.storeFile(ctx, f, emb.Model(), doc, chunks, vecs)
		if err == nil {
			return ready, nil
		}
		if errors.Is(err, ErrNotFound) {
			// Deleted while processing: nothing left to mark.
			return f, err
		}
	}
	reason := extract.CleanMessage(failureReason(err))
	if failed, ok := in.st.markFailed(f, reason); ok {
		f = failed
	} else {
		f.Status, f.Error = StatusFailed, reason
	}
	return f, fmt.Errorf("docs: %s: %w: %w", f.FileName, ErrProcessing, err)
}

// split extracts and chunks data, turning a panic in either into an error
// wrapping extract.ErrCorrupt: a hostile file must fail, not crash the
// server.
func (in *Ingester) split(ctx context.Context, mimeType string, data []byte) (doc *extract.Document, chunks []chunk.Chunk, err error) {
	defer func() {
		if p := recover(); p != nil {
			in.log.Error("docs: panic while reading a file", "mime_type", mimeType, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: internal error while reading the file", extract.ErrCorrupt)
		}
	}()
	doc, err = in.limits().Extract(ctx, mimeType, data)
	if err != nil {
		return nil, nil, err
	}
	chunks = chunk.Split(doc, in.opts.Chunk)
	if len(chunks) == 0 {
		return nil, nil, extract.ErrNoText
	}
	return doc, chunks, nil
}

// limits are the extraction limits of the options.
func (in *Ingester) limits() extract.Limits {
	return extract.Limits{
		MaxBytes:           in.opts.MaxFileBytes,
		MaxTextBytes:       in.opts.MaxTextBytes,
		MaxPDFStreamBytes:  in.opts.MaxPDFStreamBytes,
		MaxPDFDecodedBytes: in.opts.MaxPDFDecodedBytes,
	}
}

// embedAll embeds texts in batches of embedBatch and checks what the
// embedder returns. Ingestion and Reembed both use it.
func embedAll(ctx context.Context, emb embed.Embedder, texts []string) ([][]float32, error) {
	vecs := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += embedBatch {
		batch := texts[start:min(start+embedBatch, len(texts))]
		out, err := emb.Embed(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("embed: %w", err)
		}
		if err := checkVectors(emb, len(batch), out); err != nil {
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

// storeFile commits a processed file: status ready, its chunks and the
// conversation's statistics and generation, in one transaction. Rows are
// locked in the order file, conversation_stats, the same order DeleteFile
// and Reembed use, so they cannot deadlock.
func (s *Store) storeFile(ctx context.Context, f File, model string, doc *extract.Document, chunks []chunk.Chunk, vecs [][]float32) (File, error) {
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
		[]string{"file_id", "conversation_id", "ordinal", "content", "page_number", "page_start", "page_end", "char_start", "char_end", "embedding_model", "embedding"},
		pgx.CopyFromSlice(len(chunks), func(i int) ([]any, error) {
			c := chunks[i]
			return []any{f.ID, f.ConversationID, c.Ordinal, c.Content, c.PageStart, c.PageStart, c.PageEnd, c.Start, c.End, model, pgvector.NewVector(vecs[i])}, nil
		}))
	if err != nil {
		return f, dbError("docs: store chunks", err)
	}
	// A new generation tells every process that its keyword index of the
	// conversation is out of date (see keyword.go).
	if _, err := tx.Exec(ctx, `
		INSERT INTO conversation_stats (conversation_id, chunk_count) VALUES ($1, $2)
		ON CONFLICT (conversation_id) DO UPDATE
		SET chunk_count = conversation_stats.chunk_count + excluded.chunk_count,
		    generation = nextval('conversation_generation_seq')`,
		f.ConversationID, len(chunks)); err != nil {
		return f, dbError("docs: update statistics", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return f, dbError("docs: store chunks", err)
	}
	return ready, nil
}

// genericFailure is the reason stored when the real one cannot be.
const genericFailure = "processing failed"

// markFailed records a file's failure; it reports false when that could not
// be recorded (the file is gone or the database is down). The reason is
// made storable first (see extract.CleanMessage); should the database still
// refuse it, the generic reason is stored instead, so that a file never
// stays processing for want of a storable reason.
func (s *Store) markFailed(f File, reason string) (File, bool) {
	// The failure is recorded even when the caller's context has ended.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reason = extract.CleanMessage(reason)
	for _, r := range []string{reason, genericFailure} {
		failed, err := scanFile(s.pool.QueryRow(ctx, `
			UPDATE files SET status = 'failed', error = $2, updated_at = now()
			WHERE id = $1 AND status = 'processing'
			RETURNING `+fileColumns, f.ID, r))
		switch {
		case err == nil:
			return failed, true
		case errors.Is(err, pgx.ErrNoRows):
			return f, false
		}
		err = dbError("docs: record a failed file", err)
		s.log.Error("docs: cannot record a failed file", "file_id", f.ID, "reason", r, "error", err)
		if errors.Is(err, ErrUnavailable) {
			return f, false
		}
	}
	return f, false
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
