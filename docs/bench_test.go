package docs

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// envLargeBench, set to 1, adds the 100,000-chunk corpus to BenchmarkStore;
// loading it takes minutes.
const envLargeBench = "MCPSEARCH_BENCH_LARGE"

// BenchmarkStore loads a synthetic corpus of 10,000 chunks (and 100,000 with
// MCPSEARCH_BENCH_LARGE=1) through Ingest, then measures search latency per
// mode, both over the whole corpus as one conversation and over a
// 200-chunk conversation stored beside it, and in the large conversation
// within one source (source_id) of a third of its files and one of two
// files. It prints a table.
// MCPSEARCH_BENCH_EMBEDDER chooses the embedder (see benchEmbedder):
//
//	go test -run '^$' -bench BenchmarkStore ./docs/
func BenchmarkStore(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv(envLargeBench) == "1" {
		sizes = append(sizes, 100_000)
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\nembedder: %s\n%-8s %-22s %-8s %9s %9s %9s\n", benchEmbedderName(), "chunks", "conversation", "mode", "p50", "p99", "mean")
	var ingestion strings.Builder
	for _, size := range sizes {
		s, load := loadCorpus(b, size)
		catchUp, bulk := indexTimes(b, s)
		fmt.Fprintf(&ingestion, "ingest %d chunks: %.1f s, %.0f chunks/s, files ready and searchable (%.0f chunks/s over the last fifth; %.0f chunks/s for embedding alone, %d workers); "+
			"vector index builds in the background meanwhile: %d; the index then covered the rest in %.1f s; "+
			"%.0f chunks/s through the index as well; the whole index built in bulk: %.0f chunks/s\n",
			load.chunks, load.elapsed.Seconds(), float64(load.chunks)/load.elapsed.Seconds(), load.tailRate, load.embedRate, benchWorkers,
			s.IngestStats().IndexBuilds, catchUp.Seconds(), float64(load.chunks)/(load.elapsed+catchUp).Seconds(),
			float64(load.chunks)/bulk.Seconds())
		queries := benchQueries(200)
		// The keyword index of the big conversation, measured on the heap
		// and by the cache's own estimate.
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := s.Search(context.Background(), Query{Text: queries[0], ConversationID: "big", Mode: Keyword}); err != nil {
			b.Fatal(err)
		}
		// The first search merges the files' postings in the background.
		s.keywords.Wait()
		runtime.GC()
		runtime.ReadMemStats(&after)
		fmt.Fprintf(&ingestion, "keyword index of %d chunks: %.1f MiB on the heap, %.1f MiB by the cache's estimate\n",
			load.big, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), float64(s.keywords.UsedBytes())/(1<<20))
		ingestion.WriteString(fanOutCost(b, s))
		for _, conv := range []struct {
			id    string
			label string
		}{{"big", fmt.Sprintf("big (%d)", load.big)}, {"small", fmt.Sprintf("small (%d)", load.small)}} {
			for _, mode := range []Mode{Hybrid, Vector, Keyword} {
				lat := measure(b, s, Query{ConversationID: conv.id, Mode: mode}, queries)
				fmt.Fprintf(&table, "%-8d %-22s %-8s %9s %9s %9s\n", load.chunks, conv.label, mode,
					percentile(lat, 0.50), percentile(lat, 0.99), mean(lat))
				b.Run(fmt.Sprintf("chunks=%d/conv=%s/mode=%s", size, conv.id, mode), func(b *testing.B) {
					ctx := context.Background()
					for i := 0; b.Loop(); i++ {
						if _, err := s.Search(ctx, Query{Text: queries[i%len(queries)], ConversationID: conv.id, Mode: mode, Threshold: new(0.0)}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
		for _, src := range benchSources(b, s, "big") {
			for _, mode := range []Mode{Hybrid, Vector, Keyword} {
				lat := measure(b, s, Query{ConversationID: "big", Mode: mode, SourceID: src.id}, queries)
				fmt.Fprintf(&table, "%-8d %-22s %-8s %9s %9s %9s\n", load.chunks, "big, "+src.label, mode,
					percentile(lat, 0.50), percentile(lat, 0.99), mean(lat))
			}
		}
	}
	fmt.Print(table.String() + "\n" + ingestion.String())
}

// benchSource is a source recorded in a benchmark's conversation.
type benchSource struct {
	id, label string
}

// benchSources records two sources of conversation conv, as a crawl
// would: one of every third file (of a conversation over 6,000 chunks, its
// vector ranking goes through the index, filtered to the source), and one
// of two files (ranked exactly).
func benchSources(b *testing.B, s *testStore, conv string) []benchSource {
	b.Helper()
	ctx := context.Background()
	var out []benchSource
	for _, src := range []struct {
		name  string
		where string
	}{
		{"third", "n % 3 = 0"},
		{"two", "n <= 2"},
	} {
		id := uuid.NewString()
		var chunks int64
		err := s.Pool().QueryRow(ctx, `
			WITH f AS (SELECT id, chunk_count, row_number() OVER (ORDER BY id) AS n FROM files WHERE conversation_id = $1),
			src AS (INSERT INTO sources (conversation_id, id, kind, root) VALUES ($1, $2, 'site', $3) RETURNING id),
			pages AS (INSERT INTO source_pages (conversation_id, source_id, url, file_id)
				SELECT $1, $2, 'https://example.com/' || f.id, f.id FROM f WHERE `+src.where+` RETURNING file_id)
			SELECT coalesce(sum(f.chunk_count), 0) FROM f JOIN pages p ON p.file_id = f.id`,
			conv, id, "https://"+src.name+".example.com/").Scan(&chunks)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, benchSource{id: id, label: fmt.Sprintf("source of %d", chunks)})
	}
	if _, err := s.Pool().Exec(ctx, "ANALYZE sources, source_pages"); err != nil {
		b.Fatal(err)
	}
	return out
}

// fanOutCost measures the store's statements that ask every shard on a Citus
// cluster (on one PostgreSQL, every table): listing the conversations and
// the vector index policy's state, 200 calls each after one warming pass.
func fanOutCost(b *testing.B, s *testStore) string {
	b.Helper()
	ctx := context.Background()
	var out strings.Builder
	for _, st := range []struct {
		name string
		call func() error
	}{
		{"list_conversations (50)", func() error { _, err := s.ListConversations(ctx, nil, 50); return err }},
		{"vector index state", func() error { _, err := s.IndexState(ctx); return err }},
	} {
		lat := make([]time.Duration, 0, 200)
		for pass := range 2 {
			for range 200 {
				t0 := time.Now()
				if err := st.call(); err != nil {
					b.Fatal(err)
				}
				if pass == 1 {
					lat = append(lat, time.Since(t0))
				}
			}
		}
		fmt.Fprintf(&out, "%s: p50 %s, p99 %s\n", st.name, percentile(lat, 0.50), percentile(lat, 0.99))
	}
	return out.String()
}

// indexTimes returns how long the vector index takes to cover the chunks a
// load left fresh (the build the background would start once ingestion
// pauses), then how long pgvector takes to build it over every chunk, as
// for an index created after a bulk load.
func indexTimes(b *testing.B, s *testStore) (catchUp, bulk time.Duration) {
	b.Helper()
	ctx := context.Background()
	// Ingestion is over; a background build cut short by Close may hold
	// the build lock a moment longer, which buildAll waits out.
	s.Ingester.Close()
	t0 := time.Now()
	buildAll(b, s)
	catchUp = time.Since(t0)
	// As if no index had been built: every chunk fresh again.
	if _, err := s.Pool().Exec(ctx, `UPDATE vector_indexes SET watermark = -1; UPDATE conversation_models SET covered = 0`); err != nil {
		b.Fatal(err)
	}
	t0 = time.Now()
	buildAll(b, s)
	return catchUp, time.Since(t0)
}

// buildAll builds the vector index until it covers every chunk.
func buildAll(b *testing.B, s *testStore) {
	b.Helper()
	ctx := context.Background()
	for {
		if _, err := s.BuildIndex(ctx, IndexPolicy{}, true); err != nil {
			b.Fatal(err)
		}
		st, err := s.IndexState(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if st.Fresh == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const benchWorkers = 2

type loadStats struct {
	chunks, big, small int
	elapsed            time.Duration
	embedRate          float64
	// tailRate is the rate of the last fifth of the load, into a
	// conversation already holding most of its chunks.
	tailRate float64
}

// loadCorpus ingests files of about 100 chunks into conversation "big" until
// it holds size-200 chunks, and 200 chunks into conversation "small", with
// benchWorkers files in flight, as Submit's pool would.
func loadCorpus(b *testing.B, size int) (*testStore, loadStats) {
	b.Helper()
	emb, _ := benchEmbedder(b)
	s := openStore(b, pgtest.NewDatabase(b), emb, IngestOptions{})
	ctx := context.Background()

	type file struct {
		conv string
		text string
	}
	const fileWords = 12_000 // about 100 chunks of 1,000 characters
	files := make(chan file)
	go func() {
		defer close(files)
		c := newCorpus(1)
		for i := 0; ; i++ {
			conv := "big"
			if i%50 == 49 { // the small conversation grows alongside
				conv = "small"
			}
			select {
			case files <- file{conv, c.text(fileWords)}:
			case <-b.Context().Done():
				return
			}
		}
	}()

	var big, small atomic.Int64
	var wg sync.WaitGroup
	var errs collect
	start := time.Now()
	// When the big conversation reached four fifths of its size, and how
	// many chunks both held then.
	var tailOnce sync.Once
	var tailStart time.Time
	var tailChunks int64
	for w := range benchWorkers {
		wg.Go(func() {
			for i := 0; ; i++ {
				if big.Load() >= int64(size-200) && small.Load() >= 200 {
					return
				}
				f := <-files
				counter := &big
				if f.conv == "small" {
					counter = &small
					if small.Load() >= 200 {
						continue
					}
				} else if big.Load() >= int64(size-200) {
					continue
				}
				got, err := s.Ingest(ctx, f.conv, fmt.Sprintf("w%d-%d.txt", w, i), "text/plain", []byte(f.text))
				if err != nil {
					errs.add(err)
					return
				}
				if n := counter.Add(int64(got.ChunkCount)); counter == &big && n >= int64(size)*4/5 {
					tailOnce.Do(func() { tailStart, tailChunks = time.Now(), n+small.Load() })
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errs.err(); err != nil {
		b.Fatal(err)
	}
	tailRate := float64(big.Load()+small.Load()-tailChunks) / time.Since(tailStart).Seconds()

	// Embedding alone, on chunk-sized texts, for comparison.
	c := newCorpus(2)
	texts := make([]string, 2000)
	for i := range texts {
		texts[i] = c.text(150)
	}
	t0 := time.Now()
	if _, err := emb.Embed(ctx, texts); err != nil {
		b.Fatal(err)
	}
	embedRate := float64(len(texts)) / time.Since(t0).Seconds()

	if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	return s, loadStats{
		chunks:    int(big.Load() + small.Load()),
		big:       int(big.Load()),
		small:     int(small.Load()),
		elapsed:   elapsed,
		embedRate: embedRate,
		tailRate:  tailRate,
	}
}

// measure runs every query once (after one warm-up pass), as q asks, and
// returns the latencies.
func measure(b *testing.B, s *testStore, q Query, queries []string) []time.Duration {
	b.Helper()
	ctx := context.Background()
	lat := make([]time.Duration, 0, len(queries))
	q.Threshold = new(0.0)
	for pass := range 2 {
		for _, text := range queries {
			q.Text = text
			t0 := time.Now()
			if _, err := s.Search(ctx, q); err != nil {
				b.Fatal(err)
			}
			if pass == 1 {
				lat = append(lat, time.Since(t0))
			}
		}
	}
	return lat
}

func percentile(lat []time.Duration, p float64) string {
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return round(sorted[max(i, 0)])
}

func mean(lat []time.Duration) string {
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	return round(sum / time.Duration(len(lat)))
}

func round(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
}

// corpus generates text from a vocabulary of 30,000 made-up words drawn with
// a Zipf distribution, so that word frequencies, and with them posting list
// lengths and BM25 statistics, resemble natural language.
type corpus struct {
	words []string
	r     *rand.Rand
	zipf  *rand.Zipf
}

func newCorpus(seed uint64) *corpus {
	syllables := strings.Fields("ka lo mi ne su ta ri po ve du zo ga he ju fi wa bel cor dan fen gil hor jat kem lun mor nis pra qua ros sel tin urv vad wen yor zel")
	words := make([]string, 30_000)
	for i := range words {
		var w strings.Builder
		n := i + len(syllables)
		for n > 0 {
			w.WriteString(syllables[n%len(syllables)])
			n /= len(syllables)
		}
		words[i] = w.String()
	}
	r := rand.New(rand.NewPCG(seed, seed*7919))
	return &corpus{words: words, r: r, zipf: rand.NewZipf(r, 1.07, 2, uint64(len(words)-1))}
}

func (c *corpus) text(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			if i%14 == 0 {
				b.WriteString(". ")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(c.words[c.zipf.Uint64()])
	}
	b.WriteByte('.')
	return b.String()
}

// benchQueries returns n queries of two to four words of middling frequency
// (ranks 30 to 3,000, log-uniform), the kind of content words people search
// with.
func benchQueries(n int) []string {
	c := newCorpus(3)
	out := make([]string, n)
	for i := range out {
		k := 2 + c.r.IntN(3)
		words := make([]string, k)
		for j := range words {
			rank := math.Exp(math.Log(30) + c.r.Float64()*(math.Log(3000)-math.Log(30)))
			words[j] = c.words[int(rank)]
		}
		out[i] = strings.Join(words, " ")
	}
	return out
}
