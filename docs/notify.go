package docs

import (
	"context"
	"slices"
	"sync"
)

// A job's progress is read from its files (package jobs), so whoever waits
// for a job learns that it may have moved when its files do: every
// transaction that stores files of jobs as ready or failed announces their
// jobs, to this process's functions registered with OnJobs once it has
// committed, and to every process on the database through PostgreSQL's
// NOTIFY on JobsChannel, which the server delivers when the transaction
// commits. Package jobs announces what it changes itself (a job submitted,
// failed or cancelled) the same way, with AnnounceJobs. A waiter re-reads
// the job when told, instead of reading it again and again.

// JobsChannel is the PostgreSQL notification channel (LISTEN/NOTIFY) on
// which jobs that may have moved are announced, one notification per job,
// its id the payload.
const JobsChannel = "mcpsearch_jobs"

// jobListeners are the functions OnJobs registered.
type jobListeners struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(ids []string)
}

// OnJobs registers fn, called with the ids of the jobs that may have moved
// in this process: some of their files stored as ready or failed, or the
// job submitted, failed or cancelled (AnnounceJobs). It is called after the
// change committed, on the goroutine that made it, and must return at once.
// The returned function unregisters fn.
func (s *Store) OnJobs(fn func(ids []string)) (remove func()) {
	l := &s.jobs
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fns == nil {
		l.fns = map[int]func([]string){}
	}
	id := l.next
	l.next++
	l.fns[id] = fn
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.fns, id)
	}
}

// jobsMoved calls the functions OnJobs registered with ids.
func (s *Store) jobsMoved(ids []string) {
	if len(ids) == 0 {
		return
	}
	l := &s.jobs
	l.mu.Lock()
	fns := make([]func([]string), 0, len(l.fns))
	for _, fn := range l.fns {
		fns = append(fns, fn)
	}
	l.mu.Unlock()
	for _, fn := range fns {
		fn(ids)
	}
}

// AnnounceJobs tells this process (OnJobs) and every process listening on
// JobsChannel that jobs ids may have moved. The caller has committed the
// change.
func (s *Store) AnnounceJobs(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	s.jobsMoved(ids)
	if _, err := s.pool.Exec(ctx, notifyJobsSQL, JobsChannel, ids); err != nil {
		return dbError("docs: announce jobs", err)
	}
	return nil
}

// notifyJobsSQL sends one notification on channel $1 per job id of $2.
const notifyJobsSQL = `SELECT pg_notify($1, id) FROM unnest($2::text[]) AS id`

// jobsOf returns the distinct jobs of the files items stored.
func jobsOf(items []*commitItem) []string {
	var ids []string
	for _, it := range items {
		if id := it.out.JobID; id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}
