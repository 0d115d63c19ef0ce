package docs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/pg"
)

// testStore is a Store and an Ingester on it, as the server wires them.
type testStore struct {
	*Store
	*Ingester
}

// newStore opens a Store with the local embedder on a fresh database.
func newStore(t testing.TB, opts IngestOptions) (*testStore, string) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	return openStore(t, url, emb, opts), url
}

// openStore opens a pool on url, a Store on it and an Ingester on the Store,
// all closed when the test ends.
func openStore(t testing.TB, url string, emb embed.Embedder, opts IngestOptions) *testStore {
	t.Helper()
	return openStoreWith(t, url, emb, Options{}, opts)
}

// openStoreWith is openStore with the Store's options.
func openStoreWith(t testing.TB, url string, emb embed.Embedder, sopts Options, opts IngestOptions) *testStore {
	t.Helper()
	pool := openPool(t, url)
	s, err := NewStore(pool, emb, sopts)
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewIngester(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return &testStore{Store: s, Ingester: in}
}

// openPool opens a pool on url, closed when the test ends.
func openPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// wordEmbedder is a feature-hashing embedder over whole words of letters
// only: digits and punctuation do not exist for it, so texts that differ only
// in a code such as ERR-4471 get the same vector. It lets tests know exactly
// what the vector ranking can and cannot see.
type wordEmbedder struct {
	model string
	dims  int
}

func (w wordEmbedder) Model() string   { return w.model }
func (w wordEmbedder) Dimensions() int { return w.dims }

func (w wordEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		v := make([]float64, w.dims)
		for _, word := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) }) {
			h := fnv.New64a()
			h.Write([]byte(word))
			sum := h.Sum64()
			sign := 1.0
			if sum>>63 == 1 {
				sign = -1
			}
			v[sum%uint64(w.dims)] += sign
		}
		var norm float64
		for _, x := range v {
			norm += x * x
		}
		vec := make([]float32, w.dims)
		if norm == 0 {
			// No words: a fixed direction rather than the zero vector.
			vec[0] = 1
		} else {
			for j, x := range v {
				vec[j] = float32(x / math.Sqrt(norm))
			}
		}
		out[i] = vec
	}
	return out, ctx.Err()
}

// failingEmbedder fails every call.
type failingEmbedder struct{ embed.Embedder }

var errEmbedderDown = fmt.Errorf("test provider: %w", embed.ErrUnavailable)

func (failingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errEmbedderDown
}

// gatedEmbedder blocks every call until release is closed or the context
// ends, and reports each call on started.
type gatedEmbedder struct {
	embed.Embedder
	started chan struct{}
	release chan struct{}
}

func newGatedEmbedder(t testing.TB) *gatedEmbedder {
	t.Helper()
	inner, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	return &gatedEmbedder{Embedder: inner, started: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	select {
	case g.started <- struct{}{}:
	default:
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Embedder.Embed(ctx, texts)
}

// waitFiles polls until the conversation has want files, none processing.
func waitFiles(t testing.TB, s *testStore, conversationID string, want int) []File {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		files, err := s.ListFiles(context.Background(), conversationID)
		if err != nil {
			t.Fatal(err)
		}
		done := len(files) == want
		for _, f := range files {
			if f.Status == StatusProcessing {
				done = false
			}
		}
		if done {
			return files
		}
		if time.Now().After(deadline) {
			t.Fatalf("files still processing after 60 s: %+v", files)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkStats compares the counters writes maintain (see writes.go) with the
// conversation's files and chunks: its chunks, its files by status, its
// chunks per embedding model, and no counters at all for a conversation
// without files.
func checkStats(t testing.TB, pool *pgxpool.Pool, conversationID string) {
	t.Helper()
	ctx := context.Background()
	// Statements simple enough for a distributed database too: one
	// conversation, no subquery across tables.
	kept := "no row"
	var chunkCount, ready, processing, failed int64
	err := pool.QueryRow(ctx, `
		SELECT chunk_count, ready_files, processing_files, failed_files
		FROM conversation_stats WHERE conversation_id = $1`, conversationID).Scan(&chunkCount, &ready, &processing, &failed)
	switch {
	case err == nil:
		kept = fmt.Sprintf("%d chunks, %d ready, %d processing, %d failed", chunkCount, ready, processing, failed)
	case !errors.Is(err, pgx.ErrNoRows):
		t.Fatal(err)
	}
	var files int64
	if err := pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE status = 'ready'), count(*) FILTER (WHERE status = 'processing'),
		       count(*) FILTER (WHERE status = 'failed')
		FROM files f WHERE f.conversation_id = $1 AND `+visible, conversationID).Scan(&files, &ready, &processing, &failed); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `
		SELECT count(*) FROM chunks c JOIN files f ON f.conversation_id = c.conversation_id AND f.id = c.file_id
		WHERE c.conversation_id = $1 AND `+visible, conversationID).Scan(&chunkCount); err != nil {
		t.Fatal(err)
	}
	counted := "no row"
	if files > 0 {
		counted = fmt.Sprintf("%d chunks, %d ready, %d processing, %d failed", chunkCount, ready, processing, failed)
	}
	if kept != counted {
		t.Errorf("conversation %s: the counters say %s; the tables hold %s", conversationID, kept, counted)
	}
	inRows := map[string]int64{}
	rows, err := pool.Query(ctx, `SELECT embedding_model, chunks FROM conversation_models WHERE conversation_id = $1`, conversationID)
	if err != nil {
		t.Fatal(err)
	}
	var m string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&m, &n}, func() error { inRows[m] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	inFiles := map[string]int64{}
	rows, err = pool.Query(ctx, `
		SELECT f.embedding_model, sum(f.chunk_count)::bigint FROM files f
		WHERE f.conversation_id = $1 AND f.status = 'ready' AND `+visible+` GROUP BY f.embedding_model`, conversationID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&m, &n}, func() error { inFiles[m] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, model := range slices.Sorted(maps.Keys(maps.Collect(func(yield func(string, int64) bool) {
		for k, v := range inRows {
			if !yield(k, v) {
				return
			}
		}
		for k, v := range inFiles {
			if !yield(k, v) {
				return
			}
		}
	}))) {
		if inRows[model] != inFiles[model] {
			t.Errorf("conversation %s, model %s: the counters say %d chunks; its files hold %d", conversationID, model, inRows[model], inFiles[model])
		}
	}
}

func countChunks(t testing.TB, pool *pgxpool.Pool, where string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM chunks WHERE `+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// vocabulary feeds prose generators with plain words.
var vocabulary = strings.Fields(`
	system data network server client request response database index query
	cache memory disk file storage backup restore cluster node replica leader
	follower election timeout retry latency throughput bandwidth packet route
	gateway proxy balancer certificate token session cookie header payload
	schema table column row transaction commit rollback lock deadlock vacuum
	planner optimizer statistics histogram sample estimate cost budget quota
	tenant account billing invoice payment refund ledger audit report metric
	alert incident outage recovery failover migration upgrade release deploy
	pipeline build artifact container image registry kernel process thread
	signal socket buffer stream channel queue topic partition offset consumer
	producer broker message event handler callback promise future worker pool
	garden river mountain forest ocean valley island desert meadow harbor
	bridge tower castle village market library museum theater stadium school`)

// prose returns n words of deterministic text from seed, with a full stop
// every dozen words.
func prose(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var b strings.Builder
	for i := range n {
		if i > 0 {
			if i%12 == 0 {
				b.WriteString(". ")
			} else {
				b.WriteByte(' ')
			}
		}
		// A skewed choice gives the common/rare word mix of real text.
		k := int(float64(len(vocabulary)) * math.Pow(r.Float64(), 2))
		b.WriteString(vocabulary[k])
	}
	b.WriteByte('.')
	return b.String()
}

// collect gathers errors from goroutines.
type collect struct {
	mu   sync.Mutex
	errs []error
}

func (c *collect) add(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

func (c *collect) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}
