package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxMCPBody bounds one MCP message posted over HTTP.
const maxMCPBody = 4 << 20

// Handler returns the HTTP surface: streamable HTTP at /mcp and legacy SSE
// at /sse (its message endpoint is /sse?sessionid=...), for the transports
// the configuration enables; the upload API under /v1/; the web page under
// /ui/ (MCP_ui_enabled); /healthz (alive), /readyz (dependencies) and
// /metrics (Prometheus).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.cfg.Serves("http") {
		getServer := func(r *http.Request) *mcp.Server { return s.serverFor("http", identityFrom(r.Context())) }
		var streamable http.Handler = mcp.NewStreamableHTTPHandler(getServer,
			&mcp.StreamableHTTPOptions{Stateless: s.cfg.Stateless, Logger: s.log, MaxRequestBodyBytes: maxMCPBody})
		if !s.cfg.Stateless {
			// The SDK serves the 2026-07-28 revision only from a stateless
			// handler; requests of that revision say so in their
			// MCP-Protocol-Version header (the discover probe too), and
			// clients of earlier revisions keep their sessions.
			streamable = byProtocolEra(streamable, mcp.NewStreamableHTTPHandler(getServer,
				&mcp.StreamableHTTPOptions{Stateless: true, Logger: s.log, MaxRequestBodyBytes: maxMCPBody}))
		}
		mux.Handle("/mcp", bodyDeadline(mcpBodyTimeout, s.protect(jsonTooLarge(s.rpcIDs(s.rateLimitHeaders(streamable))))))
	}
	if s.cfg.Serves("sse") {
		mux.Handle("/sse", bodyDeadline(mcpBodyTimeout, s.protect(jsonTooLarge(s.newSSEHandler()))))
	}
	if s.docsOn() {
		api := http.NewServeMux()
		s.apiRoutes(api)
		mux.Handle("/v1/", s.httpSpan(bodyDeadline(uploadBodyTimeout, s.protect(api))))
	}
	s.restRoutes(mux)
	s.oauthRoutes(mux)
	if s.cfg.UIEnabled {
		mux.Handle("/ui/", bodyDeadline(mcpBodyTimeout, s.uiRoute()))
	}
	mux.Handle("GET /metrics", s.protect(s.metricsHandler()))
	mux.HandleFunc("GET /readyz", s.readiness)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"status":"ok"}`)
	})
	return s.withRequestLog(s.checkHost(mux))
}

// byProtocolEra sends requests of the stateless revision to modern and the
// rest to legacy. Revisions are dates, which compare as strings.
func byProtocolEra(legacy, modern http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= statelessRevision {
			modern.ServeHTTP(w, r)
			return
		}
		legacy.ServeHTTP(w, r)
	})
}

// ServeHTTP listens on the configured address until ctx is done, then
// shuts down gracefully. ready, if not nil, receives the bound address.
func (s *Server) ServeHTTP(ctx context.Context, ready func(addr net.Addr)) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	// No WriteTimeout: SSE streams stay open for as long as the client
	// listens. No ReadTimeout either: each route gives its request body a
	// deadline of its own (bodyDeadline), which event streams do not need.
	// Every request's context derives from streams, which shutdown cancels
	// to end the event streams (SSE, streamable HTTP GET) that would
	// otherwise keep their connections busy forever.
	streams, endStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer endStreams()
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return streams },
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	if ready != nil {
		ready(ln.Addr())
	}
	s.log.Info("listening", "addr", ln.Addr().String(), "transports", s.cfg.Transports, "stateless", s.cfg.Stateless)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down")
	// Shutdown stops accepting and waits for connections to go idle. The
	// requests in flight finish first, up to shutdownGrace; then the event
	// streams, which never go idle, are ended so that Shutdown can return.
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	s.waitIdle(sctx)
	endStreams()
	if err := <-shut; err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// shutdownGrace bounds how long a shutdown waits for requests in flight.
const shutdownGrace = 5 * time.Second

// waitIdle returns once no MCP request is being handled, or when ctx ends.
// Over SSE a result travels on the event stream after its handler returns,
// so it then waits a little longer for the answer to be written.
func (s *Server) waitIdle(ctx context.Context) {
	const poll = 10 * time.Millisecond
	for s.active.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}

// rateLimitHeaders adds X-RateLimit-Limit, -Remaining and -Reset to the
// response of a streamable HTTP POST that calls a tool, describing the
// caller's bucket of that tool as the call's rate limit left it. The call
// is learnt from the MCP middleware, which has decoded and limited it,
// through a holder this handler registers under an id it puts in a request
// header of its own (the SDK hands the request's headers to the
// middleware).
//
// Legacy SSE answers a POST with 202 before the call runs, so its POSTs
// carry no such headers; the result on the event stream has the error.
func (s *Server) rateLimitHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(callHeader)
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		h := &pendingCall{}
		id := s.pending.add(h)
		defer s.pending.remove(id)
		r.Header.Set(callHeader, id)
		next.ServeHTTP(&headerWriter{ResponseWriter: w, before: func(hdr http.Header) {
			setRateHeaders(hdr, h.call())
		}}, r)
	})
}

// callHeader carries the id of a request's pendingCall from the HTTP
// handler to the MCP middleware. A client's own value is removed first.
const callHeader = "X-Mcpsearch-Call"

// pendingCall is filled by the MCP middleware with the first call an HTTP
// request makes.
type pendingCall struct {
	mu sync.Mutex
	c  *call
	// header is the HTTP request's header where the MCP request has none
	// of its own (a REST invocation's in-process session).
	header http.Header
	// caller is who makes a REST invocation.
	caller *identity
}

// requestHeader returns the HTTP header of an MCP request: its own, or
// that of the REST invocation holder h stands for; nil over stdio.
func requestHeader(req mcp.Request, h *pendingCall) http.Header {
	if hdr := headerOf(req); hdr != nil {
		return hdr
	}
	if h != nil {
		return h.header
	}
	return nil
}

func (p *pendingCall) set(c *call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		p.c = c
	}
}

func (p *pendingCall) call() *call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c
}

// setRateHeaders describes the caller's bucket as c's rate limit left it:
// nothing when c is nil, was not limited or did not reach the limiter.
func setRateHeaders(h http.Header, c *call) {
	if c == nil {
		return
	}
	st, ok := c.limitState()
	if !ok {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(st.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(st.Remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(st.Reset.Unix(), 10))
}

// pendingCalls are the POSTs being answered, by id.
type pendingCalls struct {
	mu sync.Mutex
	m  map[string]*pendingCall
}

func (p *pendingCalls) add(h *pendingCall) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Random, so that no caller can guess another request's id.
	id := newRequestID()
	if p.m == nil {
		p.m = map[string]*pendingCall{}
	}
	p.m[id] = h
	return id
}

func (p *pendingCalls) remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, id)
}

// pendingHeaders returns the holder of the HTTP request that carries req,
// if any: named by a header of a streamable HTTP POST, or by the _meta of
// a REST invocation.
func (s *Server) pendingHeaders(transport string, req *mcp.CallToolRequest) *pendingCall {
	var id string
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		id = extra.Header.Get(callHeader)
	}
	if id == "" && transport == restTransport {
		id, _ = req.Params.GetMeta()[restCallMeta].(string)
	}
	if id == "" {
		return nil
	}
	s.pending.mu.Lock()
	defer s.pending.mu.Unlock()
	return s.pending.m[id]
}

// headerWriter calls before once, just before the header is sent.
type headerWriter struct {
	http.ResponseWriter
	before func(http.Header)
	done   bool
}

func (w *headerWriter) fire() {
	if !w.done {
		w.done = true
		w.before(w.Header())
	}
}

func (w *headerWriter) WriteHeader(code int) {
	w.fire()
	w.ResponseWriter.WriteHeader(code)
}

func (w *headerWriter) Write(p []byte) (int, error) {
	w.fire()
	return w.ResponseWriter.Write(p)
}

func (w *headerWriter) Flush() {
	w.fire()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *headerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
