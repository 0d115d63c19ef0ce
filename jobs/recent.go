package jobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/docs"
)

// RecentQuery selects a page of jobs across conversations for Recent.
type RecentQuery struct {
	// Conversations keeps the jobs of these conversations; nil keeps every
	// conversation's, and an empty, non-nil list none.
	Conversations []string
	// Active keeps the jobs still queued or running; Ended those that
	// have ended. Neither keeps both.
	Active, Ended bool
	// Source keeps the jobs that crawled or synced this source (package
	// sources): its last syncs. "" keeps every job.
	Source string
	// Limit is the most jobs of the page, 1 to docs.MaxListLimit; 0 means
	// docs.DefaultListLimit.
	Limit int
	// Cursor continues after the page whose Next it was; "" starts with
	// the newest job.
	Cursor string
}

// recentCursor is the kind of Recent's cursors.
const recentCursor = 'r'

// recentParts are what a cursor of Recent is bound to: the selection.
func (q RecentQuery) recentParts() []string {
	return []string{fmt.Sprint(q.Active, q.Ended), strings.Join(q.Conversations, "\x00"), fmt.Sprint(q.Conversations == nil), q.Source}
}

// Recent returns a page of jobs of any conversation (or of those q
// names), newest first, each with its files' progress as Get gives it;
// Total is left 0: it is not counted. It serves views that span conversations, such as
// the web page's list of jobs: on Citus it asks every shard, and it reads
// the jobs table in creation order, which costs a scan of it (jobs are far
// fewer than files).
func (s *Store) Recent(ctx context.Context, q RecentQuery) (Page, error) {
	switch {
	case q.Limit == 0:
		q.Limit = docs.DefaultListLimit
	case q.Limit < 0 || q.Limit > docs.MaxListLimit:
		return Page{}, fmt.Errorf("jobs: %w: limit %d is out of range: send 1 to %d", docs.ErrInvalidArgument, q.Limit, docs.MaxListLimit)
	}
	if q.Conversations != nil && len(q.Conversations) == 0 {
		return Page{Jobs: []Job{}}, nil
	}
	at, key, after, err := docs.ParseCursor(q.Cursor, recentCursor, q.recentParts(), "the list of jobs")
	if err != nil {
		return Page{}, err
	}
	var afterAt, afterID any
	if after {
		id, err := uuid.FromBytes(key)
		if err != nil {
			return Page{}, fmt.Errorf("jobs: %w: cursor is not one this server returned", docs.ErrInvalidArgument)
		}
		afterAt, afterID = at, id.String()
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+jobColumns+` FROM jobs j
		WHERE ($1::text[] IS NULL OR j.conversation_id = ANY($1))
		  AND (NOT $2 OR j.status IN ('queued', 'running'))
		  AND (NOT $3 OR j.status NOT IN ('queued', 'running'))
		  AND ($4::timestamptz IS NULL OR (j.created_at, j.id) < ($4, $5::uuid))
		  AND ($7 = '' OR j.input->>'source_id' = $7)
		ORDER BY j.created_at DESC, j.id DESC LIMIT $6`, q.Conversations, q.Active, q.Ended, afterAt, afterID, q.Limit+1, q.Source)
	if err != nil {
		return Page{}, dbError("jobs: recent", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanJob(r) })
	if err != nil {
		return Page{}, dbError("jobs: recent", err)
	}
	return s.settlePage(ctx, Page{}, list, q.Limit, func(last Job) string {
		id, _ := uuid.Parse(last.ID)
		return docs.Cursor(recentCursor, q.recentParts(), last.CreatedAt, id[:])
	})
}

// Recent returns a page of jobs across conversations (Store.Recent).
func (r *Runner) Recent(ctx context.Context, q RecentQuery) (Page, error) { return r.st.Recent(ctx, q) }
