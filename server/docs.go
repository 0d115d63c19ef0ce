package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
)

// SearchDocsInput is the search_docs tool's arguments.
type SearchDocsInput struct {
	Query          string   `json:"query" jsonschema:"what to look for in the conversation's files, in natural language or as exact words, names, codes or numbers (at most 2000 characters)"`
	ConversationID string   `json:"conversation_id" jsonschema:"the conversation whose uploaded files are searched"`
	TopK           int      `json:"top_k,omitempty" jsonschema:"how many chunks to return, 1 to 50 (default 5)"`
	Threshold      *float64 `json:"threshold,omitempty" jsonschema:"minimum cosine similarity 0 to 1 (default 0.7); in hybrid mode chunks that match the query's words are kept whatever their similarity, in keyword mode it is not applied"`
	Mode           string   `json:"mode,omitempty" jsonschema:"hybrid (default: meaning and exact words fused), vector (meaning only) or keyword (exact words only, BM25)"`
}

// SearchDocsOutput is the search_docs tool's structured result.
type SearchDocsOutput struct {
	Chunks []DocChunk `json:"chunks"`
}

// DocChunk is one passage found by search_docs.
type DocChunk struct {
	ChunkID    string  `json:"chunk_id"`
	FileID     string  `json:"file_id"`
	FileName   string  `json:"file_name"`
	Content    string  `json:"content"`
	Similarity float64 `json:"similarity"`
	Score      float64 `json:"score"`
	PageNumber *int    `json:"page_number"`
}

// ListFilesInput is the list_files tool's arguments.
type ListFilesInput struct {
	ConversationID string `json:"conversation_id" jsonschema:"the conversation whose uploaded files are listed"`
}

// ListFilesOutput is the list_files tool's structured result.
type ListFilesOutput struct {
	Files []FileInfo `json:"files"`
}

// FileInfo describes one uploaded file.
type FileInfo struct {
	ID         string `json:"id"`
	FileName   string `json:"file_name"`
	MIMEType   string `json:"mime_type"`
	SizeBytes  int64  `json:"size_bytes"`
	ChunkCount int    `json:"chunk_count"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	CreatedAt  string `json:"created_at"`
}

// GetChunkInput is the get_chunk tool's arguments.
type GetChunkInput struct {
	ChunkID string `json:"chunk_id" jsonschema:"a chunk_id returned by search_docs"`
}

// GetChunkOutput is the get_chunk tool's structured result.
type GetChunkOutput struct {
	ChunkID  string        `json:"chunk_id"`
	Content  string        `json:"content"`
	Metadata ChunkMetadata `json:"metadata"`
}

// ChunkMetadata locates a chunk in its file.
type ChunkMetadata struct {
	FileID     string `json:"file_id"`
	FileName   string `json:"file_name"`
	PageNumber *int   `json:"page_number"`
	CharStart  int    `json:"char_start"`
	CharEnd    int    `json:"char_end"`
	Ordinal    int    `json:"ordinal"`
}

func (s *Server) addDocsTools(m *mcp.Server) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(false), IdempotentHint: true}
	addTool(s, m, &mcp.Tool{
		Name:  "search_docs",
		Title: "Search uploaded documents",
		Description: "Search the files uploaded to a conversation (PDFs, text, Markdown, HTML) and return the most relevant passages. " +
			"Use it before answering questions about the user's documents, and quote what it returns. " +
			"Hybrid mode (default) finds passages by meaning and by exact words, names, codes and numbers. " +
			"Each chunk has its file name, page number and a chunk_id that get_chunk opens.",
		Annotations: withTitle(readOnly, "Search uploaded documents"),
	}, 0, s.searchDocs)
	addTool(s, m, &mcp.Tool{
		Name:        "list_files",
		Title:       "List uploaded files",
		Description: "List the files uploaded to a conversation with their type, size, number of chunks and processing status (processing, ready or failed, with the reason). An unknown conversation has no files.",
		Annotations: withTitle(readOnly, "List uploaded files"),
	}, 0, s.listFiles)
	addTool(s, m, &mcp.Tool{
		Name:        "get_chunk",
		Title:       "Open a document chunk",
		Description: "Return one chunk of an uploaded file in full, by the chunk_id search_docs gave, with its file name, page number and character offsets in the file's text.",
		Annotations: withTitle(readOnly, "Open a document chunk"),
	}, 0, s.getChunk)
}

func withTitle(a *mcp.ToolAnnotations, title string) *mcp.ToolAnnotations {
	c := *a
	c.Title = title
	return &c
}

func (s *Server) searchDocs(ctx context.Context, _ *mcp.CallToolRequest, in SearchDocsInput) (*mcp.CallToolResult, SearchDocsOutput, error) {
	q := strings.TrimSpace(in.Query)
	if q == "" {
		return nil, SearchDocsOutput{}, badArg("query is empty: send what to look for")
	}
	if n := utf8.RuneCountInString(q); n > maxQueryRunes {
		return nil, SearchDocsOutput{}, badArg("query has %d characters: send at most %d", n, maxQueryRunes)
	}
	conv, err := conversationID(in.ConversationID)
	if err != nil {
		return nil, SearchDocsOutput{}, err
	}
	topK := in.TopK
	if topK == 0 {
		topK = 5
	}
	if topK < 1 || topK > 50 {
		return nil, SearchDocsOutput{}, badArg("top_k %d is out of range: send 1 to 50", in.TopK)
	}
	threshold := 0.7
	if in.Threshold != nil {
		threshold = *in.Threshold
	}
	if threshold < 0 || threshold > 1 {
		return nil, SearchDocsOutput{}, badArg("threshold %g is out of range: send a similarity from 0 to 1", threshold)
	}
	mode := docs.Mode(strings.ToLower(strings.TrimSpace(in.Mode)))
	switch mode {
	case "":
		mode = docs.Hybrid
	case docs.Hybrid, docs.Vector, docs.Keyword:
	default:
		return nil, SearchDocsOutput{}, badArg("unknown mode %q: send hybrid, vector or keyword", in.Mode)
	}
	hits, err := s.deps.Docs.Search(ctx, docs.Query{Text: q, ConversationID: conv, TopK: topK, Threshold: threshold, Mode: mode})
	if err != nil {
		return nil, SearchDocsOutput{}, fmt.Errorf("search documents: %w", err)
	}
	out := SearchDocsOutput{Chunks: make([]DocChunk, 0, len(hits))}
	for _, h := range hits {
		out.Chunks = append(out.Chunks, DocChunk{ChunkID: h.ChunkID, FileID: h.FileID, FileName: h.FileName, Content: h.Content,
			Similarity: round4(h.Similarity), Score: round4(h.Score), PageNumber: page(h.PageNumber)})
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: searchDocsText(q, out)}}}, out, nil
}

func (s *Server) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in ListFilesInput) (*mcp.CallToolResult, ListFilesOutput, error) {
	conv, err := conversationID(in.ConversationID)
	if err != nil {
		return nil, ListFilesOutput{}, err
	}
	files, err := s.deps.Docs.ListFiles(ctx, conv)
	if err != nil {
		return nil, ListFilesOutput{}, fmt.Errorf("list files: %w", err)
	}
	out := ListFilesOutput{Files: make([]FileInfo, 0, len(files))}
	for _, f := range files {
		out.Files = append(out.Files, fileInfo(f))
	}
	var b strings.Builder
	if len(out.Files) == 0 {
		fmt.Fprintf(&b, "No files in conversation %s.", conv)
	}
	for i, f := range out.Files {
		fmt.Fprintf(&b, "%d. %s (%s, %d bytes, %d chunks, %s", i+1, f.FileName, f.MIMEType, f.SizeBytes, f.ChunkCount, f.Status)
		if f.Error != "" {
			fmt.Fprintf(&b, ": %s", f.Error)
		}
		fmt.Fprintf(&b, ") id %s\n", f.ID)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
}

func (s *Server) getChunk(ctx context.Context, _ *mcp.CallToolRequest, in GetChunkInput) (*mcp.CallToolResult, GetChunkOutput, error) {
	id := strings.TrimSpace(in.ChunkID)
	if id == "" {
		return nil, GetChunkOutput{}, badArg("chunk_id is empty: send a chunk_id from search_docs")
	}
	c, err := s.deps.Docs.GetChunk(ctx, id)
	if err != nil {
		return nil, GetChunkOutput{}, fmt.Errorf("get chunk %s: %w", id, err)
	}
	if !identityFrom(ctx).allows(c.ConversationID) {
		return nil, GetChunkOutput{}, errForbiddenConversation
	}
	out := GetChunkOutput{ChunkID: c.ID, Content: c.Content, Metadata: ChunkMetadata{FileID: c.FileID, FileName: c.FileName,
		PageNumber: page(c.PageNumber), CharStart: c.CharStart, CharEnd: c.CharEnd, Ordinal: c.Ordinal}}
	where := c.FileName
	if c.PageNumber > 0 {
		where += fmt.Sprintf(", page %d", c.PageNumber)
	}
	text := fmt.Sprintf("[%s, characters %d-%d]\n%s", where, c.CharStart, c.CharEnd, c.Content)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

func fileInfo(f docs.File) FileInfo {
	return FileInfo{ID: f.ID, FileName: f.FileName, MIMEType: f.MIMEType, SizeBytes: f.SizeBytes, ChunkCount: f.ChunkCount,
		Status: f.Status, Error: f.Error, CreatedAt: f.CreatedAt.UTC().Format("2006-01-02T15:04:05Z")}
}

// conversationID checks a conversation id: any non-empty text without
// control characters, as chat products use uuids, numbers or slugs.
func conversationID(raw string) (string, error) {
	id := strings.TrimSpace(raw)
	if id == "" {
		return "", badArg("conversation_id is empty: send the id of the conversation the files were uploaded to")
	}
	if len(id) > 200 || strings.IndexFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return "", badArg("conversation_id %q is malformed: send at most 200 printable characters", truncate(id, 40))
	}
	return id, nil
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}

// page maps the store's 0 (a format without pages) to null.
func page(n int) *int {
	if n <= 0 {
		return nil
	}
	return &n
}

func round4(f float64) float64 {
	return float64(int64(f*10000+0.5)) / 10000
}

func searchDocsText(q string, out SearchDocsOutput) string {
	var b strings.Builder
	if len(out.Chunks) == 0 {
		fmt.Fprintf(&b, "No passages found for %q. Check list_files for the conversation's files, or lower threshold.", q)
		return b.String()
	}
	fmt.Fprintf(&b, "Passages for %q:\n", q)
	for i, c := range out.Chunks {
		where := c.FileName
		if c.PageNumber != nil {
			where += fmt.Sprintf(", page %d", *c.PageNumber)
		}
		fmt.Fprintf(&b, "\n%d. [%s] similarity %.2f, chunk_id %s\n%s\n", i+1, where, c.Similarity, c.ChunkID, c.Content)
	}
	return b.String()
}

// docsError maps the document store's errors to the contract's.
func docsError(err error) *ToolError {
	switch {
	case errors.Is(err, docs.ErrInvalidID):
		return &ToolError{Code: CodeToolError, Message: "invalid arguments: " + err.Error() + " (send an id exactly as search_docs or list_files returned it)"}
	case errors.Is(err, docs.ErrEmptyQuery), errors.Is(err, docs.ErrInvalidArgument):
		return &ToolError{Code: CodeToolError, Message: "invalid arguments: " + err.Error()}
	case errors.Is(err, docs.ErrNotFound):
		return &ToolError{Code: CodeToolError, Message: err.Error() + " (it may have been deleted; search again)"}
	case errors.Is(err, docs.ErrUnavailable):
		return &ToolError{Code: CodeToolError, Message: "the document store is unavailable right now: " + err.Error(), Retryable: true}
	case errors.Is(err, docs.ErrSchemaOutdated):
		return &ToolError{Code: CodeToolError, Message: err.Error()}
	case errors.Is(err, docs.ErrClosed):
		// Another replica, or this one after a restart, can answer.
		return &ToolError{Code: CodeToolError, Message: "the server is shutting down; call again", Retryable: true}
	case errors.Is(err, embed.ErrUnavailable):
		return &ToolError{Code: CodeToolError, Message: "the embedding service is unavailable right now: " + err.Error(), Retryable: true}
	}
	return nil
}
