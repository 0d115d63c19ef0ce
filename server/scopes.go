package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Scopes a key may hold (keys file: scopes=read or scopes=read,write).
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
)

// Toolsets a request may narrow the tools to (X-MCP-Toolsets: web,docs).
const (
	toolsetWeb       = "web"
	toolsetDocs      = "docs"
	toolsetDocsWrite = "docs_write"
	// toolsetsHeader names the header.
	toolsetsHeader = "X-MCP-Toolsets"
)

// toolsets lists every group a tool belongs to, in the order the README
// gives them.
var toolsets = []string{toolsetWeb, toolsetDocs, toolsetDocsWrite}

// toolsetOf is the group of a tool: the web tools, the tools that read
// documents, and those that change them.
func toolsetOf(d toolDef) string {
	switch {
	case d.write:
		return toolsetDocsWrite
	case d.tool.Name == "web_search" || d.tool.Name == "fetch_url":
		return toolsetWeb
	}
	return toolsetDocs
}

// canWrite reports whether the caller may change documents: a key or a
// token with the write scope, or no credential at all (stdio, a loopback
// server without keys: whoever runs it owns it).
func (id identity) canWrite() bool {
	switch {
	case id.key != nil:
		return id.key.write
	case id.token != nil:
		return id.token.write
	}
	return true
}

// readOnly is the refusal of a write by a caller that may only read,
// naming how it could: the scope a key or a token lacks. What is refused
// is said first (what).
func (id identity) readOnly(what string) *ToolError {
	te := &ToolError{Code: CodeAuthError, Status: http.StatusForbidden}
	if g := id.token; g != nil {
		te.Message = fmt.Sprintf("%s and the access token of %s lacks the scope %s: sign in again asking for it (your identity provider must grant it)",
			what, g.subject, g.writeScope)
		te.challenge = g.writeChallenge
		return te
	}
	te.Message = fmt.Sprintf("%s and key %s may only read: give the key scopes=read,write in the keys file to let it add or delete documents", what, id.name())
	return te
}

// requestedToolsets reads X-MCP-Toolsets: the groups the request narrows
// the tools to, nil when it names none. Names it does not know are left
// out; a header naming none it knows narrows to nothing.
func requestedToolsets(h http.Header) []string {
	vals := h.Values(toolsetsHeader)
	if len(vals) == 0 {
		return nil
	}
	out := []string{}
	for _, v := range vals {
		for _, name := range strings.Split(v, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			if slices.Contains(toolsets, name) && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// toolAccess says why a caller may not use tool d, nil when it may: a
// write tool needs the write scope, and a request naming toolsets reaches
// only theirs. A header may narrow what a key sees, never widen it.
func toolAccess(id identity, h http.Header, d toolDef) *ToolError {
	if d.write && !id.canWrite() {
		return id.readOnly(d.tool.Name + " changes documents")
	}
	if sets := requestedToolsets(h); sets != nil && !slices.Contains(sets, toolsetOf(d)) {
		return &ToolError{Code: CodeAuthError, Status: http.StatusForbidden, Message: fmt.Sprintf(
			"%s is in the %s toolset, which this request's %s header leaves out", d.tool.Name, toolsetOf(d), toolsetsHeader)}
	}
	return nil
}

// headerOf returns the HTTP header of an MCP request, nil over stdio.
func headerOf(req mcp.Request) http.Header {
	if req == nil {
		return nil
	}
	if ex := req.GetExtra(); ex != nil {
		return ex.Header
	}
	return nil
}

// toolListMiddleware leaves out of tools/list the tools the caller may not
// use: write tools for a key that may only read, and tools outside the
// toolsets the request names.
func (s *Server) toolListMiddleware(id identity) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			id := s.requestIdentity("", req, id)
			res, err := next(ctx, method, req)
			lt, ok := res.(*mcp.ListToolsResult)
			if err != nil || !ok || method != "tools/list" {
				return res, err
			}
			h := headerOf(req)
			kept := make([]*mcp.Tool, 0, len(lt.Tools))
			for _, t := range lt.Tools {
				if d, known := s.tools.lookup(t.Name); known && toolAccess(id, h, d) != nil {
					continue
				}
				kept = append(kept, t)
			}
			out := *lt
			out.Tools = kept
			return &out, nil
		}
	}
}

// writesRefused says why a request of the upload API that changes
// documents is refused: the server is read-only, or the key may only read.
// nil when it may go on.
func (s *Server) writesRefused(r *http.Request) error {
	if !s.cfg.WritesOn() {
		return &ToolError{Code: CodeAuthError, Status: http.StatusForbidden,
			Message: "this server is read-only (MCP_read_only): it stores and deletes no documents"}
	}
	if id := identityFrom(r.Context()); !id.canWrite() {
		return id.readOnly("uploading and deleting change documents")
	}
	return nil
}
