package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
	"github.com/mcpsearch/mcpsearch/searxng"
)

// logBuffer collects JSON log lines written concurrently.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// records returns the logged records with message msg.
func (l *logBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func TestRequestIDs(t *testing.T) {
	fake := searxngtest.New(t)
	cfg := config.Default()
	cfg.SearXNGURL = fake.URL
	cfg.Transports = []string{"http", "sse"}
	client, err := searxng.New(cfg.SearXNGURL)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := LoadAPIKeys([]string{fullKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := New(cfg, Deps{Search: client, APIKeys: keys}, log, "test")
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	hexID := regexp.MustCompile(`^[0-9a-f]{16}$`)
	tests := []struct {
		name   string
		sent   string // X-Request-ID sent, if any
		key    string
		status int
		want   string // id expected back; "" means a generated one
	}{
		{name: "generated", key: fullKey, status: http.StatusOK},
		{name: "kept from a proxy", sent: "gw-42.abc", key: fullKey, status: http.StatusOK, want: "gw-42.abc"},
		{name: "spaces and non-ASCII replaced", sent: "bad id\tünicode", key: fullKey, status: http.StatusOK},
		{name: "too long replaced", sent: strings.Repeat("x", 200), key: fullKey, status: http.StatusOK},
		{name: "refused key logged", sent: "refused-1", key: "wrong-key-0123456789", status: http.StatusUnauthorized, want: "refused-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, hs.URL+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+tt.key)
			if tt.sent != "" {
				req.Header.Set(requestIDHeader, tt.sent)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			got := resp.Header.Get(requestIDHeader)
			if tt.want != "" && got != tt.want || tt.want == "" && !hexID.MatchString(got) {
				t.Fatalf("X-Request-ID = %q, want %q (or 16 hex digits when empty)", got, tt.want)
			}
			var found bool
			for _, rec := range logs.records(t, "http request") {
				if rec["request_id"] == got {
					found = true
					if rec["status"] != float64(tt.status) || rec["path"] != "/metrics" {
						t.Errorf("log record %v, want status %d path /metrics", rec, tt.status)
					}
				}
			}
			if !found {
				t.Errorf("no http request log line with request_id %q", got)
			}
		})
	}

	// A tool call over streamable HTTP logs the id of the HTTP request
	// that carried it, and the session.
	hc := &http.Client{Transport: bearer{fullKey, requestIDSetter{"call-7", http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		// A session of the handshake era: 2026-07-28 requests have none.
		&mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "golang"}}); err != nil {
		t.Fatal(err)
	}
	calls := logs.records(t, "tool call")
	if len(calls) != 1 {
		t.Fatalf("%d tool call log lines, want 1", len(calls))
	}
	if calls[0]["request_id"] != "call-7" || calls[0]["session"] != cs.ID() || cs.ID() == "" {
		t.Errorf("tool call log %v, want request_id call-7 and session %q", calls[0], cs.ID())
	}
}

// requestIDSetter sends a fixed X-Request-ID, as a gateway would.
type requestIDSetter struct {
	id string
	rt http.RoundTripper
}

func (s requestIDSetter) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(requestIDHeader, s.id)
	return s.rt.RoundTrip(r)
}

func TestToolCallsOverStdioGetRequestIDs(t *testing.T) {
	ids := map[string]bool{}
	for range 3 {
		id := callRequestID(&mcp.CallToolRequest{})
		if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(id) || ids[id] {
			t.Fatalf("request id %q is not a fresh 16-hex-digit id", id)
		}
		ids[id] = true
	}
}
