package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/internal/closedport"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// auditKeyName names the key of the audit tests in the keys file; the
// audit rows must carry it.
const auditKeyName = "audit-client"

// auditRow is the part of a chat_mcp_tool_calls row the tests check.
type auditRow struct {
	Tool, Code, Conversation, Transport, Session, Client, ClientVersion, Key string
	Args                                                                     map[string]any
	LatencyMS                                                                int
}

// auditConn connects to the audit database at dbURL for at most 30
// seconds; done closes the connection.
func auditConn(t *testing.T, dbURL string) (ctx context.Context, conn *pgx.Conn, done func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		cancel()
		t.Fatalf("connect to the audit database: %v", err)
	}
	return ctx, conn, func() {
		conn.Close(context.Background())
		cancel()
	}
}

// readAudit returns every row of chat_mcp_tool_calls in the database at
// dbURL, oldest first.
func readAudit(t *testing.T, dbURL string) []auditRow {
	t.Helper()
	ctx, conn, done := auditConn(t, dbURL)
	defer done()
	rows, err := conn.Query(ctx, `SELECT tool_name, coalesce(error_code, ''), coalesce(conversation_id, ''),
		coalesce(transport, ''), coalesce(session_id, ''), coalesce(client_name, ''), coalesce(client_version, ''),
		coalesce(api_key_name, ''),
		coalesce(arguments, '{}'::jsonb), coalesce(latency_ms, -1)
		FROM chat_mcp_tool_calls ORDER BY created_at, id`)
	if err != nil {
		t.Fatalf("read chat_mcp_tool_calls: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditRow, error) {
		var a auditRow
		var args json.RawMessage
		err := r.Scan(&a.Tool, &a.Code, &a.Conversation, &a.Transport, &a.Session, &a.Client, &a.ClientVersion, &a.Key, &args, &a.LatencyMS)
		// Arguments that were not a JSON object are stored as they came
		// (or as a JSON string); they have no named arguments.
		if err == nil && json.Unmarshal(args, &a.Args) != nil {
			a.Args = nil
		}
		return a, err
	})
	if err != nil {
		t.Fatalf("read chat_mcp_tool_calls: %v", err)
	}
	return out
}

// auditConfig is a documents-enabled server whose only key is named
// auditKeyName.
func auditConfig(t *testing.T, searxngURL, key string) config {
	t.Helper()
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte(fmt.Sprintf("# the audit tests' key\n%s name=%s\n", key, auditKeyName)), 0o600); err != nil {
		t.Fatal(err)
	}
	return docsConfig(t, searxngURL).with("MCP_API_KEYS_FILE=" + keys)
}

// auditedServer starts a documents server over streamable HTTP whose only
// key is key, with settings (KEY=VALUE) on top of auditConfig, and connects
// the Go SDK's client with that key.
func auditedServer(t *testing.T, key string, settings ...string) (config, target, *mcp.ClientSession) {
	t.Helper()
	cfg := auditConfig(t, searxngtest.New(t).URL, key).with(settings...)
	tg := newTarget(t, transportCase{name: "http", transport: "http"}, cfg)
	tg.key = key
	return cfg, tg, dialHTTP(t, tg)
}

// dialHTTP connects the Go SDK's client over streamable HTTP with tg's
// key, in the handshake era (2025-11-25), whose calls belong to a session;
// modern_test.go covers the audit of the stateless revision. Unlike
// connectGo it leaves closing to the caller, because these tests stop the
// server while the session is open.
func dialHTTP(t *testing.T, tg target) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(goClient, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tg.url, MaxRetries: -1, HTTPClient: tg.httpClient()},
		&mcp.ClientSessionOptions{ProtocolVersion: legacyRevision})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return s
}

// auditCall is one tool call and the outcome it must have: "" for a
// result, a contract error code, or PROTOCOL_ERROR for a JSON-RPC error.
type auditCall struct {
	tool string
	args map[string]any
	code string
}

// call makes c on s and checks its outcome.
func (c auditCall) call(t *testing.T, s *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
	var rpcErr *jsonrpc.Error
	switch {
	case c.code == "PROTOCOL_ERROR":
		if !errors.As(err, &rpcErr) {
			t.Errorf("%s %v: want a JSON-RPC error, got %v %v", c.tool, c.args, res, err)
		}
	case err != nil:
		t.Fatalf("%s %v: %v", c.tool, c.args, err)
	case c.code == "":
		if res.IsError {
			t.Errorf("%s %v failed: %s", c.tool, c.args, resultText(res))
		}
	default:
		if got := searchErr(t, res); got.Code != c.code {
			t.Errorf("%s %v: error %s (%s), want %s", c.tool, c.args, got.Code, got.Message, c.code)
		}
	}
}

// TestAuditEveryCall makes tool calls of every outcome over streamable
// HTTP, stops the server with SIGTERM and finds exactly one audit row per
// call, with its outcome, transport, session, client and key name.
func TestAuditEveryCall(t *testing.T) {
	t.Parallel()
	const conv = "conv-audit"
	// web_search gets a bucket of 4 that does not refill during the test;
	// the other tools are not limited.
	cfg, tg, s := auditedServer(t, "interop-audit-key-0123456789", "MCP_web_search_rate_limit_per_minute=1", "MCP_web_search_rate_limit_burst=4")

	calls := []auditCall{
		{"web_search", map[string]any{"query": "audit one"}, ""},
		{"web_search", map[string]any{"query": "audit two", "max_results": 2}, ""},
		{"web_search", map[string]any{"query": "audit three", "api_key": "must-be-redacted"}, "TOOL_ERROR"},
		{"web_search", map[string]any{"query": "audit four", "max_results": 1000}, "TOOL_ERROR"},
		// The bucket of 4 is empty now: invalid calls count too.
		{"web_search", map[string]any{"query": "audit five"}, "RATE_LIMITED"},
		{"web_search", map[string]any{"query": "audit six"}, "RATE_LIMITED"},
		{"list_files", map[string]any{"conversation_id": conv}, ""},
		{"search_docs", map[string]any{"query": "anything", "conversation_id": conv}, ""},
		{"search_docs", map[string]any{"query": "anything", "conversation_id": conv, "top_k": 99}, "TOOL_ERROR"},
		{"get_chunk", map[string]any{"chunk_id": "00000000-0000-0000-0000-000000000000"}, "TOOL_ERROR"},
		{"no_such_tool", map[string]any{"x": 1}, "PROTOCOL_ERROR"},
	}
	want := map[string]int{}
	for _, c := range calls {
		c.call(t, s)
		want[c.tool+" "+c.code]++
	}
	sessionID := s.ID()
	if sessionID == "" {
		t.Errorf("stateful streamable HTTP gave a %s client no session", legacyRevision)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close session: %v", err)
	}
	tg.srv.stop(t)

	rows := readAudit(t, cfg["DATABASE_URL"])
	got := map[string]int{}
	for _, r := range rows {
		got[r.Tool+" "+r.Code]++
	}
	if len(rows) != len(calls) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%d audit rows %v after %d calls, want one per call: %v", len(rows), got, len(calls), want)
	}
	for i, r := range rows {
		if r.Transport != "http" || r.Session != sessionID || r.Client != "mcpsearch-interop-go" || r.Key != auditKeyName || r.LatencyMS < 0 {
			t.Errorf("row %d %s: transport %q session %q client %q key %q latency %d, want http, %s, mcpsearch-interop-go, %s",
				i, r.Tool, r.Transport, r.Session, r.Client, r.Key, r.LatencyMS, sessionID, auditKeyName)
		}
		if conv, ok := r.Args["conversation_id"]; ok && r.Conversation != conv {
			t.Errorf("row %d %s: conversation_id column %q, arguments say %v", i, r.Tool, r.Conversation, conv)
		}
		if v, ok := r.Args["api_key"]; ok && v != "[REDACTED]" {
			t.Errorf("row %d stores the argument api_key as %v, want [REDACTED]", i, v)
		}
	}
}

// TestAuditRefusedCalls makes calls the server refuses before their
// handler runs, by the rate limit and by the input schema, over streamable
// HTTP: every row names the conversation the call's arguments name, as the
// rows of the calls that ran do.
func TestAuditRefusedCalls(t *testing.T) {
	t.Parallel()
	const conv = "audit-conv"
	// list_files gets a bucket of 5 that does not refill during the test.
	cfg, tg, s := auditedServer(t, "interop-refused-key-0123456789", "MCP_list_files_rate_limit_per_minute=1", "MCP_list_files_rate_limit_burst=5")
	var calls []auditCall
	for i := range 8 {
		code := ""
		if i >= 5 {
			code = "RATE_LIMITED"
		}
		calls = append(calls, auditCall{"list_files", map[string]any{"conversation_id": conv}, code})
	}
	calls = append(calls,
		auditCall{"search_docs", map[string]any{"query": "x", "conversation_id": conv, "top_k": 99}, "TOOL_ERROR"},
		auditCall{"search_docs", map[string]any{"query": "x", "conversation_id": conv, "top_k": "many"}, "TOOL_ERROR"})
	for _, c := range calls {
		c.call(t, s)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close session: %v", err)
	}
	tg.srv.stop(t)

	rows := readAudit(t, cfg["DATABASE_URL"])
	if len(rows) != len(calls) {
		t.Fatalf("%d audit rows after %d calls, want one per call: %+v", len(rows), len(calls), rows)
	}
	for i, r := range rows {
		if r.Tool != calls[i].tool || r.Code != calls[i].code || r.Conversation != conv {
			t.Errorf("row %d: %s %q in conversation %q, want %s %q in %s", i, r.Tool, r.Code, r.Conversation, calls[i].tool, calls[i].code, conv)
		}
	}
}

// TestAuditDatabaseOutage cuts the server's only path to PostgreSQL while
// clients keep calling: web_search keeps working, the documents tools
// answer a retryable error, and once the database is back and the server
// stops, the audit table holds one row for every call, none lost and none
// doubled.
func TestAuditDatabaseOutage(t *testing.T) {
	t.Parallel()
	const key = "interop-outage-key-0123456789"
	const conv = "conv-outage"
	fake := searxngtest.New(t)
	cfg := auditConfig(t, fake.URL, key)
	dbURL := cfg["DATABASE_URL"]
	proxy := newTCPProxy(t, hostPort(t, dbURL))
	cfg = cfg.with("DATABASE_URL=" + viaProxy(t, dbURL, proxy.addr))
	tg := newTarget(t, transportCase{name: "http", transport: "http"}, cfg)
	tg.key = key
	s := dialHTTP(t, tg)

	calls := 0
	call := func(c auditCall) {
		t.Helper()
		calls++
		c.call(t, s)
	}
	search := func(q string) auditCall { return auditCall{"web_search", map[string]any{"query": q}, ""} }
	list := auditCall{"list_files", map[string]any{"conversation_id": conv}, ""}
	listDown := auditCall{"list_files", map[string]any{"conversation_id": conv}, "TOOL_ERROR"}

	call(search("before the outage"))
	call(list)
	// The rows so far are written before the cut.
	waitAudit(t, tg.srv, "ok", func(c auditCheck) bool { return strings.Contains(c.Detail, " 2 written") })

	proxy.cut()
	call(search("during the outage 1"))
	call(listDown)
	// The writer has tried, failed and kept the rows queued.
	waitAudit(t, tg.srv, "degraded", nil)
	for i := 2; i <= 4; i++ {
		call(search(fmt.Sprintf("during the outage %d", i)))
	}
	call(listDown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "search_docs", Arguments: map[string]any{"query": "x", "conversation_id": conv}})
	calls++
	if err != nil {
		t.Fatalf("search_docs during the outage: %v", err)
	}
	wantError(t, searchErr(t, res), "TOOL_ERROR", true, "")

	proxy.restore(t)
	// The pool may hand out a connection the cut killed once more; the
	// documents tools must recover within a few calls.
	for attempt, deadline := 1, time.Now().Add(15*time.Second); ; attempt++ {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "list_files", Arguments: map[string]any{"conversation_id": conv}})
		calls++
		if err != nil {
			t.Fatalf("list_files after the outage: %v", err)
		}
		if !res.IsError {
			t.Logf("the documents tools answered again on call %d after the database came back", attempt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list_files still fails after the database came back: %s", resultText(res))
		}
		time.Sleep(100 * time.Millisecond)
	}
	call(search("after the outage"))

	if err := s.Close(); err != nil {
		t.Errorf("close session: %v", err)
	}
	tg.srv.stop(t)
	if out := tg.srv.output.String(); strings.Contains(out, "audit row not stored") {
		t.Errorf("the server gave up on audit rows at shutdown:\n%s", out)
	}
	rows := readAudit(t, dbURL)
	if len(rows) != calls {
		t.Fatalf("%d audit rows after %d calls across a database outage, want one per call", len(rows), calls)
	}
	t.Logf("%d calls, %d audit rows; %d proxied connections cut", calls, len(rows), proxy.cuts())
}

// auditCheck is the audit entry of /readyz.
type auditCheck struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Detail string `json:"detail"`
}

// waitAudit polls /readyz until the audit check has status and, if cond
// is not nil, satisfies it.
func waitAudit(t *testing.T, srv *server, status string, cond func(auditCheck) bool) auditCheck {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last auditCheck
	for {
		_, body := (apiClient{base: srv.base}).do(t, http.MethodGet, "/readyz", "", nil)
		var r struct {
			Checks struct {
				Audit auditCheck `json:"audit"`
			} `json:"checks"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("/readyz: %v: %s", err, body)
		}
		last = r.Checks.Audit
		if last.Status == status && (cond == nil || cond(last)) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit check did not become %s in time; last: %+v", status, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hostPort returns the host:port of a database URL.
func hostPort(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("DATABASE_URL: %v", err)
	}
	if u.Host == "" || u.Query().Get("host") != "" {
		t.Fatalf("the outage test needs a TCP DATABASE_URL (postgres://user:pass@host:port/db), got %q", u.Redacted())
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "5432")
	}
	return u.Host
}

// viaProxy returns dbURL with its host:port replaced by addr.
func viaProxy(t *testing.T, dbURL, addr string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// tcpProxy forwards loopback TCP connections to a target and can be cut,
// like a network outage: cut closes the listener and every connection,
// restore listens again on the same address. The port is held for the
// test, so while cut it refuses connections and no server the suites start
// can take it.
type tcpProxy struct {
	target string
	port   *closedport.Port
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]struct{} // both ends of every forwarded connection
	severed int                   // forwarded connections cut so far
	wg      sync.WaitGroup
}

// newTCPProxy starts a proxy to target on a loopback port held for the
// test and stops it when the test ends.
func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	port := closedport.Reserve(t)
	ln, err := port.Listen()
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{target: target, port: port, addr: port.Addr(), conns: map[net.Conn]struct{}{}}
	p.start(ln)
	t.Cleanup(func() {
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) start(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(c)
			}()
		}
	}()
}

// forward copies between c and a new connection to the target until
// either side closes or the proxy is cut.
func (p *tcpProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		c.Close()
		up.Close()
		return
	}
	var done sync.WaitGroup
	done.Add(2)
	pipe := func(dst, src net.Conn) {
		defer done.Done()
		io.Copy(dst, src)
		// One direction ending ends the connection, as a reset would.
		dst.Close()
		src.Close()
	}
	go pipe(up, c)
	go pipe(c, up)
	done.Wait()
	p.untrack(c, up)
}

// track registers conns unless the proxy has been cut meanwhile.
func (p *tcpProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *tcpProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// cut closes the listener, so new connections are refused, and every
// open connection.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.severed += len(p.conns) / 2
	clear(p.conns)
}

// cuts returns how many forwarded connections cut has closed.
func (p *tcpProxy) cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.severed
}

// restore listens on the proxy's address again.
func (p *tcpProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := p.port.Listen()
	if err != nil {
		t.Fatalf("restore the database proxy on %s: %v", p.addr, err)
	}
	p.start(ln)
}
