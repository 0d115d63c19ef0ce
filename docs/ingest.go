package docs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
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
	DefaultWorkers = 2
	// DefaultShutdownTimeout is how long Close lets running files finish.
	DefaultShutdownTimeout = 5 * time.Second
	// DefaultLease is how long a claim on a file lasts without renewal.
	DefaultLease = time.Minute
	// DefaultPollInterval is how often idle workers look for files to
	// resume.
	DefaultPollInterval = 5 * time.Second
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
	// Workers is the number of files processed at once in the background;
	// zero means DefaultWorkers. Only the files being processed are held
	// in memory.
	Workers int
	// QueueSize is how many uploads may be reserved or waiting for a
	// worker of this Ingester before Reserve and Submit return ErrBusy;
	// zero means 4 × Workers.
	QueueSize int
	// ShutdownTimeout bounds how long Close waits for the files being
	// processed; zero means DefaultShutdownTimeout. What is left then is
	// interrupted, not failed: it stays processing, with its bytes, and is
	// resumed by the next Ingester on the database.
	ShutdownTimeout time.Duration
	// Lease is how long a worker's claim on a file lasts; the worker renews
	// it every third of that while it works. The files of a process that
	// died without releasing them are resumed by another once their lease
	// expires. Zero means DefaultLease.
	Lease time.Duration
	// PollInterval is how often idle workers look in the database for
	// files to resume; zero means DefaultPollInterval. Files submitted to
	// this Ingester wake a worker at once.
	PollInterval time.Duration
	// Index says when the Ingester builds the vector index of its
	// embedder's model in the background (see IndexPolicy).
	Index IndexPolicy
	// Logger receives background processing events; nil discards them.
	Logger *slog.Logger
}

// Ingester runs the upload pipeline on a Store: it detects, extracts,
// chunks and embeds files, then has the Store commit each one in one
// transaction. Ingest does that synchronously. Submit and SubmitFile store
// the upload's bytes in the database and leave the rest to a bounded pool
// of background workers, which also resume the files any process left
// processing (see SubmitFile). It is safe for concurrent use; Close stops
// it.
type Ingester struct {
	st   *Store
	opts IngestOptions
	log  *slog.Logger

	// slots holds a token per upload reserved, or submitted here and not
	// yet claimed by a worker (those are in pending): QueueSize bounds it.
	slots     chan struct{}
	pendingMu sync.Mutex
	pending   map[string]bool
	// wake tells an idle worker that a file was submitted.
	wake chan struct{}

	closeMu sync.RWMutex
	closed  bool
	// stop is closed by Close: workers claim no new file.
	stop chan struct{}
	// workCtx ends, with errShutdown as its cause, when Close's bound is
	// reached: the files still processing are interrupted.
	workCtx    context.Context
	cancelWork context.CancelCauseFunc
	workers    sync.WaitGroup
	closeOnce  sync.Once

	counters ingestCounters
}

// NewIngester starts an Ingester's workers over st. They begin by resuming
// the files left processing in the database. Close stops them.
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
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Logger == nil {
		opts.Logger = st.log
	}
	in := &Ingester{
		st:      st,
		opts:    opts,
		log:     opts.Logger,
		slots:   make(chan struct{}, opts.QueueSize),
		pending: map[string]bool{},
		wake:    make(chan struct{}, opts.Workers),
		stop:    make(chan struct{}),
	}
	// Background work outlives the requests that submit it.
	in.workCtx, in.cancelWork = context.WithCancelCause(context.Background())
	for range opts.Workers {
		in.workers.Go(in.work)
	}
	if opts.Index.Interval >= 0 {
		in.workers.Go(in.indexLoop)
	}
	return in, nil
}

// Store returns the Store the Ingester writes to.
func (in *Ingester) Store() *Store { return in.st }

const (
	// embedBatch is how many chunks go to the embedder per call, bounding
	// the work lost to a cancellation and the memory of one call.
	embedBatch = 256
	// jobTimeout bounds the processing of one file; a file that exceeds it
	// fails rather than being resumed.
	jobTimeout = 15 * time.Minute
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

// Upload is a file to store: for SubmitFile, a file the caller spooled to
// disk, and for IngestUpload, bytes in memory or such a file.
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
	// Path names a file holding the bytes, such as an upload the caller
	// streamed to a spool file with the size limit enforced as it read. Its
	// size is checked before it is read; it is read, never modified or
	// removed, and must not change until the call returns.
	Path string
	// Data holds the bytes when Path is "".
	Data []byte
}

// upload is a validated upload: its bytes are data, or the file at path.
type upload struct {
	conversationID string
	fileName       string
	mimeType       string
	source         string
	sha256         string
	size           int64
	path           string
	data           []byte
}

// open returns the upload's bytes as a reader, and a function closing it.
func (up upload) open() (io.Reader, func(), error) {
	if up.path == "" {
		return bytes.NewReader(up.data), func() {}, nil
	}
	f, err := os.Open(up.path)
	if err != nil {
		return nil, nil, fmt.Errorf("docs: open upload %s: %w", up.fileName, err)
	}
	return f, func() { _ = f.Close() }, nil
}

// Ingest stores a file synchronously and returns it ready.
//
// It detects the type (ErrUnsupportedType) and checks the size (ErrTooLarge),
// then looks for the same bytes in the conversation: a ready or processing
// file is returned as is with Duplicate set, a failed one is processed again.
// Otherwise it records the file as processing (visible to ListFiles at once),
// extracts the text, chunks and embeds it, and stores the chunks, the BM25
// statistics and the status ready in one transaction. The bytes are not
// stored: should the process stop meanwhile, a worker later marks the file
// failed, and uploading it again processes it again.
//
// When processing fails (no text, a damaged file, the embedder or database
// failing) the file is marked failed with a readable reason and no chunk of
// it is kept; Ingest then returns that failed File together with an error
// wrapping ErrProcessing and the cause.
func (in *Ingester) Ingest(ctx context.Context, conversationID, fileName, mimeType string, data []byte) (File, error) {
	return in.IngestUpload(ctx, Upload{ConversationID: conversationID, FileName: fileName, MIMEType: mimeType, Data: data})
}

// IngestUpload is Ingest of an Upload, which may name the file's source and
// hold its bytes in a file.
func (in *Ingester) IngestUpload(ctx context.Context, u Upload) (File, error) {
	if in.isClosed() {
		return File{}, fmt.Errorf("docs: ingest: %w", ErrClosed)
	}
	up, err := in.validate(u)
	if err != nil {
		return File{}, err
	}
	if up.path != "" {
		// Processing needs the bytes in memory; validate checked the size.
		if up.data, err = os.ReadFile(up.path); err != nil {
			return File{}, fmt.Errorf("docs: read upload %s: %w", up.fileName, err)
		}
		if int64(len(up.data)) != up.size {
			return File{}, fmt.Errorf("docs: %w: upload %s changed while it was read", ErrInvalidArgument, up.fileName)
		}
	}
	c := newClaim(in.opts.Lease)
	f, fresh, err := in.st.claim(ctx, in.st.pool, up, &c)
	if err != nil || !fresh {
		return f, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := in.keepLease(ctx, cancel, f.ID, c)
	defer stop()
	return in.process(ctx, f, c, up.data)
}

func (in *Ingester) isClosed() bool {
	in.closeMu.RLock()
	defer in.closeMu.RUnlock()
	return in.closed
}

// validate checks an upload's arguments, size and type before anything is
// stored, and computes its digest.
func (in *Ingester) validate(u Upload) (upload, error) {
	conversationID, err := CheckConversationID(u.ConversationID)
	if err != nil {
		return upload{}, err
	}
	source, err := checkSource(u.Source)
	if err != nil {
		return upload{}, err
	}
	fileName := strings.TrimSpace(u.FileName)
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
	up := upload{conversationID: conversationID, fileName: fileName, source: source, path: u.Path, data: u.Data}
	var head []byte
	if u.Path == "" {
		up.size, head = int64(len(u.Data)), u.Data
	} else {
		fi, err := os.Stat(u.Path)
		if err != nil {
			return upload{}, fmt.Errorf("docs: upload %s: %w", fileName, err)
		}
		up.size, up.data = fi.Size(), nil
	}
	if err := in.limits().Check(up.size); err != nil {
		return upload{}, fmt.Errorf("docs: %s: %w", fileName, both(ErrTooLarge, err))
	}
	r, done, err := up.open()
	if err != nil {
		return upload{}, err
	}
	defer done()
	if u.Path != "" {
		buf := make([]byte, extract.SniffLen)
		n, err := io.ReadFull(r, buf)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return upload{}, fmt.Errorf("docs: read upload %s: %w", fileName, err)
		}
		head = buf[:n]
		r = io.MultiReader(bytes.NewReader(head), r)
	}
	if up.mimeType, err = extract.DetectType(fileName, u.MIMEType, head); err != nil {
		return upload{}, fmt.Errorf("docs: %s: %w", fileName, both(ErrUnsupportedType, err))
	}
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return upload{}, fmt.Errorf("docs: read upload %s: %w", fileName, err)
	}
	if n != up.size {
		return upload{}, fmt.Errorf("docs: %w: upload %s changed while it was read", ErrInvalidArgument, fileName)
	}
	up.sha256 = hex.EncodeToString(h.Sum(nil))
	return up, nil
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

// reclaimable is the condition, on a row of files, under which an upload of
// the same bytes processes the file again rather than being its duplicate:
// it failed, or it is processing without a live claim and without stored
// bytes, as a synchronous Ingest leaves a file when its process stops.
const reclaimable = `(status = 'failed' OR (status = 'processing'
	AND (claimed_until IS NULL OR claimed_until < now())
	AND NOT EXISTS (SELECT 1 FROM file_bytes b WHERE b.file_id = files.id)))`

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// claim records an upload as processing and reports fresh when the caller
// must process it, under claim c when c is not nil. For bytes the
// conversation already holds it returns that file with Duplicate set, unless
// the file is reclaimable, in which case it is recorded for processing
// again.
func (s *Store) claim(ctx context.Context, q querier, up upload, c *claim) (File, bool, error) {
	var token *string
	var lease float64
	if c != nil {
		token, lease = &c.token, c.lease.Seconds()
	}
	// Each round either inserts, reclaims or finds the row; a row deleted
	// between those statements sends it round again.
	for range 3 {
		f, err := scanFile(q.QueryRow(ctx, `
			INSERT INTO files (conversation_id, file_name, mime_type, size_bytes, sha256, source_url, claimed_by, claimed_until)
			VALUES ($1, $2, $3, $4, $5, $6, $7::uuid, CASE WHEN $7::uuid IS NOT NULL THEN now() + make_interval(secs => $8) END)
			ON CONFLICT (conversation_id, sha256) DO NOTHING
			RETURNING `+fileColumns,
			up.conversationID, up.fileName, up.mimeType, up.size, up.sha256, up.source, token, lease))
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return File{}, false, dbError("docs: record upload", err)
		}
		f, err = scanFile(q.QueryRow(ctx, `
			UPDATE files SET status = 'processing', error = '', file_name = $3, mime_type = $4, source_url = $5,
				attempts = 0, claimed_by = $6::uuid,
				claimed_until = CASE WHEN $6::uuid IS NOT NULL THEN now() + make_interval(secs => $7) END,
				updated_at = now()
			WHERE conversation_id = $1 AND sha256 = $2 AND `+reclaimable+`
			RETURNING `+fileColumns,
			up.conversationID, up.sha256, up.fileName, up.mimeType, up.source, token, lease))
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return File{}, false, dbError("docs: record upload", err)
		}
		f, err = s.duplicate(ctx, q, up)
		if err == nil {
			return f, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return File{}, false, dbError("docs: record upload", err)
		}
	}
	return File{}, false, fmt.Errorf("docs: record upload %s: %w: the file kept changing, try again", up.fileName, ErrBusy)
}

// duplicate returns the file of the conversation holding the upload's
// bytes, with Duplicate set, unless it is reclaimable; pgx.ErrNoRows when
// there is none.
func (s *Store) duplicate(ctx context.Context, q querier, up upload) (File, error) {
	f, err := scanFile(q.QueryRow(ctx, `SELECT `+fileColumns+` FROM files
		WHERE conversation_id = $1 AND sha256 = $2 AND NOT `+reclaimable,
		up.conversationID, up.sha256))
	f.Duplicate = err == nil
	return f, err
}

// process processes a claimed file and counts the outcome in IngestStats; a
// file deleted, taken over or interrupted meanwhile is not counted.
func (in *Ingester) process(ctx context.Context, f File, c claim, data []byte) (File, error) {
	start := time.Now()
	f, err := in.processFile(ctx, f, c, data)
	if !errors.Is(err, ErrNotFound) && !errors.Is(err, errInterrupted) {
		in.counters.done(f, err == nil, time.Since(start))
	}
	return f, err
}

// processFile extracts, chunks, embeds and stores a file held under claim
// c, or marks it failed. When the claim is interrupted (shutdown, or the
// claim lost to another process) it records nothing and returns an error
// wrapping errInterrupted.
func (in *Ingester) processFile(ctx context.Context, f File, c claim, data []byte) (File, error) {
	emb := in.st.Embedder()
	doc, chunks, err := in.split(ctx, f.MIMEType, data)
	var vecs [][]float32
	if err == nil {
		texts := make([]string, len(chunks))
		for i, c := range chunks {
			texts[i] = c.Content
		}
		vecs, err = embedAll(ctx, emb, texts)
	}
	if err == nil {
		var ready File
		ready, err = in.st.storeFile(ctx, f, c, emb.Model(), doc, chunks, vecs)
		if err == nil {
			return ready, nil
		}
		if errors.Is(err, ErrNotFound) {
			// Deleted or taken over while processing: nothing to mark.
			return f, err
		}
	}
	if cause := context.Cause(ctx); errors.Is(cause, errInterrupted) {
		return f, fmt.Errorf("docs: %s: %w", f.FileName, cause)
	}
	reason := extract.CleanMessage(failureReason(err))
	if failed, ok := in.st.markFailed(f, c, reason); ok {
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
// conversation's statistics and generation, in one transaction. The chunks
// and the file carry the write's number from chunk_write_seq: the vector
// index, built later, covers them by it (see index.go). Rows are
// locked in the order file, conversation_stats, the same order DeleteFile
// and Reembed use, so they cannot deadlock.
func (s *Store) storeFile(ctx context.Context, f File, c claim, model string, doc *extract.Document, chunks []chunk.Chunk, vecs [][]float32) (File, error) {
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

	// The claim fences the write: a process that lost its claim to
	// another stores nothing.
	var write int64
	ready, err := scanFile(tx.QueryRow(ctx, `
		UPDATE files SET status = 'ready', error = '', chunk_count = $2, page_count = $3,
			embedding_model = $4, extracted_text = $5, claimed_by = NULL, claimed_until = NULL, updated_at = now(),
			write_seq = nextval('chunk_write_seq')
		WHERE id = $1 AND status = 'processing' AND claimed_by = $6
		RETURNING `+fileColumns+`, write_seq`,
		f.ID, len(chunks), pages, model, doc.Text, c.token), &write)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("docs: store %s: %w: the file was deleted, or taken over, while it was processed", f.ID, ErrNotFound)
	}
	if err != nil {
		return f, dbError("docs: store chunks", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM file_bytes WHERE file_id = $1`, f.ID); err != nil {
		return f, dbError("docs: store chunks", err)
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"chunks"},
		[]string{"file_id", "conversation_id", "ordinal", "content", "page_number", "page_start", "page_end", "char_start", "char_end", "embedding_model", "embedding", "write_seq"},
		pgx.CopyFromSlice(len(chunks), func(i int) ([]any, error) {
			c := chunks[i]
			return []any{f.ID, f.ConversationID, c.Ordinal, c.Content, c.PageStart, c.PageStart, c.PageEnd, c.Start, c.End, model, pgvector.NewVector(vecs[i]), write}, nil
		}))
	if err != nil {
		return f, dbError("docs: store chunks", err)
	}
	// Derived from the chunks' tsv just written (see keyword.go).
	if err := storeFilePostings(ctx, tx, f.ID); err != nil {
		return f, err
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

// markFailed records the failure of a file held under claim c and deletes
// its stored bytes; it reports false when that could not be recorded (the
// file is gone or taken over, or the database is down). The reason is made
// storable first (see extract.CleanMessage); should the database still
// refuse it, the generic reason is stored instead, so that a file never
// stays processing for want of a storable reason.
func (s *Store) markFailed(f File, c claim, reason string) (File, bool) {
	// The failure is recorded even when the caller's context has ended.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reason = extract.CleanMessage(reason)
	for _, r := range []string{reason, genericFailure} {
		failed, err := s.recordFailure(ctx, f, c, r)
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

func (s *Store) recordFailure(ctx context.Context, f File, c claim, reason string) (File, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return f, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	failed, err := scanFile(tx.QueryRow(ctx, `
		UPDATE files SET status = 'failed', error = $2, claimed_by = NULL, claimed_until = NULL, updated_at = now()
		WHERE id = $1 AND status = 'processing' AND claimed_by = $3
		RETURNING `+fileColumns, f.ID, reason, c.token))
	if err != nil {
		return f, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM file_bytes WHERE file_id = $1`, f.ID); err != nil {
		return f, err
	}
	return failed, tx.Commit(ctx)
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
