package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Body read timeouts. A request's body must arrive within its timeout, so a
// client that trickles bytes cannot hold a connection for long; the
// deadline is lifted once the body is read, so a long tool call that
// follows is not cut off.
const (
	mcpBodyTimeout    = 30 * time.Second
	uploadBodyTimeout = 5 * time.Minute
)

// maxPendingPerSSESession bounds the POSTs waiting to hand a message to one
// SSE session. A client that never reads its event stream fills the
// session's queue; further POSTs then wait, each holding a goroutine and a
// body, so past this bound they are refused.
const maxPendingPerSSESession = 16

// checkHost refuses, on a loopback listener, requests whose Host header
// names another host: a web page whose domain was re-pointed at 127.0.0.1
// (DNS rebinding) sends its own domain as Host. Every route is covered,
// metrics and the upload API included, since a same-origin request carries
// no Origin header to check. Hosts listed in MCP_allowed_hosts are
// accepted, for a reverse proxy on the same machine.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if local != nil && isLoopbackAddr(local.String()) && !s.hostAllowed(r.Host) {
			writeError(w, r, &ToolError{Code: CodeAuthError, Status: http.StatusForbidden,
				Message: fmt.Sprintf("host %q is not allowed on this loopback listener (MCP_allowed_hosts)", clip(r.Host, 80))})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "" || isLoopbackHost(host) {
		return true
	}
	// The host clients are told to use (MCP_public_url) needs no second
	// mention in MCP_allowed_hosts.
	if u, err := url.Parse(s.cfg.PublicURL); err == nil && u.Host != "" && (strings.EqualFold(u.Hostname(), host) || strings.EqualFold(u.Host, hostport)) {
		return true
	}
	return slices.ContainsFunc(s.cfg.AllowedHosts, func(a string) bool { return strings.EqualFold(a, host) || strings.EqualFold(a, hostport) })
}

// bodyDeadline gives a request's body d to arrive.
func bodyDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			next.ServeHTTP(w, r)
			return
		}
		orig := r.Body
		r.Body = &deadlineBody{ReadCloser: orig, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		// net/http looks at the body's own type, after the handler, to tell
		// an unread body too large to drain (answer and close) from one to
		// drain: give it back its body, or a handler that answers without
		// reading a large body would never be heard.
		defer func() { r.Body = orig }()
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline once the body is read.
type deadlineBody struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.lift)
	}
	return n, err
}

// jsonTooLarge handles MCP messages over maxMCPBody. A tools/call is
// answered as a call that failed: the body is read through a scan (see
// oversize.go) and its stand-in call goes to next in its place. Any other
// message is refused with 413 and the contract's error body, which also
// replaces the SDK's plain-text 413.
func jsonTooLarge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
			var prefix []byte
			over := r.ContentLength > maxMCPBody
			if r.ContentLength < 0 {
				// Of unknown length: read up to the limit to tell. The SDK
				// would hold as much.
				var err error
				if prefix, err = io.ReadAll(io.LimitReader(r.Body, maxMCPBody+1)); err != nil {
					writeError(w, r, &ToolError{Code: CodeToolError, Status: http.StatusBadRequest,
						Message: "the request body could not be read: " + err.Error()})
					return
				}
				if over = len(prefix) > maxMCPBody; !over {
					r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(prefix)), int64(len(prefix))
				}
			}
			if over {
				msg, ok := readOversized(prefix, r.Body)
				if !ok {
					writeError(w, r, tooLargeMessage())
					return
				}
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(msg)), int64(len(msg))
			}
		} else if r.ContentLength > maxMCPBody {
			writeError(w, r, tooLargeMessage())
			return
		}
		next.ServeHTTP(&statusRewriter{ResponseWriter: w, r: r}, r)
	})
}

func tooLargeMessage() error {
	return &ToolError{Code: CodeToolError, Status: http.StatusRequestEntityTooLarge,
		Message: fmt.Sprintf("the MCP message is larger than %d MB: send smaller arguments", maxMCPBody>>20)}
}

// statusRewriter replaces a 413 written by the SDK with the contract's body.
type statusRewriter struct {
	http.ResponseWriter
	r        *http.Request
	replaced bool
}

func (w *statusRewriter) WriteHeader(code int) {
	if code == http.StatusRequestEntityTooLarge && !w.replaced {
		w.replaced = true
		w.ResponseWriter.Header().Del("Content-Length")
		writeError(w.ResponseWriter, w.r, tooLargeMessage())
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRewriter) Write(p []byte) (int, error) {
	if w.replaced {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusRewriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusRewriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sseHandler serves legacy SSE with one SDK handler per API key (and per
// grant of an access token, see identity.serverKey): a session
// lives in the handler of the key that opened it, so a POST with another
// key does not find it (404), and calls always run with the scope, limits
// and audit name of the key that opened the session. It also bounds the
// POSTs waiting on one session.
type sseHandler struct {
	s        *Server
	mu       sync.Mutex
	handlers map[string]*mcp.SSEHandler
	pending  map[string]int
}

func (s *Server) newSSEHandler() *sseHandler {
	return &sseHandler{s: s, handlers: map[string]*mcp.SSEHandler{}, pending: map[string]int{}}
}

func (h *sseHandler) forKey(id identity) *mcp.SSEHandler {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := id.serverKey("sse")
	sh, ok := h.handlers[k]
	if !ok {
		sh = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return h.s.serverFor("sse", id) }, &mcp.SSEOptions{MaxRequestBodyBytes: maxMCPBody})
		h.handlers[k] = sh
	}
	return sh
}

func (h *sseHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := identityFrom(r.Context())
	sh := h.forKey(id)
	session := r.URL.Query().Get("sessionid")
	if r.Method != http.MethodPost || session == "" {
		sh.ServeHTTP(w, r)
		return
	}
	pk := id.serverKey("sse") + "\x00" + session
	h.mu.Lock()
	if h.pending[pk] >= maxPendingPerSSESession {
		h.mu.Unlock()
		writeError(w, r, &ToolError{Code: CodeToolError, Status: http.StatusServiceUnavailable, Retryable: true,
			Message: "too many messages are waiting for this SSE session: read the event stream, then send again"})
		return
	}
	h.pending[pk]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.pending[pk]--; h.pending[pk] <= 0 {
			delete(h.pending, pk)
		}
		h.mu.Unlock()
	}()
	sh.ServeHTTP(w, r)
}
