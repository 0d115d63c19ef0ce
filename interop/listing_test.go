package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// pagedFiles is list_files's result and the upload API's listing, as a
// client reads them.
type pagedFiles struct {
	Files      []fileInfo `json:"files"`
	Total      int        `json:"total"`
	NextCursor string     `json:"next_cursor"`
}

// scaleFiles is the size of the conversation TestListingAtScale lists,
// about as many files as a product manual ingested as a folder.
const scaleFiles = 3000

// resultLimitBytes is MCP_tool_result_max_kb's default, in bytes.
const resultLimitBytes = 64 << 10

// TestListingAtScale ingests a folder of 3,000 pages into one
// conversation with the binary's ingest command, then lists them through
// MCP (the Go SDK over streamable HTTP) and the upload API: every result
// stays within the 64 KB result limit whatever the limit asked, the text
// summarises instead of repeating the list, and following next_cursor
// returns every file once, newest first.
func TestListingAtScale(t *testing.T) {
	fake := searxngtest.New(t)
	cfg := docsConfig(t, fake.URL)
	const conv = "manual"
	dir := t.TempDir()
	for i := range scaleFiles {
		// Long names, as a manual's pages have, so that a page of 500
		// does not fit in 64 KB.
		name := fmt.Sprintf("sql-%04d-the-postgresql-reference-manual-chapter-on-%s.md", i, strings.Repeat("indexes-", 3))
		body := fmt.Sprintf("# Page %d\n\nThis page of the manual describes feature %d of the zeppelin database.\n", i, i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, binPath, "ingest", "--conversation", conv, dir)
	cmd.Env = cfg.processEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mcpsearch ingest: %v\n%s", err, tail(string(out), 20))
	}
	t.Logf("ingested %d files in %v", scaleFiles, time.Since(start).Round(time.Second))

	tg := newTarget(t, transportCase{name: "http", transport: "http"}, cfg)
	s := connectGo(t, tg)
	// sizes checks a result against the limit and returns its text and
	// the sizes of its two forms.
	sizes := func(what string, res *mcp.CallToolResult) (string, int, int) {
		t.Helper()
		text := resultText(res)
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if len(text) > resultLimitBytes || len(raw) > resultLimitBytes {
			t.Errorf("%s: text %d bytes, structured content %d bytes; the limit is %d", what, len(text), len(raw), resultLimitBytes)
		}
		return text, len(text), len(raw)
	}

	first, res := callTool[pagedFiles](t, s, "list_files", map[string]any{"conversation_id": conv})
	text, textLen, rawLen := sizes("list_files", res)
	if len(first.Files) != 50 || first.Total != scaleFiles || first.NextCursor == "" {
		t.Fatalf("first page: %d files, total %d, next %q; want 50 of %d", len(first.Files), first.Total, first.NextCursor, scaleFiles)
	}
	if !strings.Contains(text, fmt.Sprintf("holds %d files", scaleFiles)) || strings.Contains(text, first.Files[0].ID) {
		t.Errorf("the text does not summarise the page:\n%.600s", text)
	}
	t.Logf("list_files, default limit: %d files, text %d bytes, structured content %d bytes", len(first.Files), textLen, rawLen)

	// The largest pages: cut to the limit, and each file still comes once.
	seen := map[string]bool{}
	args := map[string]any{"conversation_id": conv, "limit": 500}
	pages := 0
	for ; ; pages++ {
		if pages > scaleFiles {
			t.Fatal("no end to the pages")
		}
		page, res := callTool[pagedFiles](t, s, "list_files", args)
		text, textLen, rawLen := sizes("list_files limit 500", res)
		if pages == 0 {
			if len(page.Files) == 500 || !strings.Contains(text, "MCP_tool_result_max_kb") {
				t.Errorf("a page of 500 long names was not cut to the limit: %d files", len(page.Files))
			}
			t.Logf("list_files, limit 500: %d files fit, text %d bytes, structured content %d bytes", len(page.Files), textLen, rawLen)
		}
		for _, f := range page.Files {
			if seen[f.ID] {
				t.Fatalf("file %s listed twice", f.FileName)
			}
			seen[f.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		args["cursor"] = page.NextCursor
	}
	if len(seen) != scaleFiles {
		t.Errorf("paging listed %d files, want %d", len(seen), scaleFiles)
	}
	t.Logf("list_files, limit 500: %d files in %d calls", len(seen), pages+1)

	// The upload API pages the same way, uncut: 500 a page.
	api := apiClient{base: tg.srv.base}
	apiSeen := map[string]bool{}
	path := "/v1/conversations/" + conv + "/files?limit=500"
	for calls := 0; ; calls++ {
		if calls > 20 {
			t.Fatal("no end to the API's pages")
		}
		status, b := api.do(t, http.MethodGet, path, "", nil)
		var page pagedFiles
		if status != http.StatusOK || json.Unmarshal(b, &page) != nil || page.Total != scaleFiles || len(page.Files) > 500 {
			t.Fatalf("GET %s: %d %.300s", path, status, b)
		}
		for _, f := range page.Files {
			apiSeen[f.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		path = "/v1/conversations/" + conv + "/files?limit=500&cursor=" + url.QueryEscape(page.NextCursor)
	}
	if len(apiSeen) != scaleFiles {
		t.Errorf("the API listed %d files, want %d", len(apiSeen), scaleFiles)
	}
	if status, b := api.do(t, http.MethodGet, "/v1/conversations/"+conv+"/files?cursor=garbage", "", nil); status != http.StatusBadRequest || !strings.Contains(string(b), "cursor") {
		t.Errorf("GET with a garbage cursor: %d %s, want 400 naming the cursor", status, b)
	}

	// A prefix narrows the listing: sql-29xx is a hundred pages.
	narrow, _ := callTool[pagedFiles](t, s, "list_files", map[string]any{"conversation_id": conv, "prefix": "sql-29", "limit": 500})
	if narrow.Total != 100 || len(narrow.Files) == 0 || !strings.HasPrefix(narrow.Files[0].FileName, "sql-29") {
		t.Errorf("prefix sql-29: total %d, %d files", narrow.Total, len(narrow.Files))
	}
}
