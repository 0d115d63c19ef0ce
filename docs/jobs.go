package docs

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// A job (package jobs) stores its files with Upload.JobID; the statements
// here read and remove a job's files. Each names the job's conversation, so
// it runs on that conversation's node of a distributed database.

// NewID returns a new id of conversation conversationID for a row of its
// own (a job's, say) that is looked up by id alone: like file and chunk
// ids, it carries the conversation's key (see ids.go).
func NewID(conversationID string) string { return newID(conversationID).String() }

// ConversationsOf returns the conversations that may hold the row of id,
// made by NewID: nil for an id that carries no conversation key, and an
// empty list when no conversation has its key. Errors wrap ErrInvalidID.
func (s *Store) ConversationsOf(ctx context.Context, id string) ([]string, error) {
	id, err := parseID("job", id)
	if err != nil {
		return nil, err
	}
	return homes(ctx, s.pool, id)
}

// JobFiles is what the files of one job have come to.
type JobFiles struct {
	// Stored counts the files the job stored, in every status.
	Stored, Ready, Processing, Failed int
	// Started is set once a worker has claimed one of the job's files, or
	// one is no longer processing.
	Started bool
	Chunks  int64
	Pages   int64
	// LastUpdate is when one of the job's files last changed; zero when it
	// has none.
	LastUpdate time.Time
}

// JobFiles counts the files of job jobID in conversation conv.
func (s *Store) JobFiles(ctx context.Context, conv, jobID string) (JobFiles, error) {
	var jf JobFiles
	var last *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE f.status = 'ready'), count(*) FILTER (WHERE f.status = 'processing'),
		       count(*) FILTER (WHERE f.status = 'failed'), coalesce(bool_or(f.status <> 'processing' OR f.attempts > 0), false),
		       coalesce(sum(f.chunk_count) FILTER (WHERE f.status = 'ready'), 0),
		       coalesce(sum(f.page_count) FILTER (WHERE f.status = 'ready'), 0), max(f.updated_at)
		FROM files f
		WHERE f.conversation_id = $1 AND f.job_id = $2 AND `+visible, conv, jobID).
		Scan(&jf.Stored, &jf.Ready, &jf.Processing, &jf.Failed, &jf.Started, &jf.Chunks, &jf.Pages, &last)
	if err != nil {
		return JobFiles{}, dbError("docs: count a job's files", err)
	}
	if last != nil {
		jf.LastUpdate = *last
	}
	return jf, nil
}

// ListJobFiles returns up to limit files of job jobID in conversation conv,
// oldest first; failedOnly keeps the failed ones, for their reasons.
func (s *Store) ListJobFiles(ctx context.Context, conv, jobID string, failedOnly bool, limit int) ([]File, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+fileColumns+` FROM files f
		WHERE f.conversation_id = $1 AND f.job_id = $2 AND (NOT $3 OR f.status = 'failed') AND `+visible+`
		ORDER BY f.created_at, f.id LIMIT $4`, conv, jobID, failedOnly, limit)
	if err != nil {
		return nil, dbError("docs: list a job's files", err)
	}
	files, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (File, error) { return scanFile(r) })
	if err != nil {
		return nil, dbError("docs: list a job's files", err)
	}
	return files, nil
}

// DeleteJobFiles deletes the files of job jobID in conversation conv that
// are not ready yet, processing or waiting for a worker, with their stored
// bytes, in one transaction, and returns how many it deleted: what a
// cancelled job leaves is its ready files, whole, and its failed ones. A
// worker processing one of them stops within IngestOptions.HeldCheck and
// stores nothing of it.
func (s *Store) DeleteJobFiles(ctx context.Context, conv, jobID string) (int, error) {
	// A worker's commit of a batch of files may lock them in another
	// order than the delete: the loser of that race tries again.
	var n int
	var err error
	for range 3 {
		n, err = s.deleteJobFiles(ctx, conv, jobID)
		if err == nil || !Retryable(err) || errors.Is(err, ErrUnavailable) {
			break
		}
	}
	return n, err
}

func (s *Store) deleteJobFiles(ctx context.Context, conv, jobID string) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, dbError("docs: delete a job's files", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The files first, then the counters' lock, in the order of every
	// write of files (a worker's commit, DeleteFile): a commit of one of
	// these files that holds it finishes first, and the file, ready by
	// then, is no longer deleted.
	rows, err := tx.Query(ctx, `
		DELETE FROM files f
		WHERE f.conversation_id = $1 AND f.job_id = $2 AND f.status = 'processing'
		RETURNING f.upload_seq`, conv, jobID)
	if err != nil {
		return 0, dbError("docs: delete a job's files", err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, dbError("docs: delete a job's files", err)
	}
	floors, err := lockConversations(ctx, tx, []string{conv})
	if err != nil {
		return 0, err
	}
	ds := deltas{}
	d := ds.of(conv)
	for _, seq := range seqs {
		// A file of the conversation's deleted incarnation is the purge's,
		// and out of the counters already.
		if seq > floors[conv] {
			d.move(StatusProcessing, "")
		}
	}
	if _, err := applyDeltas(ctx, tx, ds); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, dbError("docs: delete a job's files", err)
	}
	return len(seqs), nil
}
