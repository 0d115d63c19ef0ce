// Package server is mcpsearch's MCP surface: tool definitions, the
// middleware every tool call passes through (rate limit, timeout, error
// mapping, logging), the transports and the HTTP routes. It is the only
// package that translates domain results and errors into MCP.
package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/internal/ttlcache"
	"github.com/mcpsearch/mcpsearch/searxng"
)

// Deps are the domain services the tools call, as the small interfaces the
// server needs of them, so a tool test can use a fake where a database or a
// SearXNG adds nothing. A nil service means its tools are not offered.
type Deps struct {
	Search WebSearcher
	Docs   Documents
	// Ingest processes uploads into Docs; it is needed when Docs is set.
	Ingest Uploads
	// Fetch reads web pages for fetch_url and ingestion by URL.
	Fetch PageFetcher
	// APIKeys are the keys accepted on the HTTP surfaces; none means no
	// key is asked for.
	APIKeys []APIKey
	// Audit receives a record of every tool call; nil records nothing.
	Audit *audit.Writer
}

// WebSearcher runs web searches (searxng.Client).
type WebSearcher interface {
	Search(ctx context.Context, r searxng.Request) (*searxng.Response, error)
	Ping(ctx context.Context) error
}

// PageFetcher reads web pages (fetch.Client).
type PageFetcher interface {
	// Get fetches and converts a page to text, through a short cache.
	Get(ctx context.Context, rawURL string) (*fetch.Document, error)
	// Download fetches a page's bytes as they are, for ingestion.
	Download(ctx context.Context, rawURL string) (*fetch.Resource, error)
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
	SubmitUpload(ctx context.Context, u docs.Upload) (docs.File, error)
	// Reserve takes a queue slot before a body is read (ErrBusy when none
	// is free); SubmitFile then stores an upload spooled to a file.
	Reserve() (*docs.Ticket, error)
	SubmitFile(ctx context.Context, t *docs.Ticket, u docs.Upload) (docs.File, error)
	IngestStats() docs.IngestStats
}

// Server builds MCP servers over one set of tools, limits and caches, and
// serves them over stdio or HTTP.
type Server struct {
	cfg     config.Config
	deps    Deps
	log     *slog.Logger
	version string

	limits  *limiters
	metrics *metrics

	// tools are the tools this server offers, by its configuration.
	tools toolSet
	// pending are the HTTP requests being answered whose call the
	// middleware reports back (X-RateLimit-* headers, REST results).
	pending pendingCalls
	restState
	// conns names connections without a session id of their own.
	conns connIDs

	mu      sync.Mutex
	servers map[serverKey]*mcp.Server
	cache   *ttlcache.Cache[string, *searxng.Response]
	now     func() time.Time

	// active counts MCP requests being handled, so that a shutdown can
	// let them finish before it ends the event streams that carry their
	// answers.
	active atomic.Int64
}

// serverKey names one MCP server: a transport and, over HTTP with keys,
// the key, so every call knows who made it and through what.
type serverKey struct {
	transport string
	key       string
}

// New returns a Server for cfg. Logs go to log, which must not write to
// stdout when stdio is served.
func New(cfg config.Config, deps Deps, log *slog.Logger, version string) *Server {
	s := &Server{
		cfg:     cfg,
		deps:    deps,
		log:     log,
		version: version,
		limits:  newLimiters(cfg.RateLimitFor),
		metrics: newMetrics(),
		cache:   ttlcache.New[string, *searxng.Response](cfg.WebSearchCacheSize, cfg.WebSearchCacheTTL),
		now:     time.Now,
	}
	s.servers = map[serverKey]*mcp.Server{}
	s.tools = s.enabledTools()
	s.MCP("stdio")
	s.registerDeps()
	return s
}

// MCP returns the MCP server for transport (stdio, http or sse) with every
// enabled tool registered.
func (s *Server) MCP(transport string) *mcp.Server { return s.serverFor(transport, identity{}) }

// serverFor returns the MCP server of one transport and caller. Servers
// share limits and caches; they are few (transports × keys) and made once.
func (s *Server) serverFor(transport string, id identity) *mcp.Server {
	k := serverKey{transport, id.name()}
	s.mu.Lock()
	m, ok := s.servers[k]
	s.mu.Unlock()
	if ok {
		return m
	}
	m = s.newMCPServer(transport, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.servers[k]; ok {
		return prev
	}
	s.servers[k] = m
	return m
}

func (s *Server) newMCPServer(transport string, id identity) *mcp.Server {
	m := mcp.NewServer(&mcp.Implementation{Name: "mcpsearch", Title: "mcpsearch", Version: s.version}, &mcp.ServerOptions{
		Instructions: "mcpsearch offers web search through the operator's SearXNG and search over documents uploaded to a conversation.",
		Logger:       s.log,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		SetCacheable: setCacheable,
	})
	m.AddReceivingMiddleware(s.toolMiddleware(transport, id))
	for _, d := range s.tools.defs {
		d.add(s, m, d.tool)
	}
	if s.docsOn() {
		m.AddReceivingMiddleware(s.resourceListMiddleware(id))
		s.addFileResources(m)
	}
	return m
}

// listTTL is how long clients may cache what changes only with the
// server's configuration: the tool list, resource templates, discovery.
const listTTL = 10 * time.Minute

// setCacheable gives results the SDK builds their cache hints.
func setCacheable(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	switch req.(type) {
	case *mcp.ListToolsRequest, *mcp.ListResourceTemplatesRequest, *mcp.ServerRequest[*mcp.DiscoverParams]:
		c.TTLMs, c.CacheScope = int(listTTL.Milliseconds()), "public"
	}
}

func (s *Server) docsOn() bool { return s.deps.Docs != nil && s.cfg.DocsEnabled }

func boolPtr(b bool) *bool { return &b }
