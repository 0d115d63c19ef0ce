package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// The hostile-input suite drives the binary with JSON-RPC it writes byte by
// byte, as a broken or malicious client would: NUL, lone surrogates and
// invalid UTF-8, strings of 1 and 3.5 MB, deeply nested values, numbers out
// of every range and values of the wrong type, in every argument of every
// tool the server lists (read from tools/list at run time, so a new tool is
// covered without editing the test). After each hostile call the process
// must be alive and a good call must succeed; at the end the audit table
// must hold exactly one row per tool call, the good ones included.

// hostileCallLimit bounds how long the server may take to answer one call.
const hostileCallLimit = 60 * time.Second

// maxErrorMessage is the longest error message the suite accepts: a clear
// error says what to send instead; it does not echo a megabyte back.
const maxErrorMessage = 2000

// hostileValue is one argument value, as raw JSON bytes.
type hostileValue struct {
	name string
	raw  []byte
	// big values are sent only to properties that take strings, where
	// their size is what is tested; elsewhere the type alone refuses them.
	big bool
	// once values are sent to one string property per tool: the size of
	// the message is what they test, and decoding 3.5 MB takes seconds in
	// a race-enabled binary.
	once bool
}

// nested returns a JSON value of depth objects, each the only member of
// its parent.
func nested(depth int) []byte {
	return []byte(strings.Repeat(`{"a":`, depth) + `"x"` + strings.Repeat("}", depth))
}

// jsonString returns a JSON string of about n bytes of mixed one-, two-
// and three-byte characters.
func jsonString(n int) []byte {
	const unit = "hostile é € "
	b := make([]byte, 0, n+len(unit)+2)
	b = append(b, '"')
	for len(b) < n {
		b = append(b, unit...)
	}
	return append(b, '"')
}

// hostileValues are sent in every argument of every tool.
var hostileValues = []hostileValue{
	{name: "NUL", raw: []byte(`"a\u0000b"`)},
	{name: "lone surrogate", raw: []byte(`"a\ud800b"`)},
	{name: "invalid UTF-8", raw: []byte("\"a\xff\xfe\xc0\xafb\"")},
	{name: "C1 and bidi controls", raw: []byte(`"a\u0085\u202e\u0007b"`)},
	{name: "1 MB string", raw: jsonString(1 << 20), big: true},
	{name: "3.5 MB string", raw: jsonString(7 << 19), big: true, once: true},
	{name: "nested 100 deep", raw: nested(100)},
	// Deeper than the SDK decodes (1000 levels, the envelope included):
	// refused as a message.
	{name: "nested 1000 deep", raw: nested(1000)},
	{name: "1e308", raw: []byte(`1e308`)},
	{name: "1e999", raw: []byte(`1e999`)},
	{name: "-1", raw: []byte(`-1`)},
	{name: "2^63", raw: []byte(`9223372036854775808`)},
	{name: "float", raw: []byte(`2.5`)},
	{name: "boolean", raw: []byte(`true`)},
	{name: "object", raw: []byte(`{"x":1}`)},
	{name: "null", raw: []byte(`null`)},
	{name: "numeric string", raw: []byte(`"5"`)},
}

// toolSchema is the part of a tool's inputSchema the suite reads.
type toolSchema struct {
	Name        string `json:"name"`
	InputSchema struct {
		Properties map[string]propSchema `json:"properties"`
		Required   []string              `json:"required"`
	} `json:"inputSchema"`
}

type propSchema struct {
	Type    any      `json:"type"`
	Enum    []any    `json:"enum"`
	Minimum *float64 `json:"minimum"`
}

// types returns the JSON types a property accepts.
func (p propSchema) types() []string {
	switch v := p.Type.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, t := range v {
			if s, ok := t.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// wireReply is what the server answered one message: an HTTP status (0
// over stdio) and the JSON-RPC response, if any.
type wireReply struct {
	status int
	body   []byte // the HTTP body when it is not a JSON-RPC response
	id     json.RawMessage
	// resultRaw is the result as sent; result its tool-result reading.
	resultRaw json.RawMessage
	result    *struct {
		IsError bool      `json:"isError"`
		Content []content `json:"content"`
	}
	rpcErr *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
}

func (r wireReply) String() string {
	switch {
	case r.rpcErr != nil:
		return fmt.Sprintf("JSON-RPC error %d %q (id %s)", r.rpcErr.Code, clipText(r.rpcErr.Message), r.id)
	case r.result != nil:
		text := ""
		if len(r.result.Content) > 0 {
			text = r.result.Content[0].Text
		}
		return fmt.Sprintf("result isError=%v %q", r.result.IsError, clipText(text))
	}
	return fmt.Sprintf("HTTP %d %q", r.status, clipText(string(r.body)))
}

func clipText(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// decodeReply decodes one JSON-RPC response.
func decodeReply(b []byte) (wireReply, error) {
	var r wireReply
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return r, fmt.Errorf("answer is not JSON: %v: %q", err, clipText(string(b)))
	}
	r.id = m.ID
	if m.Error != nil {
		if err := json.Unmarshal(m.Error, &r.rpcErr); err != nil {
			return r, fmt.Errorf("JSON-RPC error of the wrong shape: %s", clipText(string(m.Error)))
		}
		return r, nil
	}
	if m.Result == nil {
		return r, fmt.Errorf("answer has neither result nor error: %q", clipText(string(b)))
	}
	r.resultRaw = m.Result
	if err := json.Unmarshal(m.Result, &r.result); err != nil {
		return r, fmt.Errorf("result of the wrong shape: %s", clipText(string(m.Result)))
	}
	return r, nil
}

// rawConn sends hand-built JSON-RPC messages to one mcpsearch process.
type rawConn interface {
	// send writes body and returns the answer to the request with id, or
	// the answer the server gave for a message it could not read (id null).
	send(t *testing.T, id int, body []byte) wireReply
	// alive reports an error once the server process has exited.
	alive() error
}

// stdioRaw is a stdio mcpsearch fed line by line.
type stdioRaw struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	exited chan struct{}
	stderr *syncBuffer
}

// startStdioRaw starts the binary over stdio and performs the initialize
// handshake. At cleanup it closes stdin and checks that the process exits 0.
func startStdioRaw(t *testing.T, cfg config) *stdioRaw {
	t.Helper()
	c := &stdioRaw{lines: make(chan []byte, 16), exited: make(chan struct{}), stderr: &syncBuffer{}}
	c.cmd = exec.Command(binPath, "serve", "--transport", "stdio")
	c.cmd.Env = cfg.processEnv()
	c.cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binPath, err)
	}
	go func() {
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				c.lines <- line
			}
			if err != nil {
				close(c.lines)
				return
			}
		}
	}()
	go func() {
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() { c.close(t) })
	c.handshake(t)
	return c
}

func (c *stdioRaw) handshake(t *testing.T) {
	t.Helper()
	init := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + legacyRevision +
		`","capabilities":{},"clientInfo":{"name":"mcpsearch-interop-hostile","version":"1.0.0"}}}`)
	if r := c.send(t, 0, init); r.result == nil && r.rpcErr != nil {
		t.Fatalf("initialize: %v", r)
	}
	if _, err := c.stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		t.Fatal(err)
	}
}

func (c *stdioRaw) send(t *testing.T, id int, body []byte) wireReply {
	t.Helper()
	if _, err := c.stdin.Write(append(body, '\n')); err != nil {
		t.Fatalf("write to the stdio server: %v; stderr:\n%s", err, tail(c.stderr.String(), 30))
	}
	want := strconv.Itoa(id)
	deadline := time.After(hostileCallLimit)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("the stdio server closed stdout before answering; stderr:\n%s", tail(c.stderr.String(), 30))
			}
			r, err := decodeReply(line)
			if err != nil {
				t.Fatalf("stdout line: %v", err)
			}
			if string(r.id) == want || string(r.id) == "null" {
				return r
			}
		case <-deadline:
			t.Fatalf("no answer to %.200q within %v", body, hostileCallLimit)
		}
	}
}

func (c *stdioRaw) alive() error {
	select {
	case <-c.exited:
		return fmt.Errorf("the stdio server exited (%v); stderr:\n%s", c.cmd.ProcessState, tail(c.stderr.String(), 30))
	default:
		return nil
	}
}

// close ends the session by closing stdin, as a client that goes away
// does, and checks that the process exits 0 in time with JSON logs only.
func (c *stdioRaw) close(t *testing.T) {
	t.Helper()
	select {
	case <-c.exited:
		return
	default:
	}
	c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(shutdownLimit + hostileCallLimit):
		_ = c.cmd.Process.Kill()
		<-c.exited
		t.Errorf("the stdio server did not exit after stdin closed")
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the stdio server exited %d after stdin closed; stderr:\n%s", code, tail(c.stderr.String(), 30))
	}
	checkJSONLogs(t, c.stderr.String())
}

// httpRaw is a streamable HTTP session of a running mcpsearch, spoken by
// hand.
type httpRaw struct {
	srv       *server
	url       string
	sessionID string
}

func startHTTPRaw(t *testing.T, cfg config) *httpRaw {
	t.Helper()
	srv := startServer(t, transportCase{name: "http", transport: "http"}, cfg)
	c := &httpRaw{srv: srv, url: srv.base + "/mcp"}
	init := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + legacyRevision +
		`","capabilities":{},"clientInfo":{"name":"mcpsearch-interop-hostile","version":"1.0.0"}}}`)
	resp, r := c.post(t, 0, init)
	if r.result == nil && r.rpcErr != nil {
		t.Fatalf("initialize: %v", r)
	}
	c.sessionID = resp.Header.Get("Mcp-Session-Id")
	if c.sessionID == "" {
		t.Fatalf("initialize over streamable HTTP gave no Mcp-Session-Id")
	}
	note, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		t.Fatal(err)
	}
	c.headers(note)
	nr, err := http.DefaultClient.Do(note)
	if err != nil {
		t.Fatalf("notifications/initialized: %v", err)
	}
	io.Copy(io.Discard, nr.Body)
	nr.Body.Close()
	return c
}

func (c *httpRaw) headers(req *http.Request) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", legacyRevision)
	if c.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", c.sessionID)
	}
}

func (c *httpRaw) post(t *testing.T, id int, body []byte) (*http.Response, wireReply) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hostileCallLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	c.headers(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %.200q: %v (the server dropped the connection?)", body, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		// A JSON-RPC error may come with a 4xx status too.
		if r, err := decodeReply(b); err == nil {
			r.status = resp.StatusCode
			return resp, r
		}
		return resp, wireReply{status: resp.StatusCode, body: b}
	}
	m, err := readReply(resp, id)
	if err != nil {
		t.Fatalf("POST %.200q: %v", body, err)
	}
	b, _ := json.Marshal(m)
	r, err := decodeReply(b)
	if err != nil {
		t.Fatal(err)
	}
	r.status = resp.StatusCode
	return resp, r
}

func (c *httpRaw) send(t *testing.T, id int, body []byte) wireReply {
	t.Helper()
	_, r := c.post(t, id, body)
	return r
}

func (c *httpRaw) alive() error {
	select {
	case <-c.srv.exited:
		return fmt.Errorf("the HTTP server exited (%v); output:\n%s", c.srv.cmd.ProcessState, tail(c.srv.output.String(), 30))
	default:
		return nil
	}
}

// hostileRun makes calls on one connection and counts what the audit must
// hold.
type hostileRun struct {
	conn   rawConn
	name   string // the transport, in good queries
	nextID int
	// audited counts the tool calls the server answered as calls (a result
	// or a JSON-RPC error naming the request): each needs one audit row.
	audited     int
	goodQueries []string // the queries of the good calls, in order
	// answers counts the kinds of answers, for the log.
	answers map[string]int
	// slowest is the longest a hostile call took to be answered.
	slowest     time.Duration
	slowestCall string
}

func (h *hostileRun) id() int {
	h.nextID++
	return h.nextID
}

// callBody builds a tools/call by hand, arguments as raw bytes.
func callBody(id int, tool string, args []byte) []byte {
	name, _ := json.Marshal(tool)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s,"arguments":`, id, name)
	b.Write(args)
	b.WriteString(`}}`)
	return b.Bytes()
}

// argsWith returns the raw arguments base with key set to value.
func argsWith(base map[string][]byte, key string, value []byte) []byte {
	keys := make([]string, 0, len(base)+1)
	for k := range base {
		if k != key {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b bytes.Buffer
	b.WriteByte('{')
	write := func(k string, v []byte) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(v)
	}
	for _, k := range keys {
		write(k, base[k])
	}
	if key != "" {
		write(key, value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// hostile sends one hostile tools/call and checks the answer: a result, or
// the contract's error, or a JSON-RPC error; never silence, a dropped
// connection or a dead process. It returns the answer.
func (h *hostileRun) hostile(t *testing.T, what, tool string, args []byte) wireReply {
	t.Helper()
	id := h.id()
	start := time.Now()
	r := h.conn.send(t, id, callBody(id, tool, args))
	if d := time.Since(start); d > h.slowest {
		h.slowest, h.slowestCall = d, what
	}
	if err := h.conn.alive(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	switch {
	case r.result != nil:
		h.audited++
		if r.result.IsError {
			checkContractError(t, what, r)
		}
	case r.rpcErr != nil:
		// Parse errors and invalid requests refuse the message before it
		// is a tool call; any other error answers a call.
		if r.rpcErr.Code != -32700 && r.rpcErr.Code != -32600 {
			h.audited++
		}
		checkMessage(t, what, "JSON-RPC error message", r.rpcErr.Message)
	case r.status == http.StatusBadRequest && len(bytes.TrimSpace(r.body)) > 0:
		// Streamable HTTP may refuse a message it cannot read with 400.
		checkMessage(t, what, "HTTP 400 body", string(r.body))
	default:
		t.Errorf("%s: the server answered neither a result nor a JSON-RPC error: %v", what, r)
	}
	h.answers[classOf(r)]++
	return r
}

// classOf names an answer's kind for the summary.
func classOf(r wireReply) string {
	switch {
	case r.rpcErr != nil:
		return "rpc " + strconv.Itoa(r.rpcErr.Code)
	case r.result != nil && r.result.IsError:
		var body struct {
			Error toolError `json:"error"`
		}
		_ = json.Unmarshal([]byte(r.result.Content[0].Text), &body)
		return body.Error.Code
	case r.result != nil:
		return "result"
	}
	return "HTTP " + strconv.Itoa(r.status)
}

// checkContractError checks an error result: its text is the contract's
// body with a code, a clear message and a retryable flag.
func checkContractError(t *testing.T, what string, r wireReply) {
	t.Helper()
	if len(r.result.Content) == 0 || r.result.Content[0].Type != "text" {
		t.Errorf("%s: error result without a text block: %v", what, r)
		return
	}
	var body struct {
		Error *toolError `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.result.Content[0].Text), &body); err != nil || body.Error == nil {
		t.Errorf("%s: error text is not the contract's body: %v", what, r)
		return
	}
	e := body.Error
	if e.Code == "" || e.Retryable == nil {
		t.Errorf("%s: error body lacks code or retryable: %v", what, r)
	}
	checkMessage(t, what, "error message", e.Message)
}

// checkMessage fails the test for a message a caller cannot use: empty,
// not valid UTF-8, holding control characters other than newlines and
// tabs, or so long that it must echo the hostile value.
func checkMessage(t *testing.T, what, kind, msg string) {
	t.Helper()
	switch {
	case strings.TrimSpace(msg) == "":
		t.Errorf("%s: empty %s", what, kind)
	case !utf8.ValidString(msg):
		t.Errorf("%s: %s is not valid UTF-8: %q", what, kind, clipText(msg))
	case len(msg) > maxErrorMessage:
		t.Errorf("%s: %s of %d bytes, want at most %d: %q", what, kind, len(msg), maxErrorMessage, clipText(msg))
	case strings.ContainsFunc(msg, controlRune):
		t.Errorf("%s: %s holds control characters: %q", what, kind, clipText(msg))
	}
}

// controlRune reports characters an error message must not carry: C0 and
// C1 controls other than newline and tab, and the bidirectional overrides
// and isolates that make text read differently from what it says.
func controlRune(r rune) bool {
	switch {
	case r == '\n', r == '\t':
		return false
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// good makes a web_search that must succeed, and remembers its query for
// the audit check.
func (h *hostileRun) good(t *testing.T, after string) {
	t.Helper()
	q := fmt.Sprintf("good %s %d", h.name, len(h.goodQueries)+1)
	id := h.id()
	r := h.conn.send(t, id, callBody(id, "web_search", []byte(`{"query":"`+q+`","max_results":1}`)))
	if r.result == nil || r.result.IsError {
		t.Fatalf("good web_search after %s failed: %v", after, r)
	}
	h.audited++
	h.goodQueries = append(h.goodQueries, q)
}

// listTools returns the tools and input schemas the server offers.
func (h *hostileRun) listTools(t *testing.T) []toolSchema {
	t.Helper()
	id := h.id()
	r := h.conn.send(t, id, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id)))
	if r.rpcErr != nil {
		t.Fatalf("tools/list: %v", r)
	}
	var res struct {
		Tools []toolSchema `json:"tools"`
	}
	if err := json.Unmarshal(r.resultRaw, &res); err != nil || len(res.Tools) == 0 {
		t.Fatalf("tools/list: %v: %s", err, clipText(string(r.resultRaw)))
	}
	return res.Tools
}

// companions are arguments a tool needs that its schema cannot require:
// add_document takes exactly one of url, text or content_base64. A hostile
// value in another of its arguments comes with them, so that it reaches
// the job that stores the document, not only the check of its arguments.
var companions = map[string]map[string]any{
	"add_document": {"title": "hostile probe", "text": "A note of the hostile-input suite."},
}

// goodArgs returns values for a tool's required properties, and its
// companions, that make the call reach the tool: known names get
// meaningful values, others a value of their type.
func goodArgs(ts toolSchema, pageURL string) map[string][]byte {
	known := map[string]string{
		"url":             pageURL,
		"query":           "hostile probe",
		"conversation_id": "conv-hostile",
		"chunk_id":        "00000000-0000-0000-0000-000000000000",
	}
	out := map[string][]byte{}
	for _, name := range ts.InputSchema.Required {
		p := ts.InputSchema.Properties[name]
		var v any = "probe"
		if s, ok := known[name]; ok {
			v = s
		} else if len(p.Enum) > 0 {
			v = p.Enum[len(p.Enum)-1]
		} else {
			switch ty := p.types(); {
			case slices.Contains(ty, "integer"), slices.Contains(ty, "number"):
				v = 1
				if p.Minimum != nil {
					v = *p.Minimum
				}
			case slices.Contains(ty, "boolean"):
				v = false
			case slices.Contains(ty, "array"):
				v = []any{}
			}
		}
		out[name], _ = json.Marshal(v)
	}
	for name, v := range companions[ts.Name] {
		if _, ok := ts.InputSchema.Properties[name]; ok {
			out[name], _ = json.Marshal(v)
		}
	}
	return out
}

// takesStrings reports whether a property's values, or its items, are
// strings.
func takesStrings(p propSchema) bool {
	ty := p.types()
	return slices.Contains(ty, "string") || slices.Contains(ty, "array")
}

// refused sends a message the transport must refuse before any tool runs
// and checks the refusal: over stdio a JSON-RPC error with a null id and
// code rpcCode, over HTTP status httpStatus, whose body is the contract's
// error when jsonBody is set.
func (h *hostileRun) refused(t *testing.T, what string, body []byte, rpcCode, httpStatus int, jsonBody bool) {
	t.Helper()
	r := h.conn.send(t, h.id(), body)
	if err := h.conn.alive(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	h.answers[classOf(r)]++
	if _, overHTTP := h.conn.(*httpRaw); overHTTP {
		if r.status != httpStatus {
			t.Errorf("%s: %v, want HTTP %d", what, r, httpStatus)
			return
		}
		if jsonBody {
			var e struct {
				Error *toolError `json:"error"`
			}
			if err := json.Unmarshal(r.body, &e); err != nil || e.Error == nil || e.Error.Code == "" {
				t.Errorf("%s: HTTP %d body %q, want the contract's error", what, r.status, clipText(string(r.body)))
				return
			}
			checkMessage(t, what, "error message", e.Error.Message)
		}
		return
	}
	if r.rpcErr == nil || r.rpcErr.Code != rpcCode || string(r.id) != "null" {
		t.Errorf("%s: %v, want JSON-RPC error %d with id null", what, r, rpcCode)
		return
	}
	checkMessage(t, what, "JSON-RPC error message", r.rpcErr.Message)
}

// TestHostileToolCalls sends hostile values in every argument of every
// tool over stdio and streamable HTTP (see the top of this file).
func TestHostileToolCalls(t *testing.T) {
	t.Parallel()
	fake := searxngtest.New(t)
	pages := newPageServer(t)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			cfg := fullConfig(t, fake.URL)
			h := &hostileRun{name: transport, answers: map[string]int{}}
			var stop func()
			var output func() string
			if transport == "stdio" {
				c := startStdioRaw(t, cfg)
				h.conn, stop, output = c, func() { c.close(t) }, c.stderr.String
			} else {
				c := startHTTPRaw(t, cfg)
				h.conn, stop, output = c, func() { c.srv.stop(t) }, c.srv.output.String
			}
			tools := h.listTools(t)
			var names []string
			for _, ts := range tools {
				names = append(names, ts.Name)
			}
			offersEveryTool(t, "the hostile-input server", names)
			h.good(t, "the handshake")
			hostileCalls := 0
			for _, ts := range tools {
				base := goodArgs(ts, pages.URL+"/libffi.html")
				props := make([]string, 0, len(ts.InputSchema.Properties))
				for name := range ts.InputSchema.Properties {
					props = append(props, name)
				}
				slices.Sort(props)
				sentOnce := map[string]bool{}
				for _, prop := range props {
					p := ts.InputSchema.Properties[prop]
					for _, v := range hostileValues {
						if v.big && !takesStrings(p) || v.once && sentOnce[v.name] {
							continue
						}
						sentOnce[v.name] = true
						what := fmt.Sprintf("%s %s=%s", ts.Name, prop, v.name)
						h.hostile(t, what, ts.Name, argsWith(base, prop, v.raw))
						h.good(t, what)
						hostileCalls++
						if slices.Contains(p.types(), "array") {
							item := append(append([]byte{'['}, v.raw...), ']')
							h.hostile(t, what+" as an item", ts.Name, argsWith(base, prop, item))
							h.good(t, what+" as an item")
							hostileCalls++
						}
					}
				}
				for _, args := range []string{`"x"`, `[1]`, `5`, `null`, string(argsWith(base, "zz\u0000\u202e", []byte(`1`)))} {
					what := fmt.Sprintf("%s arguments %.40q", ts.Name, args)
					h.hostile(t, what, ts.Name, []byte(args))
					h.good(t, what)
					hostileCalls++
				}
			}
			// Past Go's nesting limit of 10,000 the message is not JSON to
			// the server; it must still answer.
			h.hostile(t, "web_search query nested 10000 deep", "web_search", argsWith(nil, "query", nested(10000)))
			h.good(t, "a value nested 10000 deep")
			// Past the 4 MB message limit a tool call is answered as a call
			// that failed; a message of another method is refused.
			if r := h.hostile(t, "a 5 MB call", "web_search", argsWith(nil, "query", jsonString(5<<20))); classOf(r) != "TOOL_ERROR" {
				t.Errorf("a 5 MB call: %v, want a TOOL_ERROR result", r)
			}
			h.good(t, "a 5 MB call")
			big := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":%s}}`, h.id(), jsonString(5<<20)))
			h.refused(t, "a 5 MB message", big, -32600, http.StatusRequestEntityTooLarge, true)
			h.good(t, "a 5 MB message")
			malformed := []string{"not json", `{"jsonrpc":"2.0","id":`, "\xff\xfe{}", "[]", "123", `"tools/call"`,
				`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"a` + "\x00" + `b"}}}`}
			for _, m := range malformed {
				what := fmt.Sprintf("message %.40q", m)
				code, status := -32700, http.StatusBadRequest
				if json.Valid([]byte(m)) {
					code = -32600
				}
				h.refused(t, what, []byte(m), code, status, false)
				h.good(t, what)
			}

			stop()
			if out := output(); strings.Contains(out, "audit row refused") {
				t.Errorf("the server set audit rows aside:\n%s", tail(out, 20))
			}
			rows := readAudit(t, cfg["DATABASE_URL"])
			t.Logf("%d hostile calls, %d good ones; answers %v; %d audit rows; slowest answer %v (%s)",
				hostileCalls, len(h.goodQueries), h.answers, len(rows), h.slowest.Round(time.Millisecond), h.slowestCall)
			if len(rows) != h.audited {
				t.Errorf("%d audit rows after %d tool calls the server answered, want one per call", len(rows), h.audited)
			}
			stored := map[string]int{}
			for _, r := range rows {
				if q, ok := r.Args["query"].(string); ok && r.Tool == "web_search" && r.Code == "" && strings.HasPrefix(q, "good ") {
					stored[q]++
				}
			}
			for _, q := range h.goodQueries {
				if stored[q] != 1 {
					t.Errorf("the good call %q has %d audit rows, want 1", q, stored[q])
				}
			}
		})
	}
}

// uploadPart is one part of a hand-built multipart body: its
// Content-Disposition and Content-Type written byte for byte.
type uploadPart struct {
	disposition string
	contentType string
	data        []byte
}

// multipartBody builds a multipart/form-data body by hand, so names may
// hold any byte, and returns it with its Content-Type.
func multipartBody(parts ...uploadPart) ([]byte, string) {
	const boundary = "hostile-boundary-0123456789"
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString("--" + boundary + "\r\nContent-Disposition: " + p.disposition + "\r\n")
		if p.contentType != "" {
			b.WriteString("Content-Type: " + p.contentType + "\r\n")
		}
		b.WriteString("\r\n")
		b.Write(p.data)
		b.WriteString("\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
	return b.Bytes(), "multipart/form-data; boundary=" + boundary
}

// filePart is a file part named name.
func filePart(name, contentType string, data []byte) uploadPart {
	return uploadPart{disposition: `form-data; name="file"; filename="` + name + `"`, contentType: contentType, data: data}
}

// checkUploadAnswer checks the answer to an upload: 202 with the files, or
// the contract's error with a status of the client's fault; never a 5xx.
// It returns the files accepted.
func checkUploadAnswer(t *testing.T, what string, status int, body []byte) []uploadedFile {
	t.Helper()
	if status == http.StatusAccepted {
		var out struct {
			Files []uploadedFile `json:"files"`
		}
		if err := json.Unmarshal(body, &out); err != nil || len(out.Files) == 0 {
			t.Errorf("%s: 202 with %q, want the files accepted", what, clipText(string(body)))
			return nil
		}
		for _, f := range out.Files {
			// A name is shown to models and people as it is stored: a
			// control character or a bidirectional override in it makes
			// it read as something else ("invoice\u202etxt.exe").
			if !utf8.ValidString(f.FileName) || strings.ContainsFunc(f.FileName, controlRune) || f.ID == "" {
				t.Errorf("%s: accepted as %q (%s): a stored name must be valid UTF-8 without control characters or bidirectional overrides", what, f.FileName, f.ID)
			}
		}
		return out.Files
	}
	var e struct {
		Error *toolError `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || e.Error.Code == "" {
		t.Errorf("%s: %d %q, want 202 or the contract's error", what, status, clipText(string(body)))
		return nil
	}
	if status < 400 || status >= 500 {
		t.Errorf("%s: status %d (%s), want a 4xx: the fault is the upload's", what, status, e.Error.Message)
	}
	checkMessage(t, what, "error message", e.Error.Message)
	return nil
}

// waitSettled polls GET /v1/files/{id} until the file is no longer
// processing, for at most readyLimit, and returns it.
func waitSettled(t *testing.T, api apiClient, id string) fileInfo {
	t.Helper()
	return waitSettledWithin(t, api, id, readyLimit)
}

// TestHostileUploads sends hostile values in every field of the upload
// API: the conversation id of the path, the file name, the content type
// and the parts themselves, and PDFs that are corrupt or whose text holds
// NUL and invalid UTF-8. Every upload must be answered with 202 or a
// client error with a clean message, every accepted file must settle
// (ready or failed with a clean reason, never stuck processing), and the
// server must stay up and take a good file afterwards.
func TestHostileUploads(t *testing.T) {
	t.Parallel()
	fake := searxngtest.New(t)
	srv := startServer(t, transportCase{name: "http", transport: "http"}, docsConfig(t, fake.URL))
	api := apiClient{base: srv.base}
	const conv = "conv-hostile-upload"
	text := []byte("A plain note about lighthouses and harbours.\n")
	alive := func(what string) {
		t.Helper()
		select {
		case <-srv.exited:
			t.Fatalf("after %s the server exited (%v); output:\n%s", what, srv.cmd.ProcessState, tail(srv.output.String(), 30))
		default:
		}
	}
	var accepted []uploadedFile
	upload := func(what, path string, body []byte, contentType string) {
		t.Helper()
		status, b := api.do(t, http.MethodPost, path, contentType, bytes.NewReader(body))
		alive(what)
		files := checkUploadAnswer(t, what, status, b)
		t.Logf("%s: %d %s", what, status, clipText(strings.Join(strings.Fields(string(b)), " ")))
		accepted = append(accepted, files...)
	}

	convIDs := map[string]string{
		"NUL":           "conv%00nul",
		"invalid UTF-8": "conv%FF%FEbad",
		"bidi override": "conv%E2%80%AEevil",
		"control":       "conv%07bell",
		"10 KB":         strings.Repeat("c", 10<<10),
		"dot segments":  "..%2F..%2Fetc",
		"blank":         "%20%20",
	}
	for name, id := range convIDs {
		body, ct := multipartBody(filePart(fmt.Sprintf("note-%x.txt", name), "text/plain", append([]byte(name+": "), text...)))
		upload("conversation id "+name, "/v1/conversations/"+id+"/files", body, ct)
	}

	names := map[string]string{
		"NUL":           "a\x00b.txt",
		"path":          "../../etc/passwd.txt",
		"absolute path": "/etc/shadow.txt",
		"invalid UTF-8": "\xff\xfe\xc0.txt",
		"10 KB":         strings.Repeat("n", 10<<10) + ".txt",
		"bidi override": "invoice\u202etxt.exe.txt",
		"controls":      "bell\x07\x1b[31m.txt",
		"quote":         `quo"te.txt`,
	}
	for what, n := range names {
		body, ct := multipartBody(filePart(n, "text/plain", append([]byte(what+" name: "), text...)))
		upload("file name "+what, "/v1/conversations/"+conv+"/files", body, ct)
	}
	// RFC 2231 names are percent-encoded, so any byte reaches the server
	// past the MIME header parser.
	encoded := map[string]string{
		"NUL":           "a%00b.txt",
		"invalid UTF-8": "%FF%FE%C0.txt",
		"controls":      "bell%07%1B%5B31m.txt",
		"bidi override": "invoice%E2%80%AEtxt.exe.txt",
	}
	for what, n := range encoded {
		part := uploadPart{disposition: `form-data; name="file"; filename*=UTF-8''` + n, contentType: "text/plain",
			data: append([]byte(what+" encoded name: "), text...)}
		body, ct := multipartBody(part)
		upload("RFC 2231 file name "+what, "/v1/conversations/"+conv+"/files", body, ct)
	}

	types := map[string]string{
		"garbage":         "garbage",
		"NUL parameter":   "text/plain; charset=\x00",
		"invalid UTF-8":   "text/\xff\xfe",
		"10 KB":           "x/" + strings.Repeat("y", 10<<10),
		"PDF for text":    "application/pdf",
		"executable type": "application/x-msdownload",
	}
	for what, ct := range types {
		body, mct := multipartBody(filePart("typed-"+strings.ReplaceAll(what, " ", "-")+".txt", ct, append([]byte(what+" type: "), text...)))
		upload("content type "+what, "/v1/conversations/"+conv+"/files", body, mct)
	}

	noName, ct := multipartBody(uploadPart{disposition: `form-data; name="file"`, contentType: "text/plain", data: text})
	upload("a part without filename", "/v1/conversations/"+conv+"/files", noName, ct)
	upload("a body that is not multipart", "/v1/conversations/"+conv+"/files", []byte("\x00\xff not multipart"), "multipart/form-data; boundary=zzz")
	upload("no boundary", "/v1/conversations/"+conv+"/files", text, "multipart/form-data")
	upload("a content type that is not multipart", "/v1/conversations/"+conv+"/files", text, "text/plain")

	// A PDF whose text holds NUL and bytes that are not UTF-8, and one that
	// is corrupt past its header, with the same bytes in its ruins.
	dirty := pdftest.Pages([]string{"Dirty text: before \x00 NUL, \xff\xfe\xc0 bytes and \x1b escape after."})
	corrupt := append([]byte("%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n(\x00\xff\xfe\xc0) Tj\n"), dirty[len(dirty)/3:len(dirty)/2]...)
	pdfs := map[string][]byte{"dirty-text.pdf": dirty, "corrupt.pdf": corrupt}
	for name, data := range pdfs {
		body, ct := multipartBody(filePart(name, "application/pdf", data))
		upload("PDF "+name, "/v1/conversations/"+conv+"/files", body, ct)
	}

	settled := map[string]fileInfo{}
	for _, f := range accepted {
		s := waitSettled(t, api, f.ID)
		settled[s.FileName] = s
		if s.Status != "ready" && s.Status != "failed" {
			t.Errorf("%s settled as %q, want ready or failed", s.FileName, s.Status)
		}
		if s.Status == "failed" {
			checkMessage(t, "the failure of "+s.FileName, "error", s.Error)
		}
	}
	if f, ok := settled["corrupt.pdf"]; !ok || f.Status != "failed" || f.Error == "" {
		t.Errorf("the corrupt PDF = %+v, want failed with a reason", f)
	}
	dirtyFile, ok := settled["dirty-text.pdf"]
	if !ok || dirtyFile.Status == "processing" {
		t.Errorf("the PDF with dirty text = %+v, want it settled", dirtyFile)
	}
	t.Logf("the corrupt PDF: %s %q; the PDF with dirty text: %s %q", settled["corrupt.pdf"].Status, settled["corrupt.pdf"].Error, dirtyFile.Status, dirtyFile.Error)
	if dirtyFile.Status == "ready" {
		// Its text reaches callers clean.
		status, b := api.do(t, http.MethodPost, "/mcp/tools/search_docs", "application/json",
			strings.NewReader(`{"query":"dirty text escape","conversation_id":"`+conv+`","mode":"keyword"}`))
		var out struct {
			Result searchDocsOutput `json:"result"`
		}
		if status != http.StatusOK || json.Unmarshal(b, &out) != nil {
			t.Fatalf("search_docs over REST: %d %s", status, b)
		}
		found := false
		for _, c := range out.Result.Chunks {
			if c.FileName != "dirty-text.pdf" {
				continue
			}
			found = true
			if !utf8.ValidString(c.Content) || strings.ContainsFunc(c.Content, controlRune) {
				t.Errorf("a chunk of the PDF with dirty text holds control characters or invalid UTF-8: %q", c.Content)
			}
		}
		if !found {
			t.Errorf("search_docs does not find the ready PDF with dirty text: %s", clipText(string(b)))
		}
	}

	// A good upload afterwards is stored and becomes ready.
	body, ct := multipartBody(filePart("after.txt", "text/plain", []byte("After the hostile uploads, a good note about tides.\n")))
	status, b := api.do(t, http.MethodPost, "/v1/conversations/conv-after/files", ct, bytes.NewReader(body))
	files := checkUploadAnswer(t, "the good upload", status, b)
	if status != http.StatusAccepted || len(files) != 1 {
		t.Fatalf("the good upload after the hostile ones: %d %s", status, b)
	}
	if f := waitSettled(t, api, files[0].ID); f.Status != "ready" {
		t.Errorf("the good upload after the hostile ones = %+v, want ready", f)
	}
}
