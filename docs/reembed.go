package docs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/embed"
)

// Reembed moves every ready file's chunks to the embedder to, one file per
// transaction, and makes to the store's embedder for ingestion and search.
//
// The switch happens first, so files uploaded meanwhile are embedded by to
// directly, and Search, which only compares vectors of the current model,
// sees each file again as soon as its transaction commits. Reembed is
// resumable: files already on to's model are skipped, so after an error or a
// cancellation running it again finishes the move. Files that another
// process (a replica still configured with the old embedder) keeps storing
// may need another run.
//
// progress, when not nil, is called with the number of chunks moved so far
// and the total known so far: first (0, 0), then after each file and
// whenever more files are found.
func (s *Store) Reembed(ctx context.Context, to embed.Embedder, progress func(done, total int)) error {
	if to == nil {
		return errors.New("docs: reembed: nil embedder")
	}
	if err := checkEmbedder(to); err != nil {
		return fmt.Errorf("docs: reembed: %w", err)
	}
	s.setEmbedder(to)

	done, total := 0, 0
	if progress != nil {
		progress(done, total)
	}
	// Files this store was ingesting with the old embedder when the switch
	// happened finish after the first listing; later rounds pick them up.
	for range 3 {
		files, err := s.filesNotOn(ctx, to.Model())
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return nil
		}
		for _, f := range files {
			total += f.chunks
		}
		if progress != nil {
			progress(done, total)
		}
		for _, f := range files {
			if err := s.reembedFile(ctx, f.conv, f.id, to); err != nil {
				return fmt.Errorf("docs: reembed file %s: %w", f.id, err)
			}
			done += f.chunks
			if progress != nil {
				progress(done, total)
			}
		}
	}
	return nil
}

type pendingFile struct {
	conv, id string
	chunks   int
}

// filesNotOn lists the ready files whose chunks are not embedded by model.
func (s *Store) filesNotOn(ctx context.Context, model string) ([]pendingFile, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT f.conversation_id, f.id::text, f.chunk_count FROM files f
		WHERE f.status = 'ready' AND f.embedding_model <> $1 AND `+visible+`
		ORDER BY f.created_at, f.id`, model)
	if err != nil {
		return nil, dbError("docs: reembed", err)
	}
	files, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pendingFile, error) {
		var p pendingFile
		err := r.Scan(&p.conv, &p.id, &p.chunks)
		return p, err
	})
	if err != nil {
		return nil, dbError("docs: reembed", err)
	}
	return files, nil
}

// reembedFile embeds one file's chunks with to and swaps the vectors in one
// transaction.
func (s *Store) reembedFile(ctx context.Context, conv, fileID string, to embed.Embedder) error {
	rows, err := s.pool.Query(ctx, `SELECT id::text, content FROM chunks WHERE conversation_id = $1 AND file_id = $2 ORDER BY ordinal`, conv, fileID)
	if err != nil {
		return dbError("read chunks", err)
	}
	type stored struct{ id, content string }
	chunks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stored, error) {
		var c stored
		err := r.Scan(&c.id, &c.content)
		return c, err
	})
	if err != nil {
		return dbError("read chunks", err)
	}
	texts := make([]string, len(chunks))
	for i, c := range chunks {
		texts[i] = c.content
	}
	vecs, err := embedAll(ctx, to, texts)
	if err != nil {
		return err
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.id
	}
	return s.storeReembedded(ctx, conv, fileID, ids, vecs, to.Model())
}
