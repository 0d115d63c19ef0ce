package docs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/docs/extract"
)

// Chunk is a stored piece of a file's text.
type Chunk struct {
	ID             string
	FileID         string
	FileName       string
	ConversationID string
	Content        string
	// Ordinal is the chunk's position in its file, from 0.
	Ordinal int
	// PageNumber is the PDF page the chunk starts on; 0 for formats without
	// pages. It equals PageStart.
	PageNumber int
	// PageStart and PageEnd are the PDF pages of the chunk's first and last
	// characters: a chunk that runs from page 7 onto page 8 has 7 and 8.
	// 0 for formats without pages.
	PageStart int
	PageEnd   int
	// CharStart and CharEnd are the chunk's rune offsets in the file's
	// extracted text.
	CharStart int
	CharEnd   int
	// Source is the URL the chunk's file was fetched from; "" for a file
	// uploaded directly.
	Source string
	// Location says where the chunk comes from in its format's own terms:
	// pages, slides, a sheet's cells, a heading path, OCR.
	Location extract.Location
}

// pageRange selects a chunk c's page_start and page_end; chunks stored
// before they existed lie on their page_number (see migration 006). Then
// its location (NULL for chunks stored before migration 010).
const pageRange = `coalesce(c.page_start, c.page_number), coalesce(c.page_end, c.page_number), c.location::text`

// chunkLocation reads a chunk's stored location; a chunk stored without one
// lies on its page range, if it has one. A value this build cannot read
// (written by a newer one) falls back to the page range too.
func chunkLocation(raw *string, pageStart, pageEnd int) extract.Location {
	if raw != nil {
		if l, err := extract.ParseLocation([]byte(*raw)); err == nil {
			return l
		}
	}
	return extract.Location{PageStart: pageStart, PageEnd: pageEnd}
}

// parseID validates a file or chunk id before it reaches the database and
// returns its canonical form.
func parseID(kind, id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fmt.Errorf("docs: %w: %s id %q is not a UUID", ErrInvalidID, kind, id)
	}
	return u.String(), nil
}

// ListFiles returns a conversation's files, oldest first, in every status.
// An unknown conversation has no files: the result is empty, not an error.
func (s *Store) ListFiles(ctx context.Context, conversationID string) ([]File, error) {
	conversationID, err := CheckConversationID(conversationID)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+fileColumns+` FROM files f
		WHERE f.conversation_id = $1 AND `+visible+`
		ORDER BY f.created_at, f.id`, conversationID)
	if err != nil {
		return nil, dbError("docs: list files", err)
	}
	files, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (File, error) { return scanFile(r) })
	if err != nil {
		return nil, dbError("docs: list files", err)
	}
	if files == nil {
		files = []File{}
	}
	return files, nil
}

// GetFile returns a file by id, in any status. Errors wrap ErrInvalidID or
// ErrNotFound.
func (s *Store) GetFile(ctx context.Context, id string) (File, error) {
	id, err := parseID("file", id)
	if err != nil {
		return File{}, err
	}
	convs, err := homes(ctx, s.pool, id)
	if err != nil {
		return File{}, err
	}
	where, args := idWhere("f", 1, id, convs)
	f, err := scanFile(s.pool.QueryRow(ctx, `SELECT `+fileColumns+` FROM files f WHERE `+where+` AND `+visible, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return File{}, fmt.Errorf("docs: file %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return File{}, dbError("docs: get file", err)
	}
	return f, nil
}

// FileText returns a ready file and its whole extracted text. A file still
// processing or failed returns it with an error wrapping ErrNotReady.
func (s *Store) FileText(ctx context.Context, id string) (File, string, error) {
	id, err := parseID("file", id)
	if err != nil {
		return File{}, "", err
	}
	convs, err := homes(ctx, s.pool, id)
	if err != nil {
		return File{}, "", err
	}
	where, args := idWhere("f", 1, id, convs)
	var text *string
	row := s.pool.QueryRow(ctx, `SELECT `+fileColumns+`, f.extracted_text FROM files f WHERE `+where+` AND `+visible, args...)
	f, err := scanFile(row, &text)
	if errors.Is(err, pgx.ErrNoRows) {
		return File{}, "", fmt.Errorf("docs: file %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return File{}, "", dbError("docs: file text", err)
	}
	if f.Status != StatusReady || text == nil {
		return f, "", fmt.Errorf("docs: file %s is %s: %w", id, f.Status, ErrNotReady)
	}
	return f, *text, nil
}

// GetChunk returns a chunk by id. Errors wrap ErrInvalidID or ErrNotFound.
func (s *Store) GetChunk(ctx context.Context, id string) (Chunk, error) {
	id, err := parseID("chunk", id)
	if err != nil {
		return Chunk{}, err
	}
	convs, err := homes(ctx, s.pool, id)
	if err != nil {
		return Chunk{}, err
	}
	where, args := idWhere("c", 1, id, convs)
	var c Chunk
	var loc *string
	err = s.pool.QueryRow(ctx, `
		SELECT c.id::text, c.file_id::text, f.file_name, c.conversation_id, c.content,
		       c.ordinal, c.page_number, `+pageRange+`, c.char_start, c.char_end, f.source_url
		FROM chunks c JOIN files f ON f.conversation_id = c.conversation_id AND f.id = c.file_id
		WHERE `+where+` AND `+visible, args...).Scan(&c.ID, &c.FileID, &c.FileName, &c.ConversationID, &c.Content,
		&c.Ordinal, &c.PageNumber, &c.PageStart, &c.PageEnd, &loc, &c.CharStart, &c.CharEnd, &c.Source)
	c.Location = chunkLocation(loc, c.PageStart, c.PageEnd)
	if errors.Is(err, pgx.ErrNoRows) {
		return Chunk{}, fmt.Errorf("docs: chunk %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Chunk{}, dbError("docs: get chunk", err)
	}
	return c, nil
}

// DeleteFile deletes a file and its chunks and takes them out of the
// conversation's statistics, in one transaction. A file still processing
// is deleted too; its processing then stores nothing. Errors wrap
// ErrInvalidID or ErrNotFound.
func (s *Store) DeleteFile(ctx context.Context, id string) error {
	id, err := parseID("file", id)
	if err != nil {
		return err
	}
	return s.deleteFile(ctx, id)
}
