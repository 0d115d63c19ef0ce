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
	return s.conversations(ctx, only, limit, nil)
}

// ConversationQuery selects a page of conversations for
// ListConversationsPage.
type ConversationQuery struct {
	// Only keeps the conversations it names; nil keeps every one, and an
	// empty, non-nil Only none.
	Only []string
	// Limit is the most conversations of the page, 1 to MaxListLimit; 0
	// means DefaultListLimit.
	Limit int
	// Cursor continues the listing after the page whose Next it was; ""
	// starts with the most recent upload.
	Cursor string
}

// ConversationPage is one page of the conversations holding files, the most
// recent upload first.
type ConversationPage struct {
	Conversations []Conversation
	// Total counts the conversations the query selects, in every page.
	Total int
	// Next is the cursor of the following page; "" on the last page.
	Next string
}

// CursorAfter returns the cursor of the conversations after
// p.Conversations[i], for a caller that passes on only the first i+1 of
// the page.
func (p ConversationPage) CursorAfter(i int) string {
	c := p.Conversations[i]
	return cursor{kind: conversationsCursor, filter: listingDigest(conversationsCursor), at: c.LastUpload, key: []byte(c.ID)}.String()
}

// ListConversationsPage returns a page of the conversations holding files,
// the most recent upload first (ties by id), with the number of
// conversations the query selects. A conversation that receives an upload
// while a caller pages moves to the front: pages already read do not show
// it again, and those to come do not either. Errors wrap
// ErrInvalidArgument for a bad limit or cursor. It asks every shard on
// Citus: it is about no one conversation.
func (s *Store) ListConversationsPage(ctx context.Context, q ConversationQuery) (ConversationPage, error) {
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return ConversationPage{}, err
	}
	after, err := parseCursor(q.Cursor, conversationsCursor, listingDigest(conversationsCursor), "list_conversations")
	if err != nil {
		return ConversationPage{}, err
	}
	if q.Only != nil && len(q.Only) == 0 {
		return ConversationPage{Conversations: []Conversation{}}, nil
	}
	page := ConversationPage{}
	if page.Conversations, err = s.conversations(ctx, q.Only, limit+1, after); err != nil {
		return ConversationPage{}, err
	}
	err = s.pool.QueryRow(ctx, `
		SELECT count(*) FROM conversation_stats
		WHERE ($1::text[] IS NULL OR conversation_id = ANY($1)) AND ready_files + processing_files + failed_files > 0`,
		q.Only).Scan(&page.Total)
	if err != nil {
		return ConversationPage{}, dbError("docs: count conversations", err)
	}
	if len(page.Conversations) > limit {
		page.Conversations = page.Conversations[:limit]
		page.Next = page.CursorAfter(limit - 1)
	}
	return page, nil
}

// conversations reads up to limit conversations of only (nil: all) holding
// files, the most recent upload first, after the cursor if any.
func (s *Store) conversations(ctx context.Context, only []string, limit int, after *cursor) ([]Conversation, error) {
	if only != nil && len(only) == 0 {
		return []Conversation{}, nil
	}
	query, args := `
		SELECT conversation_id, ready_files + processing_files + failed_files, ready_files, processing_files,
		       failed_files, chunk_count, last_upload_at
		FROM conversation_stats
		WHERE ($1::text[] IS NULL OR conversation_id = ANY($1)) AND ready_files + processing_files + failed_files > 0`, []any{only, limit}
	if after != nil {
		query += ` AND last_upload_at <= $3 AND (last_upload_at < $3 OR conversation_id > $4)`
		args = append(args, after.at, string(after.key))
	}
	rows, err := s.pool.Query(ctx, query+`
		ORDER BY last_upload_at DESC, conversation_id
		LIMIT $2`, args...)
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
