package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
)

// openSSE opens a legacy SSE stream with key and returns the message
// endpoint its first event names.
func openSSE(t *testing.T, base, key string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return data
		}
	}
	t.Fatalf("no endpoint event: %v", sc.Err())
	return ""
}

func post(t *testing.T, url, key, body string, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestSSESessionBoundToKey: a session opened with one key cannot be used
// with another, which would run calls with the first key's scope and name.
func TestSSESessionBoundToKey(t *testing.T) {
	_, hs := keyedServer(t)
	endpoint := openSSE(t, hs.URL, scopedKey)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if resp := post(t, hs.URL+endpoint, fullKey, ping, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another key's POST into the session: status %d, want 404", resp.StatusCode)
	}
	if resp := post(t, hs.URL+endpoint, scopedKey, ping, nil); resp.StatusCode != http.StatusAccepted {
		t.Errorf("the session's own key: status %d, want 202", resp.StatusCode)
	}
}

// TestHostCheckedOnEveryRoute: on a loopback listener a foreign Host header
// (DNS rebinding) is refused on every route, not only the MCP ones.
func TestHostCheckedOnEveryRoute(t *testing.T) {
	_, hs := keyedServer(t)
	for _, path := range []string{"/mcp", "/sse", "/v1/conversations/conv-a/files", "/metrics", "/readyz", "/healthz"} {
		for _, host := range []string{"evil.example", "evil.example:8080"} {
			req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
			req.Host = host
			req.Header.Set("Authorization", "Bearer "+fullKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body envelope
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || body.Error == nil || body.Error.Code != CodeAuthError {
				t.Errorf("GET %s with Host %s: status %d %+v, want 403 AUTH_ERROR", path, host, resp.StatusCode, body.Error)
			}
		}
	}
	resp, err := http.Get(hs.URL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("loopback Host refused: %v %v", resp.StatusCode, err)
	}
}

// TestPublicURLHostAllowed: on a loopback listener behind a proxy, the host
// of MCP_public_url is accepted without naming it again in
// MCP_allowed_hosts; other hosts are still refused.
func TestPublicURLHostAllowed(t *testing.T) {
	_, hs := keyedServerWith(t, func(c *config.Config) { c.PublicURL = "https://mcp.example.com/search" })
	for host, want := range map[string]int{"mcp.example.com": http.StatusOK, "mcp.example.com:443": http.StatusOK,
		"MCP.example.com": http.StatusOK, "evil.example": http.StatusForbidden, "mcp.example.com.evil.example": http.StatusForbidden} {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/healthz", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: status %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestRateLimitPerKey: one tenant emptying its bucket leaves another's full.
func TestRateLimitPerKey(t *testing.T) {
	_, hs := keyedServerWith(t, func(c *config.Config) {
		c.RateLimits = map[string]config.RateLimit{"web_search": {PerMinute: 1, Burst: 2}}
	})
	a, err := connectHTTP(t, hs.URL, "http", fullKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := connectHTTP(t, hs.URL, "http", scopedKey)
	if err != nil {
		t.Fatal(err)
	}
	call := func(s *mcp.ClientSession) *mcp.CallToolResult {
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "tenants"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for range 2 {
		if res := call(a); res.IsError {
			t.Fatalf("tenant A within its burst: %s", textOf(res))
		}
	}
	if te := toolErr(t, call(a)); te.Code != CodeRateLimited {
		t.Errorf("tenant A past its burst: %+v, want RATE_LIMITED", te)
	}
	if res := call(b); res.IsError {
		t.Errorf("tenant B's first call was refused after A's: %s", textOf(res))
	}
}

// TestOversizedMCPMessage: the 413 carries the contract's error body. (A
// tools/call is answered as a failed call instead: see oversize.go.)
func TestOversizedMCPMessage(t *testing.T) {
	_, hs := keyedServer(t)
	big := `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + strings.Repeat("a", maxMCPBody) + `"}}`
	for _, path := range []string{"/mcp", "/sse?sessionid=x"} {
		resp := post(t, hs.URL+path, fullKey, big, nil)
		var body envelope
		if resp.StatusCode != http.StatusRequestEntityTooLarge || json.NewDecoder(resp.Body).Decode(&body) != nil || body.Error == nil || body.Error.Code != CodeToolError {
			t.Errorf("POST %s of %d bytes: status %d %+v, want 413 with the contract's body", path, len(big), resp.StatusCode, body.Error)
		}
	}
}

// TestReadinessHidesDetailsWithoutKey: database error texts name users and
// hosts; only an authenticated caller sees them.
func TestReadinessHidesDetailsWithoutKey(t *testing.T) {
	_, hs := keyedServer(t)
	get := func(key string) map[string]check {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/readyz", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Checks map[string]check }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return body.Checks
	}
	if c := get("")["database"]; c.Status != "down" || c.Error != "" {
		t.Errorf("without a key: database %+v, want down without the error text", c)
	}
	if c := get(fullKey)["database"]; c.Status != "down" || c.Error == "" {
		t.Errorf("with a key: database %+v, want the error text", c)
	}
}

// TestGlobalCeiling: a tool's global ceiling bounds all tenants together,
// on top of each one's own bucket.
func TestGlobalCeiling(t *testing.T) {
	_, hs := keyedServerWith(t, func(c *config.Config) {
		c.RateLimits = map[string]config.RateLimit{"web_search": {PerMinute: 600, Burst: 100, Global: 3}}
	})
	calls := 0
	for _, key := range []string{fullKey, scopedKey} {
		cs, err := connectHTTP(t, hs.URL, "http", key)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "ceiling"}})
			if err != nil {
				t.Fatal(err)
			}
			calls++
			if calls <= 3 && res.IsError {
				t.Errorf("call %d within the ceiling refused: %s", calls, textOf(res))
			}
			if calls == 4 {
				if te := toolErr(t, res); te.Code != CodeRateLimited {
					t.Errorf("call 4 past the global ceiling of 3: %+v, want RATE_LIMITED", te)
				}
			}
		}
	}
}
