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
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/extract/ocr"
	"github.com/mcpsearch/mcpsearch/telemetry"
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
	// DefaultLease is how long a claim on a file lasts without renewal: a
	// worker renews it every third of that (a heartbeat), so a process
	// that died leaves its files to another within the lease and a
	// quarter of it (see Ingester.pollAfter).
	DefaultLease = 10 * time.Second
	// DefaultHeldCheck is how often a worker checks that the files it
	// works on were not deleted: a cancelled job stops within it.
	DefaultHeldCheck = time.Second
	// DefaultPollInterval is how often idle workers look for files to
	// resume.
	DefaultPollInterval = 5 * time.Second
	// DefaultQueueSize is the default of IngestOptions.QueueSize: two
	// requests of the upload API's 32 files each.
	DefaultQueueSize = 64
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
	// Workers is the number of files processed at once, by the background
	// workers and by IngestAll; zero means DefaultWorkers. Only the files
	// being processed, and those waiting to be stored, are held in memory.
	Workers int
	// QueueSize is how many uploads may be reserved or waiting for a
	// worker of this Ingester before Reserve and Submit return ErrBusy;
	// zero means DefaultQueueSize, or 4 × Workers when that is more. The
	// bytes of a waiting upload are in the database; up to 1 MiB of each
	// is also kept in memory for this process's workers.
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
	// HeldCheck is how often a worker looks, between renewals of its
	// lease, whether the files it works on are still its own: a file
	// deleted meanwhile (a cancelled job's, say) stops being processed
	// within that time. Zero means DefaultHeldCheck.
	HeldCheck time.Duration
	// PollInterval is how often idle workers look in the database for
	// files to resume, and the Ingester for deleted conversations to
	// purge; zero means DefaultPollInterval. Files submitted to this
	// Ingester wake a worker at once.
	PollInterval time.Duration
	// OCR, when not nil, reads the pages of PDFs without a text layer, and
	// PNG, JPEG and TIFF uploads, with the tesseract program (see package
	// extract/ocr); nil reads none, and such pages are listed in the file's
	// note.
	OCR *ocr.Engine
	// Index says when the Ingester builds the vector index of its
	// embedder's model in the background (see IndexPolicy).
	Index IndexPolicy
	// Logger receives background processing events; nil discards them.
	Logger *slog.Logger
	// Tracer traces each batch of files a worker processes, a trace of
	// its own (extraction, chunking, the embedder); nil traces none.
	Tracer trace.TracerProvider
}

// Ingester runs the upload pipeline on a Store: it detects, extracts,
// chunks and embeds files, then stores them, several files per transaction
// when several are ready to be stored at once. Ingest does that
// synchronously for one file, IngestAll for many. Submit and SubmitFile
// store the upload's bytes in the database and leave the rest to a bounded
// pool of background workers, which also resume the files any process left
// processing (see SubmitFile). It also purges deleted conversations and
// builds the vector index in the background. It is safe for concurrent use;
// Close stops it.
type Ingester struct {
	st   *Store
	opts IngestOptions
	log  *slog.Logger

	// slots holds a token per upload reserved, or submitted here and not
	// yet taken by a worker (those are in pending): QueueSize bounds it.
	slots chan struct{}
	// pending maps the files submitted here, not yet taken by a worker, to
	// their conversation and the bytes kept for them.
	pendingMu sync.Mutex
	pending   map[string]pendingUpload
	// wake tells an idle worker that a file was submitted.
	wake chan struct{}

	commits *committer

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
		opts.QueueSize = max(DefaultQueueSize, 4*opts.Workers)
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
	if opts.HeldCheck <= 0 {
		opts.HeldCheck = DefaultHeldCheck
	}
	if opts.Logger == nil {
		opts.Logger = st.log
	}
	in := &Ingester{
		st:      st,
		opts:    opts,
		log:     opts.Logger,
		slots:   make(chan struct{}, opts.QueueSize),
		pending: map[string]pendingUpload{},
		wake:    make(chan struct{}, opts.Workers),
		stop:    make(chan struct{}),
	}
	in.commits = newCommitter(st, in.log, &in.counters.batches)
	// Background work outlives the requests that submit it.
	in.workCtx, in.cancelWork = context.WithCancelCause(context.Background())
	for range opts.Workers {
		in.workers.Go(in.work)
	}
	in.workers.Go(in.maintain)
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
	// groupFiles and groupBytes bound the files a worker reads and embeds
	// together: small files share embedding calls and commits.
	groupFiles = 32
	groupBytes = 2 << 20
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
	// Note says what a user should know of a ready file, such as the pages
	// of a scan that still need OCR and why; "" when nothing.
	Note string
	// Duplicate is set by Ingest and Submit when the same bytes were
	// already uploaded to the conversation: the existing file is returned
	// and nothing is processed again.
	Duplicate bool
	// JobID is the job that stored the file (package jobs); "" for a file
	// stored outside a job.
	JobID     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Upload is a file to store: bytes in memory, or a file the caller wrote
// (such as an upload spooled to disk with the size limit enforced as it was
// read).
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
	// Path names a file holding the bytes. It is read, never modified or
	// removed, and must not change until the call returns.
	Path string
	// Data holds the bytes when Path is "".
	Data []byte
	// SHA256, when the caller computed it as it wrote Path (the hex
	// digest of the whole file), spares SubmitFile a read of the file
	// before it stores it; the bytes are checked against the digest as
	// they are stored. Ignored with Data.
	SHA256 string
	// JobID, when set, is the job the file is stored for (a UUID, see
	// package jobs): its progress is counted from the files that carry it,
	// and cancelling it removes those not yet ready.
	JobID string
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
	jobID          string
}

// open returns the upload's bytes as a reader, and a function closing it.
func (up upload) open() (io.Reader, func(), error) {
	if up.path == "" || up.data != nil {
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
// Otherwise it extracts the text, chunks and embeds it, and stores the file,
// its chunks and its keyword postings in one transaction, possibly with
// files other calls are storing at the same moment. Nothing of the file is
// recorded before it is stored: should the process stop meanwhile, there is
// nothing to clean up, and uploading it again processes it.
//
// When processing fails (no text, a damaged file, the embedder failing) the
// file is recorded failed with a readable reason and no chunk of it is
// kept; Ingest then returns that failed File together with an error
// wrapping ErrProcessing and the cause.
func (in *Ingester) Ingest(ctx context.Context, conversationID, fileName, mimeType string, data []byte) (File, error) {
	return in.IngestUpload(ctx, Upload{ConversationID: conversationID, FileName: fileName, MIMEType: mimeType, Data: data})
}

// IngestUpload is Ingest of an Upload, which may name the file's source and
// hold its bytes in a file.
func (in *Ingester) IngestUpload(ctx context.Context, u Upload) (File, error) {
	var f File
	var err error
	done := false
	first := true
	ierr := in.IngestAll(ctx, func() (Upload, bool) {
		if !first {
			return Upload{}, false
		}
		first = false
		return u, true
	}, func(_ Upload, got File, gotErr error) {
		f, err, done = got, gotErr, true
	})
	if !done {
		return File{}, ierr
	}
	return f, err
}

// IngestAll ingests every upload next yields until it reports false, as
// Ingest does, Workers files at a time, and calls done with each upload's
// outcome as Ingest returns it, from the Ingester's goroutines, once the
// file is stored. Small files are read, embedded and stored together, so
// that a folder of many small files is stored at the rate of a few large
// ones. next is called by one goroutine at a time. IngestAll returns when
// every upload next yielded is done, or ctx ends: the uploads not yet
// stored then get ctx's error. It returns ErrClosed after Close, and ctx's
// error when it ended.
func (in *Ingester) IngestAll(ctx context.Context, next func() (Upload, bool), done func(Upload, File, error)) error {
	if in.isClosed() {
		return fmt.Errorf("docs: ingest: %w", ErrClosed)
	}
	var (
		mu       sync.Mutex
		finished bool
		pending  sync.WaitGroup
		workers  sync.WaitGroup
	)
	// take returns the next group of uploads: up to groupFiles, stopping
	// once they hold groupBytes (a large file goes alone).
	take := func() []Upload {
		mu.Lock()
		defer mu.Unlock()
		var group []Upload
		var size int64
		for !finished && len(group) < groupFiles && size < groupBytes && ctx.Err() == nil {
			u, ok := next()
			if !ok {
				finished = true
				break
			}
			group = append(group, u)
			size += uploadSize(u)
		}
		return group
	}
	for range in.opts.Workers {
		workers.Go(func() {
			for {
				group := take()
				if len(group) == 0 {
					return
				}
				in.ingestGroup(ctx, group, done, &pending)
			}
		})
	}
	workers.Wait()
	pending.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// uploadSize is an upload's size as far as it is known without reading it.
func uploadSize(u Upload) int64 {
	if u.Path == "" {
		return int64(len(u.Data))
	}
	if fi, err := os.Stat(u.Path); err == nil {
		return fi.Size()
	}
	return 0
}

// ingestGroup validates, deduplicates, processes and hands to the
// committer a group of uploads; done is called for each as it is settled,
// pending counting those handed to the committer and not yet settled.
func (in *Ingester) ingestGroup(ctx context.Context, group []Upload, done func(Upload, File, error), pending *sync.WaitGroup) {
	ups := make([]upload, 0, len(group))
	orig := make([]Upload, 0, len(group))
	for _, u := range group {
		up, err := in.validate(u, true)
		if err != nil {
			done(u, File{}, err)
			continue
		}
		ups = append(ups, up)
		orig = append(orig, u)
	}
	if len(ups) == 0 {
		return
	}
	dups, err := in.st.duplicates(ctx, ups)
	if err != nil {
		for _, u := range orig {
			done(u, File{}, err)
		}
		return
	}
	items := make([]*commitItem, 0, len(ups))
	var owners []Upload
	var datas [][]byte
	for i, up := range ups {
		if f, ok := dups[up.conversationID+"\x00"+up.sha256]; ok {
			done(orig[i], f, nil)
			continue
		}
		items = append(items, &commitItem{up: &ups[i]})
		owners = append(owners, orig[i])
		datas = append(datas, up.data)
		ups[i].data = nil
	}
	in.process(ctx, items, datas)
	for i, it := range items {
		if err := ctx.Err(); err != nil {
			done(owners[i], File{}, fmt.Errorf("docs: ingest %s: %w", it.up.fileName, err))
			continue
		}
		pending.Add(1)
		u := owners[i]
		start := time.Now()
		err := in.commits.submit(it, func(it *commitItem) {
			defer pending.Done()
			in.settled(it, start)
			done(u, it.out, it.result())
		})
		if err != nil {
			pending.Done()
			done(u, File{}, err)
		}
	}
}

// result is the error a caller of Ingest gets for a settled item.
func (it *commitItem) result() error {
	switch {
	case it.err != nil:
		return it.err
	case it.failed && !it.out.Duplicate && it.cause != nil:
		return fmt.Errorf("docs: %s: %w: %w", it.out.FileName, ErrProcessing, it.cause)
	case it.failed && !it.out.Duplicate:
		return fmt.Errorf("docs: %s: %w: %s", it.out.FileName, ErrProcessing, it.reason)
	}
	return nil
}

// settled counts a settled item in IngestStats; a file that was lost or
// interrupted is not counted, nor a duplicate.
func (in *Ingester) settled(it *commitItem, start time.Time) {
	if it.err != nil || it.out.Duplicate {
		return
	}
	in.counters.done(it.out, !it.failed, time.Since(start))
}

func (in *Ingester) isClosed() bool {
	in.closeMu.RLock()
	defer in.closeMu.RUnlock()
	return in.closed
}

// validate checks an upload's arguments, size and type before anything is
// stored, and computes its digest. With load set (the upload is processed
// here and now) the bytes of an upload in a file are read into memory,
// once: the digest and the type come from that read. Without, the upload
// is read once more on its way to storage; a digest and head the caller
// gives spare the read here.
func (in *Ingester) validate(u Upload, load bool) (upload, error) {
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
	if u.JobID != "" {
		if up.jobID, err = parseID("job", u.JobID); err != nil {
			return upload{}, err
		}
	}
	if u.Path == "" {
		up.size = int64(len(u.Data))
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
	// The type is told from the content: an office document or an e-book
	// by the entries of its archive, a legacy or encrypted Office file by
	// its directory, reading what that needs of the file.
	var content io.ReaderAt
	switch {
	case u.Path == "":
		content = bytes.NewReader(u.Data)
		sum := sha256.Sum256(u.Data)
		up.sha256 = hex.EncodeToString(sum[:])
	case load:
		if up.data, err = os.ReadFile(u.Path); err != nil {
			return upload{}, fmt.Errorf("docs: read upload %s: %w", fileName, err)
		}
		if int64(len(up.data)) != up.size {
			return upload{}, fmt.Errorf("docs: %w: upload %s changed while it was read", ErrInvalidArgument, fileName)
		}
		content = bytes.NewReader(up.data)
		sum := sha256.Sum256(up.data)
		up.sha256 = hex.EncodeToString(sum[:])
	default:
		f, err := os.Open(u.Path)
		if err != nil {
			return upload{}, fmt.Errorf("docs: read upload %s: %w", fileName, err)
		}
		defer f.Close()
		content = f
		if u.SHA256 != "" {
			up.sha256 = strings.ToLower(u.SHA256)
		} else if up.sha256, err = hashFile(f, fileName, up.size); err != nil {
			// Hashed here, and stored from a second read that checks
			// the digest.
			return upload{}, err
		}
	}
	if up.mimeType, err = in.limits().Detect(fileName, u.MIMEType, content, up.size); err != nil {
		return upload{}, fmt.Errorf("docs: %s: %w", fileName, both(ErrUnsupportedType, err))
	}
	return up, nil
}

// hashFile returns the digest of f, which must be size bytes long.
func hashFile(f *os.File, name string, size int64) (string, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, size+1))
	if err != nil {
		return "", fmt.Errorf("docs: read upload %s: %w", name, err)
	}
	if n != size {
		return "", fmt.Errorf("docs: %w: upload %s changed while it was read", ErrInvalidArgument, name)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
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

// duplicates returns, by conversation and digest ("conv\x00sha"), the
// files that already hold uploads' bytes and are not to be processed
// again, with Duplicate set: one statement for a group.
func (s *Store) duplicates(ctx context.Context, ups []upload) (map[string]File, error) {
	convs := make([]string, len(ups))
	shas := make([]string, len(ups))
	for i, up := range ups {
		convs[i], shas[i] = up.conversationID, up.sha256
	}
	out := map[string]File{}
	// One statement per conversation, which names it.
	for c, shas := range byConversation(convs, shas) {
		rows, err := s.pool.Query(ctx, `
			SELECT `+fileColumns+` FROM files f
			WHERE f.conversation_id = $1 AND f.sha256 = ANY($2::text[]) AND NOT `+reclaimable("$1")+` AND `+visible, c, shas)
		if err != nil {
			return nil, dbError("docs: look for duplicates", err)
		}
		files, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (File, error) { return scanFile(r) })
		if err != nil {
			return nil, dbError("docs: look for duplicates", err)
		}
		for _, f := range files {
			f.Duplicate = true
			out[f.ConversationID+"\x00"+f.SHA256] = f
		}
	}
	return out, nil
}

// process extracts, chunks and embeds items, whose bytes are datas, and
// fills in each item's result: ready with its chunks and vectors, or
// failed with a reason. The chunks of all items are embedded together, in
// calls of embedBatch chunks. An item whose processing ctx interrupted is
// left with neither.
func (in *Ingester) process(ctx context.Context, items []*commitItem, datas [][]byte) {
	emb := in.st.Embedder()
	var texts []string
	var owners []*commitItem
	for i, it := range items {
		mime := it.f.MIMEType
		if it.up != nil {
			mime = it.up.mimeType
		}
		// The bytes are held no longer than their extraction.
		data := datas[i]
		datas[i] = nil
		doc, chunks, err := in.split(ctx, mime, data)
		if err != nil {
			it.fail(err)
			continue
		}
		it.doc, it.chunks, it.model = doc, chunks, emb.Model()
		for _, c := range chunks {
			texts = append(texts, c.Content)
			owners = append(owners, it)
		}
	}
	if len(texts) == 0 {
		return
	}
	vecs, err := embedAll(ctx, emb, texts)
	in.counters.embedded.Add(int64(len(texts)))
	for i, it := range owners {
		switch {
		case it.failed:
		case err != nil:
			it.fail(err)
		default:
			it.vecs = append(it.vecs, vecs[i])
		}
	}
}

// fail records err as the item's failure reason.
func (it *commitItem) fail(err error) {
	it.failed = true
	it.reason = extract.CleanMessage(failureReason(err))
	it.doc, it.chunks, it.vecs = nil, nil, nil
	it.cause = err
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
	xctx, span := telemetry.Start(ctx, "extract", trace.SpanKindInternal)
	doc, err = in.limits().Extract(xctx, mimeType, data)
	if span.IsRecording() {
		span.SetAttributes(telemetry.ContentTypeKey.String(mimeType), telemetry.FileBytesKey.Int(len(data)))
	}
	if err != nil {
		telemetry.Fail(span, "unreadable")
		span.End()
		return nil, nil, err
	}
	span.End()
	_, span = telemetry.Start(ctx, "chunk", trace.SpanKindInternal)
	chunks = chunk.Split(doc, in.opts.Chunk)
	if span.IsRecording() {
		span.SetAttributes(telemetry.ChunksKey.Int(len(chunks)))
	}
	span.End()
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
		// Sheets repeat their header row in every chunk's worth of rows.
		ChunkSize: in.opts.Chunk.Size,
		OCR:       in.opts.OCR,
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

// genericFailure is the reason stored when the real one cannot be.
const genericFailure = "processing failed"

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
