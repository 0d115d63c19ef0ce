package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/docs/eval"
	"github.com/mcpsearch/mcpsearch/docs/extract"
)

// evalSuffix marks corpus documents stored as files, so hits map back to
// document ids.
const evalSuffix = ".txt"

func runEval(ctx context.Context, env *environment, args []string) error {
	var dir, modes, runFile string
	var keep bool
	cfg, _, err := loadConfig(env, "eval", args, func(fs *flag.FlagSet) {
		fs.StringVar(&dir, "dataset", "", "folder of a BEIR dataset: corpus.jsonl, queries.jsonl, qrels/test.tsv (required)")
		fs.StringVar(&modes, "modes", "hybrid,vector,keyword", "search modes to measure")
		fs.BoolVar(&keep, "keep", false, "keep the scratch conversation instead of deleting it")
		fs.StringVar(&runFile, "run", "", "write the ranked lists to this file in TREC run format")
	})
	if err != nil {
		return err
	}
	if dir == "" {
		return usageError{errors.New("usage: mcpsearch eval --dataset DIR")}
	}
	var ms []docs.Mode
	for _, m := range strings.Split(modes, ",") {
		switch mode := docs.Mode(strings.TrimSpace(m)); mode {
		case docs.Hybrid, docs.Vector, docs.Keyword:
			ms = append(ms, mode)
		default:
			return usageError{fmt.Errorf("--modes: unknown mode %q: want hybrid, vector or keyword", m)}
		}
	}
	ds, err := eval.Load(dir)
	if err != nil {
		return fmt.Errorf("load dataset: %w", err)
	}
	log := newLogger(env.stderr, cfg.LogFormat, "warn")
	pool, st, err := migratedStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	in, err := newIngester(cfg, st, log, false)
	if err != nil {
		return err
	}
	defer in.Close()
	conv := "eval-" + strings.ToLower(rand.Text()[:10])
	if !keep {
		defer func() {
			// Clean up even after Ctrl-C, with a context of its own.
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := deleteConversation(cctx, st, conv); err != nil {
				fmt.Fprintf(env.stderr, "eval: removing scratch conversation %s: %v\n", conv, err)
			}
		}()
	}
	start := time.Now()
	if err := ingestCorpus(ctx, in, conv, ds); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "dataset %s: %d documents ingested in %.1fs into %s, %d judged queries; embedder %s, hybrid vector weight %.3g\n",
		dir, len(ds.Corpus), time.Since(start).Seconds(), conv, len(ds.Qrels), st.Embedder().Model(), st.VectorWeight())
	// A corpus too large to be ranked exactly is searched through the
	// vector index, as a server would once the upload settled.
	if state, err := st.IndexState(ctx); err != nil {
		return err
	} else if state.FreshLarge > 0 {
		t0 := time.Now()
		if _, err := st.BuildIndex(ctx, indexPolicy(cfg), true); err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "eval: vector index built over %d chunks in %.1fs\n", state.Indexed+state.Fresh, time.Since(t0).Seconds())
	}
	var run io.Writer
	if runFile != "" {
		f, err := os.Create(runFile)
		if err != nil {
			return fmt.Errorf("--run: %w", err)
		}
		defer f.Close()
		bw := bufio.NewWriter(f)
		defer bw.Flush()
		run = bw
	}
	// Rankings name files by id: the corpus documents they hold.
	files, err := st.ListFiles(ctx, conv)
	if err != nil {
		return err
	}
	docOf := make(map[string]string, len(files))
	for _, f := range files {
		docOf[f.ID] = strings.TrimSuffix(f.FileName, evalSuffix)
	}
	var results []eval.Result
	truncated := map[string]bool{}
	for _, mode := range ms {
		search := func(ctx context.Context, query string, k int) ([]string, error) {
			// A judged query over the limit is cut to it rather than
			// dropped, and counted.
			if r := []rune(query); len(r) > docs.MaxQueryRunes {
				truncated[query] = true
				query = string(r[:docs.MaxQueryRunes])
			}
			// Several chunks of one document share its rank: ask for
			// more chunks than documents.
			hits, err := st.Rank(ctx, docs.Query{Text: query, ConversationID: conv, Threshold: new(0.0), Mode: mode}, min(docs.MaxRankDepth, 4*k))
			if errors.Is(err, docs.ErrInvalidArgument) || errors.Is(err, docs.ErrEmptyQuery) {
				return nil, fmt.Errorf("%w: %w", eval.ErrSkipQuery, err)
			}
			if err != nil {
				return nil, err
			}
			// Several chunks of one document count once, at its best rank.
			var ids []string
			seen := map[string]bool{}
			for _, h := range hits {
				id := docOf[h.FileID]
				if !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
				if len(ids) == k {
					break
				}
			}
			return ids, nil
		}
		r, err := eval.EvaluateRun(ctx, ds, string(mode), search, run)
		if err != nil {
			return fmt.Errorf("evaluate %s: %w", mode, err)
		}
		results = append(results, r)
	}
	if err := eval.WriteTable(env.stdout, results); err != nil {
		return err
	}
	if len(truncated) > 0 {
		fmt.Fprintf(env.stdout, "%d queries longer than %d characters were cut to that length\n", len(truncated), docs.MaxQueryRunes)
	}
	return nil
}

// ingestCorpus stores the corpus's documents as files of conv, several at
// a time (docs.Ingester.IngestAll), as mcpsearch ingest stores a folder.
func ingestCorpus(ctx context.Context, in *docs.Ingester, conv string, ds *eval.Dataset) error {
	i := 0
	var mu sync.Mutex
	var failed error
	err := in.IngestAll(ctx, func() (docs.Upload, bool) {
		if i == len(ds.Corpus) {
			return docs.Upload{}, false
		}
		d := ds.Corpus[i]
		i++
		text := d.Text
		if d.Title != "" {
			text = d.Title + "\n\n" + text
		}
		return docs.Upload{ConversationID: conv, FileName: d.ID + evalSuffix, MIMEType: "text/plain", Data: []byte(text)}, true
	}, func(u docs.Upload, _ docs.File, err error) {
		// A document without words cannot be found; BEIR corpora have a
		// few, and they do not stop the run.
		if err != nil && !errors.Is(err, extract.ErrNoText) {
			mu.Lock()
			defer mu.Unlock()
			if failed == nil {
				failed = fmt.Errorf("ingest document %s: %w", strings.TrimSuffix(u.FileName, evalSuffix), err)
			}
		}
	})
	if err != nil {
		return err
	}
	return failed
}

// deleteConversation deletes the scratch conversation and purges its rows
// before the command exits: one statement a few thousand rows at a time,
// whatever the corpus's size.
func deleteConversation(ctx context.Context, st *docs.Store, conv string) error {
	if _, err := st.DeleteConversation(ctx, conv); err != nil {
		return err
	}
	return st.Purge(ctx, nil)
}
