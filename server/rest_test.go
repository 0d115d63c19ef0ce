package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/config"
)

func restCall(t *testing.T, method, url, key, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "cron-job/2.1")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: body is not JSON: %v", method, url, err)
	}
	return resp, out
}

func TestRESTListTools(t *testing.T) {
	_, hs := keyedServer(t)
	resp, out := restCall(t, http.MethodGet, hs.URL+"/mcp/tools", fullKey, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %v", resp.StatusCode, out)
	}
	var names []string
	for _, tool := range out["tools"].([]any) {
		m := tool.(map[string]any)
		names = append(names, m["name"].(string))
		params, _ := m["parameters"].(map[string]any)
		if params["type"] != "object" || m["description"] == "" {
			t.Errorf("tool %v lacks a description or an object schema: %v", m["name"], m)
		}
	}
	for _, want := range []string{"web_search", "search_docs", "list_files", "get_chunk"} {
		if !slices.Contains(names, want) {
			t.Errorf("GET /mcp/tools lacks %s: %v", want, names)
		}
	}
	if resp, _ := restCall(t, http.MethodGet, hs.URL+"/mcp/tools", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a key: status %d, want 401", resp.StatusCode)
	}
}

func TestRESTInvoke(t *testing.T) {
	_, hs := keyedServerWith(t, func(c *config.Config) {
		c.RateLimits = map[string]config.RateLimit{"web_search": {PerMinute: 1, Burst: 3}}
	})
	tests := []struct {
		name      string
		path      string
		key       string
		body      string
		status    int
		errorType string
	}{
		{"generic route", "/mcp/invoke", fullKey, `{"tool_name":"web_search","params":{"query":"rest one"}}`, 200, ""},
		{"tool route", "/mcp/tools/web_search", fullKey, `{"query":"rest two","max_results":2}`, 200, ""},
		{"invalid params", "/mcp/invoke", fullKey, `{"tool_name":"web_search","params":{"query":"x","max_results":500}}`, 400, CodeToolError},
		{"rate limited", "/mcp/invoke", fullKey, `{"tool_name":"web_search","params":{"query":"rest three"}}`, 429, CodeRateLimited},
		{"another key has its own bucket", "/mcp/invoke", scopedKey, `{"tool_name":"web_search","params":{"query":"rest four"}}`, 200, ""},
		{"unknown tool", "/mcp/invoke", fullKey, `{"tool_name":"no_such_tool","params":{}}`, 404, "TOOL_NOT_FOUND"},
		{"unknown tool route", "/mcp/tools/no_such_tool", fullKey, `{}`, 404, "TOOL_NOT_FOUND"},
		{"not JSON", "/mcp/invoke", fullKey, `tool=web_search`, 400, CodeToolError},
		{"no key", "/mcp/invoke", "", `{"tool_name":"web_search","params":{"query":"x"}}`, 401, CodeAuthError},
		{"outside the key's conversations", "/mcp/invoke", scopedKey, `{"tool_name":"list_files","params":{"conversation_id":"conv-z"}}`, 403, CodeAuthError},
		{"dependency down", "/mcp/invoke", fullKey, `{"tool_name":"list_files","params":{"conversation_id":"conv-a"}}`, 503, CodeToolError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, out := restCall(t, http.MethodPost, hs.URL+tt.path, tt.key, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %v", resp.StatusCode, tt.status, out)
			}
			if tt.status == 200 {
				res, _ := out["result"].(map[string]any)
				if out["success"] != true || res == nil || res["results"] == nil {
					t.Errorf("body %v, want success with the structured result", out)
				}
				if resp.Header.Get("X-RateLimit-Limit") == "" {
					t.Error("no X-RateLimit-* headers")
				}
				return
			}
			if out["success"] != false || out["error_type"] != tt.errorType || out["error"] == "" || out["retryable"] == nil {
				t.Errorf("body %v, want success false, error_type %s, error and retryable", out, tt.errorType)
			}
			if tt.status == 429 && resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		})
	}
}

// TestOpenAPIInStepWithTools: the OpenAPI document has an operation for
// every tool, with the same parameter schema as tools/list.
func TestOpenAPIInStepWithTools(t *testing.T) {
	h, hs := keyedServer(t)
	resp, doc := restCall(t, http.MethodGet, hs.URL+"/openapi.json", fullKey, "")
	if resp.StatusCode != http.StatusOK || doc["openapi"] != "3.1.0" {
		t.Fatalf("status %d, openapi %v", resp.StatusCode, doc["openapi"])
	}
	paths := doc["paths"].(map[string]any)
	listed, err := h.session.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range listed.Tools {
		op, ok := paths["/mcp/tools/"+tool.Name].(map[string]any)
		if !ok {
			t.Errorf("no operation for %s", tool.Name)
			continue
		}
		got, _ := json.Marshal(op["post"].(map[string]any)["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"])
		want, _ := json.Marshal(tool.InputSchema)
		if string(got) != string(want) {
			t.Errorf("%s: OpenAPI request schema\n%s\nwant tools/list's\n%s", tool.Name, got, want)
		}
	}
	if n := len(paths) - 2; n != len(listed.Tools) {
		t.Errorf("%d tool operations for %d tools", n, len(listed.Tools))
	}
}
