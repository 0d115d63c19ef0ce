package docs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// MaxConversations bounds ListConversations' limit.
const MaxConversations = 1000

// Conversation is a conversation that holds files, with their counts.
type Conversation struct {
	ID string
	// Files counts the conversation's files in every status; Ready,
	// Processing and Failed count them by status.
	Files, Ready, Processing, Failed int
	// Chunks counts the chunks of the ready files.
	Chunks int
	// LastUpload is when the newest file was uploaded.
	LastUpload time.Time
}

// ListConversations returns up to limit conversations holding files, the
// most recent upload first: those named in only, or every conversation when
// only is nil (an empty, non-nil only selects none). A limit outside
// 1..MaxConversations is refused with ErrInvalidArgument. A conversation
// whose files were all deleted is not listed. The counts come from the
// conversations' statistics, kept as files are written: a listing costs
// the same whatever the number of files.
func (s *Store) ListConversations(ctx context.Context, only []string, limit int) ([]Conversation, error) {
	if limit < 1 || limit > MaxConversations {
		return nil, fmt.Errorf("docs: list conversations: %w: limit %d is outside 1..%d", ErrInvalidArgument, limit, MaxConversations)
	}
	if only != nil && len(only) == 0 {
		return []Conversation{}, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT conversation_id, ready_files + processing_files + failed_files, ready_files, processing_files,
		       failed_files, chunk_count, last_upload_at
		FROM conversation_stats
		WHERE ($1::text[] IS NULL OR conversation_id = ANY($1)) AND ready_files + processing_files + failed_files > 0
		ORDER BY last_upload_at DESC, conversation_id
		LIMIT $2`, only, limit)
	if err != nil {
		return nil, dbError("docs: list conversations", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Conversation, error) {
		var c Conversation
		err := r.Scan(&c.ID, &c.Files, &c.Ready, &c.Processing, &c.Failed, &c.Chunks, &c.LastUpload)
		return c, err
	})
	if err != nil {
		return nil, dbError("docs: list conversations", err)
	}
	if out == nil {
		out = []Conversation{}
	}
	return out, nil
}
