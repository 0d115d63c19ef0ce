package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The REST facade serves services that do not speak MCP (an API gateway, a
// cron job, a chatbot backend):
//
//	GET  /mcp/tools    the tools and their JSON Schemas
//	POST /mcp/invoke   {"tool_name": "...", "params": {...}}
//	GET  /openapi.json the same tools as an OpenAPI 3.1 document
//
// An invocation is a tools/call on the caller's MCP server, made over an
// in-process session: it passes the same middleware as every MCP call
// (rate limit per key and tool, scope, timeout, log, metrics and audit with
// transport "rest"), so the facade adds no second path for a call.

// restTransport names the facade in logs, metrics and audit rows.
const restTransport = "rest"

// restToolInfo is one tool as GET /mcp/tools lists it.
type restToolInfo struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description"`
	Parameters  any    `json:"parameters"`
	// Result is the JSON Schema of a successful invocation's result.
	Result any `json:"result,omitempty"`
}

type restTools struct {
	Tools []restToolInfo `json:"tools"`
}

// restInvoke is the body of POST /mcp/invoke.
type restInvoke struct {
	ToolName string          `json:"tool_name"`
	Params   json.RawMessage `json:"params"`
}

// restResult answers POST /mcp/invoke.
type restResult struct {
	Success      bool   `json:"success"`
	Result       any    `json:"result,omitempty"`
	Error        string `json:"error,omitempty"`
	ErrorType    string `json:"error_type,omitempty"`
	Retryable    *bool  `json:"retryable,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

// maxInvokeBody bounds the body of one invocation, as for MCP messages.
const maxInvokeBody = maxMCPBody

func (s *Server) restRoutes(mux *http.ServeMux) {
	mux.Handle("GET /mcp/tools", s.httpSpan(s.protectWith(writeRESTError, http.HandlerFunc(s.restListTools))))
	mux.Handle("POST /mcp/invoke", s.httpSpan(bodyDeadline(mcpBodyTimeout, s.protectWith(writeRESTError, http.HandlerFunc(s.restInvoke)))))
	// One route per tool, whose body is the tool's params: what OpenAPI
	// tool callers turn into one function per tool.
	mux.Handle("POST /mcp/tools/{name}", s.httpSpan(bodyDeadline(mcpBodyTimeout, s.protectWith(writeRESTError, http.HandlerFunc(s.restInvoke)))))
	mux.Handle("GET /openapi.json", s.httpSpan(s.protectWith(writeRESTError, http.HandlerFunc(s.openAPI))))
}

// restToolList lists the tools the request's caller may use (its key's
// scopes, the X-MCP-Toolsets header), as tools/list does.
func (s *Server) restToolList(r *http.Request) []restToolInfo {
	return s.restToolsFor(identityFrom(r.Context()), r.Header)
}

// restToolsFor lists the tools caller id may use with header h; the
// identity without a key, and no header, list every tool offered.
func (s *Server) restToolsFor(id identity, h http.Header) []restToolInfo {
	out := make([]restToolInfo, 0, len(s.tools.defs))
	for _, d := range s.tools.defs {
		if toolAccess(id, h, d) != nil {
			continue
		}
		out = append(out, restToolInfo{Name: d.tool.Name, Title: d.tool.Title, Description: d.tool.Description,
			Parameters: d.tool.InputSchema, Result: s.outputSchema(d.tool.Name)})
	}
	return out
}

func (s *Server) restListTools(w http.ResponseWriter, r *http.Request) {
	// Tools change only with the server's configuration.
	w.Header().Set("Cache-Control", "private, max-age=300")
	writeJSON(w, http.StatusOK, restTools{Tools: s.restToolList(r)})
}

func (s *Server) restInvoke(w http.ResponseWriter, r *http.Request) {
	var req restInvoke
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxInvokeBody))
	var err error
	if name := r.PathValue("name"); name != "" {
		req.ToolName = name
		err = dec.Decode(&req.Params)
	} else {
		err = dec.Decode(&req)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeRESTError(w, r, tooLargeMessage())
			return
		}
		writeRESTError(w, r, badArg("the body must be JSON like {\"tool_name\": \"web_search\", \"params\": {\"query\": \"...\"}}: %v", err))
		return
	}
	req.ToolName = strings.TrimSpace(req.ToolName)
	if req.ToolName == "" {
		writeRESTError(w, r, badArg("tool_name is missing: send one of %s", strings.Join(s.toolNames(), ", ")))
		return
	}
	if _, ok := s.tools.lookup(req.ToolName); !ok {
		writeRESTError(w, r, &ToolError{Code: "TOOL_NOT_FOUND", Status: http.StatusNotFound,
			Message: fmt.Sprintf("unknown tool %q: GET /mcp/tools lists the tools (%s)", clip(req.ToolName, 60), strings.Join(s.toolNames(), ", "))})
		return
	}
	if len(req.Params) == 0 || string(req.Params) == "null" {
		req.Params = json.RawMessage("{}")
	}
	id := identityFrom(r.Context())
	cs, err := s.restSession(r.Context(), id)
	if err != nil {
		writeRESTError(w, r, err)
		return
	}
	holder := &pendingCall{header: r.Header, caller: &id}
	hid := s.pending.add(holder)
	defer s.pending.remove(hid)
	meta := mcp.Meta{restCallMeta: hid}
	// The call is a child of this request's span (httpSpan).
	traceContext.Inject(r.Context(), metaCarrier(meta))
	if ua := r.Header.Get("User-Agent"); ua != "" {
		name, ver, _ := strings.Cut(strings.Fields(ua)[0], "/")
		meta[mcp.MetaKeyClientInfo] = map[string]any{"name": clip(name, 100), "version": clip(ver, 50)}
	}
	res, err := cs.CallTool(r.Context(), &mcp.CallToolParams{Meta: meta, Name: req.ToolName, Arguments: req.Params})
	c := holder.call()
	setRateHeaders(w.Header(), c)
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			err = badArg("%s", rpc.Message)
		}
		writeRESTError(w, r, err)
		return
	}
	if c != nil {
		if o := c.outcome(); o.failure != nil {
			// The call's own log line has the cause.
			te := *o.failure
			te.cause = nil
			writeRESTError(w, r, &te)
			return
		}
	}
	if res.IsError {
		writeRESTError(w, r, errors.New(textOf(res)))
		return
	}
	var result any = res.StructuredContent
	if result == nil {
		result = map[string]string{"text": textOf(res)}
	}
	writeJSON(w, http.StatusOK, restResult{Success: true, Result: result})
}

// restCallMeta is the _meta key that ties an invocation to its call.
const restCallMeta = "io.mcpsearch/rest-call"

// restSession returns the in-process MCP session of a caller, connecting it
// on first use. Sessions are few (one per key, one for every token, whose
// calls bring their caller in their pending call) and serve calls
// concurrently.
func (s *Server) restSession(ctx context.Context, id identity) (*mcp.ClientSession, error) {
	s.restMu.Lock()
	defer s.restMu.Unlock()
	if cs, ok := s.restSessions[id.serverKey(restTransport)]; ok {
		return cs, nil
	}
	ct, st := mcp.NewInMemoryTransports()
	bg := context.WithoutCancel(ctx)
	if _, err := s.serverFor(restTransport, id).Connect(bg, st, nil); err != nil {
		return nil, fmt.Errorf("rest: connect: %w", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpsearch-rest", Version: s.version}, nil).Connect(bg, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("rest: connect: %w", err)
	}
	if s.restSessions == nil {
		s.restSessions = map[string]*mcp.ClientSession{}
	}
	s.restSessions[id.serverKey(restTransport)] = cs
	return cs, nil
}

// writeRESTError answers an invocation that failed, with the status of the
// error's class (the same table as every other route).
func writeRESTError(w http.ResponseWriter, r *http.Request, err error) {
	te := classifyRequest(r, err)
	errorHeaders(w, te)
	retryable := te.Retryable
	writeJSON(w, te.Status, restResult{Error: te.Message, ErrorType: te.Code, Retryable: &retryable, RetryAfterMS: te.RetryAfterMS})
}

func (s *Server) toolNames() []string {
	names := make([]string, 0, len(s.tools.defs))
	for _, d := range s.tools.defs {
		names = append(names, d.tool.Name)
	}
	return names
}

// outputSchema returns the result schema the SDK published for tool.
func (s *Server) outputSchema(tool string) any {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.outSchemas == nil {
		s.outSchemas = map[string]any{}
		// The SDK infers output schemas when a tool is added; list them
		// once from an in-process session.
		ct, st := mcp.NewInMemoryTransports()
		ctx := context.Background()
		srv := s.MCP("stdio")
		ss, err := srv.Connect(ctx, st, nil)
		if err == nil {
			defer ss.Close()
			if cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpsearch-schema"}, nil).Connect(ctx, ct, nil); err == nil {
				defer cs.Close()
				if res, err := cs.ListTools(ctx, nil); err == nil {
					for _, t := range res.Tools {
						s.outSchemas[t.Name] = t.OutputSchema
					}
				}
			}
		}
	}
	return s.outSchemas[tool]
}

// restState is the facade's share of the Server.
type restState struct {
	restMu       sync.Mutex
	restSessions map[string]*mcp.ClientSession
	outMu        sync.Mutex
	outSchemas   map[string]any
}
