package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkPages measures the listing pages whole, from the request to the
// last byte of HTML, through the server's HTTP handler and a real
// database: the conversations of a database of 10,000 conversations, and
// the files of a conversation of 100,000 (the first page, a page deep in
// it, and its failed files alone). Each page is a page of the store's
// keyset listings, so its cost does not grow with the database.
//
//	go test -run '^$' -bench Pages -benchtime 200x ./ui
func BenchmarkPages(b *testing.B) {
	s := newStack(b, "")
	ctx := context.Background()
	seed := []string{
		// 10,000 conversations of one file each, and c-big's 100,000 files,
		// every 50th failed, written as ingestion leaves them.
		`INSERT INTO files (conversation_id, file_name, mime_type, size_bytes, sha256, status, chunk_count, page_count, embedding_model, created_at, updated_at)
		 SELECT 'c' || lpad(i::text, 5, '0'), 'notes.txt', 'text/plain', 100 + i, md5(i::text), 'ready', 1, 0, 'm',
		        now() - make_interval(secs => i), now()
		 FROM generate_series(1, 10000) i`,
		`INSERT INTO files (conversation_id, file_name, mime_type, size_bytes, sha256, status, error, chunk_count, page_count, embedding_model, created_at, updated_at)
		 SELECT 'c-big', 'report-' || i || '.pdf', 'application/pdf', 1000 + i, md5('big' || i),
		        CASE WHEN i % 50 = 0 THEN 'failed' ELSE 'ready' END,
		        CASE WHEN i % 50 = 0 THEN 'corrupt or unreadable PDF' ELSE '' END,
		        CASE WHEN i % 50 = 0 THEN 0 ELSE 12 END, 8, 'm', now() - make_interval(secs => i), now()
		 FROM generate_series(1, 100000) i`,
		`INSERT INTO conversation_stats (conversation_id, chunk_count, ready_files, failed_files, last_upload_at, generation, epoch)
		 SELECT conversation_id, sum(chunk_count), count(*) FILTER (WHERE status = 'ready'), count(*) FILTER (WHERE status = 'failed'),
		        max(created_at), nextval('conversation_generation_seq'), currval('conversation_generation_seq')
		 FROM files GROUP BY conversation_id`,
		`ANALYZE`,
	}
	for _, q := range seed {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	h := s.http.Config.Handler
	get := func(b *testing.B, path string) string {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = "127.0.0.1:1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	// A cursor 40,000 files deep: the last page's of a listing read to
	// there.
	deep := "/ui/conversations/c-big"
	for range 800 {
		body := get(b, deep)
		i := strings.Index(body, `rel="next"`)
		j := strings.LastIndex(body[:i], `href="`)
		deep = strings.ReplaceAll(body[j+len(`href="`):i-2], "&amp;", "&")
	}
	pages := []struct{ name, path, want string }{
		{"conversations-10k", "/ui/conversations", "10001 conversations"},
		{"conversation-100k", "/ui/conversations/c-big", "100000 files"},
		{"conversation-100k-deep", deep, "report-40001.pdf"},
		{"conversation-100k-failed", "/ui/conversations/c-big?status=failed", "2000 files failed"},
	}
	for _, p := range pages {
		if body := get(b, p.path); !strings.Contains(body, p.want) {
			b.Fatalf("%s lacks %q", p.path, p.want)
		}
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				get(b, p.path)
			}
		})
	}
}
