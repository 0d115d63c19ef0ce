package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/docs"
)

// A caller waiting for a job (add_document's wait_seconds) is woken when
// the job may have moved, rather than reading it again and again: by this
// process's documents store when it stores files of the job or the job's
// own changes (docs.Store.OnJobs), and by PostgreSQL's notifications on
// docs.JobsChannel when another replica does. The notifications come over
// one connection per process, opened by the first Watch; while it is
// lost (the database restarting) every waiter is woken to read its job
// once the connection is back, since what was announced meanwhile is not
// delivered again.

// Listener connection retries, doubling up to the most.
const (
	listenRetry    = 100 * time.Millisecond
	maxListenRetry = 2 * time.Second
)

// watcher wakes the callers waiting for jobs.
type watcher struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	mu      sync.Mutex
	waiting map[string]map[chan struct{}]struct{}
	// listening is set once the listener runs.
	listening bool

	ctx         context.Context
	cancel      context.CancelFunc
	done        chan struct{}
	removeLocal func()
}

func newWatcher(d *docs.Store, log *slog.Logger) *watcher {
	w := &watcher{pool: d.Pool(), log: log, waiting: map[string]map[chan struct{}]struct{}{}, done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.removeLocal = d.OnJobs(w.wake)
	return w
}

// watch returns a channel that receives a value when job id may have
// moved (values coalesce: one waiting means one or more changes), and the
// function that stops the watch.
func (w *watcher) watch(id string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.listening && w.ctx.Err() == nil {
		w.listening = true
		go w.listen()
	}
	set := w.waiting[id]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		w.waiting[id] = set
	}
	set[c] = struct{}{}
	return c, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(set, c)
		if cur := w.waiting[id]; cur != nil && len(cur) == 0 {
			delete(w.waiting, id)
		}
	}
}

// wake wakes the waiters of jobs ids.
func (w *watcher) wake(ids []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		for c := range w.waiting[id] {
			signal(c)
		}
	}
}

// wakeAll wakes every waiter.
func (w *watcher) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, set := range w.waiting {
		for c := range set {
			signal(c)
		}
	}
}

// signal sends on c unless a value waits there already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// listen receives the notifications of docs.JobsChannel until close,
// connecting again whenever the connection is lost.
func (w *watcher) listen() {
	defer close(w.done)
	wait := listenRetry
	for {
		listened, err := w.session()
		if w.ctx.Err() != nil {
			return
		}
		// What was announced while the connection was down is lost:
		// every waiter reads its job again.
		w.wakeAll()
		if listened {
			w.log.Info("jobs: lost the connection that receives job notifications; connecting again", "error", err)
			wait = listenRetry
		}
		t := time.NewTimer(wait)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, maxListenRetry)
	}
}

// session listens on one connection until it fails, and returns why, and
// whether it listened.
func (w *watcher) session() (bool, error) {
	conn, err := pgx.ConnectConfig(w.ctx, w.pool.Config().ConnConfig)
	if err != nil {
		return false, err
	}
	defer func() {
		// Closing says goodbye to the server, which may be gone.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()
	if _, err := conn.Exec(w.ctx, "LISTEN "+pgx.Identifier{docs.JobsChannel}.Sanitize()); err != nil {
		return false, err
	}
	// Announcements made before the connection listened are not
	// delivered: the waiters read their jobs once it does.
	w.wakeAll()
	for {
		n, err := conn.WaitForNotification(w.ctx)
		if err != nil {
			return true, err
		}
		w.wake([]string{n.Payload})
	}
}

// close stops the listener.
func (w *watcher) close() {
	w.removeLocal()
	w.cancel()
	w.mu.Lock()
	started := w.listening
	w.listening = true
	w.mu.Unlock()
	if started {
		<-w.done
	}
}
