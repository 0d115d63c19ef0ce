package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/crawl"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/sources"
)

// Sources keeps the sites and folders a conversation's files come from
// and syncs them (sources.Service).
type Sources interface {
	Crawl(ctx context.Context, conv, start string, opts sources.CrawlOptions, caller string) (jobs.Job, sources.Source, error)
	Sync(ctx context.Context, src sources.Source, caller string) (jobs.Job, error)
	Get(ctx context.Context, id string) (sources.Source, error)
	List(ctx context.Context, conv string) ([]sources.Source, error)
	Delete(ctx context.Context, src sources.Source) (int, error)
}

// CrawlInput is add_document's crawl object: the URL is a site to crawl.
type CrawlInput struct {
	MaxPages int               `json:"max_pages,omitempty" jsonschema:"the most pages fetched, 1 to 20000 (default 500)"`
	MaxDepth int               `json:"max_depth,omitempty" jsonschema:"how many links away from the start page to go, 0 to 50 (default 5)"`
	Scope    string            `json:"scope,omitempty" jsonschema:"which links are followed: prefix (pages under the start URL, the default), host (the whole host) or domain (the host and its sibling subdomains)"`
	Include  []string          `json:"include,omitempty" jsonschema:"only pages whose path matches one of these globs, such as /docs/** (* within a segment, ** across)"`
	Exclude  []string          `json:"exclude,omitempty" jsonschema:"leave out pages whose path matches one of these globs, such as **/changelog*"`
	DelayMS  int               `json:"delay_ms,omitempty" jsonschema:"the least time between two requests to the site, in milliseconds, 0 to 60000 (default 0: none, the crawl slows itself when the site does)"`
	Render   string            `json:"render,omitempty" jsonschema:"which pages are rendered in a headless browser before they are read: auto (the default: pages that scripts build, whose HTML holds next to no text), never or always"`
	Headers  map[string]string `json:"headers,omitempty" jsonschema:"request headers for a private site, such as Authorization or Cookie: sent only to the start URL's own host (never after a redirect elsewhere), stored with the source for its syncs, never shown back (list_sources gives their names)"`
}

func (c CrawlInput) options() sources.CrawlOptions {
	return sources.CrawlOptions{MaxPages: c.MaxPages, MaxDepth: c.MaxDepth, Scope: c.Scope, Include: c.Include, Exclude: c.Exclude,
		DelayMS: c.DelayMS, Render: c.Render, Headers: c.Headers}
}

// constrainCrawl sets the limits of the crawl object's new options in
// add_document's input schema.
func constrainCrawl(c *jsonschema.Schema) {
	d := prop(c, "delay_ms")
	d.Minimum, d.Maximum = ptr(0.0), ptr(float64(sources.MaxDelayMS))
	prop(c, "render").Enum = enum(string(crawl.RenderNever), string(crawl.RenderAuto), string(crawl.RenderAlways))
	h := prop(c, "headers")
	h.MaxProperties = ptr(32)
	if h.AdditionalProperties != nil {
		h.AdditionalProperties.MaxLength = ptr(crawl.MaxHeaderBytes)
	}
}

// ListSourcesInput is list_sources' arguments.
type ListSourcesInput struct {
	ConversationID string `json:"conversation_id,omitempty" jsonschema:"the conversation whose sources are listed (default: the server's default conversation)"`
}

func (in ListSourcesInput) scope() scope { return inConversation(strings.TrimSpace(in.ConversationID)) }

func (in *ListSourcesInput) setDefaultConversation(id string) {
	if strings.TrimSpace(in.ConversationID) == "" {
		in.ConversationID = id
	}
}

// SourceIDInput names one source.
type SourceIDInput struct {
	SourceID string `json:"source_id" jsonschema:"a source_id from list_sources or add_document's crawl"`
}

func (SourceIDInput) scope() scope { return scope{perResult: true} }

// SourceInfo is a source as the tools and the API show it.
type SourceInfo struct {
	SourceID       string `json:"source_id"`
	ConversationID string `json:"conversation_id"`
	// Kind is site or folder.
	Kind string `json:"kind"`
	// Root is a site's start URL or a folder's path.
	Root    string               `json:"root"`
	Options sources.CrawlOptions `json:"options"`
	// HeaderNames names the request headers a site's crawl sends; their
	// values are never shown.
	HeaderNames []string `json:"header_names,omitempty"`
	// Pages counts the pages or files the source knows, Files the files
	// holding them.
	Pages      int    `json:"pages"`
	Files      int    `json:"files"`
	CreatedAt  string `json:"created_at"`
	LastSyncAt string `json:"last_sync_at,omitempty"`
	LastJobID  string `json:"last_job_id,omitempty"`
	// LastSync is the last sync's summary.
	LastSync sources.Summary `json:"last_sync"`
}

// ListSourcesOutput is list_sources' result.
type ListSourcesOutput struct {
	Sources []SourceInfo `json:"sources"`
}

// DeleteSourceOutput is delete_source's result.
type DeleteSourceOutput struct {
	SourceID     string `json:"source_id"`
	DeletedFiles int    `json:"deleted_files"`
}

// sourceTools answers the sources tools.
type sourceTools struct {
	src  Sources
	jobs jobTools
}

func newSourceTools(e toolEnv) (sourceTools, bool) {
	jt, _ := newJobTools(e)
	return sourceTools{src: e.deps.Sources, jobs: jt}, e.deps.Sources != nil && e.deps.Docs != nil && e.cfg.DocsEnabled
}

func sourceFailures() []failure {
	return append(jobFailures(), failure{is: []error{sources.ErrNotFound}, status: http.StatusNotFound})
}

func listSourcesTool() declared {
	return tool[sourceTools, ListSourcesInput, ListSourcesOutput]{def: &mcp.Tool{
		Name:  "list_sources",
		Title: "List a conversation's sites and folders",
		Description: "List the sites crawled into a conversation and the folders synced into it, with their options, how many pages and files each holds, " +
			"and what their last sync added, updated, removed and left unchanged.",
		Annotations: withTitle(docsReadOnly, "List a conversation's sites and folders"),
	}, handler: newSourceTools, constrain: func(_ sourceTools, sc *jsonschema.Schema) {
		prop(sc, "conversation_id").MaxLength = ptr(maxConversationIDLen)
	}, run: sourceTools.listSources, failures: sourceFailures(), probe: "database", ping: sourceTools.ping}
}

func syncSourceTool() declared {
	return tool[sourceTools, SourceIDInput, JobInfo]{def: &mcp.Tool{
		Name:  "sync_source",
		Title: "Sync a site",
		Description: "Crawl a site source again: pages that did not change are not read again (conditional requests), changed pages are read and embedded again, " +
			"pages gone are removed and new ones added. It starts a job: follow it with get_job; its report counts added, updated, removed and unchanged.",
		Annotations: withTitle(docsWrite, "Sync a site"),
	}, handler: func(e toolEnv) (sourceTools, bool) {
		t, on := newSourceTools(e)
		return t, on && e.cfg.WriteToolsOn()
	}, constrain: sourceIDSchema, run: sourceTools.syncSource, failures: sourceFailures(), probe: "database", ping: sourceTools.ping, write: true}
}

func deleteSourceTool() declared {
	return tool[sourceTools, SourceIDInput, DeleteSourceOutput]{def: &mcp.Tool{
		Name:  "delete_source",
		Title: "Delete a site or folder",
		Description: "Delete a source with the files that came only from it (a file another source or an upload also holds stays). " +
			"A sync under way is cancelled first. This cannot be undone.",
		Annotations: withTitle(&mcp.ToolAnnotations{DestructiveHint: boolPtr(true), IdempotentHint: true, OpenWorldHint: boolPtr(false)}, "Delete a site or folder"),
	}, handler: func(e toolEnv) (sourceTools, bool) {
		t, on := newSourceTools(e)
		return t, on && e.cfg.WriteToolsOn()
	}, constrain: sourceIDSchema, run: sourceTools.deleteSource, failures: sourceFailures(), probe: "database", ping: sourceTools.ping, write: true}
}

func sourceIDSchema(_ sourceTools, sc *jsonschema.Schema) {
	s := prop(sc, "source_id")
	s.MinLength, s.MaxLength = ptr(1), ptr(64)
}

func (t sourceTools) ping(ctx context.Context) error { return t.jobs.store.Ping(ctx) }

// sourceInfo renders a source.
func sourceInfo(src sources.Source) SourceInfo {
	return SourceInfo{SourceID: src.ID, ConversationID: src.ConversationID, Kind: src.Kind, Root: src.Root, Options: src.Options,
		HeaderNames: src.Options.HeaderNames(), Pages: src.Pages, Files: src.Files, CreatedAt: stamp(src.CreatedAt), LastSyncAt: stamp(src.LastSyncAt), LastJobID: src.LastJobID,
		LastSync: src.LastSummary}
}

// ownSource reads source id and checks that the caller may see its
// conversation; another conversation's source does not exist for it.
func (t sourceTools) ownSource(ctx context.Context, id string) (sources.Source, error) {
	src, err := t.src.Get(ctx, id)
	if err != nil {
		return sources.Source{}, err
	}
	if !identityFrom(ctx).allows(src.ConversationID) {
		return sources.Source{}, fmt.Errorf("source %s: %w", id, sources.ErrNotFound)
	}
	callFrom(ctx).setConversation(src.ConversationID)
	return src, nil
}

func (t sourceTools) listSources(ctx context.Context, in ListSourcesInput) (*mcp.CallToolResult, ListSourcesOutput, error) {
	conv := in.scope().conversation
	if conv == "" {
		return nil, ListSourcesOutput{}, badArg("conversation_id is required: this server has no default conversation")
	}
	list, err := t.src.List(ctx, conv)
	if err != nil {
		return nil, ListSourcesOutput{}, fmt.Errorf("list sources: %w", err)
	}
	out := ListSourcesOutput{Sources: make([]SourceInfo, 0, len(list))}
	var b strings.Builder
	if len(list) == 0 {
		fmt.Fprintf(&b, "%s has no source yet: add_document with url and crawl adds a site.", conv)
	}
	for _, src := range list {
		info := sourceInfo(src)
		out.Sources = append(out.Sources, info)
		fmt.Fprintf(&b, "- %s %s (source_id %s): %d pages, %d files", info.Kind, info.Root, info.SourceID, info.Pages, info.Files)
		if info.LastSyncAt != "" {
			s := info.LastSync
			fmt.Fprintf(&b, "; last sync %s: %d added, %d updated, %d removed, %d unchanged", info.LastSyncAt, s.Added, s.Updated, s.Removed, s.Unchanged)
		}
		b.WriteString("\n")
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
}

func (t sourceTools) syncSource(ctx context.Context, in SourceIDInput) (*mcp.CallToolResult, JobInfo, error) {
	src, err := t.ownSource(ctx, in.SourceID)
	if err != nil {
		return nil, JobInfo{}, fmt.Errorf("sync source: %w", err)
	}
	j, err := t.src.Sync(ctx, src, caller(ctx))
	if err != nil {
		return nil, JobInfo{}, fmt.Errorf("sync source: %w", err)
	}
	callFrom(ctx).setJob(j.ID)
	info := t.jobs.jobInfo(ctx, j)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Sync of %s started: job %s. Follow it with get_job.", src.Root, j.ID)}}}, info, nil
}

func (t sourceTools) deleteSource(ctx context.Context, in SourceIDInput) (*mcp.CallToolResult, DeleteSourceOutput, error) {
	src, err := t.ownSource(ctx, in.SourceID)
	if err != nil {
		return nil, DeleteSourceOutput{}, fmt.Errorf("delete source: %w", err)
	}
	n, err := t.src.Delete(ctx, src)
	if err != nil {
		return nil, DeleteSourceOutput{}, fmt.Errorf("delete source: %w", err)
	}
	out := DeleteSourceOutput{SourceID: src.ID, DeletedFiles: n}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Deleted source %s (%s) and %d files that came only from it.", src.ID, src.Root, n)}}}, out, nil
}
