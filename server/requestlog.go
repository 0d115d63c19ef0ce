package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// requestIDHeader carries a request's id: taken from the client (a proxy or
// gateway that already assigned one) when it is sane, otherwise made here,
// and echoed on the response so a user can quote it in a bug report.
const requestIDHeader = "X-Request-ID"

// newRequestID returns 16 random hex digits.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestID returns the client's id if it is short printable ASCII (it ends
// up in logs), else a new one.
func requestID(given string) string {
	if given == "" || len(given) > 128 {
		return newRequestID()
	}
	for i := 0; i < len(given); i++ {
		if c := given[i]; c < 0x21 || c > 0x7e {
			return newRequestID()
		}
	}
	return given
}

// callRequestID is the request id of a tool call: the HTTP request's over
// streamable HTTP, whose headers the SDK passes along; a new one over stdio
// and SSE, where one HTTP request or stream carries many calls.
func callRequestID(call *mcp.CallToolRequest) string {
	if call.Extra != nil && call.Extra.Header != nil {
		if id := call.Extra.Header.Get(requestIDHeader); id != "" {
			return id
		}
	}
	return newRequestID()
}

// withRequestLog gives every HTTP request an id and logs it when it ends:
// at debug level when it succeeded, info for a client error (4xx, such as a
// refused key) and warn for a server error, so a production log at info
// level shows what went wrong without one line per health check.
func (s *Server) withRequestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := requestID(r.Header.Get(requestIDHeader))
		// Set on the request too, so handlers and the SDK (which hands
		// request headers to tool calls) see the same id.
		r.Header.Set(requestIDHeader, id)
		w.Header().Set(requestIDHeader, id)
		sw := &statusWriter{ResponseWriter: w}
		note := &causes{}
		start := time.Now()
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), causesKey{}, note)))

		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		level := slog.LevelDebug
		cause := note.String()
		switch {
		case status >= 500, cause != "":
			level = slog.LevelWarn
		case status >= 400:
			level = slog.LevelInfo
		}
		if !s.log.Enabled(r.Context(), level) {
			return
		}
		attrs := []any{"method", r.Method, "path", r.URL.Path, "status", status,
			"ms", time.Since(start).Milliseconds(), "request_id", id}
		if sid := sessionOf(r, sw.Header()); sid != "" {
			attrs = append(attrs, "session", sid)
		}
		if cause != "" {
			attrs = append(attrs, "cause", cause)
		}
		lctx := context.WithoutCancel(r.Context())
		if sc := note.spanContext(); sc.IsValid() {
			lctx = trace.ContextWithSpanContext(lctx, sc)
		}
		s.log.Log(lctx, level, "http request", attrs...)
	})
}

// causes are what a request's answers left out of their errors (see
// ToolError.cause), for its log line.
type causes struct {
	mu   sync.Mutex
	list []string
	// trace is the span of the request, when it is traced (httpSpan).
	trace trace.SpanContext
}

type causesKey struct{}

// noteCause adds cause, if any, to the log line of the request ctx belongs
// to.
func noteCause(ctx context.Context, cause error) {
	if n, ok := ctx.Value(causesKey{}).(*causes); ok && cause != nil {
		n.mu.Lock()
		n.list = append(n.list, cause.Error())
		n.mu.Unlock()
	}
}

func (n *causes) spanContext() trace.SpanContext {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.trace
}

func (n *causes) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.list, "; ")
}

// sessionOf is the MCP session of an HTTP request: the streamable HTTP
// header (sent by the client, or assigned in the response to initialize) or
// the legacy SSE message endpoint's query parameter.
func sessionOf(r *http.Request, resp http.Header) string {
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		return id
	}
	if id := resp.Get("Mcp-Session-Id"); id != "" {
		return id
	}
	return r.URL.Query().Get("sessionid")
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush keeps SSE and streamable HTTP streams working through the wrapper.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
