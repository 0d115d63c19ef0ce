package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// rawSession speaks streamable HTTP by hand, as a client without an SDK
// would, so the test sees every HTTP header.
type rawSession struct {
	t         *testing.T
	url       string
	client    *http.Client
	sessionID string
	protocol  string
	nextID    int
}

// post sends one JSON-RPC message and returns the response and, for a
// request, the JSON-RPC response read from a JSON or event-stream body.
func (s *rawSession) post(msg map[string]any) (*http.Response, map[string]any) {
	s.t.Helper()
	body, err := json.Marshal(msg)
	if err != nil {
		s.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", s.sessionID)
	}
	if s.protocol != "" {
		req.Header.Set("Mcp-Protocol-Version", s.protocol)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("POST %s: %v", msg["method"], err)
	}
	defer resp.Body.Close()
	id, isRequest := msg["id"]
	if !isRequest {
		io.Copy(io.Discard, resp.Body)
		return resp, nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("POST %s: %s: %s", msg["method"], resp.Status, b)
	}
	reply, err := readReply(resp, id)
	if err != nil {
		s.t.Fatalf("POST %s: %v", msg["method"], err)
	}
	return resp, reply
}

// readReply finds the JSON-RPC response with id in a JSON body or in the
// data of a server-sent event stream.
func readReply(resp *http.Response, id any) (map[string]any, error) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	matches := func(data []byte) (map[string]any, bool) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return nil, false
		}
		got, _ := json.Marshal(m["id"])
		want, _ := json.Marshal(id)
		return m, bytes.Equal(got, want)
	}
	switch ct {
	case "application/json":
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if m, ok := matches(b); ok {
			return m, nil
		}
		return nil, fmt.Errorf("JSON body is not the response to id %v: %s", id, b)
	case "text/event-stream":
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var data []string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
				continue
			}
			if line == "" && len(data) > 0 {
				if m, ok := matches([]byte(strings.Join(data, "\n"))); ok {
					return m, nil
				}
				data = nil
			}
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("event stream ended without the response to id %v", id)
	}
	return nil, fmt.Errorf("unexpected Content-Type %q", resp.Header.Get("Content-Type"))
}

func (s *rawSession) request(method string, params map[string]any) (*http.Response, map[string]any) {
	s.t.Helper()
	s.nextID++
	return s.post(map[string]any{"jsonrpc": "2.0", "id": s.nextID, "method": method, "params": params})
}

// rateHeaders are the X-RateLimit-* headers of one response.
type rateHeaders struct {
	limit, remaining int
	reset            int64
}

func parseRateHeaders(t *testing.T, h http.Header) rateHeaders {
	t.Helper()
	var rh rateHeaders
	var err error
	for _, f := range []struct {
		name string
		set  func(string) error
	}{
		{"X-RateLimit-Limit", func(v string) (err error) { rh.limit, err = strconv.Atoi(v); return }},
		{"X-RateLimit-Remaining", func(v string) (err error) { rh.remaining, err = strconv.Atoi(v); return }},
		{"X-RateLimit-Reset", func(v string) (err error) { rh.reset, err = strconv.ParseInt(v, 10, 64); return }},
	} {
		v := h.Get(f.name)
		if v == "" {
			t.Fatalf("response to tools/call lacks %s; headers: %v", f.name, h)
		}
		if err = f.set(v); err != nil {
			t.Fatalf("%s: %q is not a whole number", f.name, v)
		}
	}
	return rh
}

// TestStreamableHTTPRateLimitHeaders performs the streamable HTTP handshake
// by hand and checks the X-RateLimit-* headers on tools/call responses.
func TestStreamableHTTPRateLimitHeaders(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		name := "stateful"
		if stateless {
			name = "stateless"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const perMinute, burst = 1, 2
			fake := searxngtest.New(t)
			cfg := baseConfig(fake.URL).with("MCP_rate_limit_per_minute="+strconv.Itoa(perMinute), "MCP_rate_limit_burst="+strconv.Itoa(burst))
			tg := newTarget(t, transportCase{name: "http", transport: "http", stateless: stateless}, cfg)
			s := &rawSession{t: t, url: tg.url, client: &http.Client{Timeout: 30 * time.Second}}

			resp, reply := s.request("initialize", map[string]any{
				"protocolVersion": "2025-06-18",
				"capabilities":    map[string]any{},
				"clientInfo":      map[string]any{"name": "raw-http", "version": "1.0.0"},
			})
			res, _ := reply["result"].(map[string]any)
			if res == nil {
				t.Fatalf("initialize: no result: %v", reply)
			}
			s.protocol, _ = res["protocolVersion"].(string)
			s.sessionID = resp.Header.Get("Mcp-Session-Id")
			if !stateless && s.sessionID == "" {
				t.Fatalf("stateful initialize returned no Mcp-Session-Id")
			}
			if resp, _ := s.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); resp.StatusCode != http.StatusAccepted {
				t.Errorf("notifications/initialized: %s, want 202 Accepted", resp.Status)
			}

			var seen []rateHeaders
			for i := 1; i <= burst+1; i++ {
				start := time.Now().Unix()
				resp, reply := s.request("tools/call", map[string]any{
					"name":      "web_search",
					"arguments": map[string]any{"query": "headers " + strconv.Itoa(i)},
				})
				rh := parseRateHeaders(t, resp.Header)
				seen = append(seen, rh)
				res, _ := reply["result"].(map[string]any)
				if res == nil {
					t.Fatalf("tools/call %d: no result: %v", i, reply)
				}
				limited := res["isError"] == true && strings.Contains(fmt.Sprint(res["content"]), "RATE_LIMITED")
				if limited != (i > burst) {
					t.Errorf("call %d of a burst of %d: rate limited = %v", i, burst, limited)
				}
				if rh.limit != perMinute {
					t.Errorf("call %d: X-RateLimit-Limit = %d, want %d", i, rh.limit, perMinute)
				}
				// The bucket refills one token per minute, so it is full
				// again at most burst minutes from now.
				if rh.reset < start || rh.reset > time.Now().Add(burst*time.Minute+time.Second).Unix() {
					t.Errorf("call %d: X-RateLimit-Reset = %d, want a Unix time within %d minutes from %d", i, rh.reset, burst, start)
				}
				if want := max(burst-i, 0); rh.remaining != want {
					t.Errorf("call %d: X-RateLimit-Remaining = %d, want %d (the tokens left after this call)", i, rh.remaining, want)
				}
			}
			if seen[1].remaining >= seen[0].remaining {
				t.Errorf("X-RateLimit-Remaining did not decrease across two calls: %d then %d", seen[0].remaining, seen[1].remaining)
			}
			t.Logf("X-RateLimit headers over %d calls: %+v", len(seen), seen)

			if s.sessionID != "" {
				req, _ := http.NewRequest(http.MethodDelete, s.url, nil)
				req.Header.Set("Mcp-Session-Id", s.sessionID)
				resp, err := s.client.Do(req)
				if err != nil {
					t.Fatalf("DELETE session: %v", err)
				}
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					t.Errorf("DELETE session: %s", resp.Status)
				}
			}
		})
	}
}
