package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/docs/extract"
	"github.com/mcpsearch/mcpsearch/embed"
)

// SearchDocsInput is the search_docs tool's arguments.
type SearchDocsInput struct {
	Query          string   `json:"query" jsonschema:"what to look for in the conversation's files, in natural language or as exact words, names, codes or numbers (at most 2000 characters)"`
	ConversationID string   `json:"conversation_id" jsonschema:"the conversation whose uploaded files are searched"`
	TopK           int      `json:"top_k,omitempty" jsonschema:"how many chunks to return, 1 to 50 (default 5)"`
	Threshold      *float64 `json:"threshold,omitempty" jsonschema:"minimum similarity 0 to 1 of a passage's meaning to the query's (cosine of their embeddings); the default is calibrated for the server's embedding model; in hybrid mode chunks that match the query's words are kept whatever their similarity, in keyword mode it is not applied"`
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
	// PageStart and PageEnd are the pages the chunk spans (null for
	// formats without pages); page_number is page_start.
	PageStart *int `json:"page_start"`
	PageEnd   *int `json:"page_end"`
	// Source is the URL the file was fetched from, absent for an upload.
	Source string `json:"source,omitempty"`
	// Location says where the chunk comes from, in its format's terms.
	Location Location `json:"location"`
}

// Location says where a passage comes from in its file, in the file
// format's own terms, for a citation: pages (PDF, scans), slides and the
// first one's title (decks), a sheet and its cells (spreadsheets, CSV), a
// heading path (word-processing documents, e-books, HTML). Fields that do
// not apply are absent; citation says it all in words.
type Location struct {
	Citation   string   `json:"citation" jsonschema:"where the passage is, in words: pages 7-8, slides 3-4 (Results), sheet Budget, A1:F40, Contract > 2. Scope; empty when the file has no such places"`
	PageStart  int      `json:"page_start,omitempty" jsonschema:"first page, from 1"`
	PageEnd    int      `json:"page_end,omitempty" jsonschema:"last page"`
	SlideStart int      `json:"slide_start,omitempty" jsonschema:"first slide, from 1, in presentation order"`
	SlideEnd   int      `json:"slide_end,omitempty" jsonschema:"last slide"`
	SlideTitle string   `json:"slide_title,omitempty" jsonschema:"the first slide's title"`
	Sheet      string   `json:"sheet,omitempty" jsonschema:"the spreadsheet's sheet"`
	Cells      string   `json:"cells,omitempty" jsonschema:"the range of cells, such as A1:F40"`
	Headings   []string `json:"headings,omitempty" jsonschema:"the heading path, outermost first"`
	OCR        bool     `json:"ocr,omitempty" jsonschema:"true when some of the text was recognised by OCR from an image of the page"`
}

func location(l extract.Location) Location {
	return Location{Citation: l.String(), PageStart: l.PageStart, PageEnd: l.PageEnd, SlideStart: l.SlideStart,
		SlideEnd: l.SlideEnd, SlideTitle: l.SlideTitle, Sheet: l.Sheet, Cells: l.Cells, Headings: l.Headings, OCR: l.OCR}
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
	// Source is the URL the file was fetched from, absent for an upload.
	Source string `json:"source,omitempty"`
	// Note says what to know of a ready file, such as the pages of a scan
	// that still need OCR and why; absent when nothing.
	Note string `json:"note,omitempty"`
}

// GetChunkInput is the get_chunk tool's arguments.
type GetChunkInput struct {
	ChunkID string `json:"chunk_id" jsonschema:"a chunk_id returned by search_docs"`
	// Before and After read around a hit in one call.
	Before int `json:"before,omitempty" jsonschema:"how many chunks before this one to include, 0 to 5 (default 0): the passage comes back as one text, overlaps given once"`
	After  int `json:"after,omitempty" jsonschema:"how many chunks after this one to include, 0 to 5 (default 0)"`
}

// GetChunkOutput is the get_chunk tool's structured result.
type GetChunkOutput struct {
	ChunkID  string        `json:"chunk_id"`
	Content  string        `json:"content"`
	Metadata ChunkMetadata `json:"metadata"`
	// ChunkIDs lists the chunks merged into content when before or after
	// asked for neighbours, in order.
	ChunkIDs []string `json:"chunk_ids,omitempty"`
}

// ChunkMetadata locates a chunk in its file.
type ChunkMetadata struct {
	FileID     string `json:"file_id"`
	FileName   string `json:"file_name"`
	PageNumber *int   `json:"page_number"`
	PageStart  *int   `json:"page_start"`
	PageEnd    *int   `json:"page_end"`
	Source     string `json:"source,omitempty"`
	CharStart  int    `json:"char_start"`
	CharEnd    int    `json:"char_end"`
	Ordinal    int    `json:"ordinal"`
	// Location says where the chunk (or the merged passage) comes from.
	Location Location `json:"location"`
}

// The conversation each docs tool touches, for the scope check.
func (in SearchDocsInput) scope() scope { return inConversation(strings.TrimSpace(in.ConversationID)) }
func (in ListFilesInput) scope() scope  { return inConversation(strings.TrimSpace(in.ConversationID)) }
func (in GetChunkInput) scope() scope   { return scope{perResult: true} }

// The conversation of the documents tools defaults to the server's.
func (in *SearchDocsInput) setDefaultConversation(id string) {
	if strings.TrimSpace(in.ConversationID) == "" {
		in.ConversationID = id
	}
}

func (in *ListFilesInput) setDefaultConversation(id string) {
	if strings.TrimSpace(in.ConversationID) == "" {
		in.ConversationID = id
	}
}

// Documents reads and deletes uploaded documents (docs.Store).
type Documents interface {
	Search(ctx context.Context, q docs.Query) ([]docs.Hit, error)
	// DefaultThreshold is the similarity a query without a threshold
	// needs, calibrated for the embedder in use.
	DefaultThreshold() float64
	ListFiles(ctx context.Context, conversationID string) ([]docs.File, error)
	GetFile(ctx context.Context, id string) (docs.File, error)
	GetChunk(ctx context.Context, id string) (docs.Chunk, error)
	Passage(ctx context.Context, chunkID string, before, after int) (docs.Passage, error)
	FileText(ctx context.Context, id string) (docs.File, string, error)
	RecentFiles(ctx context.Context, conversations []string, limit int) ([]docs.File, error)
	DeleteFile(ctx context.Context, id string) error
	ListConversations(ctx context.Context, only []string, limit int) ([]docs.Conversation, error)
	DeleteConversation(ctx context.Context, conversationID string) (int, error)
	Ping(ctx context.Context) error
}

// Uploads takes uploaded files into the ingestion pipeline (docs.Ingester).
type Uploads interface {
	// Reserve takes a queue slot before a body is read (ErrBusy when none
	// is free); SubmitFiles then stores the request's uploads, spooled to
	// files or fetched, in one transaction.
	Reserve() (*docs.Ticket, error)
	SubmitFiles(ctx context.Context, t *docs.Ticket, us []docs.Upload) ([]docs.File, []error)
	IngestStats() docs.IngestStats
}

// docsTools answers the documents tools.
type docsTools struct {
	store Documents
	// defaultConversation is the conversation of calls that name none.
	defaultConversation string
}

func newDocsTools(e toolEnv) (docsTools, bool) {
	return docsTools{store: e.deps.Docs, defaultConversation: e.cfg.DefaultConversation}, e.deps.Docs != nil && e.cfg.DocsEnabled
}

func (d docsTools) ping(ctx context.Context) error { return d.store.Ping(ctx) }

// docsFailures are the documents store's failures, for its tools and the
// upload API. A database or embedding service that cannot be reached, or
// logged in to, is one sentence to the caller: the error's own text names
// the database user, its name and address, and repeats what wrapped it.
func docsFailures() []failure {
	return []failure{
		{is: []error{docs.ErrTooLarge}, status: http.StatusRequestEntityTooLarge},
		{is: []error{docs.ErrUnsupportedType}, status: http.StatusUnsupportedMediaType},
		{is: []error{docs.ErrInvalidID}, status: http.StatusBadRequest, prefix: "invalid arguments: ",
			suffix: " (send an id exactly as search_docs or list_files returned it)"},
		{is: []error{docs.ErrEmptyQuery, docs.ErrInvalidArgument}, status: http.StatusBadRequest, prefix: "invalid arguments: "},
		{is: []error{docs.ErrNotFound}, status: http.StatusNotFound, suffix: " (it may have been deleted; search again)"},
		{is: []error{docs.ErrBusy}, status: http.StatusServiceUnavailable, retryable: always},
		// Waiting will not help: the operator must fix DATABASE_URL.
		{is: []error{docs.ErrMisconfigured}, status: http.StatusServiceUnavailable,
			clean: "the document store cannot log in to its database; the operator must fix DATABASE_URL"},
		{is: []error{docs.ErrUnavailable}, status: http.StatusServiceUnavailable, retryable: always,
			clean: "the document store is unavailable right now; try again shortly"},
		// Another replica, or this one after a restart, can answer.
		{is: []error{docs.ErrClosed}, status: http.StatusServiceUnavailable, retryable: always,
			clean: "the server is shutting down; call again"},
		{is: []error{embed.ErrUnavailable}, status: http.StatusServiceUnavailable, retryable: always,
			clean: "the embedding service is unavailable right now; try again shortly"},
		{is: []error{docs.ErrSchemaOutdated}, status: http.StatusServiceUnavailable,
			clean: "the document store's database schema is outdated; the operator must run `mcpsearch migrate`"},
	}
}

var docsReadOnly = &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(false), IdempotentHint: true}

// docsTool declares a tool of the documents store: they share their
// handler, its failures and the database /readyz checks.
func docsTool[In scoped, Out any](def *mcp.Tool, constrain func(docsTools, *jsonschema.Schema),
	run func(docsTools, context.Context, In) (*mcp.CallToolResult, Out, error)) declared {
	return tool[docsTools, In, Out]{def: def, handler: newDocsTools, constrain: constrain, run: run,
		failures: docsFailures(), probe: "database", ping: docsTools.ping}
}

func searchDocsTool() declared {
	return docsTool(&mcp.Tool{
		Name:  "search_docs",
		Title: "Search uploaded documents",
		Description: "Search the files uploaded to a conversation (PDFs and scans, Word, PowerPoint, Excel, OpenDocument, e-books, CSV, RTF, text, Markdown, HTML) and return the most relevant passages. " +
			"Use it before answering questions about the user's documents, and quote what it returns. " +
			"Hybrid mode (default) finds passages by meaning and by exact words, names, codes and numbers. " +
			"Each chunk has its file name, where it is in the file (pages, slides, sheet and cells, or heading path: cite it) and a chunk_id that get_chunk opens.",
		Annotations: withTitle(docsReadOnly, "Search uploaded documents"),
	}, docsTools.searchDocsSchema, docsTools.searchDocs)
}

func listFilesTool() declared {
	return docsTool(&mcp.Tool{
		Name:        "list_files",
		Title:       "List uploaded files",
		Description: "List the files uploaded to a conversation with their type, size, number of chunks and processing status (processing, ready or failed, with the reason, and a note such as pages that still need OCR). An unknown conversation has no files.",
		Annotations: withTitle(docsReadOnly, "List uploaded files"),
	}, docsTools.conversationSchema, docsTools.listFiles)
}

func getChunkTool() declared {
	return docsTool(&mcp.Tool{
		Name:        "get_chunk",
		Title:       "Open a document chunk",
		Description: "Return one chunk of an uploaded file in full, by the chunk_id search_docs gave, with its file name, where it is in the file (pages, slides, sheet and cells, or heading path) and its character offsets in the file's text.",
		Annotations: withTitle(docsReadOnly, "Open a document chunk"),
	}, docsTools.getChunkSchema, docsTools.getChunk)
}

// maxConversationIDLen bounds a conversation id in the published schemas;
// the document store checks the rest (printable text).
const maxConversationIDLen = 256

// maxIDLen bounds file and chunk ids (uuids) in the published schemas.
const maxIDLen = 64

// conversationSchema publishes the limits of conversation_id, which a
// call may leave out when the server has a default conversation.
func (d docsTools) conversationSchema(sc *jsonschema.Schema) {
	p := prop(sc, "conversation_id")
	p.MinLength, p.MaxLength = ptr(1), ptr(maxConversationIDLen)
	if def := d.defaultConversation; def != "" {
		// With a default, a call may leave the conversation out.
		sc.Required = slices.DeleteFunc(sc.Required, func(n string) bool { return n == "conversation_id" })
		p.Description += fmt.Sprintf(" (default %q, the server's own)", def)
	}
}

func (d docsTools) searchDocsSchema(sc *jsonschema.Schema) {
	d.conversationSchema(sc)
	q := prop(sc, "query")
	q.MinLength, q.MaxLength = ptr(1), ptr(docs.MaxQueryRunes)
	k := prop(sc, "top_k")
	k.Minimum, k.Maximum, k.Default = ptr(1.0), ptr(float64(docs.MaxTopK)), []byte(fmt.Sprint(docs.DefaultTopK))
	t := prop(sc, "threshold")
	if d.store != nil {
		t.Description += fmt.Sprintf(" (default here %.2f: similarity is relative to the embedding model, whose unrelated passages score near 0 and close paraphrases highest)", d.store.DefaultThreshold())
	}
	t.Minimum, t.Maximum = ptr(0.0), ptr(1.0)
	prop(sc, "mode").Enum = enum(string(docs.Hybrid), string(docs.Vector), string(docs.Keyword))
}

func (docsTools) getChunkSchema(sc *jsonschema.Schema) {
	p := prop(sc, "chunk_id")
	p.MinLength, p.MaxLength = ptr(1), ptr(maxIDLen)
	for _, name := range []string{"before", "after"} {
		n := prop(sc, name)
		n.Minimum, n.Maximum = ptr(0.0), ptr(float64(docs.MaxPassageNeighbours))
	}
}

func withTitle(a *mcp.ToolAnnotations, title string) *mcp.ToolAnnotations {
	c := *a
	c.Title = title
	return &c
}

func (d docsTools) searchDocs(ctx context.Context, in SearchDocsInput) (*mcp.CallToolResult, SearchDocsOutput, error) {
	q := docs.Query{Text: strings.TrimSpace(in.Query), ConversationID: in.scope().conversation, TopK: in.TopK,
		Threshold: in.Threshold, Mode: docs.Mode(in.Mode)}
	hits, err := d.store.Search(ctx, q)
	if err != nil {
		return nil, SearchDocsOutput{}, fmt.Errorf("search documents: %w", err)
	}
	out := SearchDocsOutput{Chunks: make([]DocChunk, 0, len(hits))}
	for _, h := range hits {
		out.Chunks = append(out.Chunks, DocChunk{ChunkID: h.ChunkID, FileID: h.FileID, FileName: h.FileName, Content: h.Content,
			Similarity: round4(h.Similarity), Score: round4(h.Score), PageNumber: page(h.PageNumber),
			PageStart: page(h.PageStart), PageEnd: page(h.PageEnd), Source: h.Source, Location: location(h.Location)})
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: searchDocsText(q.Text, out)}}}, out, nil
}

func (d docsTools) listFiles(ctx context.Context, in ListFilesInput) (*mcp.CallToolResult, ListFilesOutput, error) {
	conv := in.scope().conversation
	files, err := d.store.ListFiles(ctx, conv)
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
		if f.Note != "" {
			fmt.Fprintf(&b, "; %s", f.Note)
		}
		fmt.Fprintf(&b, ") id %s\n", f.ID)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
}

func (d docsTools) getChunk(ctx context.Context, in GetChunkInput) (*mcp.CallToolResult, GetChunkOutput, error) {
	id := strings.TrimSpace(in.ChunkID)
	// Another tenant's chunk is answered exactly like an unknown one, so
	// that ids reveal nothing across tenants.
	notFound := fmt.Errorf("get chunk: no chunk %q: %w", id, docs.ErrNotFound)
	if in.Before > 0 || in.After > 0 {
		return d.getPassage(ctx, id, in, notFound)
	}
	c, err := d.store.GetChunk(ctx, id)
	if errors.Is(err, docs.ErrNotFound) {
		return nil, GetChunkOutput{}, notFound
	}
	if err != nil {
		return nil, GetChunkOutput{}, fmt.Errorf("get chunk %q: %w", id, err)
	}
	if allowConversation(ctx, c.ConversationID) != nil {
		return nil, GetChunkOutput{}, notFound
	}
	out := GetChunkOutput{ChunkID: c.ID, Content: c.Content, Metadata: ChunkMetadata{FileID: c.FileID, FileName: c.FileName,
		PageNumber: page(c.PageNumber), PageStart: page(c.PageStart), PageEnd: page(c.PageEnd), Source: c.Source,
		CharStart: c.CharStart, CharEnd: c.CharEnd, Ordinal: c.Ordinal, Location: location(c.Location)}}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: chunkText(out)}}}, out, nil
}

// getPassage answers get_chunk with neighbours: one merged text.
func (d docsTools) getPassage(ctx context.Context, id string, in GetChunkInput, notFound error) (*mcp.CallToolResult, GetChunkOutput, error) {
	p, err := d.store.Passage(ctx, id, in.Before, in.After)
	if errors.Is(err, docs.ErrNotFound) {
		return nil, GetChunkOutput{}, notFound
	}
	if err != nil {
		return nil, GetChunkOutput{}, fmt.Errorf("get chunk %q: %w", id, err)
	}
	if allowConversation(ctx, p.ConversationID) != nil {
		return nil, GetChunkOutput{}, notFound
	}
	out := GetChunkOutput{ChunkID: id, Content: p.Content, ChunkIDs: p.ChunkIDs, Metadata: ChunkMetadata{FileID: p.FileID, FileName: p.FileName,
		PageNumber: page(p.PageStart), PageStart: page(p.PageStart), PageEnd: page(p.PageEnd), Source: p.Source,
		CharStart: p.CharStart, CharEnd: p.CharEnd, Location: location(p.Location)}}
	for i, cid := range p.ChunkIDs {
		if cid == id {
			out.Metadata.Ordinal = i
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: chunkText(out)}}}, out, nil
}

// chunkText is get_chunk's text block: where the text is, then the text.
func chunkText(out GetChunkOutput) string {
	where := citation(out.Metadata.FileName, out.Metadata.Location, out.Metadata.Source)
	text := fmt.Sprintf("[%s, characters %d-%d]\n%s", where, out.Metadata.CharStart, out.Metadata.CharEnd, out.Content)
	if len(out.ChunkIDs) > 1 {
		text += fmt.Sprintf("\n\n[%d chunks merged: %s]", len(out.ChunkIDs), strings.Join(out.ChunkIDs, ", "))
	}
	return text
}

// citation names a passage for the model to cite: the file, where in it
// ("pages 7-8", "slides 3-4 (Results)", "sheet Budget, A1:F40",
// "Contract > 2. Scope"), and the page it was fetched from.
func citation(fileName string, l Location, source string) string {
	where := fileName
	if l.Citation != "" {
		where += ", " + l.Citation
	}
	if source != "" {
		where += ", from " + source
	}
	return where
}

func fileInfo(f docs.File) FileInfo {
	return FileInfo{ID: f.ID, FileName: f.FileName, MIMEType: f.MIMEType, SizeBytes: f.SizeBytes, ChunkCount: f.ChunkCount,
		Status: f.Status, Error: f.Error, CreatedAt: f.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), Source: f.Source, Note: f.Note}
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
		fmt.Fprintf(&b, "\n%d. [%s] similarity %.2f, chunk_id %s\n%s\n", i+1, citation(c.FileName, c.Location, c.Source), c.Similarity, c.ChunkID, c.Content)
	}
	return b.String()
}
