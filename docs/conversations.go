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
// whose files were all deleted is not listed.
func (s *Store) ListConversations(ctx context.Context, only []string, limit int) ([]Conversation, error) {
	if limit < 1 || limit > MaxConversations {
		return nil, fmt.Errorf("docs: list conversations: %w: limit %d is outside 1..%d", ErrInvalidArgument, limit, MaxConversations)
	}
	if only != nil && len(only) == 0 {
		return []Conversation{}, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT conversation_id, count(*),
		       count(*) FILTER (WHERE status = 'ready'),
		       count(*) FILTER (WHERE status = 'processing'),
		       count(*) FILTER (WHERE status = 'failed'),
		       coalesce(sum(chunk_count) FILTER (WHERE status = 'ready'), 0),
		       max(created_at)
		FROM files
		WHERE $1::text[] IS NULL OR conversation_id = ANY($1)
		GROUP BY conversation_id
		ORDER BY max(created_at) DESC, conversation_id
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

// DeleteConversation deletes every file of a conversation, with their
// chunks, stored upload bytes and statistics, in one transaction, and
// returns how many files it deleted; an unknown conversation deletes none
// and is not an error. Files still processing are deleted too; their
// processing then stores nothing. Errors wrap ErrInvalidArgument for an id
// CheckConversationID refuses.
func (s *Store) DeleteConversation(ctx context.Context, conversationID string) (int, error) {
	conversationID, err := CheckConversationID(conversationID)
	if err != nil {
		return 0, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, dbError("docs: delete conversation", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	// Locks are taken in the order ingestion and DeleteFile take them: the
	// files (in id order, so that two deletions cannot deadlock), then
	// conversation_stats.
	if _, err := tx.Exec(ctx, `SELECT id FROM files WHERE conversation_id = $1 ORDER BY id FOR UPDATE`, conversationID); err != nil {
		return 0, dbError("docs: delete conversation", err)
	}
	// Without its statistics row the conversation has no chunks for search;
	// a later upload starts a new row with a new generation, so no process
	// mistakes its cached keyword index for the new content.
	if _, err := tx.Exec(ctx, `DELETE FROM conversation_stats WHERE conversation_id = $1`, conversationID); err != nil {
		return 0, dbError("docs: delete conversation", err)
	}
	// Chunks and stored bytes go with their files (ON DELETE CASCADE).
	tag, err := tx.Exec(ctx, `DELETE FROM files WHERE conversation_id = $1`, conversationID)
	if err != nil {
		return 0, dbError("docs: delete conversation", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, dbError("docs: delete conversation", err)
	}
	// Other processes notice the change through the generation; this one
	// frees the index's memory at once.
	s.keywords.drop(s.keywords.get(conversationID))
	return int(tag.RowsAffected()), nil
}
