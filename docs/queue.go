package docs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Background processing keeps every accepted upload in the database until
// it is ready or failed (file_bytes, migration 005), and workers claim the
// files to process from the database rather than from memory:
//
//   - Reserve takes a slot of the queue before the caller reads an upload's
//     body, so that a full queue is answered before anything is read.
//   - SubmitFile stores the bytes, streamed from the caller's spool file in
//     pieces, and the file row "processing", in one transaction; the upload
//     is accepted only once that has committed.
//   - Workers claim the oldest processing file without a live claim (FOR
//     UPDATE SKIP LOCKED), renew the claim's lease while they work, read the
//     bytes back, and store the outcome only while the claim is still
//     theirs. Files left by a process that stopped, this one or another
//     replica, are claimed again once their lease has expired.
//   - Close interrupts the files still running after its bound and releases
//     their claims, so the next process resumes them.

const (
	// pieceBytes is the size of the pieces an upload is stored and read
	// in: a piece is one row, so neither side holds more of an upload in
	// one message.
	pieceBytes = 256 << 10
	// maxAttempts is how many times a file may be claimed before it fails:
	// a file that keeps stopping its process (out of memory, say) must not
	// be resumed for ever.
	maxAttempts = 3
	// releaseTimeout bounds the statements that give up a claim at
	// shutdown.
	releaseTimeout = 5 * time.Second
)

// Causes of an interrupted file: it is left processing, to be resumed.
var (
	errInterrupted = errors.New("processing interrupted")
	errShutdown    = fmt.Errorf("%w: the ingester is shutting down", errInterrupted)
	errLeaseLost   = fmt.Errorf("%w: the file was deleted or claimed by another process", errInterrupted)
)

// claim is a process's hold on a file being processed: its token is stored
// in files.claimed_by, and its lease in files.claimed_until.
type claim struct {
	token string
	lease time.Duration
}

func newClaim(lease time.Duration) claim {
	return claim{token: uuid.NewString(), lease: lease}
}

// Ticket is a slot of the ingestion queue taken by Reserve for one upload.
// SubmitFile uses it; an upload abandoned before that calls Release.
type Ticket struct {
	in   *Ingester
	used atomic.Bool
}

// Reserve takes a slot of the queue for one upload, before its body is
// read, so that a caller can refuse an upload the queue cannot take without
// reading it. It returns an error wrapping ErrBusy when QueueSize uploads
// are already reserved or waiting for a worker, and ErrClosed after Close.
// The slot is given back by SubmitFile, once a worker starts on the file or
// at once for a duplicate or a refused upload, or by Ticket.Release.
func (in *Ingester) Reserve() (*Ticket, error) {
	in.closeMu.RLock()
	defer in.closeMu.RUnlock()
	if in.closed {
		return nil, fmt.Errorf("docs: reserve: %w", ErrClosed)
	}
	select {
	case in.slots <- struct{}{}:
		return &Ticket{in: in}, nil
	default:
		return nil, fmt.Errorf("docs: reserve: %w (%d uploads waiting)", ErrBusy, cap(in.slots))
	}
}

// Release gives the ticket's slot back. It does nothing once the ticket was
// released or given to SubmitFile, so a caller may defer it.
func (t *Ticket) Release() {
	if t != nil && t.used.CompareAndSwap(false, true) {
		<-t.in.slots
	}
}

// take hands the ticket's slot to SubmitFile; false means it was already
// used.
func (t *Ticket) take(in *Ingester) bool {
	return t != nil && t.in == in && t.used.CompareAndSwap(false, true)
}

// Submit validates a file like Ingest and queues it for the background
// workers as SubmitFile does, taking a slot itself. The same bytes already
// in the conversation are returned at once as a duplicate, even when the
// queue is full. It returns ErrBusy when the queue is full.
func (in *Ingester) Submit(ctx context.Context, conversationID, fileName, mimeType string, data []byte) (File, error) {
	return in.SubmitUpload(ctx, Upload{ConversationID: conversationID, FileName: fileName, MIMEType: mimeType, Data: data})
}

// SubmitUpload is Submit of an Upload, which may name the file's source and
// hold its bytes in a file.
func (in *Ingester) SubmitUpload(ctx context.Context, u Upload) (File, error) {
	if in.isClosed() {
		return File{}, fmt.Errorf("docs: submit: %w", ErrClosed)
	}
	up, err := in.validate(u)
	if err != nil {
		return File{}, err
	}
	f, err := in.st.duplicate(ctx, in.st.pool, up)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return File{}, dbError("docs: submit", err)
	}
	t, err := in.Reserve()
	if err != nil {
		return File{}, fmt.Errorf("docs: submit %s: %w", up.fileName, err)
	}
	t.used.Store(true)
	return in.enqueue(ctx, up)
}

// SubmitFile accepts an upload for background processing under ticket t,
// from Reserve, and returns the file, with status processing, once the
// upload is durable: its bytes, streamed from u.Path (or u.Data) in pieces,
// and its file row are committed in one transaction. From then on the file
// is not lost: if this process stops first, the next Ingester on the
// database, here or on another replica, processes it. Poll GetFile or
// ListFiles for the outcome.
//
// The upload is validated like Ingest's (ErrInvalidArgument, ErrTooLarge,
// ErrUnsupportedType). The same bytes already in the conversation are
// returned with Duplicate set and nothing stored, unless that file failed,
// in which case it is processed again. SubmitFile always takes over t: the
// slot is held until a worker starts on the file, and given back at once
// for a duplicate or an error. A ticket already used or released returns
// an error wrapping ErrInvalidArgument.
func (in *Ingester) SubmitFile(ctx context.Context, t *Ticket, u Upload) (File, error) {
	if !t.take(in) {
		return File{}, fmt.Errorf("docs: submit: %w: the ticket was already used or released, or comes from another ingester", ErrInvalidArgument)
	}
	if in.isClosed() {
		<-in.slots
		return File{}, fmt.Errorf("docs: submit: %w", ErrClosed)
	}
	up, err := in.validate(u)
	if err != nil {
		<-in.slots
		return File{}, err
	}
	return in.enqueue(ctx, up)
}

// enqueue stores a validated upload holding a slot and queues it; the slot
// is given back unless the file is queued.
func (in *Ingester) enqueue(ctx context.Context, up upload) (File, error) {
	queued := false
	defer func() {
		if !queued {
			<-in.slots
		}
	}()
	f, fresh, err := in.st.storeUpload(ctx, up)
	if err != nil || !fresh {
		return f, err
	}
	in.pendingMu.Lock()
	in.pending[f.ID] = true
	in.pendingMu.Unlock()
	queued = true
	select {
	case in.wake <- struct{}{}:
	default:
	}
	return f, nil
}

// storeUpload records an upload as processing together with its bytes, in
// one transaction, and reports fresh when it must be processed; a
// duplicate stores nothing.
func (s *Store) storeUpload(ctx context.Context, up upload) (File, bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return File{}, false, dbError("docs: record upload", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	f, fresh, err := s.claim(ctx, tx, up, nil)
	if err != nil || !fresh {
		return f, false, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM file_bytes WHERE file_id = $1`, f.ID); err != nil {
		return File{}, false, dbError("docs: store upload", err)
	}
	r, done, err := up.open()
	if err != nil {
		return File{}, false, err
	}
	defer done()
	// The digest is taken again as the bytes go out: a spool file changed
	// since validation must not be stored under another file's digest.
	h := sha256.New()
	r = io.TeeReader(r, h)
	buf := make([]byte, pieceBytes)
	var seq int
	var total int64
	var readErr error
	// CopyFrom encodes each row before asking for the next, so one buffer
	// serves every piece.
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"file_bytes"}, []string{"file_id", "seq", "data"},
		pgx.CopyFromFunc(func() ([]any, error) {
			n, err := io.ReadFull(r, buf)
			if n == 0 {
				if !errors.Is(err, io.EOF) {
					readErr = err
					return nil, err
				}
				return nil, nil
			}
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				readErr = err
				return nil, err
			}
			seq++
			total += int64(n)
			return []any{f.ID, seq - 1, buf[:n]}, nil
		}))
	if readErr != nil {
		return File{}, false, fmt.Errorf("docs: read upload %s: %w", up.fileName, readErr)
	}
	if err != nil {
		return File{}, false, dbError("docs: store upload", err)
	}
	if total != up.size || hex.EncodeToString(h.Sum(nil)) != up.sha256 {
		return File{}, false, fmt.Errorf("docs: %w: upload %s changed while it was stored", ErrInvalidArgument, up.fileName)
	}
	if err := tx.Commit(ctx); err != nil {
		return File{}, false, dbError("docs: store upload", err)
	}
	return f, true, nil
}

// work claims and processes files until Close.
func (in *Ingester) work() {
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-in.stop:
			return
		default:
		}
		c := newClaim(in.opts.Lease)
		f, attempts, err := in.st.claimNext(in.workCtx, c)
		if err == nil {
			in.started(f.ID)
			select {
			case <-in.stop:
				// Claimed as Close began: leave it to the next process.
				in.st.releaseClaim(f, c)
				return
			default:
			}
			in.run(f, c, attempts)
			continue
		}
		if !errors.Is(err, pgx.ErrNoRows) && in.workCtx.Err() == nil {
			in.log.Warn("docs: looking for files to process", "error", err)
		}
		in.reconcile()
		poll.Reset(in.opts.PollInterval)
		select {
		case <-in.stop:
			return
		case <-in.wake:
		case <-poll.C:
		}
	}
}

// started gives back the slot of a file submitted here once a worker has
// it.
func (in *Ingester) started(id string) {
	in.pendingMu.Lock()
	defer in.pendingMu.Unlock()
	if in.pending[id] {
		delete(in.pending, id)
		<-in.slots
	}
}

// reconcile gives back the slots of files submitted here that another
// process has started, or that were deleted, while they waited.
func (in *Ingester) reconcile() {
	in.pendingMu.Lock()
	ids := make([]string, 0, len(in.pending))
	for id := range in.pending {
		ids = append(ids, id)
	}
	in.pendingMu.Unlock()
	if len(ids) == 0 {
		return
	}
	rows, err := in.st.pool.Query(in.workCtx, `
		SELECT id::text FROM files
		WHERE id = ANY($1::uuid[]) AND status = 'processing' AND (claimed_until IS NULL OR claimed_until < now())`, ids)
	if err != nil {
		return
	}
	waiting, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	still := make(map[string]bool, len(waiting))
	for _, id := range waiting {
		still[id] = true
	}
	for _, id := range ids {
		if !still[id] {
			in.started(id)
		}
	}
}

// claimNext claims the oldest processing file without a live claim and
// returns it with the number of times it has been claimed, this one
// included; pgx.ErrNoRows when there is none.
func (s *Store) claimNext(ctx context.Context, c claim) (File, int, error) {
	var attempts int
	f, err := scanFile(s.pool.QueryRow(ctx, `
		UPDATE files SET claimed_by = $1, claimed_until = now() + make_interval(secs => $2), attempts = attempts + 1
		WHERE id = (
			SELECT id FROM files
			WHERE status = 'processing' AND (claimed_until IS NULL OR claimed_until < now())
			ORDER BY created_at, id
			LIMIT 1
			FOR UPDATE SKIP LOCKED)
		RETURNING `+fileColumns+`, attempts`, c.token, c.lease.Seconds()), &attempts)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return f, 0, dbError("docs: claim a file", err)
	}
	return f, attempts, err
}

// run processes a claimed file, renewing its lease meanwhile. Interrupted
// by Close, it releases the claim instead of recording an outcome.
func (in *Ingester) run(f File, c claim, attempts int) {
	if attempts > maxAttempts {
		reason := fmt.Sprintf("processing stopped %d times before it finished (the server restarted or ran out of memory); upload the file again, or a smaller one", attempts-1)
		in.st.markFailed(f, c, reason)
		in.counters.done(f, false, 0)
		in.log.Warn("docs: file failed after repeated interruptions", "file_id", f.ID, "file_name", f.FileName, "attempts", attempts-1)
		return
	}
	ctx, cancel := context.WithCancelCause(in.workCtx)
	defer cancel(nil)
	ctx, cancelTimeout := context.WithTimeout(ctx, jobTimeout)
	defer cancelTimeout()
	stop := in.keepLease(ctx, cancel, f.ID, c)
	data, err := in.st.loadBytes(ctx, f)
	if err != nil && context.Cause(ctx) == nil {
		// Without its bytes the file cannot be processed; a database
		// outage is worth another attempt, missing bytes are not.
		if errors.Is(err, ErrUnavailable) {
			stop()
			in.st.releaseClaim(f, c)
			in.log.Warn("docs: cannot read a file's bytes", "file_id", f.ID, "error", err)
			return
		}
		in.st.markFailed(f, c, err.Error())
		in.counters.done(f, false, 0)
		stop()
		return
	}
	if err == nil {
		f, err = in.process(ctx, f, c, data)
	}
	data = nil
	stop()
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errShutdown):
		in.st.releaseClaim(f, c)
		in.log.Info("docs: file interrupted by shutdown, left to resume", "file_id", f.ID, "file_name", f.FileName)
	case errors.Is(cause, errLeaseLost):
		in.log.Warn("docs: file deleted or claimed elsewhere while processed", "file_id", f.ID, "file_name", f.FileName)
	case err != nil:
		in.log.Warn("docs: processing failed", "file_id", f.ID, "file_name", f.FileName, "error", err)
	default:
		in.log.Info("docs: file ready", "file_id", f.ID, "file_name", f.FileName, "chunks", f.ChunkCount)
	}
}

// keepLease renews claim c on file id every third of its lease until the
// returned function is called, which waits for the renewal to stop. When
// the file turns out deleted or claimed by another process, it cancels
// ctx with errLeaseLost.
func (in *Ingester) keepLease(ctx context.Context, cancel context.CancelCauseFunc, id string, c claim) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(c.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			tag, err := in.st.pool.Exec(ctx, `
				UPDATE files SET claimed_until = now() + make_interval(secs => $3)
				WHERE id = $1 AND status = 'processing' AND claimed_by = $2`, id, c.token, c.lease.Seconds())
			switch {
			case err != nil:
				// The next tick tries again; should the lease run out
				// meanwhile, the final write is fenced by the claim.
				if ctx.Err() == nil {
					in.log.Warn("docs: cannot renew a file's lease", "file_id", id, "error", err)
				}
			case tag.RowsAffected() == 0:
				cancel(errLeaseLost)
				return
			}
		}
	}()
	return func() {
		select {
		case <-done:
		default:
			close(done)
		}
		<-ended
	}
}

// loadBytes reads a file's stored bytes.
func (s *Store) loadBytes(ctx context.Context, f File) ([]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT data FROM file_bytes WHERE file_id = $1 ORDER BY seq`, f.ID)
	if err != nil {
		return nil, dbError("docs: read upload", err)
	}
	defer rows.Close()
	data := make([]byte, 0, f.SizeBytes)
	for rows.Next() {
		// RawValues avoids a copy per piece; it is appended at once.
		data = append(data, rows.RawValues()[0]...)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("docs: read upload", err)
	}
	if int64(len(data)) != f.SizeBytes || (f.SizeBytes > 0 && len(data) == 0) {
		return nil, errors.New("the uploaded bytes were not kept (the server stopped while the file was processed); upload the file again")
	}
	return data, nil
}

// releaseClaim gives up claim c on a file, leaving it processing for any
// process to resume; the interrupted attempt is not counted.
func (s *Store) releaseClaim(f File, c claim) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_, err := s.pool.Exec(ctx, `
		UPDATE files SET claimed_by = NULL, claimed_until = NULL, attempts = greatest(attempts - 1, 0)
		WHERE id = $1 AND status = 'processing' AND claimed_by = $2`, f.ID, c.token)
	if err != nil {
		// The lease then expires on its own and the file is resumed later.
		s.log.Warn("docs: cannot release a file's claim", "file_id", f.ID, "error", err)
	}
}

// Close stops the Ingester: Reserve, Submit, SubmitFile and Ingest return
// ErrClosed, and workers claim no new file. It waits up to
// IngestOptions.ShutdownTimeout (default 5 s) for the files being
// processed, then interrupts the rest and releases their claims, which
// takes at most a few seconds more (one statement per file, bounded by
// 5 s). Interrupted and waiting files are not failed: they stay
// processing, with their bytes, and the next Ingester on the database
// resumes them. A synchronous Ingest in progress is not waited for. Close
// does not close the Store's pool. Calls after the first return at once.
func (in *Ingester) Close() {
	in.closeOnce.Do(func() {
		in.closeMu.Lock()
		in.closed = true
		in.closeMu.Unlock()
		close(in.stop)

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
			in.log.Warn("docs: shutdown timeout: interrupting unfinished files, to be resumed", "timeout", in.opts.ShutdownTimeout)
			in.cancelWork(errShutdown)
			<-done
		}
		in.cancelWork(errShutdown)
	})
}
