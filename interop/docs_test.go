package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// readyLimit bounds how long an uploaded file may take to become ready.
const readyLimit = 60 * time.Second

// The types below restate the documents tools' and upload API's result
// shapes on the client side, like the web_search types in gosdk_test.go.

type docChunk struct {
	ChunkID    string  `json:"chunk_id"`
	FileID     string  `json:"file_id"`
	FileName   string  `json:"file_name"`
	Content    string  `json:"content"`
	Similarity float64 `json:"similarity"`
	Score      float64 `json:"score"`
	PageNumber *int    `json:"page_number"`
}

type searchDocsOutput struct {
	Chunks []docChunk `json:"chunks"`
}

type fileInfo struct {
	ID         string `json:"id"`
	FileName   string `json:"file_name"`
	MIMEType   string `json:"mime_type"`
	SizeBytes  int64  `json:"size_bytes"`
	ChunkCount int    `json:"chunk_count"`
	Status     string `json:"status"`
	Error      string `json:"error"`
}

type listFilesOutput struct {
	Files []fileInfo `json:"files"`
}

type chunkOutput struct {
	ChunkID  string `json:"chunk_id"`
	Content  string `json:"content"`
	Metadata struct {
		FileID     string `json:"file_id"`
		FileName   string `json:"file_name"`
		PageNumber *int   `json:"page_number"`
		CharStart  int    `json:"char_start"`
		CharEnd    int    `json:"char_end"`
	} `json:"metadata"`
}

type uploadedFile struct {
	fileInfo
	Duplicate bool `json:"duplicate"`
}

// docsConfig is baseConfig with the documents tools on, backed by a fresh
// migrated database of the test's own. Small chunks keep the pages of the
// test documents in chunks of their own.
func docsConfig(t *testing.T, searxngURL string) config {
	t.Helper()
	return baseConfig(searxngURL).with(
		"MCP_docs_enabled=true",
		"DATABASE_URL="+pgtest.NewDatabase(t),
		"MCP_docs_chunk_size=400",
		"MCP_docs_chunk_overlap=40",
	)
}

// callTool calls a tool, fails the test on a protocol error or an error
// result, and decodes the structured content into T.
func callTool[T any](t *testing.T, s *mcp.ClientSession, name string, args map[string]any) (T, *mcp.CallToolResult) {
	t.Helper()
	var out T
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if res.IsError {
		t.Fatalf("%s %v failed: %s", name, args, resultText(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s structuredContent %s: %v", name, raw, err)
	}
	return out, res
}

// waitReady polls list_files until the conversation has want files, all
// ready, and returns them. A failed file ends the test with its reason.
func waitReady(t *testing.T, s *mcp.ClientSession, conv string, want int) []fileInfo {
	t.Helper()
	deadline := time.Now().Add(readyLimit)
	for {
		out, _ := callTool[listFilesOutput](t, s, "list_files", map[string]any{"conversation_id": conv})
		ready := 0
		for _, f := range out.Files {
			switch f.Status {
			case "failed":
				t.Fatalf("%s failed: %s", f.FileName, f.Error)
			case "ready":
				ready++
			}
		}
		if len(out.Files) == want && ready == want {
			return out.Files
		}
		if time.Now().After(deadline) {
			t.Fatalf("conversation %s: files not ready within %v: %+v", conv, readyLimit, out.Files)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// apiClient calls the upload API of one server with one key.
type apiClient struct {
	base string
	key  string
}

// do sends a request and returns the status and body.
func (c apiClient) do(t *testing.T, method, path, contentType string, body io.Reader) (int, []byte) {
	t.Helper()
	resp, b := c.send(t, method, path, contentType, body)
	return resp.StatusCode, b
}

// send sends a request and returns the response, whose body is read and
// closed, and the body.
func (c apiClient) send(t *testing.T, method, path, contentType string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, b
}

// upload posts one file new to the conversation and returns what the
// server accepted.
func (c apiClient) upload(t *testing.T, conv, name, contentType string, data []byte) uploadedFile {
	t.Helper()
	f := c.post(t, conv, name, contentType, data)
	if f.Duplicate {
		t.Fatalf("upload %s: the server calls a new file a duplicate: %+v", name, f)
	}
	return f
}

// post posts one file as multipart/form-data, as `curl -F file=@NAME`
// does, and returns what the server accepted.
func (c apiClient) post(t *testing.T, conv, name, contentType string, data []byte) uploadedFile {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
	h.Set("Content-Type", contentType)
	part, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	part.Write(data)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	status, b := c.do(t, http.MethodPost, "/v1/conversations/"+conv+"/files", mw.FormDataContentType(), &body)
	if status != http.StatusAccepted {
		t.Fatalf("upload %s: %d %s", name, status, b)
	}
	var out struct {
		Files []uploadedFile `json:"files"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Files) != 1 {
		t.Fatalf("upload %s: want one file in the answer, got %s (%v)", name, b, err)
	}
	f := out.Files[0]
	if f.ID == "" || f.FileName != name || f.SizeBytes != int64(len(data)) {
		t.Fatalf("upload %s answered %+v, want a file of %d bytes with an id", name, f, len(data))
	}
	return f
}

// The two pages of the test PDF. Each page has words the other lacks, and
// the distinctive ones sit well after the page's start, so the chunk that
// holds them starts on their page.
var (
	pdfPage1 = []string{
		"Annual maintenance report of the coastal station.",
		"The lighthouse keeper inspected the lantern and the foghorn every morning.",
		"Salt spray corroded the brass fittings of the gallery railing,",
		"so the crew replaced them with bronze before the winter storms.",
	}
	pdfPage2 = []string{
		"Second section: the inland research programme.",
		"Volunteers counted migrating cranes over the wetlands in October.",
		"At the glacier observatory the astronomers photographed the aurora",
		"with a wide-field camera cooled to minus forty degrees.",
	}
)

// docsCase is a query and the page of the test PDF that answers it.
type docsCase struct {
	query string
	mode  string
	page  int
	words []string // in the chunk found, case-insensitive
}

var pdfCases = []docsCase{
	{query: "glacier observatory aurora", page: 2, words: []string{"glacier observatory", "aurora"}},
	{query: "glacier observatory aurora", mode: "keyword", page: 2, words: []string{"aurora"}},
	{query: "lighthouse keeper lantern foghorn", page: 1, words: []string{"lighthouse keeper", "foghorn"}},
}

// checkPDFSearch runs pdfCases against conversation conv, holding the one
// file name, and opens each chunk found with get_chunk.
func checkPDFSearch(t *testing.T, s *mcp.ClientSession, conv, name string) {
	t.Helper()
	for _, c := range pdfCases {
		mode := c.mode
		if mode == "" {
			mode = "default mode"
		}
		t.Run(c.query+"/"+mode, func(t *testing.T) {
			args := map[string]any{"query": c.query, "conversation_id": conv, "top_k": 3}
			if c.mode != "" {
				args["mode"] = c.mode
			}
			out, res := callTool[searchDocsOutput](t, s, "search_docs", args)
			if len(out.Chunks) == 0 {
				t.Fatalf("search_docs found nothing: %s", resultText(res))
			}
			top := out.Chunks[0]
			if top.FileName != name || top.PageNumber == nil || *top.PageNumber != c.page {
				t.Fatalf("top chunk is %s page %v, want %s page %d: %+v", top.FileName, deref(top.PageNumber), name, c.page, top)
			}
			for _, w := range c.words {
				if !strings.Contains(strings.ToLower(top.Content), w) {
					t.Errorf("top chunk lacks %q: %q", w, top.Content)
				}
			}
			if !strings.Contains(resultText(res), name) {
				t.Errorf("text block does not name the file: %q", resultText(res))
			}

			got, _ := callTool[chunkOutput](t, s, "get_chunk", map[string]any{"chunk_id": top.ChunkID})
			m := got.Metadata
			if got.ChunkID != top.ChunkID || got.Content != top.Content {
				t.Errorf("get_chunk %s = %q, want the content search_docs gave: %q", top.ChunkID, got.Content, top.Content)
			}
			if m.FileName != name || m.FileID != top.FileID || m.PageNumber == nil || *m.PageNumber != c.page {
				t.Errorf("get_chunk metadata = %+v, want %s (%s) page %d", m, name, top.FileID, c.page)
			}
			if n := utf8.RuneCountInString(got.Content); m.CharEnd-m.CharStart != n {
				t.Errorf("char_start %d, char_end %d span %d characters; the content has %d", m.CharStart, m.CharEnd, m.CharEnd-m.CharStart, n)
			}
		})
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestDocumentsPDF is the documents feature's user story against the
// binary: a two-page PDF is uploaded over HTTP, or added with `mcpsearch
// ingest`, becomes ready, and search_docs finds each page's passage with
// its page number, which get_chunk then opens.
func TestDocumentsPDF(t *testing.T) {
	t.Parallel()
	const key = "pdf-story-key-0123456789"
	fake := searxngtest.New(t)
	cfg := docsConfig(t, fake.URL).with("MCP_API_KEYS=" + key)
	tg := newTarget(t, transportCase{name: "http", transport: "http"}, cfg)
	tg.key = key
	s := connectGo(t, tg)
	pdf := pdftest.Pages(pdfPage1, pdfPage2)

	t.Run("upload over HTTP", func(t *testing.T) {
		const conv, name = "conv-pdf-upload", "station-report.pdf"
		api := apiClient{base: tg.srv.base, key: key}
		f := api.upload(t, conv, name, "application/pdf", pdf)
		if f.Status != "processing" && f.Status != "ready" {
			t.Errorf("status right after the upload = %q, want processing or ready", f.Status)
		}
		files := waitReady(t, s, conv, 1)
		if files[0].ID != f.ID || files[0].MIMEType != "application/pdf" || files[0].ChunkCount < 2 {
			t.Errorf("list_files = %+v, want %s as application/pdf in at least 2 chunks (one per page)", files[0], f.ID)
		}
		status, b := api.do(t, http.MethodGet, "/v1/files/"+f.ID, "", nil)
		if status != http.StatusOK || !strings.Contains(string(b), `"ready"`) {
			t.Errorf("GET /v1/files/%s = %d %s, want 200 and ready", f.ID, status, b)
		}
		// The same bytes again are the same file, not a second copy.
		if dup := api.post(t, conv, name, "application/pdf", pdf); !dup.Duplicate || dup.ID != f.ID {
			t.Errorf("the same PDF uploaded again = %+v, want duplicate of %s", dup, f.ID)
		}
		checkPDFSearch(t, s, conv, name)
	})

	t.Run("mcpsearch ingest", func(t *testing.T) {
		const conv, name = "conv-pdf-cli", "station-report-cli.pdf"
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, pdf, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), readyLimit)
		defer cancel()
		cmd := exec.CommandContext(ctx, binPath, "ingest", "--conversation", conv, path)
		cmd.Env = cfg.processEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mcpsearch ingest: %v\n%s", err, out)
		}
		t.Logf("mcpsearch ingest: %s", strings.TrimSpace(string(out)))
		// ingest returns once the file is stored, so it is ready at once.
		files, _ := callTool[listFilesOutput](t, s, "list_files", map[string]any{"conversation_id": conv})
		if len(files.Files) != 1 || files.Files[0].Status != "ready" || files.Files[0].FileName != name {
			t.Fatalf("list_files after ingest = %+v, want %s ready", files.Files, name)
		}
		checkPDFSearch(t, s, conv, name)
	})
}
