package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/fetch"
)

// ingestFiles stores n small text files in conv, synchronously, named by
// name(i), and returns them oldest first.
func (h *docsHarness) ingestFiles(t *testing.T, conv string, n int, name func(i int) string) []docs.File {
	t.Helper()
	var out []docs.File
	for i := range n {
		f, err := h.ingest.Ingest(context.Background(), conv, name(i), "", []byte(fmt.Sprintf("File %d of the listing test, about zeppelins and airships.", i)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// TestListFilesPages pages through a conversation of 120 files with
// list_files: 50 files a page by default, newest first, the total on
// every page, each file once, filters by status and prefix, a text that
// summarises the page instead of repeating it, and bad cursors refused.
func TestListFilesPages(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	files := h.ingestFiles(t, "big", 120, func(i int) string { return fmt.Sprintf("chapter-%03d.txt", i) })
	if _, err := h.ingest.Ingest(context.Background(), "big", "empty.txt", "", []byte("   ")); err == nil {
		t.Fatal("an empty file was not failed")
	}
	var newest []string
	for _, f := range files {
		newest = append([]string{f.ID}, newest...)
	}

	var got []string
	args := map[string]any{"conversation_id": "big", "status": "ready"}
	for page := 0; ; page++ {
		res := h.call(t, "list_files", args)
		out := decode[ListFilesOutput](t, res)
		if out.Total != 120 || len(out.Files) > docs.DefaultListLimit {
			t.Fatalf("page %d: %d files, total %d; want at most %d of 120", page, len(out.Files), out.Total, docs.DefaultListLimit)
		}
		text := textOf(res)
		for _, f := range out.Files {
			got = append(got, f.ID)
			// The text names the files, and leaves ids and types to the
			// structured content.
			if !strings.Contains(text, f.FileName) || strings.Contains(text, f.ID) || strings.Contains(text, "text/plain") {
				t.Fatalf("page %d text does not summarise: %s", page, text)
			}
		}
		if !strings.Contains(text, "holds 120 ready files") {
			t.Errorf("page %d text lacks the total: %.200s", page, text)
		}
		if out.NextCursor == "" {
			if !strings.Contains(text, "last of them") {
				t.Errorf("last page text does not say so: %s", text)
			}
			break
		}
		if !strings.Contains(text, out.NextCursor) {
			t.Errorf("page %d text does not give the cursor", page)
		}
		args["cursor"] = out.NextCursor
	}
	if !slices.Equal(got, newest) {
		t.Errorf("paged %d files, want the 120 newest first", len(got))
	}

	all := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": "big", "limit": 500}))
	if len(all.Files) != 121 || all.Total != 121 || all.NextCursor != "" {
		t.Errorf("limit 500: %d files, total %d, next %q; want all 121", len(all.Files), all.Total, all.NextCursor)
	}
	failed := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": "big", "status": "failed"}))
	if len(failed.Files) != 1 || failed.Files[0].FileName != "empty.txt" || failed.Total != 1 {
		t.Errorf("failed files: %+v", failed)
	}
	prefixed := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": "big", "prefix": "chapter-11"}))
	if len(prefixed.Files) != 10 || prefixed.Total != 10 || prefixed.Files[0].FileName != "chapter-119.txt" {
		t.Errorf("prefix chapter-11: %d files, total %d", len(prefixed.Files), prefixed.Total)
	}
	if text := textOf(h.call(t, "list_files", map[string]any{"conversation_id": "nobody"})); !strings.Contains(text, "holds no files") {
		t.Errorf("unknown conversation: %s", text)
	}

	first := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": "big", "limit": 2}))
	tests := []struct {
		name string
		args map[string]any
		says string
	}{
		{"garbage cursor", map[string]any{"conversation_id": "big", "cursor": "garbage"}, "cursor \"garbage\" is not one this server returned"},
		{"another selection", map[string]any{"conversation_id": "big", "cursor": first.NextCursor, "status": "failed"}, "another selection"},
		{"another conversation", map[string]any{"conversation_id": "other", "cursor": first.NextCursor}, "another selection"},
		{"limit 0", map[string]any{"conversation_id": "big", "limit": 0}, "send 1 to 500"},
		{"limit 501", map[string]any{"conversation_id": "big", "limit": 501}, "501"},
		{"unknown status", map[string]any{"conversation_id": "big", "status": "done"}, "status"},
	}
	for _, tt := range tests {
		te := toolErr(t, h.call(t, "list_files", tt.args))
		if te.Code != CodeToolError || te.Retryable || !strings.Contains(te.Message, "invalid arguments") || !strings.Contains(te.Message, tt.says) {
			t.Errorf("%s: %+v, want invalid arguments saying %q", tt.name, te, tt.says)
		}
	}
}

// TestUploadAPIListPages pages GET /v1/conversations/{id}/files as
// list_files pages, and refuses bad parameters with 400.
func TestUploadAPIListPages(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	files := h.ingestFiles(t, "api", 23, func(i int) string { return fmt.Sprintf("f%02d.txt", i) })
	get := func(query string) (int, ListFilesOutput, string) {
		t.Helper()
		resp, err := http.Get(h.http.URL + "/v1/conversations/api/files" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out ListFilesOutput
		_ = json.Unmarshal(b, &out)
		return resp.StatusCode, out, string(b)
	}
	var got []string
	query := "?limit=10"
	for range 10 {
		status, out, body := get(query)
		if status != http.StatusOK || out.Total != 23 || len(out.Files) > 10 {
			t.Fatalf("GET %s: %d %s", query, status, body)
		}
		for _, f := range out.Files {
			got = append(got, f.FileName)
		}
		if out.NextCursor == "" {
			break
		}
		query = "?limit=10&cursor=" + url.QueryEscape(out.NextCursor)
	}
	var want []string
	for i := len(files) - 1; i >= 0; i-- {
		want = append(want, files[i].FileName)
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged %v, want %v", got, want)
	}
	if status, out, _ := get(""); status != http.StatusOK || len(out.Files) != 23 || out.NextCursor != "" {
		t.Errorf("no parameters: %d, %d files", status, len(out.Files))
	}
	if status, out, _ := get("?prefix=f1&status=ready"); status != http.StatusOK || out.Total != 10 {
		t.Errorf("prefix f1: %d, total %d", status, out.Total)
	}
	for _, bad := range []string{"?cursor=garbage", "?limit=abc", "?limit=0", "?limit=501", "?status=done", "?page=2"} {
		status, _, body := get(bad)
		var e envelope
		if status != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil || e.Error == nil || !strings.Contains(e.Error.Message, "invalid arguments") {
			t.Errorf("GET %s: %d %s, want 400 invalid arguments", bad, status, body)
		}
	}
}

// TestListConversationsPages pages list_conversations, within a key's
// scope too.
func TestListConversationsPages(t *testing.T) {
	h := newDocsHarness(t, nil, nil)
	var want []string
	for i := range 7 {
		conv := fmt.Sprintf("conv-%d", i)
		h.ingestFiles(t, conv, 1, func(int) string { return "a.txt" })
		want = append([]string{conv}, want...)
	}
	var got []string
	args := map[string]any{"limit": 3}
	for range 10 {
		res := h.call(t, "list_conversations", args)
		out := decode[ListConversationsOutput](t, res)
		if out.Total != 7 || len(out.Conversations) > 3 || !strings.Contains(textOf(res), "7 conversations hold files") {
			t.Fatalf("page: %+v\n%s", out, textOf(res))
		}
		for _, c := range out.Conversations {
			got = append(got, c.ID)
		}
		if out.NextCursor == "" {
			break
		}
		args["cursor"] = out.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged %v, want %v", got, want)
	}
	te := toolErr(t, h.call(t, "list_conversations", map[string]any{"cursor": "garbage"}))
	if !strings.Contains(te.Message, "invalid arguments") || !strings.Contains(te.Message, "list_conversations") {
		t.Errorf("garbage cursor: %+v", te)
	}
}

// resultSizes checks that a result stays within limit bytes, its text and
// its structured content each, and returns its text.
func resultSizes(t *testing.T, what string, res *mcp.CallToolResult, limit int) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s failed: %s", what, textOf(res))
	}
	text := textOf(res)
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if len(text) > limit || len(raw) > limit {
		t.Errorf("%s: text %d bytes, structured content %d bytes; the limit is %d", what, len(text), len(raw), limit)
	}
	return text
}

// TestToolResultLimit sets MCP_tool_result_max_kb to its least, 8, and
// asks every tool for more than that: each result stays within 8 KB, text
// and structured content alike, and says how to get the rest, which
// following its advice returns.
func TestToolResultLimit(t *testing.T) {
	const limit = config.MinToolResultKB << 10
	site := pages(t)
	h := newDocsHarness(t, func(c *config.Config) { c.ToolResultMaxKB = config.MinToolResultKB }, func(d *Deps) {
		f, err := fetch.New(fetch.Options{AllowPrivate: true})
		if err != nil {
			t.Fatal(err)
		}
		d.Fetch = f
	})
	ctx := context.Background()
	// Files with long names, so that a page of 500 does not fit.
	h.ingestFiles(t, "many", 120, func(i int) string {
		return fmt.Sprintf("%03d-%s.txt", i, strings.Repeat("a-rather-long-file-name-", 4))
	})
	var long strings.Builder
	for i := range 80 {
		fmt.Fprintf(&long, "Paragraph %d about the zeppelin hangar: %s\n\n", i, strings.Repeat("the zeppelin hangar held airships and their crews ", 20))
	}
	if _, err := h.ingest.Ingest(ctx, "long", "hangar.md", "", []byte(long.String())); err != nil {
		t.Fatal(err)
	}

	t.Run("list_files", func(t *testing.T) {
		seen := map[string]bool{}
		args := map[string]any{"conversation_id": "many", "limit": 500}
		for page := 0; ; page++ {
			res := h.call(t, "list_files", args)
			text := resultSizes(t, "list_files", res, limit)
			out := decode[ListFilesOutput](t, res)
			if page == 0 && (len(out.Files) == 120 || !strings.Contains(text, "MCP_tool_result_max_kb") || out.NextCursor == "") {
				t.Fatalf("a page of 120 long names was not cut: %d files, next %q\n%s", len(out.Files), out.NextCursor, text)
			}
			for _, f := range out.Files {
				if seen[f.ID] {
					t.Fatalf("file %s listed twice", f.FileName)
				}
				seen[f.ID] = true
			}
			if out.NextCursor == "" {
				break
			}
			args["cursor"] = out.NextCursor
		}
		if len(seen) != 120 {
			t.Errorf("the cut pages listed %d files, want 120", len(seen))
		}
	})
	t.Run("search_docs", func(t *testing.T) {
		res := h.call(t, "search_docs", map[string]any{"conversation_id": "long", "query": "zeppelin hangar", "top_k": 50})
		text := resultSizes(t, "search_docs", res, limit)
		out := decode[SearchDocsOutput](t, res)
		if len(out.Chunks) == 0 || len(out.MoreChunkIDs) == 0 || !strings.Contains(text, out.MoreChunkIDs[0]) || !strings.Contains(text, "MCP_tool_result_max_kb") {
			t.Fatalf("search of 50 passages: %d passages, %d left out\n%s", len(out.Chunks), len(out.MoreChunkIDs), text)
		}
		// What was left out opens with get_chunk.
		c := decode[GetChunkOutput](t, h.call(t, "get_chunk", map[string]any{"chunk_id": out.MoreChunkIDs[0]}))
		if !strings.Contains(c.Content, "zeppelin") {
			t.Errorf("a passage left out: %q", c.Content)
		}
	})
	t.Run("get_chunk", func(t *testing.T) {
		hits := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"conversation_id": "long", "query": "Paragraph 40", "top_k": 1}))
		res := h.call(t, "get_chunk", map[string]any{"chunk_id": hits.Chunks[0].ChunkID, "before": 5, "after": 5})
		text := resultSizes(t, "get_chunk", res, limit)
		out := decode[GetChunkOutput](t, res)
		if !out.Truncated || len(out.ChunkIDs) != 11 || !strings.Contains(text, "mcpsearch://conversations/long/files/") {
			t.Errorf("eleven chunks: truncated %v, %d ids\n%s", out.Truncated, len(out.ChunkIDs), text[max(0, len(text)-400):])
		}
	})
	t.Run("fetch_url", func(t *testing.T) {
		var whole strings.Builder
		start := 0
		for calls := 0; ; calls++ {
			res := h.call(t, "fetch_url", map[string]any{"url": site.URL + "/long", "max_length": config.MaxFetchLength, "start_index": start})
			resultSizes(t, "fetch_url", res, limit)
			out := decode[FetchURLOutput](t, res)
			whole.WriteString(out.Content)
			if out.NextStartIndex == nil {
				if calls == 0 {
					t.Fatalf("a long page came whole in one result of %d characters", len(out.Content))
				}
				break
			}
			start = *out.NextStartIndex
		}
		full := decode[FetchURLOutput](t, newHarnessDeps(t, nil, func(d *Deps) { d.Fetch = h.srv.deps.Fetch }).call(t, "fetch_url",
			map[string]any{"url": site.URL + "/long", "max_length": config.MaxFetchLength}))
		if whole.String() != full.Content {
			t.Errorf("the parts join into %d characters, the page has %d", whole.Len(), len(full.Content))
		}
	})
	t.Run("web_search", func(t *testing.T) {
		q := strings.Repeat("zeppelin ", 150)
		res := h.call(t, "web_search", map[string]any{"query": q, "max_results": 10})
		text := resultSizes(t, "web_search", res, limit)
		out := decode[WebSearchOutput](t, res)
		if len(out.Results) == 0 || len(out.Results) == 10 || !strings.Contains(text, "MCP_tool_result_max_kb") {
			t.Errorf("ten results of a long query: %d kept\n%s", len(out.Results), text[max(0, len(text)-300):])
		}
	})
}

// TestCapResultText checks the last guard of the limit: a text longer than
// the limit is cut, with a note naming the tool's way to the rest.
func TestCapResultText(t *testing.T) {
	l := resultLimit(8 << 10)
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("é", 10_000)}}}
	l.capResult(slog.New(slog.DiscardHandler), "some_tool", "call again with less", res, struct{}{})
	text := textOf(res)
	if len(text) > int(l) || !strings.HasSuffix(text, "MCP_tool_result_max_kb): call again with less]") || !strings.HasPrefix(text, "éé") {
		t.Errorf("cut text: %d bytes, ends %q", len(text), text[max(0, len(text)-80):])
	}
	short := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "short"}}}
	l.capResult(slog.New(slog.DiscardHandler), "some_tool", "", short, struct{}{})
	if textOf(short) != "short" {
		t.Errorf("a short text was changed: %q", textOf(short))
	}
}
