package docs

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestListAndDeleteConversations(t *testing.T) {
	t.Parallel()
	s, url := newStore(t, IngestOptions{})
	ctx := context.Background()
	waiting := openStoreWith(t, url, s.Embedder(), Options{}, IngestOptions{PollInterval: time.Hour})
	// Each conversation gets its files in turn, so their last uploads are
	// ordered a, b, c from oldest to newest.
	upload := func(conv string, seed uint64, data []byte) File {
		t.Helper()
		if data == nil {
			data = []byte(prose(seed, 300) + " zeppelin")
		}
		f, err := s.Ingest(ctx, conv, fmt.Sprintf("%d.txt", seed), "", data)
		if err != nil && !errors.Is(err, ErrProcessing) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		return f
	}
	a1 := upload("conv-a", 31, nil)
	upload("conv-a", 32, nil)
	upload("conv-a", 33, []byte(" \n\t ")) // fails: no text
	b1 := upload("conv-b", 34, nil)
	c1 := upload("conv-c", 35, nil)
	// A processing file, as one accepted and not yet processed: workers
	// of the store look for files once an hour, and start with none.
	if _, err := waiting.Submit(ctx, "conv-c", "later.txt", "", []byte("later")); err != nil {
		t.Fatal(err)
	}

	all, err := s.ListConversations(ctx, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []Conversation{
		{ID: "conv-c", Files: 2, Ready: 1, Processing: 1, Chunks: c1.ChunkCount},
		{ID: "conv-b", Files: 1, Ready: 1, Chunks: b1.ChunkCount},
		{ID: "conv-a", Files: 3, Ready: 2, Failed: 1},
	}
	files, err := s.ListFiles(ctx, "conv-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		want[2].Chunks += f.ChunkCount
	}
	if len(all) != len(want) {
		t.Fatalf("ListConversations = %+v; want %d conversations", all, len(want))
	}
	for i, c := range all {
		if c.LastUpload.IsZero() {
			t.Errorf("conversation %s has no last upload time", c.ID)
		}
		c.LastUpload = time.Time{}
		if c != want[i] {
			t.Errorf("conversation %d = %+v, want %+v", i, c, want[i])
		}
	}
	if all[1].LastUpload.After(all[0].LastUpload) || all[2].LastUpload.After(all[1].LastUpload) {
		t.Errorf("conversations not ordered by last upload: %+v", all)
	}

	tests := []struct {
		name  string
		only  []string
		limit int
		want  []string
	}{
		{"limit", nil, 2, []string{"conv-c", "conv-b"}},
		{"scoped", []string{"conv-a", "conv-b", "unknown"}, 10, []string{"conv-b", "conv-a"}},
		{"scoped to none", []string{}, 10, nil},
	}
	for _, tt := range tests {
		got, err := s.ListConversations(ctx, tt.only, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range got {
			ids = append(ids, c.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(tt.want) {
			t.Errorf("%s: conversations %v, want %v", tt.name, ids, tt.want)
		}
	}
	for _, limit := range []int{0, -1, MaxConversations + 1} {
		if _, err := s.ListConversations(ctx, nil, limit); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("limit %d: %v; want ErrInvalidArgument", limit, err)
		}
	}

	// A search fills this process's keyword index of the conversation.
	if hits, err := s.Search(ctx, Query{Text: "zeppelin", ConversationID: "conv-a", Mode: Keyword}); err != nil || len(hits) == 0 {
		t.Fatalf("search before deletion = %d hits, %v", len(hits), err)
	}
	n, err := s.DeleteConversation(ctx, " conv-a ")
	if err != nil || n != 3 {
		t.Fatalf("DeleteConversation = %d, %v; want 3 files", n, err)
	}
	if _, err := s.GetFile(ctx, a1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFile of a deleted conversation's file = %v; want ErrNotFound", err)
	}
	for _, mode := range Modes() {
		if hits, err := s.Search(ctx, Query{Text: "zeppelin", ConversationID: "conv-a", Mode: mode}); err != nil || len(hits) != 0 {
			t.Errorf("%s search after deletion = %d hits, %v; want none", mode, len(hits), err)
		}
	}
	if n, err := s.DeleteConversation(ctx, "conv-a"); err != nil || n != 0 {
		t.Errorf("second DeleteConversation = %d, %v; want 0, nil", n, err)
	}
	if _, err := s.DeleteConversation(ctx, " "); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("DeleteConversation of an empty id = %v; want ErrInvalidArgument", err)
	}
	left, err := s.ListConversations(ctx, nil, 10)
	if err != nil || len(left) != 2 || left[0].ID != "conv-c" || left[1].ID != "conv-b" {
		t.Errorf("after deletion ListConversations = %+v, %v; want conv-c and conv-b", left, err)
	}
	// The conversation can be filled again at once, before its rows are
	// purged, and is searchable.
	again := upload("conv-a", 31, nil)
	hits, err := s.Search(ctx, Query{Text: "zeppelin", ConversationID: "conv-a", Mode: Keyword})
	if err != nil || len(hits) == 0 {
		t.Fatalf("search after a new upload = %d hits, %v", len(hits), err)
	}
	for _, h := range hits {
		if h.FileID != again.ID {
			t.Errorf("search after a new upload found file %s; only %s is left", h.FileID, again.ID)
		}
	}
	files, err = s.ListFiles(ctx, "conv-a")
	if err != nil || len(files) != 1 || files[0].ID != again.ID {
		t.Errorf("ListFiles of the conversation filled again = %+v, %v; want only %s", files, err, again.ID)
	}
	// The purge deletes the deleted conversation's rows and nothing else.
	if err := s.Purge(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := countChunks(t, s.Pool(), "conversation_id = 'conv-a' AND file_id <> $1", again.ID); n != 0 {
		t.Errorf("%d chunks of the deleted conversation left after the purge", n)
	}
	var purges int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM conversation_purges`).Scan(&purges); err != nil || purges != 0 {
		t.Errorf("%d purges left, %v", purges, err)
	}
	checkStats(t, s.Pool(), "conv-a")
	hits, err = s.Search(ctx, Query{Text: "zeppelin", ConversationID: "conv-a", Mode: Keyword})
	if err != nil || len(hits) == 0 || hits[0].FileID != again.ID {
		t.Errorf("search after the purge = %+v, %v; want the new file", hits, err)
	}
}
