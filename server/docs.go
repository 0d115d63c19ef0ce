package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/research"
)

// SearchDocsInput is the search_docs tool's arguments. What query,
// threshold and mode say depends on the server's embedder (searchWords).
type SearchDocsInput struct {
	Query          string   `json:"query"`
	ConversationID string   `json:"conversation_id" jsonschema:"the conversation whose uploaded files are searched"`
	TopK           int      `json:"top_k,omitempty" jsonschema:"how many chunks to return, 1 to 50 (default 5)"`
	Threshold      *float64 `json:"threshold,omitempty"`
	Mode           string   `json:"mode,omitempty"`
	SourceID       string   `json:"source_id,omitempty" jsonschema:"search only the files of this source of the conversation (a site crawled or a folder ingested): a source_id from list_sources or add_document's crawl (default: every file)"`
}

// SearchDocsOutput is the search_docs tool's structured result.
type SearchDocsOutput struct {
	Chunks []DocChunk `json:"chunks"`
	// MoreChunkIDs are passages that ranked within top_k but did not fit
	// the result size limit, best first.
	MoreChunkIDs []string `json:"more_chunk_ids,omitempty" jsonschema:"chunks that ranked within top_k but did not fit the result size limit, best first: get_chunk opens each"`
	// Note says in one line when the server's reranker could not reorder
	// the passages.
	Note string `json:"note,omitempty"`
}

// searchWords is what search_docs tells agents about what its search can
// match, which depends on the embedder: a trained model finds passages by
// meaning, the hashing embedder by words and pieces of words only, so an
// agent must send the terms the documents use.
type searchWords struct {
	hybrid, query, threshold, thresholdDefault, mode, noHits string
}

// searchWordsFor returns search_docs's words for an embedder that is
// semantic (embed.Semantic) or not.
func searchWordsFor(semantic bool) searchWords {
	const thresholdUse = "; the default is calibrated for the server's embedding model; in hybrid mode chunks that match the query's words are kept whatever their similarity, in keyword mode it is not applied"
	if semantic {
		return searchWords{
			hybrid:           "Hybrid mode (default) finds passages by meaning and by exact words, names, codes and numbers.",
			query:            "what to look for in the conversation's files, in natural language or as exact words, names, codes or numbers (at most 2000 characters)",
			threshold:        "minimum similarity 0 to 1 of a passage's meaning to the query's (cosine of their embeddings)" + thresholdUse,
			thresholdDefault: " (default here %.2f: similarity is relative to the embedding model, whose unrelated passages score near 0 and close paraphrases highest)",
			mode:             "hybrid (default: meaning and exact words fused), vector (meaning only) or keyword (exact words only, BM25)",
			noHits:           "Check list_files for the conversation's files, or lower threshold.",
		}
	}
	return searchWords{
		hybrid: "This server's embedder matches words and pieces of words, not meaning: hybrid mode (default) finds passages holding the query's words, names, codes and numbers, " +
			"then passages sharing parts of them (other forms of a word, parts of an identifier), but not paraphrases or synonyms. " +
			"Search with the terms the documents are likely to use, and try other words if nothing comes back.",
		query:            "the words to look for in the conversation's files: terms, names, codes or numbers the passages are likely to contain, since a paraphrase that shares no word with them is not found (at most 2000 characters)",
		threshold:        "minimum similarity 0 to 1 of a passage's words and pieces of words to the query's (cosine of their hashed vectors, which carry no meaning)" + thresholdUse,
		thresholdDefault: " (default here %.2f: passages sharing no word or piece of a word with the query score near 0, those holding most of its words highest)",
		mode:             "hybrid (default: exact words ranked by BM25, then passages sharing pieces of words), vector (shared words and pieces of words only) or keyword (exact words only, BM25)",
		noHits:           "This server matches words, not meaning: search again with the terms the documents would use (names, codes, other forms of the words), check list_files for the conversation's files, or lower threshold.",
	}
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
	Status         string `json:"status,omitempty" jsonschema:"only the files in this status: processing, ready or failed (default: every file)"`
	Prefix         string `json:"prefix,omitempty" jsonschema:"only the files whose name, or the URL they were fetched from, begins with this (case-sensitive), such as report- or https://go.dev/doc/"`
	Limit          int    `json:"limit,omitempty" jsonschema:"how many files to return, newest first, 1 to 500 (default 50)"`
	Cursor         string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page, with the same status and prefix, to read on; leave it out to start with the newest file"`
}

// ListFilesOutput is the list_files tool's structured result, and the
// upload API's listing.
type ListFilesOutput struct {
	Files []FileInfo `json:"files"`
	// Total counts the files the status and prefix select, in every page.
	Total int `json:"total" jsonschema:"how many files the conversation holds with this status and prefix, in every page"`
	// NextCursor continues the listing; absent on the last page.
	NextCursor string `json:"next_cursor,omitempty" jsonschema:"send it as cursor, with the same status and prefix, for the next page; absent on the last page"`
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
	// Truncated says content was cut to fit the result size limit.
	Truncated bool `json:"truncated,omitempty" jsonschema:"true when content was cut to fit the result size limit: ask for fewer neighbours, open the chunks one by one, or read the file's text as its resource"`
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
	// Embedder is the embedder searches use: whether it is semantic
	// decides what search_docs tells agents it can match.
	Embedder() embed.Embedder
	ListFilesPage(ctx context.Context, q docs.FileQuery) (docs.FilePage, error)
	GetFile(ctx context.Context, id string) (docs.File, error)
	GetChunk(ctx context.Context, id string) (docs.Chunk, error)
	Passage(ctx context.Context, chunkID string, before, after int) (docs.Passage, error)
	FileText(ctx context.Context, id string) (docs.File, string, error)
	RecentFiles(ctx context.Context, conversations []string, limit int) ([]docs.File, error)
	DeleteFile(ctx context.Context, id string) error
	ListConversationsPage(ctx context.Context, q docs.ConversationQuery) (docs.ConversationPage, error)
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
	// words says what search can match with the store's embedder; without
	// a store, what the default (hashing) embedder can.
	words searchWords
	limit resultLimit
	// reranker reorders a search's best research.RerankDepth passages;
	// nil keeps the fused order.
	reranker Reranker
}

func newDocsTools(e toolEnv) (docsTools, bool) {
	semantic := e.deps.Docs != nil && embed.Semantic(e.deps.Docs.Embedder())
	return docsTools{store: e.deps.Docs, defaultConversation: e.cfg.DefaultConversation, words: searchWordsFor(semantic), limit: newResultLimit(e.cfg),
		reranker: e.deps.Reranker}, e.deps.Docs != nil && e.cfg.DocsEnabled
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
func docsTool[In scoped, Out any](def *mcp.Tool, more string, constrain func(docsTools, *jsonschema.Schema),
	run func(docsTools, context.Context, In) (*mcp.CallToolResult, Out, error)) tool[docsTools, In, Out] {
	return tool[docsTools, In, Out]{def: def, handler: newDocsTools, constrain: constrain, run: run, more: more,
		failures: docsFailures(), probe: "database", ping: docsTools.ping}
}

// searchDocsDescription is search_docs's description; %s is what hybrid
// search can match with the server's embedder (searchWords.hybrid).
const searchDocsDescription = "Search the files uploaded to a conversation (PDFs and scans, Word, PowerPoint, Excel, OpenDocument, e-books, CSV, RTF, text, Markdown, HTML) and return the most relevant passages. " +
	"Use it before answering questions about the user's documents, and quote what it returns. " +
	"%s " +
	"Each chunk has its file name, where it is in the file (pages, slides, sheet and cells, or heading path: cite it) and a chunk_id that get_chunk opens. " +
	"When the conversation holds several sites or folders (list_sources), source_id searches one of them alone."

func searchDocsTool() declared {
	t := docsTool(&mcp.Tool{
		Name:        "search_docs",
		Title:       "Search uploaded documents",
		Annotations: withTitle(docsReadOnly, "Search uploaded documents"),
	}, "open the passages left out with get_chunk, or ask for fewer (top_k)", docsTools.searchDocsSchema, docsTools.searchDocs)
	t.describe = func(d docsTools, def *mcp.Tool) { def.Description = fmt.Sprintf(searchDocsDescription, d.words.hybrid) }
	return t
}

func listFilesTool() declared {
	return docsTool(&mcp.Tool{
		Name:  "list_files",
		Title: "List uploaded files",
		Description: "List the files uploaded to a conversation, newest first, a page at a time, with their type, size, number of chunks and processing status " +
			"(processing, ready or failed, with the reason, and a note such as pages that still need OCR), and how many there are in all. " +
			"Narrow the list by status, or by the beginning of a file name or source URL; when next_cursor is given, send it as cursor to read on. " +
			"An unknown conversation has no files.",
		Annotations: withTitle(docsReadOnly, "List uploaded files"),
	}, "call list_files again with cursor set to next_cursor, or a smaller limit", docsTools.listFilesSchema, docsTools.listFiles)
}

func getChunkTool() declared {
	return docsTool(&mcp.Tool{
		Name:        "get_chunk",
		Title:       "Open a document chunk",
		Description: "Return one chunk of an uploaded file in full, by the chunk_id search_docs gave, with its file name, where it is in the file (pages, slides, sheet and cells, or heading path) and its character offsets in the file's text.",
		Annotations: withTitle(docsReadOnly, "Open a document chunk"),
	}, "ask for fewer neighbours (before, after), or open the chunks one by one", docsTools.getChunkSchema, docsTools.getChunk)
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
	q.Description = d.words.query
	t := prop(sc, "threshold")
	t.Description = d.words.threshold
	if d.store != nil {
		t.Description += fmt.Sprintf(d.words.thresholdDefault, d.store.DefaultThreshold())
	}
	t.Minimum, t.Maximum = ptr(0.0), ptr(1.0)
	m := prop(sc, "mode")
	m.Description = d.words.mode
	m.Enum = enum(string(docs.Hybrid), string(docs.Vector), string(docs.Keyword))
	prop(sc, "source_id").MaxLength = ptr(maxIDLen)
}

// listFilesSchema publishes list_files's limits: the conversation's, the
// statuses, the page size and the lengths of prefix and cursor.
func (d docsTools) listFilesSchema(sc *jsonschema.Schema) {
	d.conversationSchema(sc)
	prop(sc, "status").Enum = enum(docs.StatusProcessing, docs.StatusReady, docs.StatusFailed)
	// Characters of up to four bytes each stay within the store's bound.
	prop(sc, "prefix").MaxLength = ptr(docs.MaxPrefixLen / 4)
	pageSchema(sc)
}

// pageSchema publishes the limits of a paged listing's limit and cursor.
func pageSchema(sc *jsonschema.Schema) {
	l := prop(sc, "limit")
	l.Minimum, l.Maximum, l.Default = ptr(1.0), ptr(float64(docs.MaxListLimit)), []byte(fmt.Sprint(docs.DefaultListLimit))
	prop(sc, "cursor").MaxLength = ptr(docs.MaxCursorLen)
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
		Threshold: in.Threshold, Mode: docs.Mode(in.Mode), SourceID: in.SourceID}
	topK := cmp.Or(q.TopK, docs.DefaultTopK)
	if d.reranker != nil {
		// The reranker chooses the top_k among the best candidates.
		q.TopK = max(topK, research.RerankDepth)
	}
	hits, err := d.store.Search(ctx, q)
	if err != nil {
		return nil, SearchDocsOutput{}, fmt.Errorf("search documents: %w", err)
	}
	note := ""
	if d.reranker != nil {
		hits, note = d.rerank(ctx, q.Text, hits)
	}
	hits = hits[:min(len(hits), topK)]
	chunks := make([]DocChunk, 0, len(hits))
	for _, h := range hits {
		chunks = append(chunks, DocChunk{ChunkID: h.ChunkID, FileID: h.FileID, FileName: h.FileName, Content: h.Content,
			Similarity: round4(h.Similarity), Score: round4(h.Score), PageNumber: page(h.PageNumber),
			PageStart: page(h.PageStart), PageEnd: page(h.PageEnd), Source: h.Source, Location: location(h.Location)})
	}
	out, text := d.fitSearch(q.Text, chunks)
	if note != "" {
		out.Note = note
		text += "\nNote: " + note + "\n"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// rerank reorders hits by the reranker's relevance, which becomes their
// score; when the reranker fails, hits keep their order and note says so.
func (d docsTools) rerank(ctx context.Context, query string, hits []docs.Hit) ([]docs.Hit, string) {
	if len(hits) < 2 {
		return hits, ""
	}
	texts := make([]string, len(hits))
	for i, h := range hits {
		texts[i] = h.Content
	}
	scores, err := d.reranker.Rerank(ctx, query, texts)
	if err == nil && len(scores) != len(hits) {
		err = fmt.Errorf("%d scores for %d passages", len(scores), len(hits))
	}
	if err != nil {
		return hits, fmt.Sprintf("the reranker failed (%s): passages in their fused order", clip(err.Error(), 120))
	}
	out := slices.Clone(hits)
	for i := range out {
		out[i].Score = scores[i]
	}
	slices.SortStableFunc(out, func(a, b docs.Hit) int { return cmp.Compare(b.Score, a.Score) })
	return out, ""
}

// fitSearch keeps the best passages that fit the result size limit and
// lists the others by chunk_id; a first passage too long on its own is cut.
func (d docsTools) fitSearch(query string, chunks []DocChunk) (SearchDocsOutput, string) {
	// render is the result holding the first k passages, the first one's
	// content replaced by first when it is cut.
	render := func(k int, first *string) (SearchDocsOutput, string) {
		out := SearchDocsOutput{Chunks: slices.Clone(chunks[:k])}
		for _, c := range chunks[k:] {
			out.MoreChunkIDs = append(out.MoreChunkIDs, c.ChunkID)
		}
		if first == nil {
			return out, d.searchDocsText(query, out)
		}
		out.Chunks[0].Content = *first
		return out, d.searchDocsText(query, out) + cutPassageNote
	}
	k := d.limit.fitting(len(chunks), func(k int) (string, any) { out, text := render(k, nil); return text, out })
	if k > 0 || len(chunks) == 0 {
		return render(k, nil)
	}
	first := d.limit.fitString(chunks[0].Content, func(prefix string) (string, any) { out, text := render(1, &prefix); return text, out })
	return render(1, &first)
}

// cutPassageNote ends the text of a search whose best passage alone was too
// long for the result size limit.
const cutPassageNote = "\n[The first passage is cut to fit the result size limit: get_chunk opens it.]"

func (d docsTools) listFiles(ctx context.Context, in ListFilesInput) (*mcp.CallToolResult, ListFilesOutput, error) {
	q := docs.FileQuery{ConversationID: in.scope().conversation, Status: in.Status, Prefix: in.Prefix, Limit: in.Limit,
		Cursor: strings.TrimSpace(in.Cursor)}
	p, err := d.store.ListFilesPage(ctx, q)
	if err != nil {
		return nil, ListFilesOutput{}, fmt.Errorf("list files: %w", err)
	}
	all := filesOutput(p)
	// The files a result holds: the page's first k, and the cursor after
	// the last of them when the limit left some out.
	render := func(k int) (ListFilesOutput, string) {
		out := all
		if k < len(p.Files) {
			out.Files, out.NextCursor = all.Files[:k], p.CursorAfter(k-1)
		}
		return out, listFilesText(q, out, len(p.Files)-k, d.limit)
	}
	// A page keeps at least one file, so that paging moves on.
	k := max(1, d.limit.fitting(len(p.Files), func(k int) (string, any) { out, text := render(max(k, 1)); return text, out }))
	if len(p.Files) == 0 {
		k = 0
	}
	out, text := render(k)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// filesOutput is a page of files as list_files and the upload API return it.
func filesOutput(p docs.FilePage) ListFilesOutput {
	out := ListFilesOutput{Files: make([]FileInfo, 0, len(p.Files)), Total: p.Total, NextCursor: p.Next}
	for _, f := range p.Files {
		out.Files = append(out.Files, fileInfo(f))
	}
	return out
}

// listFilesText summarises a page of files for the model: how many files
// the conversation holds and how many this page shows, then one short line
// per file (its name, and its status unless ready, with the reason or
// note), and how to read on. Types, sizes, ids and dates are left to the
// structured content.
func listFilesText(q docs.FileQuery, out ListFilesOutput, leftOut int, limit resultLimit) string {
	var b strings.Builder
	// what names the files selected, as "3 failed files whose name or
	// source begins with "report-"".
	what := func(n int) string {
		w := plural(n, "file")
		if q.Status != "" {
			w = strings.Replace(w, " ", " "+q.Status+" ", 1)
		}
		if q.Prefix != "" {
			w += fmt.Sprintf(" whose name or source begins with %q", q.Prefix)
		}
		return w
	}
	if out.Total == 0 {
		fmt.Fprintf(&b, "Conversation %s holds %s.", q.ConversationID, strings.Replace(what(0), "0 ", "no ", 1))
		if q.Status == "" && q.Prefix == "" {
			b.WriteString(" Upload files to it, or find a conversation that holds some with list_conversations.")
		}
		return b.String()
	}
	var ready, processing, failed int
	for _, f := range out.Files {
		switch f.Status {
		case docs.StatusReady:
			ready++
		case docs.StatusProcessing:
			processing++
		case docs.StatusFailed:
			failed++
		}
	}
	which := "the %d newest"
	if q.Cursor != "" {
		which = "the next %d, newest first"
	}
	fmt.Fprintf(&b, "Conversation %s holds %s; "+which+" (%d ready, %d processing, %d failed):\n",
		q.ConversationID, what(out.Total), len(out.Files), ready, processing, failed)
	for _, f := range out.Files {
		b.WriteString(f.FileName)
		switch {
		case f.Status == docs.StatusFailed:
			fmt.Fprintf(&b, " (failed: %s)", f.Error)
		case f.Status == docs.StatusProcessing:
			b.WriteString(" (processing)")
		case f.Note != "":
			fmt.Fprintf(&b, " (%s)", f.Note)
		}
		b.WriteString("\n")
	}
	if leftOut > 0 {
		fmt.Fprintf(&b, "\n%s\n", limit.note(fmt.Sprintf("%s of this page did not fit; the cursor below starts with them", plural(leftOut, "file"))))
	}
	if out.NextCursor != "" {
		fmt.Fprintf(&b, "\nMore files follow: call list_files again with cursor %q", out.NextCursor)
		if q.Status != "" || q.Prefix != "" {
			b.WriteString(" and the same status and prefix")
		}
		b.WriteString(" to read on.")
	} else {
		b.WriteString("\nThat is the last of them.")
	}
	return b.String()
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
	out, text := d.fitChunk(out, fileURI(c.ConversationID, c.FileID))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
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
	out, text := d.fitChunk(out, fileURI(p.ConversationID, p.FileID))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// fitChunk cuts the content of a get_chunk result too long for the result
// size limit, and returns the result with its text; resource is the URI of
// the file's whole text.
func (d docsTools) fitChunk(out GetChunkOutput, resource string) (GetChunkOutput, string) {
	text := d.chunkText(out, resource)
	if d.limit.fits(text, out) {
		return out, text
	}
	cut := out
	cut.Truncated = true
	cut.Content = d.limit.fitString(out.Content, func(prefix string) (string, any) {
		c := cut
		c.Content = prefix
		return d.chunkText(c, resource), c
	})
	return cut, d.chunkText(cut, resource)
}

// chunkText is get_chunk's text block: where the text is, then the text,
// and how to read the rest when it was cut.
func (d docsTools) chunkText(out GetChunkOutput, resource string) string {
	where := citation(out.Metadata.FileName, out.Metadata.Location, out.Metadata.Source)
	text := fmt.Sprintf("[%s, characters %d-%d]\n%s", where, out.Metadata.CharStart, out.Metadata.CharEnd, out.Content)
	if len(out.ChunkIDs) > 1 {
		text += fmt.Sprintf("\n\n[%d chunks merged: %s]", len(out.ChunkIDs), strings.Join(out.ChunkIDs, ", "))
	}
	if out.Truncated {
		text += "\n\n" + d.limit.note(fmt.Sprintf("the text stops after %d of its characters; ask for fewer neighbours (before, after), open the chunks one by one, or read the file's whole text as the resource %s",
			utf8.RuneCountInString(out.Content), resource))
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

// searchDocsText is what the model reads of a search: each passage with
// where it is and its chunk_id, then the chunk_ids of the passages the size
// limit left out.
func (d docsTools) searchDocsText(q string, out SearchDocsOutput) string {
	var b strings.Builder
	if len(out.Chunks) == 0 {
		fmt.Fprintf(&b, "No passages found for %q. %s", q, d.words.noHits)
		return b.String()
	}
	fmt.Fprintf(&b, "Passages for %q:\n", q)
	for i, c := range out.Chunks {
		fmt.Fprintf(&b, "\n%d. [%s] similarity %.2f, chunk_id %s\n%s\n", i+1, citation(c.FileName, c.Location, c.Source), c.Similarity, c.ChunkID, c.Content)
	}
	if len(out.MoreChunkIDs) > 0 {
		fmt.Fprintf(&b, "\n%s\n", d.limit.note(fmt.Sprintf("%s ranked next; open them with get_chunk: %s",
			plural(len(out.MoreChunkIDs), "more passage"), strings.Join(out.MoreChunkIDs, ", "))))
	}
	return b.String()
}
