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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/docs/eval"
	"github.com/mcpsearch/mcpsearch/extract"
)

// evalSuffix marks corpus documents stored as files, so hits map back to
// document ids.
const evalSuffix = ".txt"

// zeroWeight stands for a hybrid vector weight of 0 in a sweep, which
// docs.Options reads as auto: added to any chunk's keyword score it is
// below a float64's precision, so chunks the keyword ranking found keep
// exactly their keyword order, and it orders the others by their vector
// rank, as a weight of 0 orders them by similarity.
const zeroWeight = 1e-300

// vectorWeights parses eval's --vector-weight: weights (auto, or 0 up to
// docs.MaxVectorWeight) separated by commas, each measured in hybrid mode.
func vectorWeights(v string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if strings.EqualFold(f, "auto") {
			out = append(out, 0)
			continue
		}
		w, err := strconv.ParseFloat(f, 64)
		if err != nil || !(w >= 0 && w <= docs.MaxVectorWeight) {
			return nil, fmt.Errorf("--vector-weight: want auto or numbers 0 up to %d separated by commas, got %q", docs.MaxVectorWeight, f)
		}
		if w == 0 {
			w = zeroWeight
		}
		out = append(out, w)
	}
	return out, nil
}

// weightLabel names a weight as the user wrote it.
func weightLabel(w float64) string {
	if w == zeroWeight {
		return "0"
	}
	return strconv.FormatFloat(w, 'g', 4, 64)
}

func runEval(ctx context.Context, env *environment, args []string) error {
	var dir, modes, runFile, weightList string
	var keep bool
	cfg, _, err := loadConfig(env, "eval", args, func(fs *flag.FlagSet) {
		fs.StringVar(&dir, "dataset", "", "folder of a BEIR dataset: corpus.jsonl, queries.jsonl, qrels/test.tsv (required)")
		fs.StringVar(&modes, "modes", "hybrid,vector,keyword", "search modes to measure")
		fs.BoolVar(&keep, "keep", false, "keep the scratch conversation instead of deleting it")
		fs.StringVar(&runFile, "run", "", "write the ranked lists to this file in TREC run format")
		fs.StringVar(&weightList, "vector-weight", "", "hybrid weights of the vector ranking against the keyword one (1) to measure, separated by commas, each "+
			"auto or 0 up to 10, e.g. 0,0.01,0.1,0.3,1: one hybrid row each (env MCP_docs_vector_weight, default auto)")
	})
	if err != nil {
		return err
	}
	if dir == "" {
		return usageError{errors.New("usage: mcpsearch eval --dataset DIR")}
	}
	weights := []float64{cfg.VectorWeight}
	if weightList != "" {
		if weights, err = vectorWeights(weightList); err != nil {
			return usageError{err}
		}
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
	in, err := newIngester(cfg, st, log, false, nil)
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
	// One store per hybrid weight, sharing the embedder and the data.
	stores := make([]*docs.Store, len(weights))
	for i, w := range weights {
		if stores[i], err = docs.NewStore(pool, st.Embedder(), docs.Options{VectorWeight: w, Logger: log}); err != nil {
			return err
		}
	}
	var used []string
	for i, w := range weights {
		l := weightLabel(stores[i].VectorWeight())
		if w == 0 {
			l += " (auto)"
		}
		used = append(used, l)
	}
	fmt.Fprintf(env.stdout, "dataset %s: %d documents ingested in %.1fs into %s, %d judged queries\n",
		dir, len(ds.Corpus), time.Since(start).Seconds(), conv, len(ds.Queries))
	fmt.Fprintf(env.stdout, "embedder %s (%d dimensions); hybrid vector weight %s; default threshold %.2f\n",
		st.Embedder().Model(), st.Embedder().Dimensions(), strings.Join(used, ", "), st.DefaultThreshold())
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
	// best holds, per query text, the similarity and document of the best
	// vector hit, for the threshold report.
	best := map[string]bestHit{}
	measure := func(st *docs.Store, mode docs.Mode, label string) error {
		search := func(ctx context.Context, query string, k int) ([]string, error) {
			text := query
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
			if mode == docs.Vector && len(hits) > 0 {
				best[text] = bestHit{doc: docOf[hits[0].FileID], similarity: hits[0].Similarity}
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
		r, err := eval.EvaluateRun(ctx, ds, label, search, run)
		if err != nil {
			return fmt.Errorf("evaluate %s: %w", label, err)
		}
		results = append(results, r)
		return nil
	}
	for _, mode := range ms {
		if mode != docs.Hybrid {
			if err := measure(st, mode, string(mode)); err != nil {
				return err
			}
			continue
		}
		for i, hs := range stores {
			label := "hybrid"
			if len(stores) > 1 {
				label = "hybrid w=" + weightLabel(weights[i])
				if weights[i] == 0 {
					label = "hybrid w=auto"
				}
			}
			if err := measure(hs, mode, label); err != nil {
				return err
			}
		}
	}
	if err := eval.WriteTable(env.stdout, results); err != nil {
		return err
	}
	if len(truncated) > 0 {
		fmt.Fprintf(env.stdout, "%d queries longer than %d characters were cut to that length\n", len(truncated), docs.MaxQueryRunes)
	}
	if len(best) > 0 {
		writeThresholdReport(env.stdout, ds, best, st.DefaultThreshold())
	}
	return nil
}

// bestHit is the best vector hit of a query.
type bestHit struct {
	doc        string
	similarity float64
}

// writeThresholdReport shows how the vector similarity of each query's best
// hit splits between hits judged relevant and the others, and what the
// default threshold keeps of each: the figures a threshold is calibrated on
// for an embedding model (see the default similarity threshold in doc/documents.md).
func writeThresholdReport(w io.Writer, ds *eval.Dataset, best map[string]bestHit, threshold float64) {
	var rel, non []float64
	for _, q := range ds.Queries {
		b, ok := best[q.Text]
		if !ok {
			continue
		}
		if ds.Qrels[q.ID][b.doc] > 0 {
			rel = append(rel, b.similarity)
		} else {
			non = append(non, b.similarity)
		}
	}
	describe := func(v []float64) string {
		if len(v) == 0 {
			return "none"
		}
		slices.Sort(v)
		q := func(p float64) float64 { return v[int(p*float64(len(v)-1))] }
		kept := 0
		for _, x := range v {
			if x >= threshold {
				kept++
			}
		}
		return fmt.Sprintf("%d, similarity min %.3f p10 %.3f median %.3f p90 %.3f max %.3f; %d kept by the threshold", len(v), v[0], q(0.1), q(0.5), q(0.9), v[len(v)-1], kept)
	}
	fmt.Fprintf(w, "vector best hits judged relevant: %s\n", describe(rel))
	fmt.Fprintf(w, "vector best hits not relevant:    %s\n", describe(non))
	fmt.Fprintf(w, "(default threshold %.2f: it should keep nearly every relevant best hit and few of the others)\n", threshold)
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
