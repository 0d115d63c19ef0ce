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
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Server builds MCP servers over one set of tools, limits and caches, and
// serves them over stdio or HTTP.
type Server struct {
	cfg     config.Config
	deps    Deps
	log     *slog.Logger
	version string

	limits  limiter
	metrics *metrics
	// tracer starts the spans of requests; nil when tracing is off.
	tracer trace.Tracer

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
	now     func() time.Time

	// active counts MCP requests being handled, so that a shutdown can
	// let them finish before it ends the event streams that carry their
	// answers.
	active atomic.Int64
}

// serverKey names one MCP server: a transport and, over HTTP, the caller
// (identity.serverKey), so every call knows who made it and through what.
type serverKey struct {
	transport string
	key       string
}

// New returns a Server for cfg. Logs go to log, which must not write to
// stdout when stdio is served.
func New(cfg config.Config, deps Deps, log *slog.Logger, version string) *Server {
	return newServer(cfg, deps, log, version, false)
}

// newServer is New; describeAll offers every tool mcpsearch has, whether
// its backend is there or not, for tests that describe them all.
func newServer(cfg config.Config, deps Deps, log *slog.Logger, version string, describeAll bool) *Server {
	s := &Server{
		cfg:     cfg,
		deps:    deps,
		log:     log,
		version: version,
		metrics: newMetrics(),
		now:     time.Now,
	}
	if deps.Tracing != nil {
		s.tracer = deps.Tracing.Tracer(telemetry.ScopeName, trace.WithSchemaURL(telemetry.SchemaURL))
	}
	if deps.RateLimits != nil {
		s.limits = &sharedLimiter{lim: deps.RateLimits, cfg: s.limitFor}
	} else {
		s.limits = newMemoryLimiter(s.limitFor, s.now)
	}
	s.servers = map[serverKey]*mcp.Server{}
	s.tools = buildTools(toolEnv{deps: deps, cfg: cfg, metrics: s.metrics, log: log}, describeAll)
	s.MCP("stdio")
	s.registerDeps()
	return s
}

// MCP returns the MCP server for transport (stdio, http or sse) with every
// enabled tool registered.
func (s *Server) MCP(transport string) *mcp.Server { return s.serverFor(transport, identity{}) }

// serverFor returns the MCP server of one transport and caller. Servers
// share limits and caches; they are few (transports × keys) and made once.
// Tokens share one server per transport, whose requests bring their caller
// (requestIdentity); it is made for a caller that may do nothing, should
// a request ever come without one. Over legacy SSE a token's server is its
// session's, made when the session opens and gone with it.
func (s *Server) serverFor(transport string, id identity) *mcp.Server {
	if id.token != nil {
		// Over legacy SSE a message brings nothing of its caller, nor does
		// the web page's in-process session: their server holds the grant.
		if transport == "sse" || transport == uiTransport {
			return s.newMCPServer(transport, id)
		}
		id = identity{token: &tokenGrant{conversations: []string{}}}
	}
	k := serverKey{transport, id.serverKey(transport)}
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
	// Added first, so that it runs inside the tool middleware: a call
	// answered for its over-size message is limited, logged, counted and
	// audited as any other.
	m.AddReceivingMiddleware(oversizeMiddleware)
	m.AddReceivingMiddleware(s.toolMiddleware(transport, id), s.toolListMiddleware(id))
	for _, d := range s.tools.defs {
		d.add(m)
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
