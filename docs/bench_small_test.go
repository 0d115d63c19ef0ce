package docs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// Environment of BenchmarkSmallFiles.
const (
	// envSmallFiles, set to 1, runs it; it takes several minutes.
	envSmallFiles = "MCPSEARCH_BENCH_SMALL"
	// envSmallFilesCount sets the number of one-passage files (default
	// 100,000).
	envSmallFilesCount = "MCPSEARCH_BENCH_SMALL_FILES"
	// envSmallFilesDir names a folder of text files to use as the
	// passages instead of generated text, one passage a file, as many as
	// it holds up to the count.
	envSmallFilesDir = "MCPSEARCH_BENCH_SMALL_DIR"
	// envSmallFilesShape names the one shape to store and measure,
	// files-1k or files-100k (for the default count), in a database of its
	// own: its vector index then holds its chunks alone.
	envSmallFilesShape = "MCPSEARCH_BENCH_SMALL_SHAPE"
)

// BenchmarkSmallFiles measures the shape of a folder of notes, a wiki
// export or a mail archive: 100,000 one-chunk files in one conversation,
// against the same text in 1,000 files in another, in one database and one
// run. It prints, for each shape, the ingestion rate through IngestAll
// (what mcpsearch ingest uses), search latency per mode at top 10 and 400
// deep (what mcpsearch eval ranks), and at top 10 within a source of a
// third of the files and one of two (source_id), the cost of listing and deleting the
// conversation, and what a server runs against the database while idle.
// MCPSEARCH_BENCH_EMBEDDER chooses the embedder (see benchEmbedder), and
// MCPSEARCH_BENCH_SMALL_SHAPE stores one of the shapes alone:
//
//	MCPSEARCH_BENCH_SMALL=1 go test -run '^$' -bench BenchmarkSmallFiles -benchtime 1x -timeout 60m ./docs/
func BenchmarkSmallFiles(b *testing.B) {
	if os.Getenv(envSmallFiles) != "1" {
		b.Skipf("set %s=1 to ingest and search 100,000 small files", envSmallFiles)
	}
	n := 100_000
	if v := os.Getenv(envSmallFilesCount); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("%s=%q: want a number of at least 1000", envSmallFilesCount, v)
		}
	}
	passages := smallPassages(b, n)
	n = len(passages)
	emb, label := benchEmbedder(b)
	// No background index builds: the benchmark builds the index once
	// both shapes are stored, as mcpsearch index would.
	s := openStore(b, pgtest.NewDatabase(b), emb, IngestOptions{Index: IndexPolicy{Interval: -1}})
	ctx := context.Background()

	type shape struct {
		conv  string
		files []Upload
	}
	per := n / 1000
	var large []Upload
	for i := 0; i < n; i += per {
		large = append(large, Upload{ConversationID: "files-1k", FileName: fmt.Sprintf("%04d.txt", i/per),
			Data: []byte(strings.Join(passages[i:min(i+per, n)], "\n\n"))})
	}
	small := make([]Upload, n)
	for i, p := range passages {
		small[i] = Upload{ConversationID: fmt.Sprintf("files-%dk", n/1000), FileName: fmt.Sprintf("%06d.txt", i), Data: []byte(p)}
	}
	shapes := []shape{{"files-1k", large}, {small[0].ConversationID, small}}
	if only := os.Getenv(envSmallFilesShape); only != "" {
		shapes = slices.DeleteFunc(shapes, func(sh shape) bool { return sh.conv != only })
		if len(shapes) == 0 {
			b.Fatalf("%s=%q: want files-1k or %s", envSmallFilesShape, only, small[0].ConversationID)
		}
	}
	stored := 0
	for _, sh := range shapes {
		stored += len(sh.files)
	}

	// Searches of 100,000 chunks read about 450 MB of table and index: with
	// PostgreSQL's default shared_buffers (128 MB) most reads go to the
	// operating system's cache, and the figures measure that.
	var sharedBuffers string
	if err := s.Pool().QueryRow(ctx, `SHOW shared_buffers`).Scan(&sharedBuffers); err != nil {
		b.Fatal(err)
	}
	var report strings.Builder
	fmt.Fprintf(&report, "\n%d passages of %d characters on average; %s, %d workers; shared_buffers %s\n\n",
		n, avgLen(passages), label, s.Ingester.opts.Workers, sharedBuffers)
	fmt.Fprintf(&report, "%-12s %8s %8s %9s %10s %10s\n", "conversation", "files", "chunks", "seconds", "files/s", "chunks/s")
	for _, sh := range shapes {
		var chunks atomic.Int64
		var failed atomic.Int64
		i := 0
		t0 := time.Now()
		err := s.IngestAll(ctx, func() (Upload, bool) {
			if i == len(sh.files) {
				return Upload{}, false
			}
			i++
			return sh.files[i-1], true
		}, func(_ Upload, f File, err error) {
			if err != nil {
				failed.Add(1)
				return
			}
			chunks.Add(int64(f.ChunkCount))
		})
		took := time.Since(t0)
		if err != nil || failed.Load() > 0 {
			b.Fatalf("ingest %s: %v, %d files failed", sh.conv, err, failed.Load())
		}
		fmt.Fprintf(&report, "%-12s %8d %8d %9.1f %10.0f %10.0f\n", sh.conv, len(sh.files), chunks.Load(), took.Seconds(),
			float64(len(sh.files))/took.Seconds(), float64(chunks.Load())/took.Seconds())
	}
	// The upload API's way: requests of 32 files from 4 clients at once,
	// each request's files stored in one transaction and processed by the
	// background workers; the rate counts until the last file is ready.
	uploads := smallUploadsOf(passages[:n/10], "uploads")
	t1 := time.Now()
	if err := submitAll(ctx, s, uploads, 4, 32); err != nil {
		b.Fatal(err)
	}
	waitFiles(b, s, "uploads", len(uploads))
	took := time.Since(t1)
	fmt.Fprintf(&report, "%-12s %8d %8d %9.1f %10.0f %10.0f  (upload API: 4 clients, 32 files a request)\n", "uploads", len(uploads), len(uploads), took.Seconds(),
		float64(len(uploads))/took.Seconds(), float64(len(uploads))/took.Seconds())
	if _, err := s.DeleteConversation(ctx, "uploads"); err != nil {
		b.Fatal(err)
	}
	if err := s.Purge(ctx, nil); err != nil {
		b.Fatal(err)
	}

	t0 := time.Now()
	if _, err := s.BuildIndex(ctx, IndexPolicy{}, true); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(&report, "vector index over every shape stored: %.1f s\n", time.Since(t0).Seconds())
	if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	// The load and the index build leave about a gigabyte of pages to
	// write: a checkpoint spreading them over the next minutes would share
	// the disk with the searches measured. Writing them now needs the
	// pg_checkpoint role (or a superuser).
	if _, err := s.Pool().Exec(ctx, "CHECKPOINT"); err != nil {
		fmt.Fprintf(&report, "CHECKPOINT refused (%v): the searches below may run during one\n", err)
	}

	queries := smallQueries(passages, 200)
	fmt.Fprintf(&report, "\n%-12s %-8s %9s %9s %11s %11s %7s\n", "conversation", "mode", "top10 p50", "top10 p99", "rank400 p50", "rank400 p99", "ratio")
	for _, sh := range shapes {
		for _, mode := range Modes() {
			top := searchLatencies(b, s, sh.conv, mode, queries, 10)
			deep := searchLatencies(b, s, sh.conv, mode, queries, 400)
			fmt.Fprintf(&report, "%-12s %-8s %9s %9s %11s %11s %6.1fx\n", sh.conv, mode, percentile(top, 0.5), percentile(top, 0.99),
				percentile(deep, 0.5), percentile(deep, 0.99), float64(medianOf(deep))/float64(medianOf(top)))
		}
		// Hybrid ranks no vectors where the keyword ranking decides the
		// top 10 (keywordDecides).
		decided := 0
		for _, q := range queries {
			hits, err := s.Search(ctx, Query{Text: q, ConversationID: sh.conv, Mode: Keyword, TopK: 10})
			if err != nil {
				b.Fatal(err)
			}
			if keywordDecides(len(hits), 10, s.VectorWeight()) {
				decided++
			}
		}
		fmt.Fprintf(&report, "%-12s hybrid top 10 decided by the keyword ranking alone, no vector ranking run: %d of %d queries\n", sh.conv, decided, len(queries))
		// Within one source (source_id): its files are read with the
		// conversation's counters, one row each.
		for _, src := range benchSources(b, s, sh.conv) {
			for _, mode := range Modes() {
				top := measure(b, s, Query{ConversationID: sh.conv, Mode: mode, TopK: 10, SourceID: src.id}, queries)
				fmt.Fprintf(&report, "%-12s %-8s %9s %9s   (%s)\n", sh.conv, mode, percentile(top, 0.5), percentile(top, 0.99), src.label)
			}
		}
	}

	// What a server runs while nobody calls it: its workers look for
	// files to process, its background work for deleted conversations to
	// purge and for a vector index build that is due.
	c := newClaim(time.Minute)
	idle := []struct {
		name string
		run  func() error
	}{
		{"claim files to process (every 5 s per worker)", func() error { _, _, err := s.claimFiles(ctx, &c, claimMaxFiles, claimBytes); return err }},
		{"look for a conversation to purge (every 5 s)", func() error { _, err := s.purgeStep(ctx); return err }},
		{"check whether an index build is due (every 5 s)", func() error { _, err := s.buildCandidate(ctx, 2000); return err }},
	}
	fmt.Fprintf(&report, "\nwhile idle, with %d files in the database:\n", stored)
	for _, st := range idle {
		lat := make([]time.Duration, 0, 50)
		for range 50 {
			t := time.Now()
			if err := st.run(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t))
		}
		fmt.Fprintf(&report, "  %-50s p50 %s, p99 %s\n", st.name, percentile(lat, 0.5), percentile(lat, 0.99))
	}

	lat := make([]time.Duration, 0, 50)
	for range 50 {
		t := time.Now()
		if _, err := s.ListConversations(ctx, nil, 50); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	fmt.Fprintf(&report, "list_conversations: p50 %s, p99 %s\n", percentile(lat, 0.5), percentile(lat, 0.99))
	for _, sh := range shapes {
		t := time.Now()
		files, err := s.DeleteConversation(ctx, sh.conv)
		if err != nil {
			b.Fatal(err)
		}
		deleted := time.Since(t)
		t = time.Now()
		steps := 0
		if err := s.Purge(ctx, func(n int) { steps = n }); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&report, "delete %s (%d files): %s, then its rows purged in %.1f s (%d steps)\n", sh.conv, files, round(deleted), time.Since(t).Seconds(), steps)
	}
	fmt.Print(report.String())
}

// smallPassages returns n passages: the text files of the folder
// envSmallFilesDir names, or generated ones of 40 to 100 words.
func smallPassages(b *testing.B, n int) []string {
	b.Helper()
	dir := os.Getenv(envSmallFilesDir)
	if dir == "" {
		c := newCorpus(11)
		out := make([]string, n)
		for i := range out {
			out[i] = c.text(40 + c.r.IntN(61))
		}
		return out
	}
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || len(out) == n {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if t := strings.TrimSpace(string(data)); t != "" {
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(out) < 1000 {
		b.Fatalf("%s holds %d text files; want at least 1,000", dir, len(out))
	}
	return out
}

// smallQueries returns n queries of three words taken from passages, so that
// each has matches.
func smallQueries(passages []string, n int) []string {
	c := newCorpus(12)
	out := make([]string, n)
	for i := range out {
		words := strings.Fields(passages[c.r.IntN(len(passages))])
		k := c.r.IntN(max(len(words)-3, 1))
		out[i] = strings.Trim(strings.Join(words[k:min(k+3, len(words))], " "), ".,;:")
	}
	return out
}

// searchLatencies runs every query at depth (Search for up to MaxTopK,
// Rank beyond), once to warm up, then measured.
func searchLatencies(b *testing.B, s *testStore, conv string, mode Mode, queries []string, depth int) []time.Duration {
	b.Helper()
	ctx := context.Background()
	lat := make([]time.Duration, 0, len(queries))
	for pass := range 2 {
		for _, q := range queries {
			query := Query{Text: q, ConversationID: conv, Mode: mode, Threshold: new(0.0)}
			t := time.Now()
			var err error
			if depth <= MaxTopK {
				query.TopK = depth
				_, err = s.Search(ctx, query)
			} else {
				_, err = s.Rank(ctx, query, depth)
			}
			if err != nil {
				b.Fatal(err)
			}
			if pass == 1 {
				lat = append(lat, time.Since(t))
			}
		}
	}
	return lat
}

func medianOf(lat []time.Duration) time.Duration {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func avgLen(ps []string) int {
	total := 0
	for _, p := range ps {
		total += len([]rune(p))
	}
	return total / len(ps)
}

// smallUploadsOf makes one upload of conv per passage.
func smallUploadsOf(passages []string, conv string) []Upload {
	out := make([]Upload, len(passages))
	for i, p := range passages {
		out[i] = Upload{ConversationID: conv, FileName: fmt.Sprintf("%06d.txt", i), Data: []byte(p)}
	}
	return out
}

// submitAll submits uploads as clients of the upload API would: clients
// at once, each sending requests of perRequest files and sending again,
// after a short wait, the files refused while the queue was full.
func submitAll(ctx context.Context, s *testStore, uploads []Upload, clients, perRequest int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var errs collect
	for range clients {
		wg.Go(func() {
			for {
				start := int(next.Add(int64(perRequest))) - perRequest
				if start >= len(uploads) {
					return
				}
				batch := uploads[start:min(start+perRequest, len(uploads))]
				for len(batch) > 0 {
					t, err := s.Reserve()
					if errors.Is(err, ErrBusy) {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					if err != nil {
						errs.add(err)
						return
					}
					_, results := s.SubmitFiles(ctx, t, batch)
					var again []Upload
					for i, err := range results {
						switch {
						case errors.Is(err, ErrBusy):
							again = append(again, batch[i])
						case err != nil:
							errs.add(err)
							return
						}
					}
					batch = again
					if len(batch) > 0 {
						time.Sleep(10 * time.Millisecond)
					}
				}
			}
		})
	}
	wg.Wait()
	return errs.err()
}
