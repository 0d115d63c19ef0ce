package docs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Background processing keeps every accepted upload in the database until
// it is ready or failed (file_bytes, migration 005), and workers claim the
// files to process from the database rather than from memory:
//
//   - Reserve takes a slot of the queue before the caller reads an upload's
//     body, so that a full queue is answered before anything is read.
//   - SubmitFile stores the bytes, streamed from the caller's spool file in
//     pieces, and the file row "processing", in one transaction; the upload
//     is accepted only once that has committed. The bytes of a small
//     upload are also kept in memory for this process's workers.
//   - Workers claim the oldest processing files without a live claim (FOR
//     UPDATE SKIP LOCKED), several small ones at a time, renew the claim's
//     lease while they work, read the bytes back unless this process kept
//     them, process the files together and store the outcomes through the
//     committer only while the claim is still theirs. Files left by a
//     process that stopped, this one or another replica, are claimed again
//     once their lease has expired: the lease is short (DefaultLease, 10 s)
//     and renewed by a heartbeat, and idle workers look again within a
//     quarter of it while files are held, so such files move again within
//     about 13 s.
//   - A connection lost (the database restarting) does not lose the work:
//     the committer tries the outcomes again until the database is back
//     (outagePatience), and a worker that cannot go on releases its claim
//     as soon as the database answers again, taking the files up again
//     itself, or leaving them to any other worker.
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
	// claimFiles and claimBytes bound what a worker claims at once: small
	// files come in groups, a large one alone.
	claimMaxFiles = groupFiles
	claimBytes    = groupBytes
)

// Causes of an interrupted file: it is left processing, to be resumed.
var (
	errInterrupted = errors.New("processing interrupted")
	errShutdown    = fmt.Errorf("%w: the ingester is shutting down", errInterrupted)
	errLeaseLost   = fmt.Errorf("%w: the file was deleted or claimed by another process", errInterrupted)
)

// pendingUpload is a file submitted here that no worker has taken yet:
// its conversation, and the bytes kept for it (nil when the file was too
// large to keep).
type pendingUpload struct {
	conv string
	kept []byte
}

// claim is a process's hold on files being processed: its token is stored
// in files.claimed_by, and its lease in files.claimed_until.
type claim struct {
	token string
	lease time.Duration
	// conv is the conversation of the files claimed (claimFiles sets
	// it): a claim's statements name it.
	conv string
	// others is set by claimFiles when files were processing, whether or
	// not it could claim them: held by other workers, perhaps of a process
	// that died, whose leases are about to expire.
	others bool
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
	if t.take(t.in) {
		t.in.freeSlot()
	}
}

// take hands the ticket's slot over; false means it was already used or
// released, or is another Ingester's.
func (t *Ticket) take(in *Ingester) bool {
	return t != nil && t.in == in && t.used.CompareAndSwap(false, true)
}

// freeSlot gives back the slot of a ticket taken.
func (in *Ingester) freeSlot() { <-in.slots }

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
	up, err := in.validate(u, false)
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
	t.take(in)
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
		in.freeSlot()
		return File{}, fmt.Errorf("docs: submit: %w", ErrClosed)
	}
	up, err := in.validate(u, false)
	if err != nil {
		in.freeSlot()
		return File{}, err
	}
	return in.enqueue(ctx, up)
}

// SubmitFiles is SubmitFile for the files of one request, stored together
// in one transaction: one durable write for all of them. Ticket t, from
// Reserve, holds the first upload's slot; every other upload takes its own
// and, when the queue has none left, is refused with an error wrapping
// ErrBusy, unless its bytes are already in the conversation. It returns one
// file and one error per upload, in order. SubmitFiles always takes over t.
func (in *Ingester) SubmitFiles(ctx context.Context, t *Ticket, us []Upload) ([]File, []error) {
	files := make([]File, len(us))
	errs := make([]error, len(us))
	if !t.take(in) {
		for i := range errs {
			errs[i] = fmt.Errorf("docs: submit: %w: the ticket was already used or released, or comes from another ingester", ErrInvalidArgument)
		}
		return files, errs
	}
	slots := 1
	defer func() {
		for range slots {
			in.freeSlot()
		}
	}()
	if in.isClosed() {
		for i := range errs {
			errs[i] = fmt.Errorf("docs: submit: %w", ErrClosed)
		}
		return files, errs
	}
	var ups []upload
	var at []int
	for i, u := range us {
		up, err := in.validate(u, false)
		if err != nil {
			errs[i] = err
			continue
		}
		ups, at = append(ups, up), append(at, i)
	}
	if len(ups) == 0 {
		return files, errs
	}
	dups, err := in.st.duplicates(ctx, ups)
	if err != nil {
		for _, i := range at {
			errs[i] = err
		}
		return files, errs
	}
	// The files to store, each with a slot but a second copy of the same
	// bytes, which storeUploads answers as a duplicate.
	var todo []upload
	var todoAt []int
	seen := map[string]bool{}
	for k, up := range ups {
		i := at[k]
		key := up.conversationID + "\x00" + up.sha256
		if f, ok := dups[key]; ok {
			files[i] = f
			continue
		}
		if seen[key] {
			todo, todoAt = append(todo, up), append(todoAt, i)
			continue
		}
		if len(seen) >= slots {
			if _, err := in.Reserve(); err != nil {
				errs[i] = fmt.Errorf("docs: submit %s: %w", up.fileName, err)
				continue
			}
			slots++
		}
		seen[key] = true
		todo, todoAt = append(todo, up), append(todoAt, i)
	}
	if len(todo) == 0 {
		return files, errs
	}
	stored, err := in.st.storeUploads(ctx, todo)
	if err != nil {
		for _, i := range todoAt {
			errs[i] = err
		}
		return files, errs
	}
	in.pendingMu.Lock()
	for k, st := range stored {
		files[todoAt[k]] = st.file
		if st.fresh {
			in.pending[st.file.ID] = pendingUpload{conv: st.file.ConversationID, kept: st.kept}
			slots--
		}
	}
	in.pendingMu.Unlock()
	in.wakeWorker()
	return files, errs
}

// enqueueBatch is how many files Enqueue stores per transaction.
const enqueueBatch = 32

// Enqueue stores uploads for the background workers as SubmitFiles does,
// but takes no slot of the queue and keeps no bytes in memory: it is for
// the files of a job (an archive's entries, a fetched page), whose bytes
// wait in the database until a worker, on any replica, claims them.
// Uploads are stored enqueueBatch to a transaction. It returns one file
// and one error per upload, in order; a file whose bytes the conversation
// holds is returned with Duplicate set.
func (in *Ingester) Enqueue(ctx context.Context, us []Upload) ([]File, []error) {
	files := make([]File, len(us))
	errs := make([]error, len(us))
	if in.isClosed() {
		for i := range errs {
			errs[i] = fmt.Errorf("docs: enqueue: %w", ErrClosed)
		}
		return files, errs
	}
	var ups []upload
	var at []int
	for i, u := range us {
		up, err := in.validate(u, false)
		if err != nil {
			errs[i] = err
			continue
		}
		ups, at = append(ups, up), append(at, i)
	}
	for start := 0; start < len(ups); start += enqueueBatch {
		end := min(start+enqueueBatch, len(ups))
		stored, err := in.st.storeUploads(ctx, ups[start:end])
		for k := start; k < end; k++ {
			i := at[k]
			if err != nil {
				errs[i] = err
				continue
			}
			files[i] = stored[k-start].file
		}
	}
	in.wakeWorker()
	return files, errs
}

// enqueue stores a validated upload holding a slot and queues it; the slot
// is given back unless the file is queued.
func (in *Ingester) enqueue(ctx context.Context, up upload) (File, error) {
	stored, err := in.st.storeUploads(ctx, []upload{up})
	if err != nil || !stored[0].fresh {
		in.freeSlot()
		return stored0(stored).file, err
	}
	in.pendingMu.Lock()
	in.pending[stored[0].file.ID] = pendingUpload{conv: stored[0].file.ConversationID, kept: stored[0].kept}
	in.pendingMu.Unlock()
	in.wakeWorker()
	return stored[0].file, nil
}

func stored0(s []storedUpload) storedUpload {
	if len(s) == 0 {
		return storedUpload{}
	}
	return s[0]
}

// wakeWorker tells an idle worker that files were submitted.
func (in *Ingester) wakeWorker() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
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
		files, attempts, err := in.st.claimFiles(in.workCtx, &c, claimMaxFiles, claimBytes)
		if err == nil && len(files) > 0 {
			kept := in.started(files)
			select {
			case <-in.stop:
				// Claimed as Close began: leave them to the next process.
				in.st.releaseClaim(c, nil)
				return
			default:
			}
			in.run(files, attempts, kept, c)
			continue
		}
		if err != nil && in.workCtx.Err() == nil {
			in.log.Warn("docs: looking for files to process", "error", err)
		}
		in.reconcile()
		poll.Reset(in.pollAfter(c))
		select {
		case <-in.stop:
			return
		case <-in.wake:
		case <-poll.C:
		}
	}
}

// pollAfter is how long an idle worker waits before it looks for files
// again after claim c found none it could take: PollInterval, or a quarter
// of the lease while other workers hold files, so that the files of a
// process that died move again within the lease and a quarter of it.
func (in *Ingester) pollAfter(c claim) time.Duration {
	if c.others {
		return min(in.opts.PollInterval, in.opts.Lease/4)
	}
	return in.opts.PollInterval
}

// started gives back the slots of the files submitted here that a worker
// now has, and returns the bytes kept for them.
func (in *Ingester) started(files []File) map[string][]byte {
	in.pendingMu.Lock()
	defer in.pendingMu.Unlock()
	kept := map[string][]byte{}
	for _, f := range files {
		if p, ok := in.pending[f.ID]; ok {
			delete(in.pending, f.ID)
			in.freeSlot()
			if p.kept != nil {
				kept[f.ID] = p.kept
			}
		}
	}
	return kept
}

// reconcile gives back the slots of files submitted here that another
// process has started, or that were deleted, while they waited.
func (in *Ingester) reconcile() {
	in.pendingMu.Lock()
	ids := make([]string, 0, len(in.pending))
	convs := make([]string, 0, len(in.pending))
	for id, p := range in.pending {
		ids, convs = append(ids, id), append(convs, p.conv)
	}
	in.pendingMu.Unlock()
	if len(ids) == 0 {
		return
	}
	still := make(map[string]bool, len(ids))
	for c, ids := range byConversation(convs, ids) {
		rows, err := in.st.pool.Query(in.workCtx, `
			SELECT id::text FROM files
			WHERE conversation_id = $2 AND id = ANY($1::uuid[]) AND status = 'processing'
			  AND (claimed_until IS NULL OR claimed_until < now())`, ids, c)
		if err != nil {
			return
		}
		waiting, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return
		}
		for _, id := range waiting {
			still[id] = true
		}
	}
	var gone []File
	for _, id := range ids {
		if !still[id] {
			gone = append(gone, File{ID: id})
		}
	}
	in.started(gone)
}

// run processes files held under claim c, renewing its lease meanwhile,
// and waits until their outcomes are stored. Interrupted by Close, it
// releases the claim on the files it could not finish instead.
func (in *Ingester) run(files []File, attempts []int, kept map[string][]byte, c claim) {
	in.counters.working.Add(int64(len(files)))
	defer in.counters.working.Add(-int64(len(files)))
	ctx, cancel := context.WithCancelCause(in.workCtx)
	defer cancel(nil)
	ctx, cancelTimeout := context.WithTimeout(ctx, jobTimeout)
	defer cancelTimeout()
	stop := in.keepLease(ctx, cancel, c, len(files))
	defer stop()
	// After keepLease, whose renewals are not the files' work.
	ctx, span := telemetry.StartRoot(ctx, in.opts.Tracer, "ingest", trace.SpanKindInternal)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(telemetry.FilesKey.Int(len(files)))
	}

	items := make([]*commitItem, 0, len(files))
	var datas [][]byte
	var missing []string
	for i, f := range files {
		it := &commitItem{f: f, c: c}
		if attempts[i] > maxAttempts {
			it.failed = true
			it.reason = fmt.Sprintf("processing stopped %d times before it finished (the server restarted or ran out of memory); upload the file again, or a smaller one", attempts[i]-1)
			in.log.Warn("docs: file failed after repeated interruptions", "file_id", f.ID, "file_name", f.FileName, "attempts", attempts[i]-1)
			in.settle(it)
			continue
		}
		if _, ok := kept[f.ID]; !ok {
			missing = append(missing, f.ID)
		}
		items = append(items, it)
	}
	loaded, err := in.st.loadBytes(ctx, files, missing)
	if err != nil && context.Cause(ctx) == nil {
		// A database outage is worth another attempt: the files are
		// left to the next claim.
		in.log.Warn("docs: cannot read the bytes of files", "files", len(missing), "error", err)
		stop()
		in.st.releaseClaim(c, nil)
		return
	}
	var todo []*commitItem
	for _, it := range items {
		data, ok := kept[it.f.ID]
		if !ok {
			data, ok = loaded[it.f.ID]
		}
		if !ok {
			it.failed = true
			it.reason = "the uploaded bytes were not kept (the server stopped while the file was processed); upload the file again"
			in.settle(it)
			continue
		}
		todo = append(todo, it)
		datas = append(datas, data)
	}
	// From here datas alone holds the bytes, so that each file's are
	// freed once it is extracted.
	kept, loaded = nil, nil
	start := time.Now()
	in.process(ctx, todo, datas)
	datas = nil
	if context.Cause(ctx) != nil && errors.Is(context.Cause(ctx), errInterrupted) {
		stop()
		if errors.Is(context.Cause(ctx), errShutdown) {
			in.st.releaseClaim(c, nil)
			in.log.Info("docs: files interrupted by shutdown, left to resume", "files", len(todo))
		} else {
			in.log.Warn("docs: files deleted or claimed elsewhere while processed", "files", len(todo))
		}
		return
	}
	// Handed to the committer together, so that they share transactions.
	var settled sync.WaitGroup
	for _, it := range todo {
		settled.Add(1)
		err := in.commits.submit(it, func(it *commitItem) {
			defer settled.Done()
			in.settled(it, start)
			in.logOutcome(it)
		})
		if err != nil {
			// Closed meanwhile: the claim is released below.
			settled.Done()
		}
	}
	settled.Wait()
	stop()
	// Whatever the claim still holds (a commit refused at shutdown) is
	// left for the next process.
	in.st.releaseClaim(c, nil)
}

// settle stores a failure found before processing, through the committer.
func (in *Ingester) settle(it *commitItem) {
	if err := in.commits.commit(it); err == nil {
		in.counters.done(it.f, false, 0)
	}
}

func (in *Ingester) logOutcome(it *commitItem) {
	switch {
	case errors.Is(it.err, ErrNotFound):
		in.log.Warn("docs: file deleted or claimed elsewhere while processed", "file_id", it.f.ID, "file_name", it.f.FileName)
	case it.err != nil:
		in.log.Warn("docs: cannot store a processed file", "file_id", it.f.ID, "file_name", it.f.FileName, "error", it.err)
	case it.failed:
		in.log.Warn("docs: processing failed", "file_id", it.f.ID, "file_name", it.f.FileName, "error", it.reason)
	default:
		in.log.Info("docs: file ready", "file_id", it.f.ID, "file_name", it.f.FileName, "chunks", it.out.ChunkCount)
	}
}

// keepLease renews claim c every third of its lease until the returned
// function is called, which waits for the renewal to stop. Between
// renewals it looks, every IngestOptions.HeldCheck, whether the claim
// still holds its files (a read, not a write): when it holds none of them
// any more (deleted, as a cancelled job's are, or claimed by another
// process), it cancels ctx with errLeaseLost, so that the work stops within
// that interval rather than at the next renewal.
func (in *Ingester) keepLease(ctx context.Context, cancel context.CancelCauseFunc, c claim, files int) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		renew := time.NewTicker(c.lease / 3)
		defer renew.Stop()
		check := time.NewTicker(in.opts.HeldCheck)
		defer check.Stop()
		for {
			var held int
			var err error
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-renew.C:
				held, err = in.st.renewClaim(ctx, c)
			case <-check.C:
				held, err = in.st.heldFiles(ctx, c)
			}
			switch {
			case err != nil:
				// The next tick tries again; should the lease run out
				// meanwhile, the final write is fenced by the claim.
				if ctx.Err() == nil {
					in.log.Warn("docs: cannot renew a claim", "files", files, "error", err)
				}
			case held == 0:
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

// loadBytes reads the stored bytes of the files ids, among files, in one
// statement, and returns those whose bytes are all there.
func (s *Store) loadBytes(ctx context.Context, files []File, ids []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(ids) == 0 {
		return out, nil
	}
	size := map[string]int64{}
	for _, f := range files {
		size[f.ID] = f.SizeBytes
	}
	// The files a worker claims are of one conversation.
	rows, err := s.pool.Query(ctx, `
		SELECT file_id::text, data FROM file_bytes
		WHERE conversation_id = $2 AND file_id = ANY($1::uuid[]) ORDER BY file_id, seq`,
		pgx.QueryResultFormats{pgx.TextFormatCode, pgx.BinaryFormatCode}, ids, files[0].ConversationID)
	if err != nil {
		return nil, dbError("docs: read uploads", err)
	}
	defer rows.Close()
	var id string
	for rows.Next() {
		if err := rows.Scan(&id, nil); err != nil {
			return nil, dbError("docs: read uploads", err)
		}
		data, ok := out[id]
		if !ok {
			data = make([]byte, 0, size[id])
		}
		// RawValues avoids a copy per piece; it is appended at once.
		out[id] = append(data, rows.RawValues()[1]...)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("docs: read uploads", err)
	}
	for id, data := range out {
		if int64(len(data)) != size[id] {
			delete(out, id)
		}
	}
	// An empty upload has no piece.
	for _, id := range ids {
		if _, ok := out[id]; !ok && size[id] == 0 {
			out[id] = []byte{}
		}
	}
	return out, nil
}

// Close stops the Ingester: Reserve, Submit, SubmitFile, Ingest and
// IngestAll return ErrClosed, and workers claim no new file. It waits up to
// IngestOptions.ShutdownTimeout (default 5 s) for the files being
// processed, then interrupts the rest and releases their claims, which
// takes at most a few seconds more (bounded by 5 s). Interrupted and
// waiting files are not failed: they stay processing, with their bytes,
// and the next Ingester on the database resumes them. Files already
// processed are stored before Close returns. Close does not close the
// Store's pool. Calls after the first return at once.
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
		in.commits.close()
	})
}
