package docs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/extract"
)

// MaxPassageNeighbours bounds how many chunks Passage adds on each side of
// the one asked for.
const MaxPassageNeighbours = 5

// Passage is a chunk read together with its neighbours in the file, as one
// text.
type Passage struct {
	FileID         string
	FileName       string
	ConversationID string
	// Content is the chunks' text merged in order, each overlap with the
	// previous chunk given once.
	Content string
	// FirstChunkID and LastChunkID are the first and last chunk merged;
	// ChunkIDs lists them all, in order.
	FirstChunkID string
	LastChunkID  string
	ChunkIDs     []string
	// CharStart and CharEnd are Content's rune offsets in the file's
	// extracted text.
	CharStart int
	CharEnd   int
	// PageStart and PageEnd are the PDF pages the passage starts and ends
	// on: the first chunk's PageStart and the last chunk's PageEnd; 0 for
	// formats without pages.
	PageStart int
	PageEnd   int
	// Source is the URL the file was fetched from; "" for a file uploaded
	// directly.
	Source string
	// Location covers the merged chunks' locations: their pages or slides
	// from the first to the last, the first's heading path, the cells of
	// both when they lie on one sheet.
	Location extract.Location
}

// Passage returns the chunk chunkID with up to before chunks preceding it
// and after chunks following it in its file (each 0..MaxPassageNeighbours),
// merged into one text. Errors wrap ErrInvalidID, ErrNotFound or
// ErrInvalidArgument.
func (s *Store) Passage(ctx context.Context, chunkID string, before, after int) (Passage, error) {
	id, err := parseID("chunk", chunkID)
	if err != nil {
		return Passage{}, err
	}
	if before < 0 || before > MaxPassageNeighbours || after < 0 || after > MaxPassageNeighbours {
		return Passage{}, fmt.Errorf("docs: passage: %w: before and after must be 0 to %d", ErrInvalidArgument, MaxPassageNeighbours)
	}
	// The neighbours' places, then the text they span, cut from the
	// file's extracted text by their rune offsets (substr counts
	// characters), so overlaps appear once.
	convs, err := homes(ctx, s.pool, id)
	if err != nil {
		return Passage{}, err
	}
	where, args := idWhere("h", 3, id, convs)
	rows, err := s.pool.Query(ctx, `
		SELECT c.id::text, c.file_id::text, f.file_name, c.conversation_id,
		       c.page_number, `+pageRange+`, c.char_start, c.char_end, f.source_url
		FROM chunks h
		JOIN chunks c ON c.conversation_id = h.conversation_id AND c.file_id = h.file_id
		     AND c.ordinal BETWEEN h.ordinal - $1 AND h.ordinal + $2
		JOIN files f ON f.conversation_id = c.conversation_id AND f.id = c.file_id
		WHERE `+where+` AND `+visible+`
		ORDER BY c.ordinal`, append([]any{before, after}, args...)...)
	if err != nil {
		return Passage{}, dbError("docs: passage", err)
	}
	chunks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Chunk, error) {
		var c Chunk
		var loc *string
		err := r.Scan(&c.ID, &c.FileID, &c.FileName, &c.ConversationID, &c.PageNumber, &c.PageStart, &c.PageEnd, &loc, &c.CharStart, &c.CharEnd, &c.Source)
		c.Location = chunkLocation(loc, c.PageStart, c.PageEnd)
		return c, err
	})
	if err != nil {
		return Passage{}, dbError("docs: passage", err)
	}
	if len(chunks) == 0 {
		return Passage{}, fmt.Errorf("docs: chunk %s: %w", id, ErrNotFound)
	}
	first, last := chunks[0], chunks[len(chunks)-1]
	p := Passage{
		FileID:         first.FileID,
		FileName:       first.FileName,
		ConversationID: first.ConversationID,
		FirstChunkID:   first.ID,
		LastChunkID:    last.ID,
		CharStart:      first.CharStart,
		CharEnd:        first.CharEnd,
		PageStart:      first.PageStart,
		PageEnd:        last.PageEnd,
		Source:         first.Source,
	}
	for i, c := range chunks {
		p.ChunkIDs = append(p.ChunkIDs, c.ID)
		p.CharEnd = max(p.CharEnd, c.CharEnd)
		if i == 0 {
			p.Location = c.Location
		} else {
			p.Location = p.Location.Merge(c.Location)
		}
	}
	var text *string
	err = s.pool.QueryRow(ctx, `SELECT substr(extracted_text, $3 + 1, $4 - $3) FROM files WHERE conversation_id = $1 AND id = $2`,
		p.ConversationID, p.FileID, p.CharStart, p.CharEnd).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && text == nil) {
		return Passage{}, fmt.Errorf("docs: chunk %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Passage{}, dbError("docs: passage", err)
	}
	p.Content = *text
	return p, nil
}
