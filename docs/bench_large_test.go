package docs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/mcpsearch/mcpsearch/docs/keyword"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/migrations"
)

// envBigDatabase, set to 1, runs BenchmarkBigDatabase; loading its database
// takes minutes.
const envBigDatabase = "MCPSEARCH_BENCH_1M"

// Shape of BenchmarkBigDatabase's database: 10,000 conversations, every
// 100th of 1,000 chunks (10 files of 100), the others of one 90-chunk file;
// 991,000 chunks in all.
const (
	bigConversations = 10_000
	bigEvery         = 100
	bigChunksPerFile = 100
	bigFiles         = 10
	smallChunks      = 90
)

// bigShape returns the files and chunks per file of conversation i.
func bigShape(i int) (files, chunksPerFile int) {
	if i%bigEvery == 0 {
		return bigFiles, bigChunksPerFile
	}
	return 1, smallChunks
}

// bigDatabase is the database BenchmarkBigDatabase loads and keeps, so that
// later runs measure without loading again.
const bigDatabase = "mcpsearch_bench_1m"

// BenchmarkBigDatabase writes about 1,000,000 chunks over 10,000
// conversations (100 of them of 1,000 chunks) straight into the tables with
// COPY (with real local-embedder vectors, and no HNSW index: conversations
// this small are ranked exactly, and the files' keyword postings written as
// ingestion writes them), then measures keyword and hybrid latency in the
// 1,000-chunk conversations never searched before (cold: the keyword index
// is built) and searched again (warm), the memory of their keyword indexes,
// and the completeness and recall@10 of vector search against an exact
// ranking in conversations of both sizes:
//
//	MCPSEARCH_BENCH_1M=1 go test -run '^$' -bench BenchmarkBigDatabase -benchtime 1x -timeout 3h ./docs/
//
// The database, mcpsearch_bench_1m on DATABASE_URL's server, is kept: a
// later run (or one interrupted while loading) loads only the conversations
// it lacks, and writes the keyword postings of files loaded without them. Drop it with `dropdb mcpsearch_bench_1m` when done.
func BenchmarkBigDatabase(b *testing.B) {
	if os.Getenv(envBigDatabase) != "1" {
		b.Skipf("set %s=1 to load a database of 1,000,000 chunks", envBigDatabase)
	}
	emb, err := embed.NewLocal(384)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s := openStore(b, benchDatabase(b), emb, IngestOptions{})
	t0 := time.Now()
	loadBig(b, s, emb)
	var chunks int64
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM chunks`).Scan(&chunks); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("%d chunks in %d conversations; loading took %.0f s\n", chunks, bigConversations, time.Since(t0).Seconds())
	// Files loaded before keyword postings existed get them now, so that
	// the cold searches below measure what follows an upgrade.
	t0 = time.Now()
	filled, err := FillKeywordPostings(ctx, s.Pool())
	if err != nil {
		b.Fatal(err)
	}
	if filled > 0 {
		fmt.Printf("keyword postings written for %d files in %.1f s\n", filled, time.Since(t0).Seconds())
		if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE files"); err != nil {
			b.Fatal(err)
		}
	}
	var stored, raw int64
	if err := s.Pool().QueryRow(ctx, `SELECT coalesce(sum(pg_column_size(keyword_postings)), 0), coalesce(sum(octet_length(keyword_postings)), 0) FROM files`).Scan(&stored, &raw); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("keyword postings: %.1f MiB stored (%.1f MiB uncompressed), %.0f bytes per chunk\n",
		float64(stored)/(1<<20), float64(raw)/(1<<20), float64(stored)/float64(chunks))

	queries := benchQueries(200)
	fmt.Printf("\n%-8s %-6s %9s %9s %9s\n", "mode", "cache", "p50", "p99", "mean")
	for m, mode := range []Mode{Keyword, Hybrid} {
		// Each of the 100 large conversations once, cold, then again, warm.
		convs := rand.New(rand.NewPCG(uint64(m), 7)).Perm(bigConversations / bigEvery)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, pass := range []string{"cold", "warm"} {
			lat := make([]time.Duration, 0, len(convs))
			for i, c := range convs {
				start := time.Now()
				q := Query{Text: queries[i+100*m], ConversationID: fmt.Sprintf("c%05d", bigEvery*c), Mode: mode}
				if _, err := s.Search(ctx, q); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			fmt.Printf("%-8s %-6s %9s %9s %9s\n", mode, pass, percentile(lat, 0.5), percentile(lat, 0.99), mean(lat))
		}
		// The merges of each index's segments, which follow its first
		// search, are done.
		s.keywords.Wait()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heapBytes := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
		est := float64(s.keywords.UsedBytes())
		indexed := float64(len(convs) * bigFiles * bigChunksPerFile)
		fmt.Printf("%-8s keyword indexes of %d conversations: %.1f MiB on the heap, %.1f MiB by the cache's estimate; "+
			"%.0f KiB per conversation of %d chunks, %.1f MiB per 100,000 chunks\n",
			mode, len(convs), heapBytes/(1<<20), est/(1<<20), est/float64(len(convs))/(1<<10), bigFiles*bigChunksPerFile, est/indexed*100_000/(1<<20))
		// Forget the indexes so that the next mode starts cold too.
		s.keywords = keyword.NewCache(s.Store.opts.KeywordCacheBytes, nil)
	}

	// Vector completeness and recall@10 against an exact ranking.
	var short, total, found, wanted int
	for i, q := range queries[:100] {
		// Every other search in a 1,000-chunk conversation.
		conv := fmt.Sprintf("c%05d", (i*97)%bigConversations)
		if i%2 == 0 {
			conv = fmt.Sprintf("c%05d", bigEvery*(i/2))
		}
		hits, err := s.Search(ctx, Query{Text: q, ConversationID: conv, Mode: Vector, TopK: 10, Threshold: new(float64)})
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

// benchDatabase returns the URL of the kept benchmark database, creating
// and migrating it if need be.
func benchDatabase(b *testing.B) string {
	b.Helper()
	ctx := context.Background()
	admin := pgtest.AdminURL(b)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, bigDatabase).Scan(&exists); err != nil {
		b.Fatal(err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+bigDatabase); err != nil {
			b.Fatal(err)
		}
	}
	url, err := pgtest.WithDatabase(admin, bigDatabase)
	if err != nil {
		b.Fatal(err)
	}
	mc, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer mc.Close(ctx)
	if _, err := migrations.Apply(ctx, mc); err != nil {
		b.Fatal(err)
	}
	return url
}

// loadBig writes the conversations the big database lacks, with their files,
// chunks and statistics, by COPY, one conversation per transaction, from two
// goroutines.
func loadBig(b *testing.B, s *testStore, emb embed.Embedder) {
	b.Helper()
	ctx := context.Background()
	rows, err := s.Pool().Query(ctx, `SELECT conversation_id FROM conversation_stats`)
	if err != nil {
		b.Fatal(err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	loaded := make(map[string]bool, len(have))
	for _, c := range have {
		loaded[c] = true
	}
	if len(loaded) == bigConversations {
		return
	}
	convs := make(chan int)
	var wg sync.WaitGroup
	var errs collect
	for w := range 2 {
		wg.Go(func() {
			c := newCorpus(uint64(10 + w))
			for i := range convs {
				conv := fmt.Sprintf("c%05d", i)
				if loaded[conv] {
					continue
				}
				if err := loadConversation(ctx, s, emb, c, conv, i); err != nil {
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

func loadConversation(ctx context.Context, s *testStore, emb embed.Embedder, c *corpus, conv string, shape int) error {
	nFiles, perFile := bigShape(shape)
	n := nFiles * perFile
	texts := make([]string, n)
	for i := range texts {
		texts[i] = c.text(150)
	}
	vecs, err := emb.Embed(ctx, texts)
	if err != nil {
		return err
	}
	files := make([]uuid.UUID, nFiles)
	for i := range files {
		files[i] = uuid.New()
	}
	return pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"files"},
			[]string{"id", "conversation_id", "file_name", "mime_type", "size_bytes", "sha256", "status", "chunk_count", "embedding_model", "extracted_text"},
			pgx.CopyFromSlice(len(files), func(i int) ([]any, error) {
				return []any{files[i], conv, fmt.Sprintf("%d.txt", i), "text/plain", int64(0), files[i].String(), StatusReady,
					perFile, emb.Model(), strings.Join(texts[i*perFile:(i+1)*perFile], " ")}, nil
			})); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"chunks"},
			[]string{"file_id", "conversation_id", "ordinal", "content", "char_start", "char_end", "embedding_model", "embedding"},
			pgx.CopyFromSlice(n, func(i int) ([]any, error) {
				return []any{files[i/perFile], conv, i % perFile, texts[i], 0, len(texts[i]), emb.Model(), pgvector.NewVector(vecs[i])}, nil
			})); err != nil {
			return err
		}
		// As ingestion writes them.
		built, err := buildPostings(ctx, tx, conv, files)
		if err != nil {
			return err
		}
		for id, p := range built {
			if _, err := tx.Exec(ctx, `UPDATE files SET keyword_postings = $2 WHERE id = $1`, id, p); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO conversation_stats (conversation_id, chunk_count, ready_files, generation, epoch)
			VALUES ($1, $2, $3, nextval('conversation_generation_seq'), currval('conversation_generation_seq'))`, conv, n, len(files)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO conversation_models (conversation_id, embedding_model, chunks) VALUES ($1, $2, $3)`, conv, emb.Model(), n)
		return err
	})
}
