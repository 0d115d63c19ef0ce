// Package server is mcpsearch's MCP surface: tool definitions, the
// middleware every tool call passes through (rate limit, timeout, error
// mapping, logging), the transports and the HTTP routes. It is the only
// package that translates domain results and errors into MCP.
package server

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/internal/ttlcache"
	"github.com/mcpsearch/mcpsearch/searxng"
)

// Deps are the domain services the tools call. A nil service means its
// tools are not offered.
type Deps struct {
	Search *searxng.Client
	Docs   *docs.Store
	// Ingest processes uploads into Docs; it is needed when Docs is set.
	Ingest *docs.Ingester
	// APIKeys are the keys accepted on the HTTP surfaces; none means no
	// key is asked for.
	APIKeys []APIKey
	// Audit receives a record of every tool call; nil records nothing.
	Audit *audit.Writer
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

	mu       sync.Mutex
	timeouts map[string]time.Duration // registered tools and their timeouts
	servers  map[serverKey]*mcp.Server
	cache    *ttlcache.Cache[string, *searxng.Response]
	now      func() time.Time

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
		cfg:      cfg,
		deps:     deps,
		log:      log,
		version:  version,
		limits:   newLimiters(cfg.RateLimitFor),
		metrics:  newMetrics(),
		timeouts: map[string]time.Duration{},
		cache:    ttlcache.New[string, *searxng.Response](cfg.WebSearchCacheSize, cfg.WebSearchCacheTTL),
		now:      time.Now,
	}
	s.servers = map[serverKey]*mcp.Server{}
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
	})
	m.AddReceivingMiddleware(s.toolMiddleware(transport, id))
	if s.deps.Search != nil && s.cfg.WebSearchEnabled {
		s.addWebSearch(m)
	}
	if s.docsOn() {
		s.addDocsTools(m)
		s.addFileResources(m)
	}
	return m
}

// addTool registers a typed tool with its own timeout. Every tool is
// registered through here so that the middleware knows its timeout.
func addTool[In, Out any](s *Server, m *mcp.Server, t *mcp.Tool, timeout time.Duration, h mcp.ToolHandlerFor[In, Out]) {
	if timeout <= 0 {
		timeout = s.cfg.ToolTimeout
	}
	s.mu.Lock()
	s.timeouts[t.Name] = timeout
	s.mu.Unlock()
	mcp.AddTool(m, t, h)
}

// timeoutFor returns a registered tool's timeout; ok is false for a tool
// no server offers.
func (s *Server) timeoutFor(tool string) (d time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok = s.timeouts[tool]
	return d, ok
}

func (s *Server) docsOn() bool { return s.deps.Docs != nil && s.cfg.DocsEnabled }

func boolPtr(b bool) *bool { return &b }
