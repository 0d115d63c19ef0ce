package docs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/extract"
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

// MaxPrefixLen bounds FileQuery.Prefix, in bytes.
const MaxPrefixLen = 1024

// FileQuery selects a page of a conversation's files for ListFilesPage.
type FileQuery struct {
	ConversationID string
	// Status keeps the files of one status (StatusProcessing, StatusReady
	// or StatusFailed); "" keeps every status.
	Status string
	// Prefix keeps the files whose name or source URL begins with it,
	// exactly (case matters); "" keeps every file.
	Prefix string
	// Limit is the most files of the page, 1 to MaxListLimit; 0 means
	// DefaultListLimit.
	Limit int
	// Cursor continues the listing after the page whose Next it was; ""
	// starts with the newest file.
	Cursor string
}

// FilePage is one page of a conversation's files, newest first.
type FilePage struct {
	Files []File
	// Total counts the files the query selects, in every page.
	Total int
	// Next is the cursor of the following page; "" on the last page.
	Next string

	filter uint64
}

// CursorAfter returns the cursor of the files after p.Files[i], for a
// caller that passes on only the first i+1 files of the page.
func (p FilePage) CursorAfter(i int) string {
	f := p.Files[i]
	id, err := uuid.Parse(f.ID)
	if err != nil {
		// Ids come from the database's uuid column.
		panic(fmt.Sprintf("docs: file id %q is not a UUID: %v", f.ID, err))
	}
	return cursor{kind: filesCursor, filter: p.filter, at: f.CreatedAt, key: id[:]}.String()
}

// ListFilesPage returns a page of a conversation's files, newest first (by
// upload time, ties broken by id), with the number of files the query
// selects. An unknown conversation has no files. Errors wrap
// ErrInvalidArgument for a bad conversation id, status, prefix, limit or
// cursor.
//
// Every statement names the conversation, so that on Citus it runs on the
// conversation's shard alone. The total comes from the conversation's
// counters unless a prefix is given, when the selected files are counted.
func (s *Store) ListFilesPage(ctx context.Context, q FileQuery) (FilePage, error) {
	conv, err := CheckConversationID(q.ConversationID)
	if err != nil {
		return FilePage{}, err
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return FilePage{}, err
	}
	switch q.Status {
	case "", StatusProcessing, StatusReady, StatusFailed:
	default:
		return FilePage{}, fmt.Errorf("docs: %w: unknown status %q: send processing, ready or failed, or none for every file", ErrInvalidArgument, clipRunes(q.Status, 40))
	}
	switch {
	case len(q.Prefix) > MaxPrefixLen:
		return FilePage{}, fmt.Errorf("docs: %w: prefix is %d bytes long; send at most %d", ErrInvalidArgument, len(q.Prefix), MaxPrefixLen)
	case !utf8.ValidString(q.Prefix) || strings.ContainsRune(q.Prefix, 0):
		return FilePage{}, fmt.Errorf("docs: %w: prefix is not valid UTF-8 text: send the beginning of a file name or URL", ErrInvalidArgument)
	}
	page := FilePage{filter: listingDigest(filesCursor, conv, q.Status, q.Prefix)}
	after, err := parseCursor(q.Cursor, filesCursor, page.filter, "list_files")
	if err != nil {
		return FilePage{}, err
	}
	where := `f.conversation_id = $1 AND ($2 = '' OR f.status = $2)
		AND ($3 = '' OR starts_with(f.file_name, $3) OR starts_with(f.source_url, $3)) AND ` + visible
	// One more than the page, to know whether another follows.
	list, args := `SELECT `+fileColumns+` FROM files f WHERE `+where, []any{conv, q.Status, q.Prefix, limit + 1}
	if after != nil {
		id, err := uuid.FromBytes(after.key)
		if err != nil {
			return FilePage{}, fmt.Errorf("docs: %w: cursor is not one this server returned: send the next_cursor of the previous page as it came", ErrInvalidArgument)
		}
		// Spelt out rather than as a row comparison, so that the index
		// on (conversation_id, created_at) starts the scan at the cursor.
		list += ` AND f.created_at <= $5 AND (f.created_at < $5 OR f.id < $6)`
		args = append(args, after.at, id)
	}
	b := &pgx.Batch{}
	b.Queue(list+` ORDER BY f.created_at DESC, f.id DESC LIMIT $4`, args...)
	if q.Prefix == "" {
		b.Queue(`SELECT coalesce((SELECT CASE $2 WHEN 'ready' THEN ready_files WHEN 'processing' THEN processing_files
		       WHEN 'failed' THEN failed_files ELSE ready_files + processing_files + failed_files END
		       FROM conversation_stats WHERE conversation_id = $1), 0)`, conv, q.Status)
	} else {
		b.Queue(`SELECT count(*) FROM files f WHERE `+where, conv, q.Status, q.Prefix)
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return FilePage{}, dbError("docs: list files", err)
	}
	page.Files, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (File, error) { return scanFile(r) })
	if err != nil {
		return FilePage{}, dbError("docs: list files", err)
	}
	var total int64
	if err := br.QueryRow().Scan(&total); err != nil {
		return FilePage{}, dbError("docs: count files", err)
	}
	if err := br.Close(); err != nil {
		return FilePage{}, dbError("docs: list files", err)
	}
	page.Total = int(total)
	if len(page.Files) > limit {
		page.Files = page.Files[:limit]
		page.Next = page.CursorAfter(limit - 1)
	}
	if page.Files == nil {
		page.Files = []File{}
	}
	return page, nil
}

// clipRunes shortens s to at most n runes, for an error message.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
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

// MaxFileChunks bounds FileChunks' limit.
const MaxFileChunks = 500

// FileChunks returns up to limit chunks of file f (as GetFile returned
// it), in their order in the file, from the one after ordinal after (-1
// for the first): the file's chunks with their places in its text and
// their locations, for reading a file as it was cut.
func (s *Store) FileChunks(ctx context.Context, f File, after, limit int) ([]Chunk, error) {
	if limit <= 0 || limit > MaxFileChunks {
		return nil, fmt.Errorf("docs: %w: limit %d is out of range: send 1 to %d", ErrInvalidArgument, limit, MaxFileChunks)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT c.id::text, c.content, c.ordinal, c.page_number, `+pageRange+`, c.char_start, c.char_end
		FROM chunks c
		WHERE c.conversation_id = $1 AND c.file_id = $2 AND c.ordinal > $3
		ORDER BY c.ordinal LIMIT $4`, f.ConversationID, f.ID, after, limit)
	if err != nil {
		return nil, dbError("docs: a file's chunks", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Chunk, error) {
		c := Chunk{FileID: f.ID, FileName: f.FileName, ConversationID: f.ConversationID, Source: f.Source}
		var loc *string
		err := r.Scan(&c.ID, &c.Content, &c.Ordinal, &c.PageNumber, &c.PageStart, &c.PageEnd, &loc, &c.CharStart, &c.CharEnd)
		c.Location = chunkLocation(loc, c.PageStart, c.PageEnd)
		return c, err
	})
	if err != nil {
		return nil, dbError("docs: a file's chunks", err)
	}
	return out, nil
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
