package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// The tests in this file drive mcpsearch with clients of the stateless
// protocol revision 2026-07-28: no initialize handshake, server/discover
// instead, and the protocol version, client info and capabilities in every
// request's _meta. Each client negotiates the revision itself and must end
// up on 2026-07-28 over every transport that serves it; identity, scoped
// keys, rate limits and the audit must work for its requests as they do for
// sessions.

// modernRevision is the protocol revision the modern clients must negotiate.
const modernRevision = "2026-07-28"

// legacyRevision is the newest revision of the initialize handshake, which
// the server must keep offering to older clients.
const legacyRevision = "2025-11-25"

// modernTransports are the transports that serve modernRevision. Legacy SSE
// is not among them: the revision deprecates it and it stays for older
// clients only.
var modernTransports = []transportCase{
	{name: "stdio", transport: "stdio"},
	{name: "http", transport: "http"},
	{name: "http-stateless", transport: "http", stateless: true},
}

// The keys of the modern servers: one for every conversation and one
// scoped to modernMine's conversation.
const (
	modernKey        = "interop-modern-key-0123456789"
	modernKeyName    = "modern-client"
	modernScopedKey  = "interop-modern-scoped-key-0123456789"
	modernScopedName = "modern-scoped"
)

// modernTools are the tools of a documents-enabled server, whose keys
// (and stdio) may write: the tools that change documents among them.
var modernTools = []string{"add_document", "cancel_job", "delete_document", "get_chunk", "get_job", "list_conversations",
	"list_files", "list_jobs", "search_docs", "web_search"}

// modernDoc is a text file small enough to be one chunk, and what finds it.
type modernDoc struct {
	conv, name, text string
	phrase           string // in the text, verbatim
	query            string // for search_docs
	fileID, chunkID  string // set by ingest
}

var (
	modernMine = modernDoc{
		conv: "conv-modern-mine", name: "harbour-log.txt",
		text: "Harbour log, week 12.\n\nThe lighthouse keeper polished the brass lantern at dawn " +
			"and counted the ferries passing the breakwater. Fog closed the harbour by noon.\n",
		phrase: "lighthouse keeper polished the brass lantern",
		query:  "lighthouse keeper lantern",
	}
	modernOther = modernDoc{
		conv: "conv-modern-other", name: "orchard-diary.txt",
		text: "Orchard diary.\n\nThe beekeeper moved twelve hives into the apple orchard " +
			"before the blossom opened, and the cider press was oiled for autumn.\n",
		phrase: "beekeeper moved twelve hives",
		query:  "beekeeper hives orchard",
	}
)

// modernServer is a documents-enabled mcpsearch with its own database.
// Over HTTP it requires a key: tg carries the one for every conversation,
// scoped the one limited to modernMine's conversation. Over stdio there are
// no keys: the client is whoever started the process.
type modernServer struct {
	tc     transportCase
	tg     target
	scoped target
	dbURL  string
}

func newModernServer(t *testing.T, tc transportCase, searxngURL string, extra ...string) modernServer {
	t.Helper()
	cfg := docsConfig(t, searxngURL).with(extra...)
	if tc.transport != "stdio" {
		keys := filepath.Join(t.TempDir(), "keys")
		lines := fmt.Sprintf("%s name=%s\n%s name=%s conversations=%s\n",
			modernKey, modernKeyName, modernScopedKey, modernScopedName, modernMine.conv)
		if err := os.WriteFile(keys, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg = cfg.with("MCP_API_KEYS_FILE=" + keys)
	}
	ms := modernServer{tc: tc, tg: newTarget(t, tc, cfg), dbURL: cfg["DATABASE_URL"]}
	if tc.transport != "stdio" {
		ms.scoped = ms.tg
		ms.tg.key, ms.scoped.key = modernKey, modernScopedKey
	}
	return ms
}

// ingest stores doc with `mcpsearch ingest` and returns it with the ids of
// its file and first chunk.
func (ms modernServer) ingest(t *testing.T, doc modernDoc) modernDoc {
	t.Helper()
	path := filepath.Join(t.TempDir(), doc.name)
	if err := os.WriteFile(path, []byte(doc.text), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "ingest", "--conversation", doc.conv, path)
	cmd.Env = ms.tg.cfg.processEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mcpsearch ingest %s: %v\n%s", doc.name, err, out)
	}
	conn, err := pgx.Connect(ctx, ms.dbURL)
	if err != nil {
		t.Fatalf("connect to the documents database: %v", err)
	}
	defer conn.Close(context.Background())
	err = conn.QueryRow(ctx, `SELECT f.id::text, c.id::text FROM files f JOIN chunks c ON c.conversation_id = f.conversation_id AND c.file_id = f.id
		WHERE f.conversation_id = $1 AND f.file_name = $2 AND f.status = 'ready' ORDER BY c.ordinal LIMIT 1`,
		doc.conv, doc.name).Scan(&doc.fileID, &doc.chunkID)
	if err != nil {
		t.Fatalf("%s is not ready with a chunk after mcpsearch ingest: %v", doc.name, err)
	}
	return doc
}

// uri is the resource URI of doc, as the server names files.
func (doc modernDoc) uri() string {
	return "mcpsearch://conversations/" + url.PathEscape(doc.conv) + "/files/" + doc.fileID
}

// auditRows waits until ms's audit table holds want rows and returns them.
// Rows are written in the background, within a second, and a stdio
// server's only once its client has gone, so the table is polled; a row
// more than want fails the test.
func (ms modernServer) auditRows(t *testing.T, want int) []auditRow {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rows := readAudit(t, ms.dbURL)
		switch {
		case len(rows) > want:
			t.Fatalf("%d audit rows after %d tool calls, want one per call: %+v", len(rows), want, rows)
		case len(rows) == want:
			return rows
		case time.Now().After(deadline):
			t.Fatalf("%d audit rows 20s after %d tool calls, want one per call: %+v", len(rows), want, rows)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkAuditClient fails the test for every row that does not name the
// client and transport of the calls, or whose key is not one of keys (by
// name, with the number of rows each must have).
func checkAuditClient(t *testing.T, rows []auditRow, tc transportCase, client *mcp.Implementation, keys map[string]int) {
	t.Helper()
	got := map[string]int{}
	for i, r := range rows {
		got[r.Key]++
		if r.Client != client.Name || r.ClientVersion != client.Version || r.Transport != tc.transport || r.LatencyMS < 0 {
			t.Errorf("audit row %d (%s %s): client %q version %q transport %q latency %d, want %q %q over %s",
				i, r.Tool, r.Code, r.Client, r.ClientVersion, r.Transport, r.LatencyMS, client.Name, client.Version, tc.transport)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(keys) {
		t.Errorf("audit rows by key name = %v, want %v", got, keys)
	}
}

// rawDiscover sends server/discover as a client of modernRevision without
// an SDK would, over tg's transport, and returns the result. Over stdio it
// starts the binary for this one request.
func rawDiscover(t *testing.T, tg target) discoverResult {
	t.Helper()
	req, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "server/discover",
		"params": map[string]any{"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    modernRevision,
			"io.modelcontextprotocol/clientInfo":         map[string]string{"name": "mcpsearch-interop-raw", "version": "1.0.0"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var body []byte
	if tg.transport == "stdio" {
		body = stdioExchange(t, tg.cfg, req)
	} else {
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.url, bytes.NewReader(req))
		if err != nil {
			t.Fatal(err)
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Accept", "application/json, text/event-stream")
		hreq.Header.Set("Mcp-Protocol-Version", modernRevision)
		hreq.Header.Set("Mcp-Method", "server/discover")
		hreq.Header.Set("Authorization", "Bearer "+tg.key)
		resp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			t.Fatalf("POST server/discover: %v", err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			t.Fatalf("read the server/discover answer: %v", err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST server/discover: %s: %s", resp.Status, buf.String())
		}
		body = buf.Bytes()
	}
	return decodeDiscover(t, body)
}

// stdioExchange starts the binary over stdio, writes one request line and
// returns the first line it answers; then it closes stdin and checks that
// the server exits 0.
func stdioExchange(t *testing.T, cfg config, req []byte) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "serve", "--transport", "stdio")
	cmd.Env = cfg.processEnv()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binPath, err)
	}
	// The answer must come before stdin closes: a client that closes it has
	// gone, and nothing is owed to it.
	if _, err := stdin.Write(append(req, '\n')); err != nil {
		t.Fatalf("write to the stdio server: %v", err)
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	stdin.Close()
	if werr := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("stdio exchange: read %v, exit %v; stderr:\n%s", err, werr, stderr.String())
	}
	return line
}

// discoverResult is the part of a server/discover result the tests check.
type discoverResult struct {
	SupportedVersions []string `json:"supportedVersions"`
	Capabilities      struct {
		Tools *struct{} `json:"tools"`
	} `json:"capabilities"`
	Meta struct {
		ServerInfo *mcp.Implementation `json:"io.modelcontextprotocol/serverInfo"`
	} `json:"_meta"`
	TTLMs      *int   `json:"ttlMs"`
	CacheScope string `json:"cacheScope"`
}

// decodeDiscover finds the JSON-RPC response in body, a JSON document, an
// event stream or stdio lines, and decodes its result.
func decodeDiscover(t *testing.T, body []byte) discoverResult {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "data:")
		var resp struct {
			ID     json.RawMessage `json:"id"`
			Result *discoverResult `json:"result"`
			Error  *jsonrpc.Error  `json:"error"`
		}
		if json.Unmarshal([]byte(line), &resp) != nil || string(resp.ID) != "1" {
			continue
		}
		if resp.Error != nil || resp.Result == nil {
			t.Fatalf("server/discover answered an error: %s", line)
		}
		return *resp.Result
	}
	t.Fatalf("no answer to server/discover in %q", body)
	return discoverResult{}
}

// checkDiscover checks what a modern client learns from server/discover.
func checkDiscover(t *testing.T, d discoverResult) {
	t.Helper()
	if !slices.Contains(d.SupportedVersions, modernRevision) || !slices.Contains(d.SupportedVersions, legacyRevision) {
		t.Errorf("supportedVersions = %v, want %s for modern clients and %s for older ones", d.SupportedVersions, modernRevision, legacyRevision)
	}
	if d.Capabilities.Tools == nil {
		t.Errorf("server/discover declares no tools capability")
	}
	if si := d.Meta.ServerInfo; si == nil || si.Name != "mcpsearch" || si.Version == "" {
		t.Errorf("server/discover _meta serverInfo = %+v, want mcpsearch and a version", si)
	}
}

// goSDKVersion is the version of the Go SDK this module requires, whose
// client the tests use.
func goSDKVersion(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, err := moduleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", "github.com/modelcontextprotocol/go-sdk")
	cmd.Dir = root
	out, err := cmd.Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	t.Fatalf("go list -m github.com/modelcontextprotocol/go-sdk: %v %s", err, out)
	return ""
}

// minStaticTTL is the least TTL worth sending for what changes only with
// the configuration.
const minStaticTTL = time.Minute

// TestTypeScriptV2Client drives mcpsearch with the TypeScript SDK's v2
// client (ts2-client.mjs) in automatic version negotiation, over every
// transport that serves the stateless revision.
func TestTypeScriptV2Client(t *testing.T) {
	requireNode(t, "@modelcontextprotocol/client")
	for _, tc := range modernTransports {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := searxngtest.New(t)
			ms := newModernServer(t, tc, fake.URL)
			mine, other := ms.ingest(t, modernMine), ms.ingest(t, modernOther)
			keys := map[string]int{} // tool calls by key name, for the audit
			var client *mcp.Implementation

			t.Run("session", func(t *testing.T) {
				const q = "stateless revision"
				before := fake.Requests()
				rep := runTS2(t, ms.tg, "session", "--query", q, "--expect-first-url", searxngtest.ResultURL(q, 1),
					"--expect-tools", strings.Join(modernTools, ","), "--write-tools", strings.Join(tools.writes, ","),
					"--conversation", mine.conv, "--file-name", mine.name,
					"--file-phrase", mine.phrase, "--doc-query", mine.query)
				keys[ms.tg.keyName()] += toolCalls(t, rep)
				client = reportedClient(t, rep)
				if got := fake.Requests() - before; got != 1 {
					t.Errorf("SearXNG got %d requests for one web_search, want 1", got)
				}
			})
			t.Run("cache hints", func(t *testing.T) {
				rep := runTS2(t, ms.tg, "cache-hints", "--conversation", mine.conv, "--file-id", mine.fileID)
				keys[ms.tg.keyName()] += toolCalls(t, rep)
			})
			t.Run("scoped key", func(t *testing.T) {
				if tc.transport == "stdio" {
					t.Skip("keys are an HTTP matter: over stdio the client is whoever started the server")
				}
				rep := runTS2(t, ms.scoped, "scoped", "--conversation", mine.conv, "--other-conversation", other.conv,
					"--other-file-id", other.fileID, "--other-chunk-id", other.chunkID)
				keys[ms.scoped.keyName()] += toolCalls(t, rep)
			})
			t.Run("rate limited", func(t *testing.T) {
				limited := newModernServer(t, tc, fake.URL, "MCP_rate_limit_per_minute=1", "MCP_rate_limit_burst=2")
				before := fake.Requests()
				rep := runTS2(t, limited.tg, "ratelimited", "--burst", "2", "--query", "limited")
				if got := fake.Requests() - before; got != 2 {
					t.Errorf("SearXNG got %d requests for 2 allowed calls and 1 limited one, want 2", got)
				}
				rows := limited.auditRows(t, toolCalls(t, rep))
				checkAuditClient(t, rows, tc, reportedClient(t, rep), map[string]int{limited.tg.keyName(): 3})
				if codes := auditCodes(rows); codes != ",,RATE_LIMITED" {
					t.Errorf("audit error codes = %q, want two results and RATE_LIMITED", codes)
				}
			})
			t.Run("audit", func(t *testing.T) {
				if client == nil {
					t.Skip("the session scenario did not run")
				}
				total := 0
				for _, n := range keys {
					total += n
				}
				checkAuditClient(t, ms.auditRows(t, total), tc, client, keys)
			})
		})
	}
}

// runTS2 runs one scenario of ts2-client.mjs against tg and fails the test
// unless it reports success.
func runTS2(t *testing.T, tg target, scenario string, extra ...string) tsReport {
	t.Helper()
	return runNodeScript(t, "ts2-client.mjs", scenario, tg.transport, append(tsArgs(tg), extra...))
}

// toolCalls is the number of tools/call requests a ts2-client.mjs run made.
func toolCalls(t *testing.T, rep tsReport) int {
	t.Helper()
	n, ok := rep.Details["tool_calls"].(float64)
	if !ok && rep.Details["tool_calls"] != nil {
		t.Fatalf("tool_calls in the report is %v", rep.Details["tool_calls"])
	}
	return int(n)
}

// reportedClient is the client name and version a ts2-client.mjs run sent.
func reportedClient(t *testing.T, rep tsReport) *mcp.Implementation {
	t.Helper()
	raw, err := json.Marshal(rep.Details["client"])
	if err != nil {
		t.Fatal(err)
	}
	var impl mcp.Implementation
	if err := json.Unmarshal(raw, &impl); err != nil || impl.Name == "" || impl.Version == "" {
		t.Fatalf("the report names no client: %s (%v)", raw, err)
	}
	return &impl
}

// keyName is the name of tg's key in the keys file, "" without a key.
func (tg target) keyName() string {
	switch tg.key {
	case modernKey:
		return modernKeyName
	case modernScopedKey:
		return modernScopedName
	}
	return ""
}

// auditCodes joins the error codes of rows, "" for a result.
func auditCodes(rows []auditRow) string {
	codes := make([]string, len(rows))
	for i, r := range rows {
		codes[i] = r.Code
	}
	return strings.Join(codes, ",")
}

// TestGoSDKModernClient drives mcpsearch with the Go SDK's client, which
// asks for the newest revision it knows through server/discover, over every
// transport that serves the stateless revision.
func TestGoSDKModernClient(t *testing.T) {
	client := &mcp.Implementation{Name: "mcpsearch-interop-go-modern", Version: goSDKVersion(t)}
	for _, tc := range modernTransports {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := searxngtest.New(t)
			ms := newModernServer(t, tc, fake.URL)
			mine, other := ms.ingest(t, modernMine), ms.ingest(t, modernOther)
			keys := map[string]int{}
			s := connectGoAs(t, ms.tg, client)
			call := func(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					t.Fatalf("%s %v: %v", tool, args, err)
				}
				return res
			}
			ok := func(t *testing.T, tool string, args map[string]any, out any) {
				t.Helper()
				keys[ms.tg.keyName()]++
				res := call(t, s, tool, args)
				if res.IsError {
					t.Fatalf("%s %v failed: %s", tool, args, resultText(res))
				}
				raw, err := json.Marshal(res.StructuredContent)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(raw, out); err != nil {
					t.Fatalf("%s structuredContent %s: %v", tool, raw, err)
				}
			}
			ctx := context.Background()

			t.Run("discover", func(t *testing.T) {
				init := s.InitializeResult()
				if init == nil || init.ProtocolVersion != modernRevision {
					t.Fatalf("negotiated %+v, want protocol version %s through server/discover", init, modernRevision)
				}
				if init.ServerInfo == nil || init.ServerInfo.Name != "mcpsearch" || init.Capabilities == nil || init.Capabilities.Tools == nil {
					t.Errorf("server/discover gave serverInfo %+v capabilities %+v, want mcpsearch with tools", init.ServerInfo, init.Capabilities)
				}
				checkDiscover(t, rawDiscover(t, ms.tg))
			})

			t.Run("tools/list", func(t *testing.T) {
				res, err := s.ListTools(ctx, nil)
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				var names []string
				for _, tool := range res.Tools {
					names = append(names, tool.Name)
					if readOnly := !slices.Contains(tools.writes, tool.Name); tool.OutputSchema == nil || tool.Annotations == nil || tool.Annotations.ReadOnlyHint != readOnly {
						t.Errorf("%s: want an outputSchema and readOnlyHint %v", tool.Name, readOnly)
					}
				}
				slices.Sort(names)
				if !slices.Equal(names, modernTools) {
					t.Errorf("tools = %v, want %v", names, modernTools)
				}
			})

			t.Run("web_search", func(t *testing.T) {
				const q = "go modern client"
				var out searchOutput
				ok(t, "web_search", map[string]any{"query": q, "max_results": 2}, &out)
				if len(out.Results) != 2 || out.Results[0].URL != searxngtest.ResultURL(q, 1) {
					t.Errorf("results = %+v, want 2 starting at %s", out.Results, searxngtest.ResultURL(q, 1))
				}
			})

			t.Run("errors", func(t *testing.T) {
				keys[ms.tg.keyName()]++
				e := searchErr(t, call(t, s, "web_search", map[string]any{"query": "x", "max_results": 1000}))
				wantError(t, e, "TOOL_ERROR", false, "max_results")
				keys[ms.tg.keyName()]++
				_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
				var werr *jsonrpc.Error
				if !errors.As(err, &werr) || !strings.Contains(werr.Message, "no_such_tool") {
					t.Errorf("calling an unknown tool: want a JSON-RPC error naming it, got %v", err)
				}
				if _, err := s.ListTools(ctx, nil); err != nil {
					t.Errorf("tools/list after the errors: %v", err)
				}
			})

			t.Run("documents tools", func(t *testing.T) {
				var files listFilesOutput
				ok(t, "list_files", map[string]any{"conversation_id": mine.conv}, &files)
				if len(files.Files) != 1 || files.Files[0].ID != mine.fileID || files.Files[0].Status != "ready" {
					t.Fatalf("list_files = %+v, want %s ready", files.Files, mine.name)
				}
				var found searchDocsOutput
				ok(t, "search_docs", map[string]any{"query": mine.query, "conversation_id": mine.conv, "top_k": 3}, &found)
				if len(found.Chunks) == 0 || found.Chunks[0].ChunkID != mine.chunkID || !strings.Contains(found.Chunks[0].Content, mine.phrase) {
					t.Fatalf("search_docs %q = %+v, want chunk %s with %q", mine.query, found.Chunks, mine.chunkID, mine.phrase)
				}
				var chunk chunkOutput
				ok(t, "get_chunk", map[string]any{"chunk_id": mine.chunkID}, &chunk)
				if chunk.ChunkID != mine.chunkID || chunk.Content != found.Chunks[0].Content || chunk.Metadata.FileName != mine.name {
					t.Errorf("get_chunk = %+v, want the chunk search_docs found", chunk)
				}
			})

			t.Run("resources", func(t *testing.T) {
				list, err := s.ListResources(ctx, nil)
				if err != nil {
					t.Fatalf("resources/list: %v", err)
				}
				if !slices.ContainsFunc(list.Resources, func(r *mcp.Resource) bool { return r.URI == mine.uri() }) {
					t.Errorf("resources/list lacks %s", mine.uri())
				}
				templates, err := s.ListResourceTemplates(ctx, nil)
				if err != nil || len(templates.ResourceTemplates) != 1 {
					t.Errorf("resources/templates/list = %+v, %v; want the file template", templates, err)
				}
				read, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: mine.uri()})
				if err != nil {
					t.Fatalf("resources/read %s: %v", mine.uri(), err)
				}
				if len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, mine.phrase) {
					t.Errorf("resources/read %s = %+v, want the text with %q", mine.uri(), read.Contents, mine.phrase)
				}
			})

			t.Run("cache hints", func(t *testing.T) {
				d := rawDiscover(t, ms.tg)
				if d.TTLMs == nil {
					t.Errorf("server/discover has no ttlMs")
				} else if time.Duration(*d.TTLMs)*time.Millisecond < minStaticTTL || d.CacheScope != "public" {
					t.Errorf("server/discover ttlMs %d cacheScope %q, want at least %v and public: it changes only with the configuration", *d.TTLMs, d.CacheScope, minStaticTTL)
				}
				tools, err := s.ListTools(ctx, nil)
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				if time.Duration(tools.TTLMs)*time.Millisecond < minStaticTTL || tools.CacheScope != "public" {
					t.Errorf("tools/list ttlMs %d cacheScope %q, want at least %v and public: tools change only with the configuration", tools.TTLMs, tools.CacheScope, minStaticTTL)
				}
				list, err := s.ListResources(ctx, nil)
				if err != nil {
					t.Fatalf("resources/list: %v", err)
				}
				if list.CacheScope != "private" {
					t.Errorf("resources/list cacheScope %q, want private: what is listed depends on the key", list.CacheScope)
				}
				read, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: mine.uri()})
				if err != nil {
					t.Fatalf("resources/read: %v", err)
				}
				if read.TTLMs <= 0 || read.CacheScope != "private" {
					t.Errorf("resources/read ttlMs %d cacheScope %q, want a positive TTL (a file's text does not change) and private (reading depends on the key)", read.TTLMs, read.CacheScope)
				}
			})

			t.Run("scoped key", func(t *testing.T) {
				if tc.transport == "stdio" {
					t.Skip("keys are an HTTP matter: over stdio the client is whoever started the server")
				}
				scoped := connectGoAs(t, ms.scoped, client)
				keys[modernScopedName] += 5 // the calls below
				if res := call(t, scoped, "list_files", map[string]any{"conversation_id": mine.conv}); res.IsError {
					t.Errorf("list_files of the key's own conversation failed: %s", resultText(res))
				}
				for _, c := range []struct {
					tool string
					args map[string]any
				}{
					{"list_files", map[string]any{"conversation_id": other.conv}},
					{"search_docs", map[string]any{"query": other.query, "conversation_id": other.conv}},
				} {
					e := searchErr(t, call(t, scoped, c.tool, c.args))
					if e.Code != "AUTH_ERROR" || *e.Retryable {
						t.Errorf("%s outside the key's conversations: %s retryable=%v (%s), want AUTH_ERROR", c.tool, e.Code, *e.Retryable, e.Message)
					}
				}
				// A chunk of another conversation is answered exactly like an
				// unknown one, so that chunk ids reveal nothing across
				// conversations.
				const unknownID = "00000000-0000-0000-0000-000000000000"
				foreign := searchErr(t, call(t, scoped, "get_chunk", map[string]any{"chunk_id": other.chunkID}))
				unknown := searchErr(t, call(t, scoped, "get_chunk", map[string]any{"chunk_id": unknownID}))
				if foreign.Code != "TOOL_ERROR" || *foreign.Retryable ||
					strings.ReplaceAll(foreign.Message, other.chunkID, "ID") != strings.ReplaceAll(unknown.Message, unknownID, "ID") {
					t.Errorf("get_chunk outside the key's conversations = %s %q, want it answered like an unknown chunk: %s %q",
						foreign.Code, foreign.Message, unknown.Code, unknown.Message)
				}
				list, err := scoped.ListResources(ctx, nil)
				if err != nil {
					t.Fatalf("resources/list: %v", err)
				}
				if slices.ContainsFunc(list.Resources, func(r *mcp.Resource) bool { return r.URI == other.uri() }) {
					t.Errorf("resources/list shows %s, outside the key's conversations", other.uri())
				}
				if _, err := scoped.ReadResource(ctx, &mcp.ReadResourceParams{URI: other.uri()}); err == nil {
					t.Errorf("resources/read %s outside the key's conversations succeeded", other.uri())
				}
			})

			t.Run("rate limited", func(t *testing.T) {
				limited := newModernServer(t, tc, fake.URL, "MCP_rate_limit_per_minute=1", "MCP_rate_limit_burst=2")
				ls := connectGoAs(t, limited.tg, client)
				if v := ls.InitializeResult().ProtocolVersion; v != modernRevision {
					t.Fatalf("negotiated %s, want %s", v, modernRevision)
				}
				for i := range 2 {
					searchOK(t, call(t, ls, "web_search", map[string]any{"query": "limited", "page": i + 1}))
				}
				e := searchErr(t, call(t, ls, "web_search", map[string]any{"query": "limited", "page": 3}))
				wantError(t, e, "RATE_LIMITED", true, "web_search")
				rows := limited.auditRows(t, 3)
				checkAuditClient(t, rows, tc, client, map[string]int{limited.tg.keyName(): 3})
				if codes := auditCodes(rows); codes != ",,RATE_LIMITED" {
					t.Errorf("audit error codes = %q, want two results and RATE_LIMITED", codes)
				}
			})

			t.Run("audit", func(t *testing.T) {
				total := 0
				for _, n := range keys {
					total += n
				}
				checkAuditClient(t, ms.auditRows(t, total), tc, client, keys)
			})
		})
	}
}
