package docs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// pageAll reads every page of q, limit files at a time, and returns the
// files in order; each page must report the same total.
func pageAll(t *testing.T, s *testStore, q FileQuery) ([]File, int) {
	t.Helper()
	var all []File
	total := -1
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("no end to the pages of %+v", q)
		}
		p, err := s.ListFilesPage(context.Background(), q)
		if err != nil {
			t.Fatalf("ListFilesPage(%+v): %v", q, err)
		}
		if total >= 0 && p.Total != total {
			t.Errorf("page %d says %d files in all, page 0 said %d", pages, p.Total, total)
		}
		total = p.Total
		if limit := cmp.Or(q.Limit, DefaultListLimit); len(p.Files) > limit {
			t.Fatalf("page of %d files for limit %d", len(p.Files), limit)
		}
		all = append(all, p.Files...)
		if p.Next == "" {
			return all, total
		}
		if len(p.Files) == 0 {
			t.Fatalf("an empty page with a next cursor")
		}
		q.Cursor = p.Next
	}
}

func ids(files []File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.ID
	}
	return out
}

// TestListFilesPage pages through a conversation's files in every
// selection: newest first, each file once, the total on every page, files
// uploaded in one transaction (the same created_at) split across pages.
func TestListFilesPage(t *testing.T) {
	t.Parallel()
	// What waiting accepts stays processing: its embedder never answers
	// (until the test ends), and s's workers look for files once an hour.
	s, url := newStore(t, IngestOptions{PollInterval: time.Hour})
	ctx := context.Background()
	gate := newGatedEmbedder(t)
	t.Cleanup(func() { close(gate.release) })
	waiting := openStoreWith(t, url, gate, Options{}, IngestOptions{PollInterval: time.Hour, ShutdownTimeout: time.Millisecond})
	const conv = "paged"
	for i := range 12 {
		name := fmt.Sprintf("report-%02d.txt", i)
		if i%3 == 0 {
			name = fmt.Sprintf("notes-%02d.md", i)
		}
		if _, err := s.Ingest(ctx, conv, name, "", []byte(prose(uint64(100+i), 40))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		// No text: failed.
		if _, err := s.Ingest(ctx, conv, fmt.Sprintf("empty-%d.txt", i), "", []byte(strings.Repeat(" ", i+1))); !errors.Is(err, ErrProcessing) {
			t.Fatalf("empty file: %v", err)
		}
	}
	if _, err := s.IngestUpload(ctx, Upload{ConversationID: conv, FileName: "page.md", Source: "https://example.org/manual/intro",
		Data: []byte(prose(7, 40))}); err != nil {
		t.Fatal(err)
	}
	// Five files in one transaction share their created_at.
	ticket, err := waiting.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	var ups []Upload
	for i := range 5 {
		ups = append(ups, Upload{ConversationID: conv, FileName: fmt.Sprintf("batch-%d.txt", i), Data: []byte(prose(uint64(200+i), 30))})
	}
	if _, errs := waiting.SubmitFiles(ctx, ticket, ups); slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		t.Fatal(errs)
	}
	ticket.Release()
	// Another conversation's files are never listed.
	if _, err := s.Ingest(ctx, "other", "report-x.txt", "", []byte(prose(9, 40))); err != nil {
		t.Fatal(err)
	}

	oldest, err := s.ListFiles(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	newest := slices.Clone(oldest)
	slices.Reverse(newest)
	if len(newest) != 21 {
		t.Fatalf("%d files stored, want 21", len(newest))
	}
	tied := 0
	for _, f := range newest {
		if strings.HasPrefix(f.FileName, "batch-") && f.CreatedAt.Equal(newest[0].CreatedAt) {
			tied++
		}
	}
	if tied != 5 {
		t.Fatalf("%d files of the batch share the newest created_at, want 5: the ties are not tested", tied)
	}
	keep := func(ok func(File) bool) []string {
		var out []string
		for _, f := range newest {
			if ok(f) {
				out = append(out, f.ID)
			}
		}
		return out
	}
	tests := []struct {
		name string
		q    FileQuery
		want []string
	}{
		{"every file, one a page", FileQuery{Limit: 1}, ids(newest)},
		{"every file, 4 a page", FileQuery{Limit: 4}, ids(newest)},
		{"every file, default limit", FileQuery{}, ids(newest)},
		{"ready", FileQuery{Status: StatusReady, Limit: 5}, keep(func(f File) bool { return f.Status == StatusReady })},
		{"failed", FileQuery{Status: StatusFailed, Limit: 2}, keep(func(f File) bool { return f.Status == StatusFailed })},
		{"processing", FileQuery{Status: StatusProcessing, Limit: 2}, keep(func(f File) bool { return f.Status == StatusProcessing })},
		{"name prefix", FileQuery{Prefix: "report-", Limit: 3}, keep(func(f File) bool { return strings.HasPrefix(f.FileName, "report-") })},
		{"source prefix", FileQuery{Prefix: "https://example.org/manual/", Limit: 3}, keep(func(f File) bool { return f.Source != "" })},
		{"prefix and status", FileQuery{Prefix: "notes-", Status: StatusReady, Limit: 3}, keep(func(f File) bool { return strings.HasPrefix(f.FileName, "notes-") })},
		{"a prefix is case-sensitive", FileQuery{Prefix: "REPORT-"}, nil},
		{"no match", FileQuery{Status: StatusFailed, Prefix: "report-"}, nil},
	}
	for _, tt := range tests {
		tt.q.ConversationID = conv
		got, total := pageAll(t, s, tt.q)
		if !slices.Equal(ids(got), tt.want) || total != len(tt.want) {
			t.Errorf("%s: %d files (total %d) %v, want %d newest first %v", tt.name, len(got), total, ids(got), len(tt.want), tt.want)
		}
	}
	if got, total := pageAll(t, s, FileQuery{ConversationID: "unknown", Limit: 3}); len(got) != 0 || total != 0 {
		t.Errorf("unknown conversation: %d files, total %d", len(got), total)
	}
	// The tied batch is spread over pages of one, and the last page says
	// there is no other.
	if first, _ := s.ListFilesPage(ctx, FileQuery{ConversationID: conv, Limit: 21}); first.Next != "" || len(first.Files) != 21 {
		t.Errorf("a page holding every file: %d files, next %q", len(first.Files), first.Next)
	}
}

// TestListFilesPageConcurrentWrites pages through a conversation while
// files are uploaded to it and deleted from it: every file that was there
// at the start and not deleted is listed once, none twice.
func TestListFilesPageConcurrentWrites(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	const conv = "moving"
	var before []File
	for i := range 30 {
		f, err := s.Ingest(ctx, conv, fmt.Sprintf("f%02d.txt", i), "", []byte(prose(uint64(300+i), 20)))
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, f)
	}
	seen := map[string]int{}
	q := FileQuery{ConversationID: conv, Limit: 4}
	deleted := map[string]bool{}
	for page := 0; ; page++ {
		p, err := s.ListFilesPage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range p.Files {
			seen[f.ID]++
		}
		// Between pages: two new files, and one old file not yet listed
		// deleted.
		for j := range 2 {
			if _, err := s.Ingest(ctx, conv, fmt.Sprintf("new-%d-%d.txt", page, j), "", []byte(prose(uint64(1000+page*2+j), 20))); err != nil {
				t.Fatal(err)
			}
		}
		if page == 1 {
			victim := before[3]
			if err := s.DeleteFile(ctx, victim.ID); err != nil {
				t.Fatal(err)
			}
			deleted[victim.ID] = true
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("file %s listed %d times", id, n)
		}
	}
	for _, f := range before {
		if !deleted[f.ID] && seen[f.ID] != 1 {
			t.Errorf("file %s (%s), there from the start, listed %d times", f.ID, f.FileName, seen[f.ID])
		}
		if deleted[f.ID] && seen[f.ID] != 0 {
			t.Errorf("file %s listed after it was deleted", f.FileName)
		}
	}
}

// TestListFilesPageRefuses checks the arguments a page refuses, each with
// ErrInvalidArgument and a message saying what to send.
func TestListFilesPageRefuses(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Ingest(ctx, "c", fmt.Sprintf("%d.txt", i), "", []byte(prose(uint64(i), 20))); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.ListFilesPage(ctx, FileQuery{ConversationID: "c", Limit: 1})
	if err != nil || first.Next == "" {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	convs, err := s.ListConversationsPage(ctx, ConversationQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Only one conversation: no next page; a cursor of that listing still
	// exists for the check.
	convCursor := convs.CursorAfter(0)
	tests := []struct {
		name string
		q    FileQuery
		says string
	}{
		{"garbage cursor", FileQuery{ConversationID: "c", Cursor: "not a cursor!"}, "not one this server returned"},
		{"truncated cursor", FileQuery{ConversationID: "c", Cursor: first.Next[:10]}, "not one this server returned"},
		{"huge cursor", FileQuery{ConversationID: "c", Cursor: strings.Repeat("A", 5000)}, "more than any cursor"},
		{"a conversations cursor", FileQuery{ConversationID: "c", Cursor: convCursor}, "another listing"},
		{"another status", FileQuery{ConversationID: "c", Status: StatusReady, Cursor: first.Next}, "another selection"},
		{"another conversation", FileQuery{ConversationID: "d", Cursor: first.Next}, "another selection"},
		{"another prefix", FileQuery{ConversationID: "c", Prefix: "1", Cursor: first.Next}, "another selection"},
		{"unknown status", FileQuery{ConversationID: "c", Status: "done"}, "send processing, ready or failed"},
		{"limit too large", FileQuery{ConversationID: "c", Limit: MaxListLimit + 1}, "send 1 to 500"},
		{"negative limit", FileQuery{ConversationID: "c", Limit: -1}, "send 1 to 500"},
		{"prefix with NUL", FileQuery{ConversationID: "c", Prefix: "a\x00b"}, "not valid UTF-8"},
		{"prefix not UTF-8", FileQuery{ConversationID: "c", Prefix: "a\xffb"}, "not valid UTF-8"},
		{"long prefix", FileQuery{ConversationID: "c", Prefix: strings.Repeat("a", MaxPrefixLen+1)}, "at most 1024"},
		{"no conversation", FileQuery{Limit: 1}, "empty conversation id"},
	}
	for _, tt := range tests {
		_, err := s.ListFilesPage(ctx, tt.q)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v, want ErrInvalidArgument saying %q", tt.name, err, tt.says)
		}
	}
	// The cursor works with its own selection.
	if next, err := s.ListFilesPage(ctx, FileQuery{ConversationID: "c", Limit: 1, Cursor: first.Next}); err != nil || len(next.Files) != 1 || next.Files[0].ID == first.Files[0].ID {
		t.Errorf("second page: %+v, %v", next, err)
	}
}

// TestListConversationsPage pages through the conversations holding files,
// with and without a scope, and checks the cursors it refuses.
func TestListConversationsPage(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, IngestOptions{})
	ctx := context.Background()
	var want []string
	for i := range 7 {
		conv := fmt.Sprintf("conv-%d", i)
		if _, err := s.Ingest(ctx, conv, "a.txt", "", []byte(prose(uint64(400+i), 20))); err != nil {
			t.Fatal(err)
		}
		want = append([]string{conv}, want...)
		time.Sleep(2 * time.Millisecond)
	}
	readAll := func(q ConversationQuery) ([]string, int) {
		t.Helper()
		var got []string
		total := -1
		for range 100 {
			p, err := s.ListConversationsPage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if total >= 0 && p.Total != total {
				t.Errorf("totals differ between pages: %d, %d", total, p.Total)
			}
			total = p.Total
			for _, c := range p.Conversations {
				got = append(got, c.ID)
			}
			if p.Next == "" {
				return got, total
			}
			q.Cursor = p.Next
		}
		t.Fatal("no end to the pages")
		return nil, 0
	}
	for _, limit := range []int{1, 3, 0} {
		if got, total := readAll(ConversationQuery{Limit: limit}); !slices.Equal(got, want) || total != 7 {
			t.Errorf("limit %d: %v (total %d), want %v", limit, got, total, want)
		}
	}
	only := []string{"conv-1", "conv-4", "conv-6", "none"}
	if got, total := readAll(ConversationQuery{Only: only, Limit: 2}); !slices.Equal(got, []string{"conv-6", "conv-4", "conv-1"}) || total != 3 {
		t.Errorf("scoped: %v (total %d)", got, total)
	}
	if got, total := readAll(ConversationQuery{Only: []string{}}); len(got) != 0 || total != 0 {
		t.Errorf("empty scope: %v (total %d)", got, total)
	}
	files, err := s.ListFilesPage(ctx, FileQuery{ConversationID: "conv-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"garbage", files.CursorAfter(0)} {
		if _, err := s.ListConversationsPage(ctx, ConversationQuery{Cursor: c}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("cursor %q: %v, want ErrInvalidArgument", c, err)
		}
	}
	if _, err := s.ListConversationsPage(ctx, ConversationQuery{Limit: MaxListLimit + 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("limit %d: %v", MaxListLimit+1, err)
	}
}
