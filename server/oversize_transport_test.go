package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
)

// idLast sends MCP messages as the TypeScript SDK lays them out: "id" and
// "jsonrpc" after "params", so a server must read the whole message to
// find the id. chunked sends bodies without a length.
type idLast struct {
	rt      http.RoundTripper
	chunked bool
}

func (o idLast) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.Body == nil {
		return o.rt.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) == nil {
		var b bytes.Buffer
		for _, k := range []string{"method", "params", "result", "error", "jsonrpc", "id"} {
			if v, ok := m[k]; ok {
				b.WriteString(map[bool]string{true: "{", false: ","}[b.Len() == 0])
				fmt.Fprintf(&b, "%q:%s", k, v)
			}
		}
		body = append(b.Bytes(), '}')
	}
	r = r.Clone(r.Context())
	r.Body, r.ContentLength, r.GetBody = io.NopCloser(bytes.NewReader(body)), int64(len(body)), nil
	if o.chunked {
		r.Body, r.ContentLength = io.NopCloser(struct{ io.Reader }{bytes.NewReader(body)}), -1
	}
	return o.rt.RoundTrip(r)
}

// bigQuery is a web_search query that makes a message of over 5 MB.
var bigQuery = strings.Repeat("a", 5<<20)

// checkOversizeResult checks the answer to an over-size call: a tool
// result, not a transport error, with the contract's TOOL_ERROR.
func checkOversizeResult(t *testing.T, what string, res *mcp.CallToolResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: the 5 MB call failed at the transport: %v", what, err)
	}
	te := toolErr(t, res)
	if te.Code != CodeToolError || te.Retryable || !strings.Contains(te.Message, "larger than 4 MB (5.0 MB)") {
		t.Errorf("%s: %+v, want TOOL_ERROR saying the message is larger than 4 MB", what, te)
	}
}

// TestOversizedToolCallOverHTTP: a 5 MB tools/call whose id comes after
// its arguments is answered as a failed tool call by real clients over
// streamable HTTP (the 2026-07-28 revision, a session of the handshake
// era, a stateless server) and legacy SSE, with bodies of known and
// unknown length; the session goes on.
func TestOversizedToolCallOverHTTP(t *testing.T) {
	tests := []struct {
		name, transport, protocol string
		stateless, chunked        bool
	}{
		{"streamable, 2026-07-28", "http", "", false, false},
		{"streamable, session", "http", "2025-11-25", false, false},
		{"streamable, session, no length", "http", "2025-11-25", false, true},
		{"streamable, stateless server", "http", "2025-11-25", true, false},
		{"streamable, stateless server, 2026-07-28, no length", "http", "", true, true},
		{"sse", "sse", "", false, false},
		{"sse, no length", "sse", "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hs := keyedServerWith(t, func(c *config.Config) {
				if tt.stateless {
					c.Stateless, c.Transports = true, []string{"http"}
				}
			})
			hc := &http.Client{Transport: bearer{fullKey, idLast{http.DefaultTransport, tt.chunked}}}
			var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}
			if tt.transport == "sse" {
				tr = &mcp.SSEClientTransport{Endpoint: hs.URL + "/sse", HTTPClient: hc}
			}
			var opts *mcp.ClientSessionOptions
			if tt.protocol != "" {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: tt.protocol}
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "oversize-test", Version: "1"}, nil).Connect(context.Background(), tr, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": bigQuery}})
			checkOversizeResult(t, tt.name, res, err)
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "after"}})
			if err != nil || res.IsError {
				t.Fatalf("the call after the 5 MB one: %v %v", err, res)
			}
		})
	}
}

// rpcAnswer reads the one JSON-RPC message of a streamable HTTP answer,
// sent as JSON or as an event stream.
func rpcAnswer(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return body
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"id"`) {
			return []byte(data)
		}
	}
	t.Fatalf("no message in the event stream %q", body)
	return nil
}

// TestOversizedToolCallRawHTTP checks the wire: the answer is a result for
// the request's own id, whatever the key order, and what is not a tool
// call with an id keeps the 413 with the contract's body.
func TestOversizedToolCallRawHTTP(t *testing.T) {
	_, hs := keyedServerWith(t, func(c *config.Config) { c.Stateless, c.Transports = true, []string{"http"} })
	big := tsCall(`"big-1"`, "web_search", `{"query":"`+bigQuery+`"}`)
	resp := post(t, hs.URL+"/mcp", fullKey, big, nil)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s, want 200", resp.StatusCode, b)
	}
	var msg struct {
		ID     json.RawMessage
		Result *mcp.CallToolResult
		Error  any
	}
	raw := rpcAnswer(t, resp)
	if err := json.Unmarshal(raw, &msg); err != nil || string(msg.ID) != `"big-1"` || msg.Result == nil {
		t.Fatalf("answer %s (%v), want a result for id \"big-1\"", raw, err)
	}
	checkOversizeResult(t, "raw", msg.Result, nil)

	for _, tt := range []struct{ name, body string }{
		{"another method", `{"method":"resources/read","params":{"uri":"` + bigQuery + `"},"jsonrpc":"2.0","id":2}`},
		{"a notification", `{"method":"tools/call","params":{"name":"web_search","arguments":{"query":"` + bigQuery + `"}},"jsonrpc":"2.0"}`},
		{"not JSON", `{"method":"tools/call","params":{"name":"web_search","arguments":{"query":"` + bigQuery + `}},"id":3}`},
	} {
		resp := post(t, hs.URL+"/mcp", fullKey, tt.body, nil)
		var body envelope
		if resp.StatusCode != http.StatusRequestEntityTooLarge || json.NewDecoder(resp.Body).Decode(&body) != nil || body.Error == nil || body.Error.Code != CodeToolError {
			t.Errorf("%s: status %d %+v, want 413 with the contract's body", tt.name, resp.StatusCode, body.Error)
		}
	}
}

// TestOversizedMessageOverScanBound: past the bound of what is read to
// find the id, the message is refused with 413 as before, without reading
// it all.
func TestOversizedMessageOverScanBound(t *testing.T) {
	_, hs := keyedServer(t)
	head := `{"method":"tools/call","params":{"name":"web_search","arguments":{"query":"`
	tail := `"}},"jsonrpc":"2.0","id":1}`
	n := maxScannedMessage + 1<<20
	body := io.MultiReader(strings.NewReader(head), io.LimitReader(repeatReader('a'), int64(n)), strings.NewReader(tail))
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp", body)
	req.ContentLength = int64(len(head) + n + len(tail))
	req.Header.Set("Authorization", "Bearer "+fullKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e envelope
	if resp.StatusCode != http.StatusRequestEntityTooLarge || json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error == nil || e.Error.Code != CodeToolError {
		t.Errorf("a %d MB message: status %d %+v, want 413 with the contract's body", req.ContentLength>>20, resp.StatusCode, e.Error)
	}
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestOversizedToolCallOverStdio: over stdio a 5 MB tools/call, id last,
// is answered with a tool result for its id; add_document's names the
// ways for larger files. A 5 MB message of another method keeps its
// JSON-RPC error, and the server goes on.
func TestOversizedToolCallOverStdio(t *testing.T) {
	h := newHarness(t, nil)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"agent","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		tsCall(`"big-1"`, "web_search", `{"query":"`+bigQuery+`"}`),
		tsCall(`"big-2"`, "add_document", `{"conversation_id":"c1","file_name":"a.pdf","content_base64":"`+bigQuery+`"}`),
		`{"method":"resources/read","params":{"uri":"` + bigQuery + `"},"jsonrpc":"2.0","id":7}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"after"}}}`,
	}, "\r\n") + "\n"
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.srv.ServeIO(ctx, strings.NewReader(in), &out); err != nil {
		t.Fatalf("ServeIO: %v", err)
	}
	results := map[string]*mcp.CallToolResult{}
	var invalid int
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage
			Result json.RawMessage
			Error  *struct{ Code int }
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			t.Fatalf("stdout holds a line that is not JSON: %q", sc.Text())
		}
		switch {
		case msg.Error != nil && msg.Error.Code == -32600 && string(msg.ID) == "null":
			invalid++
		case msg.Result != nil && string(msg.ID) != "1":
			var res mcp.CallToolResult
			if err := json.Unmarshal(msg.Result, &res); err != nil {
				t.Fatalf("result %s: %v", msg.Result, err)
			}
			results[string(msg.ID)] = &res
		}
	}
	checkOversizeResult(t, "web_search", results[`"big-1"`], nil)
	if res := results[`"big-2"`]; res == nil {
		t.Errorf("no answer to the 5 MB add_document call:\n%s", clipText(out.String()))
	} else {
		checkOversizeResult(t, "add_document", res, nil)
		if te := toolErr(t, res); !strings.Contains(te.Message, "POST /v1/conversations/{id}/files") || !strings.Contains(te.Message, "url") {
			t.Errorf("add_document's error does not name the upload API and url: %q", te.Message)
		}
	}
	if invalid != 1 {
		t.Errorf("%d invalid requests, want 1 for the 5 MB resources/read", invalid)
	}
	if res := results["3"]; res == nil || res.IsError {
		t.Errorf("the call after the 5 MB ones: %+v", res)
	}
}

func clipText(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// TestOversizedCallsAudited: the calls answered for their size land in the
// audit table and the metrics as any call: tool, transport, key, session,
// TOOL_ERROR, and a note in place of the arguments.
func TestOversizedCallsAudited(t *testing.T) {
	var w *audit.Writer
	var pool *pgxpool.Pool
	keys, err := LoadAPIKeys(nil, strings.NewReader(scopedKey+" name=tenant-a conversations=conv-a\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newDocsHarness(t, nil, func(d *Deps) {
		pool = d.Docs.(*docs.Store).Pool()
		w = audit.NewWriter(pool, audit.Options{FlushInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		d.Audit = w
		d.APIKeys = keys
	})
	args := map[string]any{"query": bigQuery, "conversation_id": "conv-a"}
	for _, transport := range []string{"http", "sse"} {
		hc := &http.Client{Transport: bearer{scopedKey, idLast{rt: http.DefaultTransport}}}
		var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: h.http.URL + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}
		if transport == "sse" {
			tr = &mcp.SSEClientTransport{Endpoint: h.http.URL + "/sse", HTTPClient: hc}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "audit-client", Version: "2"}, nil).Connect(context.Background(), tr,
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_docs", Arguments: args})
		checkOversizeResult(t, transport, res, err)
		cs.Close()
	}
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"audit-client","version":"2"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		tsCall("2", "search_docs", `{"query":"`+bigQuery+`","conversation_id":"conv-a"}`) + "\n"
	if err := h.srv.ServeIO(context.Background(), strings.NewReader(in), io.Discard); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT transport, tool_name, coalesce(api_key_name, ''), coalesce(error_code, ''), coalesce(error, ''),
		arguments::text, coalesce(conversation_id, ''), coalesce(session_id, ''), coalesce(client_name, '') FROM chat_mcp_tool_calls`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var transport, tool, key, code, errText, args, conv, session, client string
		if err := rows.Scan(&transport, &tool, &key, &code, &errText, &args, &conv, &session, &client); err != nil {
			t.Fatal(err)
		}
		seen[transport] = true
		wantKey := "tenant-a"
		if transport == "stdio" {
			wantKey = ""
		}
		var note map[string]string
		_ = json.Unmarshal([]byte(args), &note)
		if tool != "search_docs" || key != wantKey || code != CodeToolError || !strings.Contains(errText, "larger than 4 MB") ||
			conv != "conv-a" || session == "" || client != "audit-client" {
			t.Errorf("%s row: tool %q key %q code %q error %q conversation %q session %q client %q", transport, tool, key, code, errText, conv, session, client)
		}
		if want := "arguments of 5.0 MB not kept: the message was over the 4 MB limit"; note[oversizeNoteKey] != want || len(args) > 200 {
			t.Errorf("%s row arguments %s, want the note %q", transport, clipText(args), want)
		}
	}
	if len(seen) != 3 {
		t.Errorf("audit rows for %v, want stdio, http and sse", seen)
	}

	req, _ := http.NewRequest(http.MethodGet, h.http.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+scopedKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, transport := range []string{"stdio", "http", "sse"} {
		want := `mcpsearch_tool_calls_total{outcome="TOOL_ERROR",tool="search_docs",transport="` + transport + `"} 1`
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
