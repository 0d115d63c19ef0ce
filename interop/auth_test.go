package interop

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// The keys of the servers that require them; one per test that starts
// such a server, so a failure names its test.
const (
	authKey      = "interop-auth-key-0123456789"
	otherAuthKey = "interop-other-key-9876543210"
)

// TestAuthTypeScript drives a server that requires API keys with the
// official TypeScript SDK over streamable HTTP and SSE: with a valid key
// in the Authorization header the client works as without keys; with a
// wrong or no key the handshake is refused with 401.
func TestAuthTypeScript(t *testing.T) {
	requireNode(t)
	t.Parallel()
	fake := searxngtest.New(t)
	cfg := baseConfig(fake.URL).with("MCP_API_KEYS=" + authKey + "," + otherAuthKey)
	srv := startServer(t, transportCase{name: "http,sse", transport: "http,sse"}, cfg)
	for _, transport := range []string{"http", "sse"} {
		url := srv.base + "/mcp"
		if transport == "sse" {
			url = srv.base + "/sse"
		}
		cases := []struct {
			name     string
			key      string
			scenario string
		}{
			{"first key", authKey, "basic"},
			{"second key", otherAuthKey, "basic"},
			{"wrong key", "not-a-key-of-this-server", "unauthorized"},
			{"no key", "", "unauthorized"},
		}
		for _, c := range cases {
			t.Run(transport+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				tg := target{transport: transport, url: url, cfg: cfg, srv: srv, key: c.key}
				if c.scenario == "unauthorized" {
					runTS(t, tg, c.scenario, "--expect-status", "401")
					return
				}
				q := "keyed " + transport + " " + c.name
				runTS(t, tg, c.scenario, "--query", q, "--max-results", "2",
					"--expect-first-url", searxngtest.ResultURL(q, 1))
			})
		}
	}
}

// TestAuthHTTP checks what a client without an SDK sees of a keyed server:
// every protected surface answers 401 with WWW-Authenticate and the
// contract's AUTH_ERROR body to a missing or wrong key, and lets a valid
// key through; the health probes stay open.
func TestAuthHTTP(t *testing.T) {
	t.Parallel()
	fake := searxngtest.New(t)
	cfg := docsConfig(t, fake.URL).with("MCP_API_KEYS=" + authKey)
	srv := startServer(t, transportCase{name: "http,sse", transport: "http,sse"}, cfg)
	paths := []struct {
		method, path string
		okStatus     int // the status with a valid key
	}{
		{http.MethodGet, "/v1/conversations/conv-auth/files", http.StatusOK},
		{http.MethodGet, "/metrics", http.StatusOK},
		// Past the key, the transport itself refuses a POST that is not JSON.
		{http.MethodPost, "/mcp", http.StatusUnsupportedMediaType},
		{http.MethodDelete, "/v1/files/00000000-0000-0000-0000-000000000000", http.StatusNotFound},
	}
	for _, p := range paths {
		for _, key := range []string{"", "wrong-key", authKey} {
			name := p.method + " " + p.path + " key=" + key
			t.Run(name, func(t *testing.T) {
				resp, body := apiClient{base: srv.base, key: key}.send(t, p.method, p.path, "", nil)
				status, hdr := resp.StatusCode, resp.Header
				if key == authKey {
					if status != p.okStatus {
						t.Errorf("status %d with a valid key, want %d: %s", status, p.okStatus, body)
					}
					return
				}
				if status != http.StatusUnauthorized {
					t.Fatalf("status %d, want 401: %s", status, body)
				}
				if !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", hdr.Get("WWW-Authenticate"))
				}
				var e struct {
					Error *toolError `json:"error"`
				}
				if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || e.Error.Code != "AUTH_ERROR" || e.Error.Message == "" {
					t.Errorf("body = %s, want the contract's AUTH_ERROR", body)
				}
			})
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if status, body := (apiClient{base: srv.base}).do(t, http.MethodGet, p, "", nil); status != http.StatusOK {
			t.Errorf("GET %s without a key = %d %s, want 200", p, status, body)
		}
	}
}
