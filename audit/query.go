package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tail returns the n most recent calls, newest first.
func Tail(ctx context.Context, pool *pgxpool.Pool, n int) ([]Entry, error) {
	if pool == nil {
		return nil, ErrNoDatabase
	}
	rows, err := pool.Query(ctx, `SELECT id, server_id, coalesce(conversation_id, ''), tool_name, arguments, result,
		coalesce(error, ''), coalesce(error_code, ''), coalesce(latency_ms, 0), coalesce(transport, ''), coalesce(session_id, ''),
		coalesce(client_name, ''), coalesce(client_version, ''), coalesce(api_key_name, ''), created_at, sanitised, coalesce(subject, '')
		FROM chat_mcp_tool_calls ORDER BY created_at DESC, id LIMIT $1`, n)
	if err != nil {
		return nil, fmt.Errorf("audit tail: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		var args, res []byte
		err := r.Scan(&e.ID, &e.ServerID, &e.ConversationID, &e.ToolName, &args, &res, &e.Error, &e.ErrorCode, &e.LatencyMS,
			&e.Transport, &e.SessionID, &e.ClientName, &e.ClientVersion, &e.APIKey, &e.CreatedAt, &e.Sanitised, &e.Subject)
		e.Arguments, e.Result = args, res
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("audit tail: %w", err)
	}
	return out, nil
}

// Prune deletes calls older than age and returns how many went.
func Prune(ctx context.Context, pool *pgxpool.Pool, age time.Duration) (int64, error) {
	if pool == nil {
		return 0, ErrNoDatabase
	}
	if age <= 0 {
		return 0, fmt.Errorf("audit prune: age must be positive, got %s", age)
	}
	tag, err := pool.Exec(ctx, `DELETE FROM chat_mcp_tool_calls WHERE created_at < now() - make_interval(secs => $1)`, age.Seconds())
	if err != nil {
		return 0, fmt.Errorf("audit prune: %w", err)
	}
	return tag.RowsAffected(), nil
}
