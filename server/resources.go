package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/docs"
)

// fileURITemplate names a ready file's extracted text as an MCP resource.
const fileURITemplate = "mcpsearch://conversations/{conversation_id}/files/{file_id}"

// fileTextTTL is the cache hint of a file's text.
const fileTextTTL = time.Hour

// maxListedResources bounds resources/list; clients reach any other file
// through the template.
const maxListedResources = 200

func fileURI(conv, fileID string) string {
	return "mcpsearch://conversations/" + url.PathEscape(conv) + "/files/" + fileID
}

// parseFileURI is the inverse of fileURI.
func parseFileURI(uri string) (conv, fileID string, ok bool) {
	rest, ok := strings.CutPrefix(uri, "mcpsearch://conversations/")
	if !ok {
		return "", "", false
	}
	c, id, ok := strings.Cut(rest, "/files/")
	if !ok || c == "" || id == "" || strings.Contains(id, "/") {
		return "", "", false
	}
	conv, err := url.PathUnescape(c)
	return conv, id, err == nil
}

func (s *Server) addFileResources(m *mcp.Server) {
	m.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: fileURITemplate,
		Name:        "conversation-file",
		Title:       "Uploaded file (extracted text)",
		Description: "The extracted text of one ready file uploaded to a conversation; list_files gives the ids.",
		MIMEType:    "text/plain",
	}, s.readFile)
}

func (s *Server) readFile(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	conv, id, ok := parseFileURI(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	id = strings.TrimSpace(id)
	f, text, err := s.deps.Docs.FileText(ctx, id)
	switch {
	case errors.Is(err, docs.ErrNotFound), errors.Is(err, docs.ErrInvalidID):
		return nil, mcp.ResourceNotFoundError(uri)
	case err != nil:
		return nil, s.resourceError(ctx, "read "+uri, err)
	}
	// A file is found only under its own conversation, and only by a
	// caller whose key may see that conversation.
	if f.ConversationID != conv || !identityFrom(ctx).allows(conv) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	// A file's text never changes once it is ready; it may be deleted, so
	// the hint is an hour, for this caller only.
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}},
		Cacheable: mcp.Cacheable{TTLMs: int(fileTextTTL.Milliseconds()), CacheScope: "private"}}, nil
}

// resourceListMiddleware answers resources/list from the database: files
// are listed as they are stored, not registered one by one.
func (s *Server) resourceListMiddleware(id identity) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "resources/list" {
				return next(ctx, method, req)
			}
			return s.listFileResources(ctx, s.requestIdentity("", req, id))
		}
	}
}

// listFileResources answers resources/list with the most recent ready files the
// caller may see.
func (s *Server) listFileResources(ctx context.Context, id identity) (*mcp.ListResourcesResult, error) {
	convs := id.conversations()
	files, err := s.deps.Docs.RecentFiles(ctx, convs, maxListedResources)
	if err != nil {
		return nil, s.resourceError(ctx, "list files", err)
	}
	// Files come and go with uploads: the list is not cached.
	out := &mcp.ListResourcesResult{Resources: make([]*mcp.Resource, 0, len(files)), Cacheable: mcp.Cacheable{CacheScope: "private"}}
	for _, f := range files {
		out.Resources = append(out.Resources, &mcp.Resource{
			URI:         fileURI(f.ConversationID, f.ID),
			Name:        f.FileName,
			Title:       f.FileName,
			Description: fmt.Sprintf("%s in conversation %s: %d chunks, %d pages", f.MIMEType, f.ConversationID, f.ChunkCount, f.PageCount),
			MIMEType:    "text/plain",
		})
	}
	return out, nil
}

// resourceError answers a failed resource request with the contract's
// message and whether to retry, as a tool call would; the cause a clean
// message leaves out goes to the log.
func (s *Server) resourceError(ctx context.Context, op string, err error) error {
	te := classify(ctx, err)
	attrs := []any{"op", op, "error", te.Message}
	if te.cause != nil {
		attrs = append(attrs, "cause", te.cause.Error())
	}
	s.log.Warn("resource request failed", attrs...)
	data, _ := json.Marshal(map[string]any{"code": te.Code, "retryable": te.Retryable})
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: te.Message, Data: data}
}
