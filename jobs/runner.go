package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/pg"
	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Fetcher downloads what a URL job stores (fetch.Client), with fetch_url's
// address rules.
type Fetcher interface {
	Download(ctx context.Context, rawURL string) (*fetch.Resource, error)
}

// Options tune a Runner. The zero value is usable.
type Options struct {
	// Workers is how many jobs' first parts (fetches, unpacking) run at
	// once; zero means 2, a negative value none (a CLI run, which runs
	// its own job and leaves the others to the servers).
	Workers int
	// Lease is how long a process's hold on a job lasts without renewal;
	// it renews it every third of that. A job held by a process that
	// stopped is taken over once its lease expires. Zero means
	// DefaultLease.
	Lease time.Duration
	// Check is how often a process running a job looks whether it was
	// cancelled; zero means a second.
	Check time.Duration
	// Poll is how often idle workers look for jobs to take over; zero
	// means 5 s. Jobs added here wake a worker at once.
	Poll time.Duration
	// FetchTimeout bounds the download of a URL job; zero means a minute.
	FetchTimeout time.Duration
	// Fetch downloads URL jobs; nil refuses them.
	Fetch Fetcher
	// Unpack, when set, turns an archive (a .zip or .tar.gz of documents)
	// into its files; nil stores archives as single files.
	Unpack Unpacker
	// Kinds run the jobs of kinds registered by other packages (a crawl,
	// a sync): a worker that takes such a job calls its function under the
	// job's lease, then submits the job when it returns nil; an error
	// fails the job with its text.
	Kinds  map[string]KindFunc
	Logger *slog.Logger
	// Tracer traces the jobs a worker takes up, each a trace of its own
	// linked to the call that started it; nil traces none.
	Tracer trace.TracerProvider
}

// KindFunc runs a job of a registered kind: ctx ends when the job is
// cancelled or deleted, or the process stops. It stores the job's files
// with Runner.StoreFiles and reports its progress with Store.SetReport.
type KindFunc func(ctx context.Context, r *Runner, j Job) error

// DefaultLease is Options.Lease's default: a job whose process stopped is
// resumed, or failed, within it and a third of it (Options.Poll), since
// the process holding a job renews its lease every third of it (a
// heartbeat).
const DefaultLease = 10 * time.Second

// maxAttempts is how many times a job's first part may be taken up before
// the job fails.
const maxAttempts = 3

// Runner adds jobs and runs the part of them that precedes their files, on
// whichever replica takes them: the download of a URL job, and of any job
// whose process stopped. Close stops it.
type Runner struct {
	st   *Store
	in   *docs.Ingester
	opts Options
	log  *slog.Logger

	// watch wakes the callers waiting for jobs (Watch).
	watch   *watcher
	wake    chan struct{}
	stop    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	workers sync.WaitGroup
	once    sync.Once
}

// NewRunner starts a Runner adding files through in.
func NewRunner(st *Store, in *docs.Ingester, opts Options) *Runner {
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Check <= 0 {
		opts.Check = time.Second
	}
	if opts.Poll <= 0 {
		// A job whose process stopped is taken over within its lease and
		// a third of it.
		opts.Poll = min(5*time.Second, opts.Lease/3)
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runner{st: st, in: in, opts: opts, log: opts.Logger, wake: make(chan struct{}, max(opts.Workers, 1)), stop: make(chan struct{}),
		watch: newWatcher(st.docs, opts.Logger)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for range opts.Workers {
		r.workers.Go(r.work)
	}
	return r
}

// Store returns the jobs store.
func (r *Runner) Store() *Store { return r.st }

// Lease returns how long a job whose process stopped waits before another
// takes it over.
func (r *Runner) Lease() time.Duration { return r.opts.Lease }

// Close stops taking jobs and interrupts those running: they are left to
// the next process, which takes them over when their lease expires.
func (r *Runner) Close() {
	r.once.Do(func() {
		close(r.stop)
		r.cancel()
		r.workers.Wait()
		r.watch.close()
	})
}

// Watch returns a channel that receives a value whenever job id may have
// moved: some of its files stored as ready or failed, or the job
// submitted, failed or cancelled, by this process or by another on the
// database. Values coalesce, and one may come with nothing changed (the
// connection that receives other processes' news was lost meanwhile): the
// caller reads the job (Get) to know where it stands, and calls stop when
// it no longer waits. A job that moved before Watch is not announced: the
// caller reads it once after Watch.
func (r *Runner) Watch(id string) (changed <-chan struct{}, stop func()) { return r.watch.watch(id) }

// AddURL records a job storing the document at url in conversation conv,
// and returns it queued: a worker of this process, or of another replica,
// downloads it.
func (r *Runner) AddURL(ctx context.Context, conv, url, caller string) (Job, error) {
	if r.opts.Fetch == nil {
		return Job{}, fmt.Errorf("jobs: %w: this server does not fetch URLs", docs.ErrInvalidArgument)
	}
	return r.enqueue(ctx, conv, KindURL, Input{URL: url}, caller)
}

// enqueue records a job queued for a worker, and wakes one.
func (r *Runner) enqueue(ctx context.Context, conv, kind string, in Input, caller string) (Job, error) {
	j, err := r.st.Create(ctx, conv, kind, in, caller)
	if err != nil {
		return Job{}, err
	}
	r.wakeWorker()
	return j, nil
}

// wakeWorker tells an idle worker that a job waits.
func (r *Runner) wakeWorker() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// AddFiles records a job of kind kind storing ups in conversation conv
// (an archive among them is unpacked into its files), stores them for the
// documents queue, and returns the job with what became of each upload:
// its file, or why it was refused. With ticket t (docs.Ingester.Reserve)
// the files take slots of the queue as an upload does (SubmitFiles), and
// one the queue cannot take is refused as busy; without, they wait in the
// database for a worker (Enqueue). The job holds a lease while the files
// are stored, so that a process stopping meanwhile leaves it failed, not
// running.
func (r *Runner) AddFiles(ctx context.Context, conv, kind string, in Input, caller string, ups []docs.Upload, t *docs.Ticket) (Job, []docs.File, []error, error) {
	token := uuid.NewString()
	j, err := r.st.CreateHeld(ctx, conv, kind, in, caller, token, r.opts.Lease)
	if err != nil {
		if t != nil {
			t.Release()
		}
		return Job{}, nil, nil, err
	}
	hctx, release := r.st.hold(ctx, j, token, r.opts)
	defer release()
	submit := r.in.Enqueue
	if t != nil {
		submit = func(ctx context.Context, ups []docs.Upload) ([]docs.File, []error) {
			return r.in.SubmitFiles(ctx, t, ups)
		}
	}
	files, errs, out := r.store(hctx, j, ups, submit)
	if err := context.Cause(hctx); err != nil && ctx.Err() == nil {
		// Cancelled while its files were stored: what was stored is
		// removed by the cancel, or by this.
		_, _ = r.st.docs.DeleteJobFiles(context.WithoutCancel(ctx), j.ConversationID, j.ID)
		j, gerr := r.st.Get(context.WithoutCancel(ctx), j.ID)
		if gerr != nil {
			return j, files, errs, gerr
		}
		return j, files, errs, nil
	}
	if err := r.st.Submit(ctx, j, out); err != nil {
		return j, files, errs, err
	}
	j, err = r.st.Get(ctx, j.ID)
	return j, files, errs, err
}

// store stores ups as files of job j, unpacking archives, and returns each
// upload's file or refusal, with the job's outcome.
func (r *Runner) store(ctx context.Context, j Job, ups []docs.Upload, submit func(context.Context, []docs.Upload) ([]docs.File, []error)) ([]docs.File, []error, Outcome) {
	var out Outcome
	files := make([]docs.File, len(ups))
	errs := make([]error, len(ups))
	var plain []docs.Upload
	var at []int
	for i, u := range ups {
		u.ConversationID, u.JobID = j.ConversationID, j.ID
		if r.opts.Unpack != nil {
			un, ok, err := r.opts.Unpack.Unpack(ctx, u)
			if ok {
				files[i], errs[i] = r.storeArchive(ctx, j, u, un, err, &out)
				un.Close()
				continue
			}
		}
		plain, at = append(plain, u), append(at, i)
	}
	if len(plain) == 0 {
		// The ticket's slot is not needed.
		submit(ctx, nil)
		return files, errs, out
	}
	fs, es := submit(ctx, plain)
	for k, i := range at {
		files[i], errs[i] = fs[k], es[k]
		out.count(plain[k].FileName, fs[k], es[k])
	}
	return files, errs, out
}

// storeArchive stores the entries of archive u, in batches so that the
// job's progress shows them as they come.
func (r *Runner) storeArchive(ctx context.Context, j Job, u docs.Upload, un Unpacked, unpackErr error, out *Outcome) (docs.File, error) {
	if unpackErr != nil {
		out.Refusals = append(out.Refusals, Refusal{FileName: u.FileName, Reason: unpackErr.Error()})
		return docs.File{FileName: u.FileName}, unpackErr
	}
	out.Refusals = append(out.Refusals, un.Refusals...)
	entries := un.Entries
	for start := 0; start < len(entries); start += 64 {
		if ctx.Err() != nil {
			return docs.File{FileName: u.FileName}, context.Cause(ctx)
		}
		batch := entries[start:min(start+64, len(entries))]
		for i := range batch {
			batch[i].ConversationID, batch[i].JobID = j.ConversationID, j.ID
		}
		fs, es := r.in.Enqueue(ctx, batch)
		var part Outcome
		for k := range batch {
			part.count(batch[k].FileName, fs[k], es[k])
		}
		if err := r.st.Add(ctx, j, part); err != nil {
			return docs.File{FileName: u.FileName}, err
		}
	}
	// The archive itself is not a file of the conversation: its entries
	// are.
	return docs.File{FileName: u.FileName, Status: "unpacked"}, nil
}

// count adds the outcome of one upload.
func (o *Outcome) count(name string, f docs.File, err error) {
	switch {
	case err != nil:
		o.Refusals = append(o.Refusals, Refusal{FileName: name, Reason: reason(err)})
	case f.Duplicate:
		o.Duplicates++
	}
}

// reason is an error's words for a job's refusals: its last part, without
// the packages that wrapped it.
func reason(err error) string {
	var re interface{ Reason() string }
	if errors.As(err, &re) {
		return re.Reason()
	}
	return err.Error()
}

// work takes up jobs waiting for a process until Close.
func (r *Runner) work() {
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		j, token, ok, err := r.st.takeOne(r.ctx, r.opts.Lease)
		if err != nil && r.ctx.Err() == nil {
			r.log.Warn("jobs: looking for jobs to run", "error", err)
		}
		if ok {
			r.run(j, token)
			continue
		}
		poll.Reset(r.opts.Poll)
		select {
		case <-r.stop:
			return
		case <-r.wake:
		case <-poll.C:
		}
	}
}

// run runs the first part of job j, held under token.
func (r *Runner) run(j Job, token string) {
	ctx, release := r.st.hold(r.ctx, j, token, r.opts)
	defer release()
	// After hold, whose checks of the lease are not the job's work.
	ctx, span := r.startSpan(ctx, j)
	var err error
	defer func() {
		if err != nil {
			telemetry.Fail(span, "job_failed")
		}
		span.End()
	}()
	switch {
	case j.Attempts > maxAttempts:
		err = fmt.Errorf("stopped %d times before it finished (the server restarted or ran out of memory)", j.Attempts-1)
	case j.Kind == KindURL:
		err = r.runURL(ctx, j)
	case r.opts.Kinds[j.Kind] != nil:
		if err = r.opts.Kinds[j.Kind](ctx, r, j); err == nil {
			err = r.st.Submit(ctx, j, Outcome{})
		}
	default:
		// The process storing its files stopped: what it stored is kept
		// and processed, but the job cannot know what it did not store.
		err = errors.New("the process storing its files stopped before it had stored them all; the files it stored are kept, send the rest again (what is already stored is recognised)")
	}
	if err == nil || r.ctx.Err() != nil {
		return
	}
	if c := context.Cause(ctx); c != nil && (errors.Is(c, ErrCancelled) || errors.Is(c, ErrNotFound)) {
		return
	}
	if errors.Is(err, docs.ErrUnavailable) {
		// The database went away (a restart): not the job's fault. It is
		// given back as soon as the database answers, to be taken up
		// again at once, here or by another replica.
		r.log.Info("jobs: database unavailable; the job is given back, to be resumed", "job_id", j.ID, "kind", j.Kind, "error", err)
		if gerr := r.st.giveBack(j, token, r.opts.Lease); gerr != nil {
			r.log.Warn("jobs: cannot give a job back; it is resumed once its lease expires", "job_id", j.ID, "error", gerr)
		}
		r.wakeWorker()
		return
	}
	r.log.Info("jobs: job failed", "job_id", j.ID, "kind", j.Kind, "error", err)
	if ferr := r.st.Fail(context.WithoutCancel(ctx), j, err.Error()); ferr != nil {
		r.log.Warn("jobs: cannot record a failed job", "job_id", j.ID, "error", ferr)
	}
}

// startSpan starts the trace of job j, linked to the call that started it.
func (r *Runner) startSpan(ctx context.Context, j Job) (context.Context, trace.Span) {
	if r.opts.Tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	var links []trace.Link
	var parent string
	err := r.st.pool.QueryRow(ctx, `SELECT coalesce(input->>'traceparent', '') FROM jobs WHERE conversation_id = $1 AND id = $2`,
		j.ConversationID, j.ID).Scan(&parent)
	if l, ok := telemetry.LinkTo(parent); ok && err == nil {
		links = append(links, l)
	}
	ctx, span := telemetry.StartRoot(ctx, r.opts.Tracer, "job "+j.Kind, trace.SpanKindInternal, links...)
	span.SetAttributes(telemetry.JobIDKey.String(j.ID), telemetry.JobKindKey.String(j.Kind))
	return ctx, span
}

// StoreFiles stores ups as files of job j, for the documents queue, and
// records what was refused or already there in the job; it returns each
// upload's file or why it was refused. For the functions of Options.Kinds.
func (r *Runner) StoreFiles(ctx context.Context, j Job, ups []docs.Upload) ([]docs.File, []error, error) {
	files, errs, out := r.store(ctx, j, ups, r.in.Enqueue)
	if err := r.st.Add(ctx, j, out); err != nil {
		return files, errs, err
	}
	return files, errs, nil
}

// AddKind records a job of a registered kind (Options.Kinds) in
// conversation conv, queued, and wakes a worker to run it.
func (r *Runner) AddKind(ctx context.Context, conv, kind string, in Input, caller string) (Job, error) {
	if r.opts.Kinds[kind] == nil {
		return Job{}, fmt.Errorf("jobs: %w: no runner for jobs of kind %s", docs.ErrInvalidArgument, kind)
	}
	return r.enqueue(ctx, conv, kind, in, caller)
}

// Ingester returns the documents ingester jobs store files through.
func (r *Runner) Ingester() *docs.Ingester { return r.in }

// runURL downloads a URL job's document and stores it.
func (r *Runner) runURL(ctx context.Context, j Job) error {
	fctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
	res, err := r.opts.Fetch.Download(fctx, j.Input.URL)
	cancel()
	if err != nil {
		if c := context.Cause(ctx); c != nil {
			return c
		}
		return err
	}
	up := docs.Upload{FileName: res.FileName(), MIMEType: res.ContentType, Source: res.URL, Data: res.Body}
	files, errs, out := r.store(ctx, j, []docs.Upload{up}, r.in.Enqueue)
	if c := context.Cause(ctx); c != nil {
		return c
	}
	if errs[0] != nil && (len(out.Refusals) == 0 || errors.Is(errs[0], docs.ErrUnavailable)) {
		// A database away is no refusal of the page: the job is taken
		// up again once it is back (run).
		return errs[0]
	}
	_ = files
	return r.st.Submit(ctx, j, out)
}

// takeOne claims a job waiting for a process, if any: a URL job not yet
// fetched, or a job whose process stopped (its lease expired). The jobs
// waiting are found with one statement that asks every node of a
// distributed database (a partial index keeps it to such jobs); the claim
// names the job's conversation.
func (s *Store) takeOne(ctx context.Context, lease time.Duration) (Job, string, bool, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT conversation_id, id::text FROM jobs
		WHERE NOT submitted AND status IN ('queued', 'running') AND (claimed_until IS NULL OR claimed_until < now())
		ORDER BY created_at LIMIT 8`)
	if err != nil {
		return Job{}, "", false, dbError("jobs: look for jobs", err)
	}
	type ref struct{ conv, id string }
	refs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ref, error) {
		var x ref
		return x, r.Scan(&x.conv, &x.id)
	})
	if err != nil {
		return Job{}, "", false, dbError("jobs: look for jobs", err)
	}
	for _, x := range refs {
		j := Job{ConversationID: x.conv, ID: x.id}
		token := uuid.NewString()
		err := s.claim(ctx, &j, token, lease)
		if err == nil {
			return j, token, true, nil
		}
		if !errors.Is(err, errTaken) {
			return Job{}, "", false, err
		}
	}
	return Job{}, "", false, nil
}

// errTaken reports a job another process holds.
var errTaken = errors.New("held by another process")

// claim takes job j under token for lease, if no live claim holds it, and
// reads it back into j.
func (s *Store) claim(ctx context.Context, j *Job, token string, lease time.Duration) error {
	got, err := scanJob(s.pool.QueryRow(ctx, `
		UPDATE jobs j SET claimed_by = $3, claimed_until = now() + make_interval(secs => $4), attempts = j.attempts + 1,
		       status = 'running', started_at = least(j.started_at, now())
		WHERE j.conversation_id = $1 AND j.id = $2 AND NOT j.submitted AND j.status IN ('queued', 'running')
		  AND (j.claimed_until IS NULL OR j.claimed_until < now())
		RETURNING `+jobColumns, j.ConversationID, j.ID, token, lease.Seconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		return errTaken
	}
	if err != nil {
		return dbError("jobs: claim", err)
	}
	*j = got
	return nil
}

// Hold keeps the lease of job j, held under token (CreateHeld), renewing
// it every third of lease, until release is called, which also gives the
// lease up. The context it returns ends, with ErrCancelled or ErrNotFound
// as its cause, when the job is cancelled or deleted, or another process
// took it over: it looks every check.
func (s *Store) Hold(parent context.Context, j Job, token string, lease, check time.Duration) (context.Context, func()) {
	return s.hold(parent, j, token, Options{Lease: lease, Check: check})
}

func (s *Store) hold(parent context.Context, j Job, token string, opts Options) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		renew := time.NewTicker(opts.Lease / 3)
		defer renew.Stop()
		check := time.NewTicker(opts.Check)
		defer check.Stop()
		for {
			var stmt string
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-renew.C:
				stmt = `UPDATE jobs SET claimed_until = now() + make_interval(secs => $4)
					WHERE conversation_id = $1 AND id = $2 AND claimed_by = $3 RETURNING status`
			case <-check.C:
				stmt = `SELECT status FROM jobs WHERE conversation_id = $1 AND id = $2 AND (claimed_by = $3 OR submitted) AND $4::float8 IS NOT NULL`
			}
			var status string
			err := s.pool.QueryRow(ctx, stmt, j.ConversationID, j.ID, token, opts.Lease.Seconds()).Scan(&status)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				cancel(fmt.Errorf("jobs: job %s was deleted or taken over: %w", j.ID, ErrNotFound))
				return
			case err != nil:
				// The next tick tries again.
			case status == Cancelled:
				cancel(fmt.Errorf("jobs: job %s: %w", j.ID, ErrCancelled))
				return
			}
		}
	}()
	return ctx, func() {
		select {
		case <-done:
		default:
			close(done)
		}
		<-ended
		cancel(nil)
		_ = untilAnswered(releaseTimeout, func(ctx context.Context) error {
			_, err := s.pool.Exec(ctx, `UPDATE jobs SET claimed_by = NULL, claimed_until = NULL
				WHERE conversation_id = $1 AND id = $2 AND claimed_by = $3`, j.ConversationID, j.ID, token)
			return err
		})
	}
}

// releaseTimeout bounds the release of a job's lease.
const releaseTimeout = 5 * time.Second

// giveBack gives up job j, held under token, after an outage of the
// database, so that any process takes it up again at once; the attempt
// interrupted is not counted. It tries until the database answers, for up
// to lease: by then the lease has expired anyway.
func (s *Store) giveBack(j Job, token string, lease time.Duration) error {
	return untilAnswered(lease, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `
			UPDATE jobs SET claimed_by = NULL, claimed_until = NULL, attempts = greatest(attempts - 1, 0)
			WHERE conversation_id = $1 AND id = $2 AND claimed_by = $3`, j.ConversationID, j.ID, token)
		return err
	})
}

// untilAnswered runs f until it succeeds, fails for another reason than
// the database being unreachable, or patience passes, and returns its last
// error.
func untilAnswered(patience time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		err := f(ctx)
		if err == nil || !pg.Unavailable(err) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// Get returns job id with its files' progress (Store.Get).
func (r *Runner) Get(ctx context.Context, id string) (Job, error) { return r.st.Get(ctx, id) }

// List returns a page of a conversation's jobs (Store.List).
func (r *Runner) List(ctx context.Context, conv, status string, limit int, cursor string) (Page, error) {
	return r.st.List(ctx, conv, status, limit, cursor)
}

// Cancel cancels job id (Store.Cancel).
func (r *Runner) Cancel(ctx context.Context, id string) (Job, error) { return r.st.Cancel(ctx, id) }

// Files returns up to limit of job j's stored files, oldest first, or of
// its failed ones.
func (r *Runner) Files(ctx context.Context, j Job, failedOnly bool, limit int) ([]docs.File, error) {
	return r.st.docs.ListJobFiles(ctx, j.ConversationID, j.ID, failedOnly, limit)
}
