package server

import (
	"net/http"
)

// openAPIDocument describes the REST facade as OpenAPI 3.1, generated from
// the same tool definitions as MCP's tools/list: one operation per tool
// (POST /mcp/tools/{name}, for OpenAPI tool callers that make a function of
// each operation), plus the generic list and invoke routes.
func (s *Server) openAPIDocument() map[string]any {
	errorSchema := map[string]any{
		"type":     "object",
		"required": []string{"success", "error", "error_type"},
		"properties": map[string]any{
			"success":        map[string]any{"const": false},
			"error":          map[string]any{"type": "string", "description": "what went wrong and what to send instead"},
			"error_type":     map[string]any{"type": "string", "description": "TOOL_ERROR, RATE_LIMITED, TIMEOUT, AUTH_ERROR or TOOL_NOT_FOUND"},
			"retryable":      map[string]any{"type": "boolean", "description": "whether the same call may succeed later"},
			"retry_after_ms": map[string]any{"type": "integer", "description": "when rate limited: how long until a call is allowed"},
		},
	}
	errorResponse := func(desc string) map[string]any {
		return map[string]any{"description": desc, "content": map[string]any{
			"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
	}
	failures := map[string]any{
		"400": errorResponse("invalid parameters"),
		"401": errorResponse("missing or invalid API key"),
		"403": errorResponse("the key may not use that conversation, or the address is refused"),
		"404": errorResponse("unknown tool, file or chunk"),
		"429": errorResponse("rate limited; see Retry-After"),
		"500": errorResponse("internal error"),
		"502": errorResponse("an upstream service (SearXNG, a web site) failed"),
		"503": errorResponse("a dependency is down; retry later"),
		"504": errorResponse("the call did not finish in time"),
	}
	withFailures := func(ok map[string]any) map[string]any {
		out := map[string]any{"200": ok}
		for k, v := range failures {
			out[k] = v
		}
		return out
	}
	paths := map[string]any{
		"/mcp/tools": map[string]any{"get": map[string]any{
			"operationId": "listTools",
			"summary":     "List the tools with their parameter schemas",
			"responses": withFailures(map[string]any{"description": "the tools", "content": map[string]any{
				"application/json": map[string]any{"schema": map[string]any{
					"type": "object", "required": []string{"tools"},
					"properties": map[string]any{"tools": map[string]any{"type": "array", "items": map[string]any{
						"type": "object", "required": []string{"name", "description", "parameters"},
						"properties": map[string]any{
							"name":        map[string]any{"type": "string"},
							"title":       map[string]any{"type": "string"},
							"description": map[string]any{"type": "string"},
							"parameters":  map[string]any{"type": "object", "description": "JSON Schema of the tool's params"},
							"result":      map[string]any{"type": "object", "description": "JSON Schema of the tool's result"},
						}}}}}}}}),
		}},
		"/mcp/invoke": map[string]any{"post": map[string]any{
			"operationId": "invokeTool",
			"summary":     "Invoke any tool by name",
			"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
				"type": "object", "required": []string{"tool_name", "params"},
				"properties": map[string]any{
					"tool_name": map[string]any{"type": "string", "enum": s.toolNames()},
					"params":    map[string]any{"type": "object"},
				}}}}},
			"responses": withFailures(map[string]any{"description": "the tool's result", "content": map[string]any{
				"application/json": map[string]any{"schema": map[string]any{
					"type": "object", "required": []string{"success", "result"},
					"properties": map[string]any{"success": map[string]any{"const": true}, "result": map[string]any{"type": "object"}},
				}}}}),
		}},
	}
	// Every tool offered: a call a key may not make is answered 403.
	for _, t := range s.restToolsFor(identity{}, nil) {
		result := t.Result
		if result == nil {
			result = map[string]any{"type": "object"}
		}
		paths["/mcp/tools/"+t.Name] = map[string]any{"post": map[string]any{
			"operationId": t.Name,
			"summary":     t.Title,
			"description": t.Description,
			"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": t.Parameters}}},
			"responses": withFailures(map[string]any{"description": "the tool's result", "content": map[string]any{
				"application/json": map[string]any{"schema": map[string]any{
					"type": "object", "required": []string{"success", "result"},
					"properties": map[string]any{"success": map[string]any{"const": true}, "result": result},
				}}}}),
		}}
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "mcpsearch",
			"version":     s.version,
			"description": "Web search through SearXNG, web page reading and search over uploaded documents, as plain HTTP. The same tools are served over MCP at /mcp.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":         map[string]any{"Error": errorSchema},
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
	if s.accessControlled() {
		doc["security"] = []any{map[string]any{"bearer": []string{}}}
	}
	return doc
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "private, max-age=300")
	writeJSON(w, http.StatusOK, s.openAPIDocument())
}
