package docs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// envBigDatabase, set to 1, runs BenchmarkBigDatabase; loading its database
// takes minutes.
const envBigDatabase = "MCPSEARCH_BENCH_1M"

// Shape of BenchmarkBigDatabase's database.
const (
	bigConversations = 10_000
	bigChunksPerConv = 100 // per file
	bigFilesPerConv  = 10
)

// BenchmarkBigDatabase writes 1,000,000 chunks over 10,000 conversations of
// 1,000 chunks straight into the tables with COPY (with real local-embedder
// vectors, and no HNSW index: conversations this small are ranked exactly),
// then measures keyword and hybrid latency in conversations never searched
// before (cold: the keyword index is built) and searched again (warm), and
// the completeness and recall@10 of vector search against an exact ranking:
//
//	MCPSEARCH_BENCH_1M=1 go test -run '^$' -bench BenchmarkBigDatabase -timeout 60m ./docs/
func BenchmarkBigDatabase(b *testing.B) {
	if os.Getenv(envBigDatabase) != "1" {
		b.Skipf("set %s=1 to load a database of 1,000,000 chunks", envBigDatabase)
	}
	emb, err := embed.NewLocal(384)
	if err != nil {
		b.Fatal(err)
	}
	s := openStore(b, pgtest.NewDatabase(b), emb, IngestOptions{})
	ctx := context.Background()
	t0 := time.Now()
	loadBig(b, s, emb)
	fmt.Printf("loaded %d chunks in %d conversations in %.0f s\n", bigConversations*bigFilesPerConv*bigChunksPerConv, bigConversations, time.Since(t0).Seconds())

	queries := benchQueries(200)
	r := rand.New(rand.NewPCG(7, 7))
	fmt.Printf("\n%-8s %-6s %9s %9s %9s\n", "mode", "cache", "p50", "p99", "mean")
	for _, mode := range []Mode{Keyword, Hybrid} {
		convs := make([]string, len(queries))
		for i := range convs {
			convs[i] = fmt.Sprintf("c%05d", r.IntN(bigConversations))
		}
		for _, pass := range []string{"cold", "warm"} {
			lat := make([]time.Duration, 0, len(queries))
			for i, q := range queries {
				start := time.Now()
				if _, err := s.Search(ctx, Query{Text: q, ConversationID: convs[i], Mode: mode, Threshold: new(0.0)}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			fmt.Printf("%-8s %-6s %9s %9s %9s\n", mode, pass, percentile(lat, 0.5), percentile(lat, 0.99), mean(lat))
		}
		// Forget the indexes so that the next mode starts cold too.
		s.keywords = newKeywordCache(s.Store.opts.KeywordCacheBytes)
	}

	// Vector completeness and recall@10 against an exact ranking.
	var short, total, found, wanted int
	for i, q := range queries[:100] {
		conv := fmt.Sprintf("c%05d", (i*97)%bigConversations)
		hits, err := s.Search(ctx, Query{Text: q, ConversationID: conv, Mode: Vector, TopK: 10, Threshold: new(0.0)})
		if err != nil {
			b.Fatal(err)
		}
		qv, err := emb.Embed(ctx, []string{q})
		if err != nil {
			b.Fatal(err)
		}
		rows, err := s.Pool().Query(ctx, `
			SELECT id::text FROM chunks WHERE conversation_id = $1 AND 1 - (embedding <=> $2) >= 0
			ORDER BY embedding <=> $2, id LIMIT 10`, conv, pgvector.NewVector(qv[0]))
		if err != nil {
			b.Fatal(err)
		}
		exact, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		total++
		if len(hits) < len(exact) {
			short++
		}
		got := map[string]bool{}
		for _, h := range hits {
			got[h.ChunkID] = true
		}
		for _, id := range exact {
			wanted++
			if got[id] {
				found++
			}
		}
	}
	fmt.Printf("\nvector top 10: %d of %d searches short of min(10, matches); recall@10 against exact %.3f\n",
		short, total, float64(found)/float64(max(wanted, 1)))
}

// loadBig writes the big database's files, chunks and statistics with COPY,
// one conversation per transaction, from two goroutines.
func loadBig(b *testing.B, s *testStore, emb embed.Embedder) {
	b.Helper()
	ctx := context.Background()
	convs := make(chan int)
	var wg sync.WaitGroup
	var errs collect
	for w := range 2 {
		wg.Go(func() {
			c := newCorpus(uint64(10 + w))
			for i := range convs {
				if err := loadConversation(ctx, s, emb, c, fmt.Sprintf("c%05d", i)); err != nil {
					errs.add(err)
				}
			}
		})
	}
	for i := range bigConversations {
		convs <- i
	}
	close(convs)
	wg.Wait()
	if err := errs.err(); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
}

func loadConversation(ctx context.Context, s *testStore, emb embed.Embedder, c *corpus, conv string) error {
	n := bigFilesPerConv * bigChunksPerConv
	texts := make([]string, n)
	for i := range texts {
		texts[i] = c.text(150)
	}
	vecs, err := emb.Embed(ctx, texts)
	if err != nil {
		return err
	}
	files := make([]uuid.UUID, bigFilesPerConv)
	for i := range files {
		files[i] = uuid.New()
	}
	return pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"files"},
			[]string{"id", "conversation_id", "file_name", "mime_type", "size_bytes", "sha256", "status", "chunk_count", "embedding_model", "extracted_text"},
			pgx.CopyFromSlice(len(files), func(i int) ([]any, error) {
				return []any{files[i], conv, fmt.Sprintf("%d.txt", i), "text/plain", int64(0), files[i].String(), StatusReady,
					bigChunksPerConv, emb.Model(), strings.Join(texts[i*bigChunksPerConv:(i+1)*bigChunksPerConv], " ")}, nil
			})); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"chunks"},
			[]string{"file_id", "conversation_id", "ordinal", "content", "char_start", "char_end", "embedding_model", "embedding"},
			pgx.CopyFromSlice(n, func(i int) ([]any, error) {
				return []any{files[i/bigChunksPerConv], conv, i % bigChunksPerConv, texts[i], 0, len(texts[i]), emb.Model(), pgvector.NewVector(vecs[i])}, nil
			})); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO conversation_stats (conversation_id, chunk_count) VALUES ($1, $2)`, conv, n)
		return err
	})
}
