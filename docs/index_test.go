package docs

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

func TestIndexDue(t *testing.T) {
	t.Parallel()
	p := IndexPolicy{FreshChunks: 100, Settle: 5 * time.Second}
	tests := []struct {
		name string
		st   IndexState
		want bool
	}{
		{"no large conversation has enough fresh chunks", IndexState{Dimensions: 384, Fresh: 5000, FreshLarge: 99, Idle: time.Hour}, false},
		{"writes paused", IndexState{Dimensions: 384, Indexed: 10000, Fresh: 100, FreshLarge: 100, Idle: 5 * time.Second}, true},
		{"writes going on", IndexState{Dimensions: 384, Indexed: 10000, Fresh: 100, FreshLarge: 100, Idle: time.Second}, false},
		{"writes going on, fresh outnumber indexed", IndexState{Dimensions: 384, Indexed: 1000, Fresh: 1000, FreshLarge: 100}, true},
		{"no index yet, writes going on", IndexState{Dimensions: 384, Fresh: 150, FreshLarge: 150}, true},
		{"too many dimensions to index", IndexState{Dimensions: 4001, Fresh: 1e6, FreshLarge: 1e6, Idle: time.Hour}, false},
	}
	for _, tt := range tests {
		if got := tt.st.due(p); got != tt.want {
			t.Errorf("%s: due = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestVectorIndexFreshChunks has one store build the vector index in the
// background and another store on the same database add a file after it:
// both must rank the conversation as an exact search does, the new file
// included, before any rebuild; a rebuild then covers it and replaces the
// index, and what an interrupted build left behind is dropped.
func TestVectorIndexFreshChunks(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	emb, _ := embed.NewLocal(384)
	opts := IngestOptions{Chunk: chunk.Options{Size: 200, Overlap: 0}}
	builder := opts
	builder.Index = IndexPolicy{FreshChunks: 20, Settle: 50 * time.Millisecond, Interval: 50 * time.Millisecond}
	// Conversations over 20 chunks are ranked through the index.
	sopts := Options{exactChunks: 20}
	a := openStoreWith(t, url, emb, sopts, builder)
	opts.Index.Interval = -1 // b never builds on its own
	b := openStoreWith(t, url, emb, sopts, opts)
	const conv = "manual"
	first, err := b.Ingest(ctx, conv, "first.txt", "", []byte(prose(31, 1500)))
	if err != nil {
		t.Fatal(err)
	}
	if first.ChunkCount <= 20 {
		t.Fatalf("%d chunks; the test needs a conversation over the exact-ranking limit", first.ChunkCount)
	}

	// a's background loop builds the index once writes have settled.
	for deadline := time.Now().Add(time.Minute); a.IngestStats().IndexBuilds == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no index built in the background")
		}
	}
	st, err := b.IndexState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Fresh != 0 || st.Indexed != int64(first.ChunkCount) {
		t.Errorf("after the build %d chunks indexed and %d fresh; want %d and 0", st.Indexed, st.Fresh, first.ChunkCount)
	}
	if got := a.IngestStats().IndexBuilds; got != 1 {
		t.Errorf("IngestStats().IndexBuilds = %d, want 1", got)
	}
	// No more background builds: the next file stays fresh.
	a.Ingester.Close()

	second, err := b.Ingest(ctx, conv, "second.txt", "", []byte(prose(32, 600)))
	if err != nil {
		t.Fatal(err)
	}
	// Deleted once covered by the index, below.
	third, err := b.Ingest(ctx, conv, "third.txt", "", []byte(prose(33, 600)))
	if err != nil {
		t.Fatal(err)
	}
	if st, err = b.IndexState(ctx); err != nil {
		t.Fatal(err)
	}
	if fresh := int64(second.ChunkCount + third.ChunkCount); st.Fresh != fresh || st.FreshLarge != fresh {
		t.Errorf("state after two more files: %+v; want %d fresh chunks", st, fresh)
	}

	queries := []string{"replica failover latency", "cluster leader election", "database backup retention"}
	sameAsExact := func(label string) {
		t.Helper()
		fresh := 0
		for _, q := range queries {
			want := exactRanking(t, b, emb, conv, q, 10)
			for _, s := range []*testStore{a, b} {
				hits, err := s.Search(ctx, Query{Text: q, ConversationID: conv, Mode: Vector, TopK: 10, Threshold: new(0.0)})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, h := range hits {
					got = append(got, h.ChunkID)
					if h.FileID == second.ID {
						fresh++
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: %q ranked %v; exact ranking %v", label, q, got, want)
				}
			}
		}
		if fresh == 0 {
			t.Errorf("%s: no hit from the second file; the test does not reach fresh chunks", label)
		}
	}
	sameAsExact("before the rebuild")

	// Another process holding the build lock: b does not build.
	lock, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockKey("vector-index/"+emb.Model())); err != nil {
		t.Fatal(err)
	}
	if built, err := b.BuildIndex(ctx, IndexPolicy{}, true); err != nil || built {
		t.Errorf("BuildIndex while another process builds = %v, %v; want false, nil", built, err)
	}
	lock.Close(ctx)

	// An interrupted build's leftover carries the model's prefix; an
	// older binary's index is named without a watermark.
	for _, name := range []string{indexName(emb.Model(), emb.Dimensions(), 1<<40), "chunks_hnsw_local_hash_v1_384_384_1b4fae1c"} {
		if _, err := b.Pool().Exec(ctx, "CREATE INDEX "+pgx.Identifier{name}.Sanitize()+" ON chunks (id)"); err != nil {
			t.Fatal(err)
		}
	}
	if built, err := b.BuildIndex(ctx, IndexPolicy{}, true); err != nil || !built {
		t.Fatalf("BuildIndex = %v, %v", built, err)
	}
	next, err := b.IndexState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next.Fresh != 0 || next.Watermark <= st.Watermark || next.Index == st.Index {
		t.Errorf("after the rebuild: %+v; before: %+v", next, st)
	}
	rows, err := b.Pool().Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename = 'chunks' AND indexname LIKE 'chunks\_hnsw\_%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{next.Index}) {
		t.Errorf("vector indexes on chunks: %v; want only %s", names, next.Index)
	}
	sameAsExact("after the rebuild")
	if err := b.DeleteFile(ctx, third.ID); err != nil {
		t.Fatal(err)
	}
	sameAsExact("after deleting a covered file")

	// Nothing fresh: nothing to build.
	if built, err := b.BuildIndex(ctx, IndexPolicy{}, true); err != nil || built {
		t.Errorf("BuildIndex with nothing fresh = %v, %v; want false, nil", built, err)
	}
}

// exactRanking returns the ids of the conversation's k chunks nearest to q,
// computed over every chunk without any index.
func exactRanking(t *testing.T, s *testStore, emb embed.Embedder, conv, q string, k int) []string {
	t.Helper()
	ctx := context.Background()
	qv, err := emb.Embed(ctx, []string{q})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `SELECT id::text FROM chunks WHERE conversation_id = $1
		ORDER BY embedding <=> $2, id LIMIT $3`, conv, pgvector.NewVector(qv[0]), k)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != k {
		t.Fatalf("exact ranking has %d chunks, want %d", len(ids), k)
	}
	return ids
}

// TestCancelledBuildLeavesNothing cancels a build midway: the error says
// so, no unfinished index is left on the table, the lock is free again, and
// the next build succeeds.
func TestCancelledBuildLeavesNothing(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	emb, _ := embed.NewLocal(384)
	s := openStoreWith(t, url, emb, Options{exactChunks: 20},
		IngestOptions{Chunk: chunk.Options{Size: 100, Overlap: 0}, Index: IndexPolicy{Interval: -1}})
	ctx := context.Background()
	if _, err := s.Ingest(ctx, "big", "big.txt", "", []byte(prose(41, 30000))); err != nil {
		t.Fatal(err)
	}
	// A graph that does not fit in 1 MB builds slowly enough to be cut.
	slow := IndexPolicy{BuildMemory: 1 << 20}
	cut, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if built, err := s.BuildIndex(cut, slow, true); err == nil {
		t.Fatalf("BuildIndex under a 300 ms deadline = %v, nil; want an error (the build was too fast to cut: make the data larger)", built)
	}
	var left int
	err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'chunks\_hnsw\_%'`).Scan(&left)
	if err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d vector indexes left by the cancelled build", left)
	}
	if st, err := s.IndexState(ctx); err != nil || st.Index != "" {
		t.Errorf("after the cancelled build: %+v, %v; want no index registered", st, err)
	}
	// The cancelled backend may take a moment to let go of the lock.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		built, err := s.BuildIndex(ctx, IndexPolicy{}, true)
		if err != nil {
			t.Fatal(err)
		}
		if built {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no build after the cancelled one")
		}
	}
}
