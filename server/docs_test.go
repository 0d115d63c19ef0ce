package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/extract/ocr"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/internal/closedport"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/pg"
	"github.com/mcpsearch/mcpsearch/searxng"
)

// setDocs gives d a document store and an ingester on the database at url,
// closed when the test ends, and returns the store.
func setDocs(t testing.TB, d *Deps, url string) *docs.Store {
	t.Helper()
	return setDocsWith(t, d, url, docs.IngestOptions{})
}

// setDocsWith is setDocs with the ingester's options.
func setDocsWith(t testing.TB, d *Deps, url string, opts docs.IngestOptions) *docs.Store {
	t.Helper()
	emb, err := embed.NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	return setDocsOn(t, d, url, emb, opts)
}

// setDocsOn is setDocsWith with the store's embedder.
func setDocsOn(t testing.TB, d *Deps, url string, emb embed.Embedder, opts docs.IngestOptions) *docs.Store {
	t.Helper()
	pool, err := pg.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := docs.NewStore(pool, emb, docs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := docs.NewIngester(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	d.Docs, d.Ingest = st, in
	r := jobs.NewRunner(jobs.NewStore(st), in, jobs.Options{Poll: 100 * time.Millisecond, Check: 100 * time.Millisecond,
		Unpack: jobs.ArchiveUnpacker{MaxFileBytes: 50 << 20}})
	t.Cleanup(r.Close)
	d.Jobs = r
	return st
}

// docsHarness is a server with a real, freshly migrated database and its
// HTTP surface.
type docsHarness struct {
	*harness
	store  *docs.Store
	ingest *docs.Ingester
	http   *httptest.Server
}

func newDocsHarness(t *testing.T, tweak func(*config.Config), deps func(*Deps)) *docsHarness {
	t.Helper()
	var st *docs.Store
	var in *docs.Ingester
	url := pgtest.NewDatabase(t)
	h := newHarnessDeps(t, func(c *config.Config) {
		c.Transports = []string{"http", "sse"}
		if tweak != nil {
			tweak(c)
		}
	}, func(d *Deps) {
		st = setDocs(t, d, url)
		in = d.Ingest.(*docs.Ingester)
		if deps != nil {
			deps(d)
		}
	})
	hs := httptest.NewServer(h.srv.Handler())
	t.Cleanup(hs.Close)
	return &docsHarness{harness: h, store: st, ingest: in, http: hs}
}

// upload posts files as multipart to the upload API.
func upload(t *testing.T, base, conv string, files map[string][]byte, header http.Header) *http.Response {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, data := range files {
		w, err := mw.CreateFormFile("file", name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/conversations/"+conv+"/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// waitReady polls list_files until every file of conv is ready.
func (h *docsHarness) waitReady(t *testing.T, conv string, n int) ListFilesOutput {
	t.Helper()
	return h.waitReadyWithin(t, conv, n, 30*time.Second)
}

// waitReadyWithin is waitReady with its own time limit.
func (h *docsHarness) waitReadyWithin(t *testing.T, conv string, n int, limit time.Duration) ListFilesOutput {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		out := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": conv}))
		ready := 0
		for _, f := range out.Files {
			if f.Status == "failed" {
				t.Fatalf("file %s failed: %s", f.FileName, f.Error)
			}
			if f.Status == "ready" {
				ready++
			}
		}
		if ready == n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("files not ready in time: %+v", out.Files)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const manual = `# Quillstore operations manual

## Leases

Every writer holds a lease. The error code E1047 means the writer's lease expired
before it renewed it; run quill renew --force to take the lease back.

## Backups

Backups run nightly at 02:00 UTC and are kept for 14 days. Restore one with quill restore.

## Networking

The cluster gossips over UDP port 7946 and serves clients on TCP port 9042.
`

func TestDocsToolsEndToEnd(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	resp := upload(t, h.http.URL, "conv-1", map[string][]byte{"manual.md": []byte(manual)}, nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: %s", resp.Status)
	}
	var up uploadResponse
	json.NewDecoder(resp.Body).Decode(&up)
	if len(up.Files) != 1 || up.Files[0].ID == "" {
		t.Fatalf("upload answer %+v", up)
	}
	files := h.waitReady(t, "conv-1", 1)
	if f := files.Files[0]; f.FileName != "manual.md" || f.MIMEType != "text/markdown" || f.ChunkCount < 1 {
		t.Errorf("list_files gave %+v", f)
	}

	for _, mode := range []string{"hybrid", "keyword", "vector"} {
		t.Run(mode, func(t *testing.T) {
			args := map[string]any{"query": "what does error E1047 mean", "conversation_id": "conv-1", "mode": mode}
			if mode == "vector" {
				args["threshold"] = 0.0
			}
			out := decode[SearchDocsOutput](t, h.call(t, "search_docs", args))
			if len(out.Chunks) == 0 || !strings.Contains(out.Chunks[0].Content, "E1047") {
				t.Fatalf("%s search missed the passage: %+v", mode, out.Chunks)
			}
			c := out.Chunks[0]
			if c.FileName != "manual.md" || c.ChunkID == "" || c.PageNumber != nil || c.Similarity <= 0 || c.Similarity > 1 {
				t.Errorf("chunk fields: %+v", c)
			}
		})
	}

	hit := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"query": "E1047", "conversation_id": "conv-1"})).Chunks[0]
	got := decode[GetChunkOutput](t, h.call(t, "get_chunk", map[string]any{"chunk_id": hit.ChunkID}))
	if got.Content != hit.Content || got.Metadata.FileName != "manual.md" || got.Metadata.CharEnd <= got.Metadata.CharStart {
		t.Errorf("get_chunk = %+v, want the chunk search_docs found", got)
	}
	if want := []rune(manual)[got.Metadata.CharStart:got.Metadata.CharEnd]; string(want) != got.Content {
		t.Errorf("char offsets %d-%d do not locate the chunk in the file's text", got.Metadata.CharStart, got.Metadata.CharEnd)
	}

	// The same bytes again return the existing file.
	resp = upload(t, h.http.URL, "conv-1", map[string][]byte{"copy.md": []byte(manual)}, nil)
	var dup uploadResponse
	json.NewDecoder(resp.Body).Decode(&dup)
	if len(dup.Files) != 1 || !dup.Files[0].Duplicate || dup.Files[0].ID != up.Files[0].ID {
		t.Errorf("duplicate upload answered %+v, want the existing file", dup)
	}
}

// TestSearchDocsOneSource: search_docs with source_id searches the files
// of that source alone, over MCP and through the REST facade; a source of
// another conversation, an unknown one or an id that is not one is an
// invalid argument naming source_id, over both.
func TestSearchDocsOneSource(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	const conv = "two-manuals"
	resp := upload(t, h.http.URL, conv, map[string][]byte{
		"quillstore.md": []byte(manual),
		"inkwell.md":    []byte("# Inkwell manual\n\nThe error code E1047 means the inkwell ran dry; refill it before the lease of the desk expires.\n"),
	}, nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: %s", resp.Status)
	}
	files := h.waitReady(t, conv, 2)
	ids := map[string]string{}
	for _, f := range files.Files {
		ids[f.FileName] = f.ID
	}
	ctx := context.Background()
	source := func(conv, fileID string) string {
		id := uuid.NewString()
		if _, err := h.store.Pool().Exec(ctx, `INSERT INTO sources (conversation_id, id, kind, root) VALUES ($1, $2, 'site', $3)`, conv, id, "https://"+id+".example/"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.store.Pool().Exec(ctx, `INSERT INTO source_pages (conversation_id, source_id, url, file_id) VALUES ($1, $2, $3, $4)`, conv, id, "https://"+id+".example/", fileID); err != nil {
			t.Fatal(err)
		}
		return id
	}
	quill := source(conv, ids["quillstore.md"])
	all := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"query": "error code E1047 lease", "conversation_id": conv, "mode": "keyword", "top_k": 10}))
	names := map[string]bool{}
	for _, c := range all.Chunks {
		names[c.FileName] = true
	}
	if !names["quillstore.md"] || !names["inkwell.md"] {
		t.Fatalf("the query finds %v in the conversation; it must find both manuals", names)
	}
	for _, mode := range []string{"hybrid", "keyword", "vector"} {
		out := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"query": "error code E1047 lease", "conversation_id": conv,
			"mode": mode, "threshold": 0.0, "top_k": 10, "source_id": quill}))
		if len(out.Chunks) == 0 {
			t.Errorf("%s search of the source found nothing", mode)
		}
		for _, c := range out.Chunks {
			if c.FileName != "quillstore.md" {
				t.Errorf("%s search of the source of quillstore.md found a chunk of %s", mode, c.FileName)
			}
		}
	}
	rest, out := restCall(t, http.MethodPost, h.http.URL+"/mcp/tools/search_docs", "",
		fmt.Sprintf(`{"query":"error code E1047","conversation_id":%q,"mode":"keyword","source_id":%q}`, conv, quill))
	if rest.StatusCode != http.StatusOK {
		t.Fatalf("REST search_docs with source_id: status %d: %v", rest.StatusCode, out)
	}
	chunks, _ := out["result"].(map[string]any)["chunks"].([]any)
	if len(chunks) == 0 {
		t.Fatalf("REST search_docs with source_id found nothing: %v", out)
	}
	for _, c := range chunks {
		if name := c.(map[string]any)["file_name"]; name != "quillstore.md" {
			t.Errorf("REST search_docs of the source found a chunk of %v", name)
		}
	}

	for name, id := range map[string]string{
		"of another conversation": source("elsewhere", ids["inkwell.md"]),
		"unknown":                 uuid.NewString(),
		"not a uuid":              "quillstore",
		"too long":                strings.Repeat("9", 100),
	} {
		te := toolErr(t, h.call(t, "search_docs", map[string]any{"query": "E1047", "conversation_id": conv, "source_id": id}))
		if te.Code != CodeToolError || te.Retryable || !strings.Contains(te.Message, "source_id") {
			t.Errorf("source_id %s: %+v, want a non-retryable TOOL_ERROR naming source_id", name, te)
		}
		body, _ := json.Marshal(map[string]any{"query": "E1047", "conversation_id": conv, "source_id": id})
		rest, out := restCall(t, http.MethodPost, h.http.URL+"/mcp/tools/search_docs", "", string(body))
		if msg, _ := out["error"].(string); rest.StatusCode != http.StatusBadRequest || !strings.Contains(msg, "source_id") {
			t.Errorf("REST source_id %s: status %d, %v; want 400 naming source_id", name, rest.StatusCode, out)
		}
	}
}

// TestGetChunkNeighbours: get_chunk with before and after returns one
// passage, overlaps given once, whose offsets locate it in the file.
func TestGetChunkNeighbours(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	var doc strings.Builder
	// Twenty sections: a Markdown file's chunks end at its sections.
	for i := range 20 {
		fmt.Fprintf(&doc, "## Section %d\n\nSection %d explains step %d of the lighthouse routine: trim the wick, polish the lens, log the weather, and wind the clockwork that turns the light.\n\n", i, i, i)
	}
	text := doc.String()
	upload(t, h.http.URL, "conv-n", map[string][]byte{"routine.md": []byte(text)}, nil)
	if f := h.waitReady(t, "conv-n", 1).Files[0]; f.ChunkCount < 3 {
		t.Fatalf("the document made %d chunks, want at least 3", f.ChunkCount)
	}
	hit := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"query": "step 6 of the lighthouse routine", "conversation_id": "conv-n", "mode": "keyword"})).Chunks[0]
	around := decode[GetChunkOutput](t, h.call(t, "get_chunk", map[string]any{"chunk_id": hit.ChunkID, "before": 1, "after": 1}))
	if len(around.ChunkIDs) < 2 || !strings.Contains(around.Content, hit.Content) {
		t.Errorf("get_chunk with neighbours: %d chunks %v, holds the hit: %v", len(around.ChunkIDs), around.ChunkIDs, strings.Contains(around.Content, hit.Content))
	}
	if want := []rune(text)[around.Metadata.CharStart:around.Metadata.CharEnd]; string(want) != around.Content {
		t.Errorf("passage offsets %d-%d do not locate the merged text", around.Metadata.CharStart, around.Metadata.CharEnd)
	}
	te := toolErr(t, h.call(t, "get_chunk", map[string]any{"chunk_id": hit.ChunkID, "after": 9}))
	if !strings.Contains(te.Message, "after 9 is out of range: send 0 to 5") {
		t.Errorf("after 9: %+v", te)
	}
}

// TestDefaultConversation: a single-user setup names its conversation once,
// in the configuration, and the tools' schemas say so.
func TestDefaultConversation(t *testing.T) {
	h := newDocsHarness(t, func(c *config.Config) { c.DefaultConversation = "desk" }, nil)
	upload(t, h.http.URL, "desk", map[string][]byte{"notes.md": []byte(manual)}, nil)
	h.waitReady(t, "desk", 1)
	files := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{}))
	if len(files.Files) != 1 || files.Files[0].FileName != "notes.md" {
		t.Errorf("list_files without a conversation: %+v, want the default conversation's file", files)
	}
	hits := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"query": "E1047"}))
	if len(hits.Chunks) == 0 {
		t.Error("search_docs without a conversation found nothing in the default conversation")
	}
	other := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": "elsewhere"}))
	if len(other.Files) != 0 {
		t.Errorf("a named conversation still wins: %+v", other)
	}
	tools, err := h.session.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != "search_docs" && tool.Name != "list_files" {
			continue
		}
		b, _ := json.Marshal(tool.InputSchema)
		if strings.Contains(string(b), `"required":["conversation_id"`) || !strings.Contains(string(b), `default \"desk\"`) {
			t.Errorf("%s schema does not make conversation_id optional with its default: %s", tool.Name, b)
		}
	}
}

func TestDocsToolsArguments(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	empty := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": "nobody"}))
	if empty.Files == nil || len(empty.Files) != 0 {
		t.Errorf("unknown conversation: %+v, want an empty list", empty)
	}
	none := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"query": "x", "conversation_id": "nobody"}))
	if none.Chunks == nil || len(none.Chunks) != 0 {
		t.Errorf("unknown conversation: %+v, want no chunks", none)
	}
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"get_chunk", map[string]any{"chunk_id": "not-a-uuid"}, "invalid"},
		{"get_chunk", map[string]any{"chunk_id": ""}, "chunk_id is empty"},
		{"search_docs", map[string]any{"query": "", "conversation_id": "c"}, "query is empty"},
		{"search_docs", map[string]any{"query": "x", "conversation_id": ""}, "conversation_id is empty"},
		{"search_docs", map[string]any{"query": "x", "conversation_id": "c", "top_k": 500}, "send 1 to 50"},
		{"search_docs", map[string]any{"query": "x", "conversation_id": "c", "threshold": 1.5}, "send 0 to 1"},
		{"search_docs", map[string]any{"query": "x", "conversation_id": "c", "mode": "fuzzy"}, "hybrid, vector or keyword"},
		{"search_docs", map[string]any{"query": "x", "conversation_id": "c", "top_k": "ten"}, "integer"},
		{"list_files", map[string]any{"conversation_id": strings.Repeat("x", 300)}, "at most 256"},
		{"list_files", map[string]any{"conversation_id": "a\x00b"}, "conversation"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.tool, tt.args), func(t *testing.T) {
			te := toolErr(t, h.call(t, tt.tool, tt.args))
			if te.Code != CodeToolError || te.Retryable || !strings.Contains(te.Message, tt.want) {
				t.Errorf("got %+v, want non-retryable TOOL_ERROR mentioning %q", te, tt.want)
			}
		})
	}
	te := toolErr(t, h.call(t, "get_chunk", map[string]any{"chunk_id": "00000000-0000-4000-8000-000000000000"}))
	if te.Code != CodeToolError || !strings.Contains(te.Message, "not found") {
		t.Errorf("unknown chunk: %+v", te)
	}
}

// TestDatabaseDownIsOneSentence stops nothing but points the documents
// store at a closed port: every documents tool over MCP, the REST facade,
// the upload API and the file resources must answer the same clean,
// retryable sentence, without the database user, name or address the
// driver's error holds or the words of its wrappers; each failure's cause
// goes to the log once. web_search does not depend on the database.
func TestDatabaseDownIsOneSentence(t *testing.T) {
	addr := closedport.Reserve(t).Addr()
	leaks := []string{"leakuser", "leakpass", "leakdb", addr, "127.0.0.1", "dial", "connect", "docs:", "list files"}
	const sentence = "the document store is unavailable right now; try again shortly"

	fake := searxngtest.New(t)
	cfg := config.Default()
	cfg.SearXNGURL = fake.URL
	cfg.Transports = []string{"http"}
	cfg.RateLimit = config.RateLimit{PerMinute: 6000, Burst: 1000}
	client, err := searxng.New(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	d := Deps{Search: client}
	setDocs(t, &d, "postgres://leakuser:leakpass@"+addr+"/leakdb?connect_timeout=2")
	logs := &logBuffer{}
	srv := New(cfg, d, slog.New(slog.NewJSONHandler(logs, nil)), "test")
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	session := connect(t, srv.MCP("stdio"))

	clean := func(where, msg string, retryable bool) {
		t.Helper()
		if msg != sentence || !retryable {
			t.Errorf("%s: %q retryable %v, want %q retryable", where, msg, retryable, sentence)
		}
		for _, leak := range leaks {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: the answer shows %q: %s", where, leak, msg)
			}
		}
	}
	chunk := "00000000-0000-4000-8000-000000000000"
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"search_docs", map[string]any{"query": "x", "conversation_id": "c"}},
		{"list_files", map[string]any{"conversation_id": "c"}},
		{"list_conversations", map[string]any{}},
		{"get_chunk", map[string]any{"chunk_id": chunk}},
		{"get_chunk", map[string]any{"chunk_id": chunk, "after": 1}},
	}
	for _, c := range calls {
		res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		te := toolErr(t, res)
		clean("MCP "+c.tool, te.Message, te.Retryable)
	}
	_, err = session.ListResources(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), sentence) {
		t.Errorf("resources/list: %v, want %q", err, sentence)
	}
	for _, leak := range leaks {
		if err != nil && strings.Contains(err.Error(), leak) {
			t.Errorf("resources/list shows %q: %v", leak, err)
		}
	}

	restCalls := map[string]string{
		"/mcp/invoke":            `{"tool_name":"list_files","params":{"conversation_id":"c"}}`,
		"/mcp/tools/search_docs": `{"query":"x","conversation_id":"c"}`,
	}
	for path, body := range restCalls {
		resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out restResult
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || out.Retryable == nil || resp.Header.Get("Retry-After") == "" {
			t.Errorf("REST %s: %s %+v (%v), want 503 with Retry-After", path, resp.Status, out, err)
			continue
		}
		clean("REST "+path, out.Error, *out.Retryable)
	}

	api := []struct{ method, path string }{
		{http.MethodGet, "/v1/conversations/c/files"},
		{http.MethodGet, "/v1/files/" + chunk},
		{http.MethodDelete, "/v1/files/" + chunk},
		{http.MethodDelete, "/v1/conversations/c"},
	}
	for _, a := range api {
		req, _ := http.NewRequest(a.method, hs.URL+a.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out envelope
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || out.Error == nil {
			t.Errorf("%s %s: %s (%v), want 503 and the contract's error", a.method, a.path, resp.Status, err)
			continue
		}
		clean(a.method+" "+a.path, out.Error.Message, out.Error.Retryable)
	}
	resp := upload(t, hs.URL, "c", map[string][]byte{"notes.txt": []byte("a note that cannot be stored\n")}, nil)
	var up uploadResponse
	if err := json.NewDecoder(resp.Body).Decode(&up); err != nil || resp.StatusCode != http.StatusServiceUnavailable || up.Error == nil || len(up.Files) != 1 || up.Files[0].Refusal == nil {
		t.Errorf("upload: %s %+v (%v), want 503 with the file refused", resp.Status, up, err)
	} else {
		clean("upload", up.Error.Message, up.Error.Retryable)
		clean("upload's file", up.Files[0].Refusal.Message, up.Files[0].Refusal.Retryable)
	}

	res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "still works"}})
	if err != nil || res.IsError {
		t.Errorf("web_search failed while the database is down: %v %v", err, res)
	}

	// The operator learns why, once per failure: in the tool call's log
	// line, or in the request's where no tool was called.
	caused := func(recs []map[string]any) (n int) {
		for _, r := range recs {
			if c, _ := r["cause"].(string); strings.Contains(c, "leakdb") {
				n++
			}
		}
		return n
	}
	if n, want := caused(logs.records(t, "tool call")), len(calls)+len(restCalls); n != want {
		t.Errorf("%d tool call log lines give the cause, want %d", n, want)
	}
	if n, want := caused(logs.records(t, "http request")), len(api)+1; n != want {
		t.Errorf("%d request log lines give the cause, want %d (the upload API's; the facade's calls have theirs)", n, want)
	}
	if n := caused(logs.records(t, "resource request failed")); n != 1 {
		t.Errorf("%d resource log lines give the cause, want 1", n)
	}
}

func TestUploadAPIErrors(t *testing.T) {
	h := newDocsHarness(t, func(c *config.Config) { c.MaxFileBytes = 1 << 10 }, nil)
	tests := []struct {
		name   string
		do     func() *http.Response
		status int
	}{
		{"too large", func() *http.Response {
			return upload(t, h.http.URL, "c", map[string][]byte{"big.txt": bytes.Repeat([]byte("a "), 1<<10)}, nil)
		}, http.StatusRequestEntityTooLarge},
		{"unsupported", func() *http.Response {
			return upload(t, h.http.URL, "c", map[string][]byte{"photo.png": append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 64)...)}, nil)
		}, http.StatusUnsupportedMediaType},
		{"not multipart", func() *http.Response {
			resp, err := http.Post(h.http.URL+"/v1/conversations/c/files", "text/plain", strings.NewReader("x"))
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}, http.StatusBadRequest},
		{"no file", func() *http.Response { return upload(t, h.http.URL, "c", nil, nil) }, http.StatusBadRequest},
		{"unknown file", func() *http.Response {
			resp, err := http.Get(h.http.URL + "/v1/files/00000000-0000-4000-8000-000000000000")
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}, http.StatusNotFound},
		{"malformed id", func() *http.Response {
			resp, err := http.Get(h.http.URL + "/v1/files/nope")
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := tt.do()
			defer resp.Body.Close()
			var body struct {
				Error *ToolError `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error == nil || body.Error.Message == "" {
				t.Errorf("body is not a JSON error: %v", err)
			}
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d (%+v)", resp.StatusCode, tt.status, body.Error)
			}
		})
	}
	// Nothing was stored by the failed uploads.
	if files, _ := h.store.ListFiles(context.Background(), "c"); len(files) != 0 {
		t.Errorf("failed uploads left files: %+v", files)
	}
}

func TestUploadGetDelete(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	resp := upload(t, h.http.URL, "c", map[string][]byte{"a.txt": []byte("alpha beta gamma"), "b.html": []byte("<html><body><p>delta epsilon</p><script>nope()</script></body></html>")}, nil)
	var up uploadResponse
	json.NewDecoder(resp.Body).Decode(&up)
	if resp.StatusCode != http.StatusAccepted || len(up.Files) != 2 {
		t.Fatalf("upload: %d %+v", resp.StatusCode, up)
	}
	h.waitReady(t, "c", 2)
	id := up.Files[0].ID
	get, _ := http.Get(h.http.URL + "/v1/files/" + id)
	var f FileInfo
	json.NewDecoder(get.Body).Decode(&f)
	get.Body.Close()
	if f.ID != id || f.Status != "ready" {
		t.Errorf("GET file: %+v", f)
	}
	req, _ := http.NewRequest(http.MethodDelete, h.http.URL+"/v1/files/"+id, nil)
	del, err := http.DefaultClient.Do(req)
	if err != nil || del.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", err, del.Status)
	}
	out := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": "c"}))
	if len(out.Files) != 1 || out.Files[0].ID == id {
		t.Errorf("after delete: %+v", out.Files)
	}
	res := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"query": "script nope", "conversation_id": "c", "mode": "keyword"}))
	if len(res.Chunks) != 0 {
		t.Errorf("HTML script text was indexed: %+v", res.Chunks)
	}
}

func TestFileResources(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	upload(t, h.http.URL, "res-conv", map[string][]byte{"manual.md": []byte(manual)}, nil)
	files := h.waitReady(t, "res-conv", 1)
	ctx := context.Background()
	list, err := h.session.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fileURI("res-conv", files.Files[0].ID)
	if len(list.Resources) != 1 || list.Resources[0].URI != want || list.Resources[0].Name != "manual.md" {
		t.Fatalf("resources/list = %+v, want %s", list.Resources, want)
	}
	tmpls, err := h.session.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpls.ResourceTemplates) != 1 || tmpls.ResourceTemplates[0].URITemplate != fileURITemplate {
		t.Fatalf("templates: %+v %v", tmpls, err)
	}
	read, err := h.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: want})
	if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != manual {
		t.Fatalf("read: %v %+v", err, read)
	}
	for _, bad := range []string{
		fileURI("other-conv", files.Files[0].ID),
		fileURI("res-conv", "00000000-0000-4000-8000-000000000000"),
		fileURI("res-conv", "nope"),
		"mcpsearch://elsewhere",
	} {
		if _, err := h.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: bad}); err == nil {
			t.Errorf("read %s succeeded", bad)
		}
	}
}

// TestConversations: list_conversations shows each conversation's files,
// only those a scoped key may see, and DELETE removes a whole conversation.
func TestConversations(t *testing.T) {
	keys, err := LoadAPIKeys([]string{fullKey}, strings.NewReader(scopedKey+" name=tenant-a conversations=conv-a\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newDocsHarness(t, nil, func(d *Deps) { d.APIKeys = keys })
	auth := http.Header{"Authorization": {"Bearer " + fullKey}}
	upload(t, h.http.URL, "conv-a", map[string][]byte{"one.md": []byte("# One\n\nfirst file"), "two.md": []byte("# Two\n\nsecond file")}, auth)
	upload(t, h.http.URL, "conv-b", map[string][]byte{"three.md": []byte("# Three\n\nthird file")}, auth)
	h.waitReady(t, "conv-a", 2)
	h.waitReady(t, "conv-b", 1)

	all := decode[ListConversationsOutput](t, h.call(t, "list_conversations", map[string]any{}))
	got := map[string]int{}
	for _, c := range all.Conversations {
		got[c.ID] = c.Ready
	}
	if got["conv-a"] != 2 || got["conv-b"] != 1 {
		t.Errorf("list_conversations = %+v, want conv-a with 2 ready files and conv-b with 1", all.Conversations)
	}

	scoped, err := connectHTTP(t, h.http.URL, "http", scopedKey)
	if err != nil {
		t.Fatal(err)
	}
	res, err := scoped.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_conversations", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	mine := decode[ListConversationsOutput](t, res)
	if len(mine.Conversations) != 1 || mine.Conversations[0].ID != "conv-a" {
		t.Errorf("a key scoped to conv-a sees %+v", mine.Conversations)
	}

	del := func(key, conv string) *http.Response {
		req, _ := http.NewRequest(http.MethodDelete, h.http.URL+"/v1/conversations/"+conv, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := del(scopedKey, "conv-b"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("scoped key deleting another conversation: %s", resp.Status)
	}
	resp := del(scopedKey, "conv-a")
	var out deletedConversation
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusOK || out.DeletedFiles != 2 {
		t.Errorf("DELETE conv-a: %s %+v, want 200 with 2 files", resp.Status, out)
	}
	if files := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": "conv-a"})); len(files.Files) != 0 {
		t.Errorf("conv-a still lists %+v", files.Files)
	}
}

// TestUploadResultsPerPart: every part of a multi-file upload gets its own
// result, so nothing is stored without the caller knowing; a URL part is
// fetched and kept with its source.
func TestUploadResultsPerPart(t *testing.T) {
	site := pages(t)
	f, err := fetch.New(fetch.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	h := newDocsHarness(t, nil, func(d *Deps) { d.Fetch = f })
	resp := upload(t, h.http.URL, "mixed", map[string][]byte{
		"a.md":      []byte("# A\n\nalpha"),
		"b.md":      []byte("# B\n\nbravo"),
		"photo.png": append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 64)...),
	}, nil)
	var out uploadResponse
	json.NewDecoder(resp.Body).Decode(&out)
	results := map[string]string{}
	for _, f := range out.Files {
		results[f.FileName] = f.Result
		if f.Result == uploadRefused && (f.Refusal == nil || f.Refusal.Message == "") {
			t.Errorf("%s refused without a reason", f.FileName)
		}
	}
	if resp.StatusCode != http.StatusMultiStatus || results["a.md"] != uploadAccepted || results["b.md"] != uploadAccepted || results["photo.png"] != uploadRefused {
		t.Fatalf("mixed upload: %s %v, want 207 with a and b accepted and the PNG refused", resp.Status, results)
	}
	h.waitReady(t, "mixed", 2)
	// Sending the same files again returns them, not an error.
	resp = upload(t, h.http.URL, "mixed", map[string][]byte{"a.md": []byte("# A\n\nalpha")}, nil)
	out = uploadResponse{}
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusAccepted || len(out.Files) != 1 || out.Files[0].Result != uploadDuplicate {
		t.Errorf("re-sent file: %s %+v, want 202 duplicate", resp.Status, out.Files)
	}

	// A URL part.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("url", site.URL+"/zlib")
	mw.Close()
	resp, err = http.Post(h.http.URL+"/v1/conversations/web/files", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	out = uploadResponse{}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || len(out.Files) != 1 || out.Files[0].Source != site.URL+"/zlib" {
		t.Fatalf("URL upload: %s %+v", resp.Status, out.Files)
	}
	files := h.waitReady(t, "web", 1)
	if files.Files[0].Source != site.URL+"/zlib" {
		t.Errorf("list_files source = %q", files.Files[0].Source)
	}
	res := h.call(t, "search_docs", map[string]any{"query": "inflate deflate zlib stream", "conversation_id": "web", "mode": "keyword"})
	hits := decode[SearchDocsOutput](t, res)
	if len(hits.Chunks) == 0 || hits.Chunks[0].Source != site.URL+"/zlib" || !strings.Contains(textOf(res), "from "+site.URL+"/zlib") {
		t.Errorf("search hits do not show the source: %+v", hits.Chunks)
	}
}

// busyUploads is an upload queue with no free slot.
type busyUploads struct{ Uploads }

func (busyUploads) Reserve() (*docs.Ticket, error) {
	return nil, fmt.Errorf("docs: reserve: %w", docs.ErrBusy)
}

// TestUploadBusyBeforeReading: with the queue full, an upload is refused
// with 503 before its body is read: the client announces 45 MB, sends only
// the headers, and gets its answer.
func TestUploadBusyBeforeReading(t *testing.T) {
	h := newDocsHarness(t, nil, func(d *Deps) { d.Ingest = busyUploads{d.Ingest} })
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/conversations/c/files HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=xyz\r\nContent-Length: %d\r\n\r\n", 45<<20)
	// Were the server reading the body, no answer would come.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	defer resp.Body.Close()
	var body envelope
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || body.Error == nil || !body.Error.Retryable {
		t.Errorf("status %s, Retry-After %q, body %+v; want 503, retryable, with Retry-After", resp.Status, resp.Header.Get("Retry-After"), body.Error)
	}
}

// TestOfficeFilesCitedByTheirPlaces uploads a deck, a workbook and a Word
// document through the upload API, under names that do not say what they
// are, and checks that search_docs and get_chunk give each passage's place
// in its format's terms, in the structured result and in the text the
// model reads.
func TestOfficeFilesCitedByTheirPlaces(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	read := func(name string) []byte {
		t.Helper()
		data, err := os.ReadFile(filepath.Join("..", "extract", "testdata", "formats", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	resp := upload(t, h.http.URL, "office", map[string][]byte{
		"deck":     read("deck.pptx"),
		"sheet.gz": read("budget.xlsx"),
		"letter":   read("contract.docx"),
	}, nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: %s", resp.Status)
	}
	h.waitReady(t, "office", 3)
	for _, c := range []struct {
		query, file string
		check       func(Location) bool
		cited       string
	}{
		{"gearbox before winter", "deck", func(l Location) bool { return l.SlideStart > 0 && l.SlideTitle != "" }, "[deck, slide"},
		{"microfilm reader", "sheet.gz", func(l Location) bool { return l.Sheet == "Notes" && l.Cells != "" }, "[sheet.gz, sheet Notes, "},
		{"acceptance", "letter", func(l Location) bool { return len(l.Headings) > 1 }, "[letter, Service Agreement"},
	} {
		res := h.call(t, "search_docs", map[string]any{"query": c.query, "conversation_id": "office", "mode": "keyword"})
		out := decode[SearchDocsOutput](t, res)
		if len(out.Chunks) == 0 || out.Chunks[0].FileName != c.file {
			t.Errorf("%q: %+v; want a passage of %s first", c.query, out.Chunks, c.file)
			continue
		}
		hit := out.Chunks[0]
		if !c.check(hit.Location) || hit.Location.Citation == "" {
			t.Errorf("%q: located at %+v", c.query, hit.Location)
		}
		if text := textOf(res); !strings.Contains(text, c.cited) {
			t.Errorf("%q: the text does not cite %q:\n%s", c.query, c.cited, text)
		}
		res = h.call(t, "get_chunk", map[string]any{"chunk_id": hit.ChunkID, "after": 1})
		got := decode[GetChunkOutput](t, res)
		if got.Metadata.Location.Citation == "" || !strings.Contains(textOf(res), c.cited) {
			t.Errorf("%q: get_chunk located at %+v:\n%s", c.query, got.Metadata.Location, textOf(res))
		}
	}
}

// TestScannedPDFThroughOCR uploads a scanned PDF (a text PDF rendered as
// images) to a server whose ingester runs tesseract: its text is found by
// search_docs and cited with its page and OCR. The test needs tesseract and
// poppler-utils; without them it skips, unless MCPSEARCH_REQUIRE_OCR=1
// (CI), where it fails.
func TestScannedPDFThroughOCR(t *testing.T) {
	engine, err := ocr.New(ocr.Options{DPI: 150})
	if err != nil {
		t.Fatal(err)
	}
	if st := engine.Probe(context.Background()); !st.Available || !st.Renderer {
		if os.Getenv("MCPSEARCH_REQUIRE_OCR") == "1" {
			t.Fatalf("OCR is required and not available: %s", st.Reason)
		}
		t.Skipf("OCR is not available (%s): install tesseract-ocr, tesseract-ocr-eng and poppler-utils", st.Reason)
	}
	url := pgtest.NewDatabase(t)
	h := newHarnessDeps(t, func(c *config.Config) { c.Transports = []string{"http"} },
		func(d *Deps) { setDocsWith(t, d, url, docs.IngestOptions{OCR: engine}) })
	hs := httptest.NewServer(h.srv.Handler())
	t.Cleanup(hs.Close)
	dh := &docsHarness{harness: h, http: hs}
	scan, err := os.ReadFile(filepath.Join("..", "extract", "testdata", "formats", "scanned.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	if resp := upload(t, hs.URL, "scans", map[string][]byte{"scan.pdf": scan}, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: %s", resp.Status)
	}
	dh.waitReadyWithin(t, "scans", 1, 5*time.Minute)
	res := h.call(t, "search_docs", map[string]any{"query": "acceptance", "conversation_id": "scans", "mode": "keyword"})
	out := decode[SearchDocsOutput](t, res)
	if len(out.Chunks) == 0 {
		t.Fatalf("the scan's text is not found: %s", textOf(res))
	}
	if l := out.Chunks[0].Location; !l.OCR || l.PageStart == 0 || !strings.Contains(textOf(res), "(OCR)") {
		t.Errorf("a passage of the scan located at %+v:\n%s", l, textOf(res))
	}
}
