package server

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// waitJob polls get_job until the job ends.
func (h *docsHarness) waitJob(t *testing.T, id string) JobInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info := decode[JobInfo](t, h.call(t, "get_job", map[string]any{"job_id": id}))
		switch info.Status {
		case "succeeded", "failed", "cancelled":
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not end: %+v", id, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAddDocumentTextAndBytes(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	// Text, waited for: the answer comes when the job is done.
	res := h.call(t, "add_document", map[string]any{"conversation_id": "c1", "title": "Quillstore manual", "text": manual, "wait_seconds": 30})
	out := decode[AddDocumentOutput](t, res)
	if out.Status != "succeeded" || out.Counts.Ready != 1 || len(out.Files) != 1 || out.Files[0].FileName != "Quillstore manual.md" {
		t.Fatalf("add_document text: %+v", out)
	}
	var link *mcp.ResourceLink
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			link = l
		}
	}
	if link == nil || link.URI != fileURI("c1", out.Files[0].FileID) {
		t.Fatalf("no resource link to the stored file: %+v", res.Content)
	}
	found := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"conversation_id": "c1", "query": "E1047 lease expired"}))
	if len(found.Chunks) == 0 || found.Chunks[0].FileID != out.Files[0].FileID {
		t.Fatalf("search after add_document: %+v", found)
	}

	// The same text again is recognised: no second file.
	again := decode[AddDocumentOutput](t, h.call(t, "add_document", map[string]any{"conversation_id": "c1", "title": "Copy", "text": manual}))
	if again.Status != "succeeded" || again.Counts.Duplicates != 1 || !again.Files[0].Duplicate || again.Files[0].FileID != out.Files[0].FileID {
		t.Fatalf("duplicate: %+v", again)
	}

	// Bytes: a zip of two notes and a file of no known type, answered at
	// once and followed with get_job.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range map[string]string{"notes/a.txt": "Harbour pilots board ships at the outer buoy.", "notes/b.md": "# Tides\n\nSpring tides follow the full moon.", "bin/x.dat": "\x00\x01\x02\xff\xfe"} {
		w, _ := zw.Create(name)
		w.Write([]byte(body))
	}
	zw.Close()
	started := decode[AddDocumentOutput](t, h.call(t, "add_document", map[string]any{"conversation_id": "c1", "file_name": "notes.zip",
		"content_base64": base64.StdEncoding.EncodeToString(buf.Bytes())}))
	if started.JobID == "" || started.Kind != "document" {
		t.Fatalf("zip job: %+v", started)
	}
	done := h.waitJob(t, started.JobID)
	if done.Status != "succeeded" || done.Counts.Ready != 2 || done.Counts.Refused != 1 || len(done.Failures) != 1 || done.Failures[0].FileName != "bin/x.dat" {
		t.Fatalf("zip job done: %+v", done)
	}
	list := decode[ListJobsOutput](t, h.call(t, "list_jobs", map[string]any{"conversation_id": "c1", "limit": 2}))
	if list.Total != 3 || len(list.Jobs) != 2 || list.Jobs[0].JobID != started.JobID || list.NextCursor == "" {
		t.Fatalf("list_jobs: %+v", list)
	}
	rest := decode[ListJobsOutput](t, h.call(t, "list_jobs", map[string]any{"conversation_id": "c1", "limit": 2, "cursor": list.NextCursor}))
	if len(rest.Jobs) != 1 || rest.Jobs[0].JobID != out.JobID || rest.NextCursor != "" {
		t.Fatalf("list_jobs page 2: %+v", rest)
	}

	// delete_document removes a file with its chunks.
	del := decode[DeleteDocumentOutput](t, h.call(t, "delete_document", map[string]any{"file_id": out.Files[0].FileID}))
	if !del.Deleted {
		t.Fatalf("delete: %+v", del)
	}
	gone := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"conversation_id": "c1", "query": "E1047 lease expired", "mode": "keyword"}))
	if len(gone.Chunks) != 0 {
		t.Fatalf("deleted file still found: %+v", gone)
	}
}

func TestAddDocumentRefusals(t *testing.T) {
	h := newDocsHarness(t, func(c *config.Config) { c.MaxFileBytes = 1 << 20 }, nil)
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"nothing", map[string]any{"conversation_id": "c"}, "exactly one of url, text"},
		{"two", map[string]any{"conversation_id": "c", "text": "x", "title": "t", "url": "https://example.com/"}, "exactly one of url, text"},
		{"text without title", map[string]any{"conversation_id": "c", "text": "some text"}, "title is required"},
		{"bytes without name", map[string]any{"conversation_id": "c", "content_base64": "aGVsbG8="}, "file_name is required"},
		{"not base64", map[string]any{"conversation_id": "c", "content_base64": "%%%", "file_name": "a.txt"}, "not base64"},
		{"not a url", map[string]any{"conversation_id": "c", "url": "file:///etc/passwd"}, "http or https"},
		{"too large", map[string]any{"conversation_id": "c", "file_name": "big.txt",
			"content_base64": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("a "), 600<<10))}, "MCP_docs_max_file_mb"},
		{"unsupported", map[string]any{"conversation_id": "c", "file_name": "x.exe",
			"content_base64": base64.StdEncoding.EncodeToString([]byte("MZ\x90\x00\x03\x00\x00\x00\x04\x00\xff\xff"))}, "unsupported"},
		{"wait too long", map[string]any{"conversation_id": "c", "text": "x", "title": "t", "wait_seconds": 121}, "wait_seconds"},
		{"unknown job", nil, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, args := "add_document", tt.args
			if args == nil {
				tool, args = "get_job", map[string]any{"job_id": docs.NewID("c")}
			}
			res := h.call(t, tool, args)
			if !res.IsError {
				t.Fatalf("accepted: %s", textOf(res))
			}
			if te := toolErr(t, res); !strings.Contains(strings.ToLower(te.Message), strings.ToLower(tt.want)) {
				t.Fatalf("error %q, want it to mention %q", te.Message, tt.want)
			}
		})
	}
}

// slowEmbedder takes its time over every text, so that a job lasts.
type slowEmbedder struct {
	embed.Embedder
	delay time.Duration
}

func (s slowEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	select {
	case <-time.After(s.delay * time.Duration(len(texts))):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Embedder.Embed(ctx, texts)
}

// progressCollector keeps the progress notifications a client receives.
type progressCollector struct {
	mu  sync.Mutex
	got []*mcp.ProgressNotificationParams
	at  []time.Time
}

func (p *progressCollector) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	p.got = append(p.got, req.Params)
	p.at = append(p.at, time.Now())
	p.mu.Unlock()
}

func TestAddDocumentReportsProgress(t *testing.T) {
	url := pgtest.NewDatabase(t)
	local, err := embed.NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessDeps(t, nil, func(d *Deps) {
		setDocsOn(t, d, url, slowEmbedder{local, 40 * time.Millisecond}, docs.IngestOptions{Workers: 1})
	})
	var pc progressCollector
	client := mcp.NewClient(&mcp.Implementation{Name: "progress-test", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: pc.handle})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := h.srv.MCP("stdio").Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := client.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// Forty notes of a few chunks each: several seconds of embedding.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range 40 {
		w, _ := zw.Create(fmt.Sprintf("note-%02d.txt", i))
		fmt.Fprintf(w, "Note %d. %s", i, strings.Repeat(fmt.Sprintf("Sentence %d about the harbour and its tides. ", i), 60))
	}
	zw.Close()
	params := &mcp.CallToolParams{Name: "add_document", Arguments: map[string]any{"conversation_id": "p", "file_name": "notes.zip",
		"content_base64": base64.StdEncoding.EncodeToString(buf.Bytes()), "wait_seconds": 60}}
	params.SetProgressToken("tok-1")
	start := time.Now()
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	out := decode[AddDocumentOutput](t, res)
	if out.Status != "succeeded" || out.Counts.Ready != 40 {
		t.Fatalf("job: %+v", out.JobInfo)
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	t.Logf("%d notifications over %s", len(pc.got), took.Round(time.Millisecond))
	if took > 3*time.Second && len(pc.got) < int(took/(2*time.Second)) {
		t.Fatalf("%d notifications in %s, want one at least every 2 s", len(pc.got), took)
	}
	if len(pc.got) < 2 {
		t.Fatalf("notifications: %d", len(pc.got))
	}
	// The longest gap is a figure: the rate above, over the time the call
	// measured, is the test; one gap grows with a loaded machine's stalls.
	var gap time.Duration
	defer func() { t.Logf("longest gap between notifications %s", gap.Round(time.Millisecond)) }()
	for i, p := range pc.got {
		if p.ProgressToken != "tok-1" {
			t.Fatalf("notification %d token %v", i, p.ProgressToken)
		}
		if i > 0 && p.Progress <= pc.got[i-1].Progress {
			t.Fatalf("progress did not grow: %v then %v", pc.got[i-1].Progress, p.Progress)
		}
		if i > 0 {
			gap = max(gap, pc.at[i].Sub(pc.at[i-1]))
		}
		if !strings.Contains(p.Message, " files, ") && !strings.Contains(p.Message, "waiting") {
			t.Fatalf("message %q", p.Message)
		}
	}
	if last := pc.got[len(pc.got)-1]; last.Total != 40 {
		t.Errorf("last total %v, want 40", last.Total)
	}
}

func TestKeyScopesAndToolsets(t *testing.T) {
	const writer, reader = "writer-key-0123456789abcdef", "reader-key-0123456789abcdef"
	keys, err := LoadAPIKeys(nil, strings.NewReader(writer+" name=w\n"+reader+" name=r scopes=read\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newDocsHarness(t, nil, func(d *Deps) { d.APIKeys = keys })
	tools := func(key string, header http.Header) []string {
		t.Helper()
		cs := connectWith(t, h.http.URL, key, header)
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	all := tools(writer, nil)
	for _, name := range []string{"add_document", "cancel_job", "delete_document", "get_job", "list_jobs", "search_docs", "web_search"} {
		if !slices.Contains(all, name) {
			t.Errorf("writer lacks %s: %v", name, all)
		}
	}
	read := tools(reader, nil)
	for _, name := range []string{"add_document", "cancel_job", "delete_document"} {
		if slices.Contains(read, name) {
			t.Errorf("reader sees %s: %v", name, read)
		}
	}
	if !slices.Contains(read, "get_job") || !slices.Contains(read, "search_docs") {
		t.Errorf("reader lacks the reading tools: %v", read)
	}
	web := tools(writer, http.Header{"X-Mcp-Toolsets": {"web"}})
	if !slices.Equal(web, []string{"web_search", "fetch_url"}) && !slices.Equal(web, []string{"web_search"}) {
		t.Errorf("toolset web: %v", web)
	}
	// A header narrows, never widens.
	widened := tools(reader, http.Header{"X-Mcp-Toolsets": {"docs,docs_write"}})
	if slices.Contains(widened, "add_document") || !slices.Contains(widened, "search_docs") || slices.Contains(widened, "web_search") {
		t.Errorf("reader with docs,docs_write: %v", widened)
	}

	// The reader calling a write tool anyway is refused, as is a call
	// outside the request's toolsets.
	cs := connectWith(t, h.http.URL, reader, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add_document", Arguments: map[string]any{"conversation_id": "c", "text": "x", "title": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if te := toolErr(t, res); te.Code != CodeAuthError || !strings.Contains(te.Message, "scopes=read,write") {
		t.Fatalf("reader add_document: %+v", te)
	}
	cs = connectWith(t, h.http.URL, writer, http.Header{"X-Mcp-Toolsets": {"web"}})
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_docs", Arguments: map[string]any{"conversation_id": "c", "query": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if te := toolErr(t, res); te.Code != CodeAuthError || !strings.Contains(te.Message, "X-MCP-Toolsets") {
		t.Fatalf("search_docs outside the toolsets: %+v", te)
	}

	// The upload API: a read key cannot upload, delete or cancel.
	resp := upload(t, h.http.URL, "c", map[string][]byte{"a.txt": []byte("hello there")}, http.Header{"Authorization": {"Bearer " + reader}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("reader upload: %d", resp.StatusCode)
	}
	// REST lists what the key may use.
	req, _ := http.NewRequest(http.MethodGet, h.http.URL+"/mcp/tools", nil)
	req.Header.Set("Authorization", "Bearer "+reader)
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if strings.Contains(string(body), `"add_document"`) || !strings.Contains(string(body), `"get_job"`) {
		t.Fatalf("REST tools for a reader: %s", body)
	}
}

// connectWith opens a streamable HTTP session with key and extra headers.
func connectWith(t *testing.T, base, key string, header http.Header) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: headerTransport{key: key, header: header}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "scopes-test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type headerTransport struct {
	key    string
	header http.Header
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.key)
	for k, v := range h.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestReadOnlyServer(t *testing.T) {
	h := newDocsHarness(t, func(c *config.Config) { c.ReadOnly = true }, nil)
	res, err := h.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == "add_document" || tl.Name == "delete_document" || tl.Name == "cancel_job" {
			t.Errorf("read-only server offers %s", tl.Name)
		}
	}
	resp := upload(t, h.http.URL, "c", map[string][]byte{"a.txt": []byte("hello there")}, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "MCP_read_only") {
		t.Fatalf("upload on a read-only server: %d %s", resp.StatusCode, body)
	}
	// Writes off by their own setting: hidden too, uploads still taken.
	h2 := newDocsHarness(t, func(c *config.Config) { c.WriteToolsEnabled = false }, nil)
	res, _ = h2.session.ListTools(context.Background(), nil)
	for _, tl := range res.Tools {
		if tl.Name == "add_document" {
			t.Errorf("add_document offered with MCP_docs_write_tools_enabled=false")
		}
	}
	if resp := upload(t, h2.http.URL, "c", map[string][]byte{"a.txt": []byte("hello there")}, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload with write tools off: %d", resp.StatusCode)
	}
}

func TestUploadAPIJobs(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	resp := upload(t, h.http.URL, "c9", map[string][]byte{"a.txt": []byte("The lighthouse keeper logs the weather."), "b.txt": []byte("Fog horns sound every thirty seconds.")}, nil)
	var up uploadResponse
	if err := json.NewDecoder(resp.Body).Decode(&up); err != nil || resp.StatusCode != http.StatusAccepted || up.JobID == "" {
		t.Fatalf("upload: %d %+v %v", resp.StatusCode, up, err)
	}
	get := func(method, path string) (int, []byte) {
		req, _ := http.NewRequest(method, h.http.URL+path, nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, b
	}
	var info JobInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get(http.MethodGet, "/v1/jobs/"+up.JobID)
		if code != http.StatusOK {
			t.Fatalf("GET job: %d %s", code, body)
		}
		_ = json.Unmarshal(body, &info)
		if info.Status == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if info.Kind != "upload" || info.Counts.Ready != 2 {
		t.Fatalf("upload job: %+v", info)
	}
	if code, body := get(http.MethodDelete, "/v1/jobs/"+up.JobID); code != http.StatusConflict || !strings.Contains(string(body), "ended") {
		t.Fatalf("cancel of an ended job: %d %s", code, body)
	}
	code, body := get(http.MethodGet, "/v1/conversations/c9/jobs?limit=1")
	var page ListJobsOutput
	if err := json.Unmarshal(body, &page); err != nil || code != http.StatusOK || page.Total != 1 || page.Jobs[0].JobID != up.JobID {
		t.Fatalf("list jobs: %d %s", code, body)
	}
	if code, _ := get(http.MethodGet, "/v1/jobs/"+docs.NewID("c9")); code != http.StatusNotFound {
		t.Fatalf("unknown job: %d", code)
	}
	if code, _ := get(http.MethodGet, "/v1/conversations/c9/jobs?status=bogus"); code != http.StatusBadRequest {
		t.Fatalf("bad status: %d", code)
	}
}

func TestLoadAPIKeysScopes(t *testing.T) {
	tests := []struct {
		line  string
		write bool
		err   string
	}{
		{"k0123456789abcdef", true, ""},
		{"k0123456789abcdef scopes=read", false, ""},
		{"k0123456789abcdef scopes=read,write", true, ""},
		{"k0123456789abcdef scopes=write,read name=x", true, ""},
		{"k0123456789abcdef scopes=write", false, "lacks read"},
		{"k0123456789abcdef scopes=admin", false, "unknown scope"},
	}
	for _, tt := range tests {
		keys, err := LoadAPIKeys(nil, strings.NewReader(tt.line))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want %q", tt.line, err, tt.err)
			}
			continue
		}
		if err != nil || len(keys) != 1 || keys[0].CanWrite() != tt.write {
			t.Errorf("%q: %+v %v", tt.line, keys, err)
		}
	}
}
