package docs

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// RecentFiles returns up to limit ready files, newest first, of the given
// conversations, or of every conversation when conversations is nil. It
// serves listings that span conversations, such as the MCP resources list.
func (s *Store) RecentFiles(ctx context.Context, conversations []string, limit int) ([]File, error) {
	if limit <= 0 {
		return []File{}, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+fileColumns+` FROM files f
		WHERE f.status = 'ready' AND ($1::text[] IS NULL OR f.conversation_id = ANY($1)) AND `+visible+`
		ORDER BY f.created_at DESC, f.id
		LIMIT $2`, conversations, limit)
	if err != nil {
		return nil, dbError("docs: recent files", err)
	}
	files, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (File, error) { return scanFile(r) })
	if err != nil {
		return nil, dbError("docs: recent files", err)
	}
	if files == nil {
		files = []File{}
	}
	return files, nil
}
