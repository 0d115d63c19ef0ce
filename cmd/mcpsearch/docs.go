package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/term"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/extract/ocr"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/migrations"
	"github.com/mcpsearch/mcpsearch/pg"
	"github.com/mcpsearch/mcpsearch/sources"
)

// newEmbedder builds the configured embedder. A model2vec model that is
// missing or damaged stops the command with the way to fix it: there is no
// fallback to another embedder, whose vectors would not match the stored
// ones.
func newEmbedder(cfg config.Config) (embed.Embedder, error) {
	e, err := embed.New(embedConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("embedder (MCP_embed_*): %w", err)
	}
	return e, nil
}

// embedConfig is the embedder configuration of cfg.
func embedConfig(cfg config.Config) embed.Config {
	return embed.Config{Provider: cfg.EmbedProvider, Model: cfg.EmbedModel, ModelDir: cfg.EmbedModelDir, ModelsDir: cfg.EmbedModelsDir,
		BaseURL: cfg.EmbedBaseURL, APIKey: cfg.EmbedAPIKey, Dimensions: cfg.EmbedDimensions, BatchSize: cfg.EmbedBatchSize}
}

// openPool opens the connection pool on DATABASE_URL, which it needs. It
// does not connect yet.
func openPool(ctx context.Context, cfg config.Config, opts ...pg.Option) (*pgxpool.Pool, error) {
	if cfg.DatabaseURL == "" {
		return nil, usageError{errors.New("DATABASE_URL is not set: point it at PostgreSQL with pgvector (scripts/pg.sh prints one for a local server)")}
	}
	pool, err := pg.Open(ctx, cfg.DatabaseURL, opts...)
	if err != nil {
		return nil, usageError{fmt.Errorf("DATABASE_URL: %w", err)}
	}
	return pool, nil
}

// newStore builds the documents store of cfg on pool, with its embedder.
func newStore(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*docs.Store, error) {
	emb, err := newEmbedder(cfg)
	if err != nil {
		return nil, err
	}
	st, err := docs.NewStore(pool, emb, docs.Options{VectorWeight: cfg.VectorWeight, DefaultThreshold: cfg.Threshold, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open documents store: %w", err)
	}
	return st, nil
}

// indexPolicy is the vector index policy of cfg.
func indexPolicy(cfg config.Config) docs.IndexPolicy {
	return docs.IndexPolicy{BuildMemory: int64(cfg.IndexBuildMemoryMB) << 20}
}

// newIngester starts the upload pipeline of cfg on st; Close stops it. A
// server's Ingester builds the vector index in the background; a command's
// (background false) leaves that to the server or to mcpsearch index,
// since it ends as soon as its files are stored. tp traces its batches of
// files; nil traces none.
func newIngester(cfg config.Config, st *docs.Store, log *slog.Logger, background bool, tp trace.TracerProvider) (*docs.Ingester, error) {
	policy := indexPolicy(cfg)
	if !background {
		policy.Interval = -1
	}
	engine, err := newOCR(cfg)
	if err != nil {
		return nil, err
	}
	if background {
		// A server says at start-up whether scans and images can be read.
		pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		status := engine.Probe(pctx)
		cancel()
		level := slog.LevelInfo
		if engine.Enabled() && !status.Available {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "ocr", "status", status)
	}
	in, err := docs.NewIngester(st, docs.IngestOptions{
		Chunk:        chunk.Options{Size: cfg.ChunkSize, Overlap: cfg.ChunkOverlap},
		MaxFileBytes: cfg.MaxFileBytes,
		Workers:      cfg.Workers,
		OCR:          engine,
		Index:        policy,
		Logger:       log,
		Tracer:       tp,
	})
	if err != nil {
		return nil, fmt.Errorf("start ingestion: %w", err)
	}
	return in, nil
}

// newOCR builds the OCR engine of cfg (MCP_docs_ocr_*). Whether tesseract
// and its languages are there is found on first use, or by Probe.
func newOCR(cfg config.Config) (*ocr.Engine, error) {
	mode, err := ocr.ParseMode(cfg.OCRMode)
	if err != nil {
		return nil, fmt.Errorf("MCP_docs_ocr_mode: %w", err)
	}
	engine, err := ocr.New(ocr.Options{Mode: mode, Languages: ocr.ParseLanguages(cfg.OCRLanguages), DPI: cfg.OCRDPI,
		Workers: cfg.OCRWorkers, PageTimeout: cfg.OCRTimeout, MaxPages: cfg.OCRMaxPages})
	if err != nil {
		return nil, fmt.Errorf("OCR (MCP_docs_ocr_*): %w", err)
	}
	return engine, nil
}

// migratedStore opens the pool and the store of cfg and checks that the
// schema is current. The caller closes the pool.
func migratedStore(ctx context.Context, cfg config.Config, log *slog.Logger) (*pgxpool.Pool, *docs.Store, error) {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	st, err := newStore(cfg, pool, log)
	if err == nil {
		err = st.CheckSchema(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, st, nil
}

func runMigrate(ctx context.Context, env *environment, args []string) error {
	cfg, _, err := loadConfig(env, "migrate", args, nil)
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := migrations.Apply(ctx, pool)
	if err != nil {
		return fmt.Errorf("migrate: %w", pg.Error("database", err))
	}
	if len(applied) == 0 {
		fmt.Fprintf(env.stdout, "schema is up to date (version %d)\n", migrations.Latest())
	}
	for _, name := range applied {
		fmt.Fprintln(env.stdout, "applied", name)
	}
	// Files stored before keyword postings existed get them now, so that
	// no search pays for it; a later run finds none left.
	filled, err := docs.FillKeywordPostings(ctx, pool)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if filled > 0 {
		fmt.Fprintf(env.stdout, "wrote the keyword postings of %d files stored before them\n", filled)
	}
	return nil
}

func runIngest(ctx context.Context, env *environment, args []string) error {
	var conv, syncDir, crawlURL string
	var verbose bool
	var cf crawlFlags
	cfg, fs, err := loadConfig(env, "ingest", args, func(fs *flag.FlagSet) {
		fs.StringVar(&conv, "conversation", "", "conversation the files belong to (required)")
		fs.BoolVar(&verbose, "verbose", false, "list every file ingested or already present, not only those skipped or failed")
		fs.StringVar(&syncDir, "sync", "", "keep this folder in sync: read what is new or changed since the last sync, remove what was deleted")
		fs.StringVar(&crawlURL, "crawl", "", "crawl the site from this URL (links, sitemap.xml, llms.txt) and keep it as a source to sync")
		cf.register(fs)
	})
	if err != nil {
		return err
	}
	usage := usageError{errors.New("usage: mcpsearch ingest --conversation ID PATH|URL... (files, folders or http(s) URLs), " +
		"or --sync DIR, or --crawl URL [--max-pages N --max-depth N --scope prefix|host|domain --include GLOB --exclude GLOB " +
		"--delay-ms N --render auto|never|always --header 'Name: value']")}
	switch {
	case strings.TrimSpace(conv) == "":
		return usage
	case syncDir != "" || crawlURL != "":
		if fs.NArg() > 0 || (syncDir != "" && crawlURL != "") {
			return usage
		}
		return ingestSource(ctx, env, cfg, conv, syncDir, crawlURL, cf.options(), verbose)
	case fs.NArg() == 0:
		return usage
	}
	var urls, local []string
	for _, a := range fs.Args() {
		if strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://") {
			urls = append(urls, a)
		} else {
			local = append(local, a)
		}
	}
	engine, err := newOCR(cfg)
	if err != nil {
		return err
	}
	paths, skips, err := collectFiles(local, extract.Limits{MaxBytes: cfg.MaxFileBytes, OCR: engine})
	if err != nil {
		return err
	}
	paths = append(paths, urls...)
	if len(paths) == 0 {
		p := newProgress(env.stderr, false, false, 0, len(skips))
		p.listSkipped(skips)
		p.summary(env.stdout, conv)
		return errors.New("no supported files (PDF, text, Markdown, HTML) under the given paths")
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
	// The run is a job the server shows (get_job, list_jobs) and may
	// cancel; should this process stop, the job fails once its lease
	// expires instead of staying running.
	jst := jobs.NewStore(st)
	token := uuid.NewString()
	input := jobs.Input{Files: fs.Args()}
	if len(input.Files) > 20 {
		input.Files = input.Files[:20]
	}
	job, err := jst.CreateHeld(ctx, conv, jobs.KindIngest, input, "cli", token, jobs.DefaultLease)
	if err != nil {
		return fmt.Errorf("record the ingestion job: %w", err)
	}
	jctx, release := jst.Hold(ctx, job, token, jobs.DefaultLease, time.Second)
	defer release()
	fmt.Fprintf(env.stderr, "job %s\n", job.ID)
	out, err := ingestFiles(jctx, env, in, conv, job.ID, paths, skips, cfg, verbose)
	if cause := context.Cause(jctx); cause != nil && ctx.Err() == nil {
		return fmt.Errorf("stopped: %w", cause)
	}
	if serr := jst.Submit(context.WithoutCancel(ctx), job, out); serr != nil && err == nil {
		err = fmt.Errorf("record the ingestion job: %w", serr)
	}
	return err
}

// ingestSource syncs folder dir, or crawls the site at start, into conv
// as a source.
func ingestSource(ctx context.Context, env *environment, cfg config.Config, conv, dir, start string, opts sources.CrawlOptions, verbose bool) error {
	s, closeRun, err := openSyncRun(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer closeRun()
	if dir != "" {
		return s.syncFolder(ctx, conv, dir, verbose)
	}
	return s.crawlSite(ctx, conv, start, opts)
}

// skip is a file or folder that ingest leaves out, and why.
type skip struct {
	path   string
	reason string
}

// collectFiles expands folders into the files below them worth ingesting,
// and returns every file or folder it leaves out with the reason: hidden,
// unreadable, not a regular file, empty, over maxBytes, or of a type that
// cannot be extracted (judged by content and name, as an upload is). Files
// named explicitly are always tried; a path that does not exist is an
// error.
func collectFiles(args []string, limits extract.Limits) ([]string, []skip, error) {
	var out []string
	var skips []skip
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[filepath.Clean(p)] {
			seen[filepath.Clean(p)] = true
			out = append(out, p)
		}
	}
	for _, a := range args {
		info, err := os.Stat(a)
		if err != nil {
			return nil, nil, errors.New(extract.CleanMessage(err.Error()))
		}
		if !info.IsDir() {
			add(a)
			continue
		}
		// A folder named through a symbolic link is walked; links met
		// inside are not, so a walk cannot loop.
		root := a
		if li, err := os.Lstat(a); err == nil && li.Mode()&fs.ModeSymlink != 0 {
			root = a + string(filepath.Separator)
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				skips = append(skips, skip{p, "unreadable: " + errText(err)})
				return nil
			}
			hidden := p != root && strings.HasPrefix(d.Name(), ".")
			switch {
			case d.IsDir() && hidden:
				skips = append(skips, skip{p + string(filepath.Separator), "hidden folder"})
				return filepath.SkipDir
			case d.IsDir():
				return nil
			case hidden:
				skips = append(skips, skip{p, "hidden file"})
				return nil
			}
			if why := skipReason(p, d, limits); why != "" {
				skips = append(skips, skip{p, why})
				return nil
			}
			add(p)
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("walk %s: %w", a, err)
		}
	}
	sort.Strings(out)
	return out, skips, nil
}

// skipReason says why the file p met in a folder walk is not worth
// ingesting, or returns "" when it is. Its type is told from its content as
// an upload's is: a Word document saved as .bin is read, a legacy .doc is
// skipped saying to save it as .docx, an image is read only with OCR.
func skipReason(p string, d fs.DirEntry, limits extract.Limits) string {
	// Stat follows a symbolic link: a link to a file counts as the file.
	info, err := os.Stat(p)
	switch {
	case err != nil && d.Type()&fs.ModeSymlink != 0 && errors.Is(err, fs.ErrNotExist):
		return "broken link"
	case err != nil:
		return "unreadable: " + errText(err)
	case info.IsDir():
		return "link to a folder, not followed"
	case !info.Mode().IsRegular():
		// A named pipe or device could block the read or never end.
		return "not a regular file"
	case info.Size() == 0:
		return "empty file"
	case info.Size() > limits.MaxBytes:
		return fmt.Sprintf("too large: %s, over the limit of %d MB (MCP_docs_max_file_mb)", megabytes(info.Size()), limits.MaxBytes>>20)
	}
	f, err := os.Open(p)
	if err != nil {
		return "unreadable: " + errText(err)
	}
	defer f.Close()
	if _, err := limits.Detect(d.Name(), "", f, info.Size()); err != nil {
		if !errors.Is(err, extract.ErrUnsupported) {
			return "unreadable: " + extract.CleanMessage(errText(err))
		}
		kind := strings.TrimPrefix(err.Error(), extract.ErrUnsupported.Error()+": ")
		if strings.HasPrefix(kind, `"`) {
			// Detection names the file when its content matched no
			// known format and did not read as text.
			kind = "binary content"
		}
		return "unsupported type: " + kind
	}
	return ""
}

// errText is the cause of a file system error without the path, which the
// caller prints already.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err.Error()
}

func megabytes(n int64) string {
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// ingestFiles ingests local files and URLs into conv and reports each one's
// outcome through a progress reporter. Local files are read, embedded and
// stored several at a time (docs.Ingester.IngestAll), so that a folder of
// many small files goes as fast as a few large ones; an interrupted run
// stored whole files only, and a second run skips them as already present.
func ingestFiles(ctx context.Context, env *environment, in *docs.Ingester, conv, jobID string, paths []string, skips []skip, cfg config.Config, verbose bool) (jobs.Outcome, error) {
	return ingestFilesWith(ctx, env, in, conv, jobID, paths, skips, cfg, verbose, nil)
}

// ingestFilesWith is ingestFiles calling stored, when not nil, with each
// local file stored (ready, failed in processing, or already present).
func ingestFilesWith(ctx context.Context, env *environment, in *docs.Ingester, conv, jobID string, paths []string, skips []skip, cfg config.Config, verbose bool,
	stored func(path string, f docs.File)) (jobs.Outcome, error) {
	var out jobs.Outcome
	var outMu sync.Mutex
	record := func(name string, f docs.File, err error) {
		outMu.Lock()
		defer outMu.Unlock()
		switch {
		case err != nil:
			out.Refusals = append(out.Refusals, jobs.Refusal{FileName: name, Reason: errText(err)})
		case f.Duplicate:
			out.Duplicates++
		}
	}
	tty := false
	if f, ok := env.stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	p := newProgress(env.stderr, tty, verbose, len(paths), len(skips))
	p.listSkipped(skips)
	var local, urls []string
	for _, path := range paths {
		if strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
			urls = append(urls, path)
		} else {
			local = append(local, path)
		}
	}
	i := 0
	next := func() (docs.Upload, bool) {
		for i < len(local) {
			path := local[i]
			i++
			// A file named explicitly may be anything: what cannot be
			// read as an upload is reported here, without reading it.
			if err := checkUpload(path, cfg.MaxFileBytes); err != nil {
				p.file(path, docs.File{}, err)
				record(path, docs.File{}, err)
				continue
			}
			return docs.Upload{ConversationID: conv, FileName: filepath.Base(path), Path: path, JobID: jobID}, true
		}
		return docs.Upload{}, false
	}
	err := in.IngestAll(ctx, next, func(u docs.Upload, f docs.File, err error) {
		if err != nil {
			err = errors.New(errText(err))
		}
		p.file(u.Path, f, err)
		// A file that failed processing is stored failed, and counted
		// from its row.
		if !errors.Is(err, docs.ErrProcessing) {
			record(u.Path, f, err)
		}
		if stored != nil && f.ID != "" && (err == nil || errors.Is(err, docs.ErrProcessing)) {
			stored(u.Path, f)
		}
	})
	if err != nil && ctx.Err() == nil {
		return out, err
	}
	// Failures are counted by p, not returned, so every page is tried.
	_ = forEach(ctx, len(urls), cfg.Workers, func(i int) error {
		f, err := ingestURL(ctx, in, cfg, conv, jobID, urls[i])
		if err != nil && !errors.Is(err, docs.ErrProcessing) {
			record(urls[i], f, err)
		}
		if err != nil {
			err = errors.New(errText(err))
		}
		p.file(urls[i], f, err)
		return nil
	})
	p.summary(env.stdout, conv)
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	if state, err := in.Store().IndexState(ctx); err == nil && state.FreshLarge > 0 {
		fmt.Fprintf(env.stderr, "%d chunks are not in the vector index yet (searchable, ranked exactly meanwhile); "+
			"a running server builds it once uploads pause, or run mcpsearch index\n", state.Fresh)
	}
	if failed := p.failures(); failed > 0 {
		return out, fmt.Errorf("%d of %d files failed", failed, len(paths))
	}
	return out, nil
}

// checkUpload refuses, before it is read, a file that is not a regular
// file or is larger than maxBytes, which would only be refused after
// filling memory.
func checkUpload(p string, maxBytes int64) error {
	info, err := os.Stat(p)
	switch {
	case err != nil:
		return errors.New(errText(err))
	case !info.Mode().IsRegular():
		return errors.New("not a regular file")
	case info.Size() > maxBytes:
		return fmt.Errorf("too large: %s, over the limit of %d MB (MCP_docs_max_file_mb)", megabytes(info.Size()), maxBytes>>20)
	}
	return nil
}

// ingestURL fetches a page with fetch_url's client and address rules and
// ingests it with the URL as its source.
func ingestURL(ctx context.Context, in *docs.Ingester, cfg config.Config, conv, jobID, target string) (docs.File, error) {
	if !cfg.FetchURLEnabled {
		return docs.File{}, errors.New("ingestion by URL is off (MCP_fetch_url_enabled=false)")
	}
	fc, err := newFetcher(cfg)
	if err != nil {
		return docs.File{}, err
	}
	fctx, cancel := context.WithTimeout(ctx, cfg.FetchURLTimeout)
	res, err := fc.Download(fctx, target)
	cancel()
	if err != nil {
		return docs.File{}, fmt.Errorf("fetch: %w", err)
	}
	return in.IngestUpload(ctx, docs.Upload{ConversationID: conv, FileName: res.FileName(), MIMEType: res.ContentType, Source: res.URL, Data: res.Body, JobID: jobID})
}

// runDelete deletes every file of a conversation.
func runDelete(ctx context.Context, env *environment, args []string) error {
	var conv string
	cfg, fs, err := loadConfig(env, "delete", args, func(fs *flag.FlagSet) {
		fs.StringVar(&conv, "conversation", "", "conversation whose files are deleted (required)")
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(conv) == "" || fs.NArg() > 0 {
		return usageError{errors.New("usage: mcpsearch delete --conversation ID")}
	}
	log := newLogger(env.stderr, cfg.LogFormat, "warn")
	pool, st, err := migratedStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	n, err := st.DeleteConversation(ctx, conv)
	if err != nil {
		return errors.New(errText(err))
	}
	// The conversation is gone already; its rows are deleted now rather
	// than left to a server.
	if err := st.Purge(ctx, nil); err != nil {
		return errors.New(errText(err))
	}
	fmt.Fprintf(env.stdout, "deleted %d files of conversation %s\n", n, conv)
	return nil
}

// commandStore loads the configuration of the command name from args and
// opens its store on a current schema, logging at the configured level.
// The caller closes the pool.
func commandStore(ctx context.Context, env *environment, name string, args []string) (config.Config, *pgxpool.Pool, *docs.Store, error) {
	cfg, _, err := loadConfig(env, name, args, nil)
	if err != nil {
		return cfg, nil, nil, err
	}
	pool, st, err := migratedStore(ctx, cfg, newLogger(env.stderr, cfg.LogFormat, cfg.LogLevel))
	return cfg, pool, st, err
}

func runIndex(ctx context.Context, env *environment, args []string) error {
	cfg, pool, st, err := commandStore(ctx, env, "index", args)
	if err != nil {
		return err
	}
	defer pool.Close()
	before, err := st.IndexState(ctx)
	if err != nil {
		return errors.New(errText(err))
	}
	switch {
	case before.Dimensions > docs.MaxIndexDimensions:
		fmt.Fprintf(env.stdout, "%s has %d dimensions: pgvector indexes at most %d, so its chunks are always ranked exactly\n",
			before.Model, before.Dimensions, docs.MaxIndexDimensions)
		return nil
	case before.Indexed+before.Fresh == 0:
		fmt.Fprintf(env.stdout, "no chunk of %s is stored yet: nothing to index\n", before.Model)
		return nil
	case before.Fresh == 0:
		fmt.Fprintf(env.stdout, "the vector index %s already covers every chunk of %s (%d)\n",
			before.Index, before.Model, before.Indexed)
		return nil
	}
	start := time.Now()
	built, err := st.BuildIndex(ctx, indexPolicy(cfg), true)
	if err != nil {
		return errors.New(errText(err))
	}
	if !built {
		return errors.New("another process is building the vector index of " + before.Model + "; try again when it has finished")
	}
	after, err := st.IndexState(ctx)
	if err != nil {
		return errors.New(errText(err))
	}
	fmt.Fprintf(env.stdout, "built %s over %d chunks of %s in %.1fs\n", after.Index, after.Indexed, after.Model, time.Since(start).Seconds())
	return nil
}

func runReembed(ctx context.Context, env *environment, args []string) error {
	cfg, pool, st, err := commandStore(ctx, env, "reembed", args)
	if err != nil {
		return err
	}
	defer pool.Close()
	to, err := newEmbedder(cfg)
	if err != nil {
		return err
	}
	tty := false
	if f, ok := env.stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	p := &reembedProgress{w: env.stderr, tty: tty, model: to.Model(), start: time.Now()}
	err = st.Reembed(ctx, to, p.update)
	p.finish()
	if err != nil {
		return fmt.Errorf("reembed to %s: %w (run the command again: it resumes with the files not moved yet)", to.Model(), err)
	}
	if p.total == 0 {
		fmt.Fprintf(env.stdout, "every chunk already uses %s (%d dimensions): nothing to move\n", to.Model(), to.Dimensions())
		return nil
	}
	elapsed := time.Since(p.start).Seconds()
	fmt.Fprintf(env.stdout, "every chunk now uses %s (%d dimensions): %d chunks moved in %.1fs (%.0f chunks/s)\n",
		to.Model(), to.Dimensions(), p.done, elapsed, float64(p.done)/max(elapsed, 0.001))
	return nil
}

// reembedProgress reports a reembed: on a terminal a bar redrawn at most
// ten times a second, otherwise a line every few seconds. Searches go on
// meanwhile: each file moves in one transaction.
type reembedProgress struct {
	w           io.Writer
	tty         bool
	model       string
	start       time.Time
	drawn       time.Time
	done, total int
	announced   bool
}

func (p *reembedProgress) update(done, total int) {
	p.done, p.total = done, total
	if total == 0 {
		return
	}
	if !p.announced {
		p.announced = true
		fmt.Fprintf(p.w, "reembed: moving %d chunks to %s, one file at a time; searches go on meanwhile, and an interrupted run resumes where it stopped\n", total, p.model)
	}
	every := 5 * time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	if done < total && time.Since(p.drawn) < every {
		return
	}
	p.drawn = time.Now()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K"+p.bar())
		return
	}
	fmt.Fprintln(p.w, "reembed: "+p.bar())
}

// bar is the progress line: a bar, chunks moved, the rate and the time
// left at that rate.
func (p *reembedProgress) bar() string {
	const width = 24
	filled := 0
	if p.total > 0 {
		filled = width * min(p.done, p.total) / p.total
	}
	elapsed := max(time.Since(p.start).Seconds(), 0.001)
	rate := float64(p.done) / elapsed
	left := "--"
	switch {
	case p.done >= p.total:
		left = "0s"
	case rate > 0:
		left = (time.Duration(float64(p.total-p.done)/rate) * time.Second).Round(time.Second).String()
	}
	return fmt.Sprintf("[%s%s] chunks %d/%d  %.0f chunks/s  left %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		p.done, p.total, rate, left)
}

// finish ends the bar's line on a terminal.
func (p *reembedProgress) finish() {
	if p.tty && !p.drawn.IsZero() {
		fmt.Fprintln(p.w)
	}
}
