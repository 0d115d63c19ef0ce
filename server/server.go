// Package server is mcpsearch's MCP surface: tool definitions, the
// middleware every tool call passes through (rate limit, timeout, error
// mapping, logging), the transports and the HTTP routes. It is the only
// package that translates domain results and errors into MCP.
package server

import (
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/internal/ttlcache"
	"github.com/mcpsearch/mcpsearch/searxng"
)

// Deps are the domain services the tools call. A nil service means its
// tools are not offered.
type Deps struct {
	Search *searxng.Client
}

// Server builds MCP servers over one set of tools, limits and caches, and
// serves them over stdio or HTTP.
type Server struct {
	cfg     config.Config
	deps    Deps
	log     *slog.Logger
	version string

	limits   *limiters
	timeouts map[string]time.Duration
	cache    *ttlcache.Cache[string, *searxng.Response]
	now      func() time.Time

	servers map[string]*mcp.Server
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
		timeouts: map[string]time.Duration{},
		cache:    ttlcache.New[string, *searxng.Response](cfg.WebSearchCacheSize, cfg.WebSearchCacheTTL),
		now:      time.Now,
	}
	// One MCP server per transport, sharing limits and caches, so that logs
	// and records can tell which transport a call came through.
	s.servers = map[string]*mcp.Server{}
	for _, t := range []string{"stdio", "http", "sse"} {
		s.servers[t] = s.newMCPServer(t)
	}
	return s
}

// MCP returns the MCP server for transport (stdio, http or sse) with every
// enabled tool registered.
func (s *Server) MCP(transport string) *mcp.Server { return s.servers[transport] }

func (s *Server) newMCPServer(transport string) *mcp.Server {
	m := mcp.NewServer(&mcp.Implementation{Name: "mcpsearch", Title: "mcpsearch", Version: s.version}, &mcp.ServerOptions{
		Instructions: "mcpsearch offers web search through the operator's SearXNG and search over documents uploaded to a conversation.",
		Logger:       s.log,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	m.AddReceivingMiddleware(s.toolMiddleware(transport))
	if s.deps.Search != nil && s.cfg.WebSearchEnabled {
		s.addWebSearch(m)
	}
	return m
}

// addTool registers a typed tool with its own timeout. Every tool is
// registered through here so that the middleware knows its timeout.
func addTool[In, Out any](s *Server, m *mcp.Server, t *mcp.Tool, timeout time.Duration, h mcp.ToolHandlerFor[In, Out]) {
	if timeout <= 0 {
		timeout = s.cfg.ToolTimeout
	}
	s.timeouts[t.Name] = timeout
	mcp.AddTool(m, t, h)
}

func (s *Server) timeoutFor(tool string) time.Duration {
	if d, ok := s.timeouts[tool]; ok {
		return d
	}
	return s.cfg.ToolTimeout
}

func boolPtr(b bool) *bool { return &b }
