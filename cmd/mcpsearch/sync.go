package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/crawl"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/render"
	"github.com/mcpsearch/mcpsearch/sources"
)

// crawlFlags are the crawl options of ingest --crawl, as flags.
type crawlFlags struct {
	opts             sources.CrawlOptions
	include, exclude globList
	headers          headerList
}

func (c *crawlFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&c.opts.MaxPages, "max-pages", 0, fmt.Sprintf("with --crawl, the most pages fetched (default %d, at most %d)", crawl.DefaultMaxPages, crawl.MaxPagesLimit))
	fs.IntVar(&c.opts.MaxDepth, "max-depth", 0, fmt.Sprintf("with --crawl, how many links away from the start page (default %d)", crawl.DefaultMaxDepth))
	fs.StringVar(&c.opts.Scope, "scope", "", "with --crawl, the pages followed: prefix (of the start URL, the default), host or domain")
	fs.Var(&c.include, "include", "with --crawl, keep only pages whose path matches this glob (/docs/**); repeatable")
	fs.Var(&c.exclude, "exclude", "with --crawl, leave out pages whose path matches this glob (**/changelog*); repeatable")
	fs.IntVar(&c.opts.DelayMS, "delay-ms", 0, fmt.Sprintf("with --crawl, the least time between two requests to the site, in milliseconds (0 to %d; default none: the crawl slows itself when the site does)", sources.MaxDelayMS))
	fs.StringVar(&c.opts.Render, "render", "", "with --crawl, which pages are rendered in headless Chromium: auto (pages that scripts build, the default), never or always")
	fs.Var(&c.headers, "header", "with --crawl, a request header for a private site, 'Name: value' (Authorization, Cookie), sent to the start URL's host alone and kept with the source; repeatable")
}

func (c *crawlFlags) options() sources.CrawlOptions {
	o := c.opts
	o.Include, o.Exclude = c.include, c.exclude
	if len(c.headers) > 0 {
		o.Headers = map[string]string(c.headers)
	}
	return o
}

// headerList is the repeatable --header flag: "Name: value".
type headerList map[string]string

// String names the headers, never their values: flag shows it in errors.
func (l *headerList) String() string { return strings.Join(slices.Sorted(maps.Keys(*l)), ", ") }

func (l *headerList) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if name = strings.TrimSpace(name); !ok || name == "" {
		return errors.New("want 'Name: value', such as 'Authorization: Bearer ...'")
	}
	if *l == nil {
		*l = headerList{}
	}
	(*l)[name] = strings.TrimSpace(value)
	return nil
}

// globList is a repeatable flag.
type globList []string

func (l *globList) String() string     { return strings.Join(*l, ",") }
func (l *globList) Set(v string) error { *l = append(*l, v); return nil }

// syncRun is what a crawl or a sync from the CLI works with: the stores,
// the ingester processing the files it stores, and a jobs runner that runs
// no job but its own.
type syncRun struct {
	env    *environment
	cfg    config.Config
	docs   *docs.Store
	in     *docs.Ingester
	runner *jobs.Runner
	src    *sources.Store
	syncer *sources.Syncer
	render *render.Renderer
}

// openSyncRun opens the database, an ingester and a syncRun on them; the
// function it returns closes them, in order.
func openSyncRun(ctx context.Context, env *environment, cfg config.Config) (*syncRun, func(), error) {
	log := newLogger(env.stderr, cfg.LogFormat, "warn")
	pool, st, err := migratedStore(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	in, err := newIngester(cfg, st, log, false, nil)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	s, err := newSyncRun(env, cfg, st, in)
	if err != nil {
		in.Close()
		pool.Close()
		return nil, nil, err
	}
	return s, func() { s.runner.Close(); s.render.Close(); in.Close(); pool.Close() }, nil
}

func newSyncRun(env *environment, cfg config.Config, st *docs.Store, in *docs.Ingester) (*syncRun, error) {
	fc, err := newFetcher(cfg)
	if err != nil {
		return nil, err
	}
	srcs := sources.NewStore(st)
	rd := newRenderer(cfg, fc, nil)
	sy := sources.NewSyncer(srcs, fc, crawlBase(cfg, rd), nil)
	r := jobs.NewRunner(jobs.NewStore(st), in, jobs.Options{Workers: -1, Lease: time.Duration(cfg.JobLeaseSeconds) * time.Second,
		Kinds: sy.Kinds()})
	return &syncRun{env: env, cfg: cfg, docs: st, in: in, runner: r, src: srcs, syncer: sy, render: rd}, nil
}

// crawlBase are the crawl options every site starts from; rd renders the
// pages built by scripts.
func crawlBase(cfg config.Config, rd *render.Renderer) crawl.Options {
	return crawl.Options{UserAgent: cfg.FetchURLUserAgent, PerHost: cfg.CrawlPerHost, MaxBytes: cfg.FetchURLMaxBytes,
		Timeout: cfg.FetchURLTimeout, Delay: time.Duration(cfg.CrawlDelayMS) * time.Millisecond, Renderer: rd}
}

// newRenderer returns the headless browser crawls render pages built by
// scripts with, through fetch_url's client: MCP_crawl_render_max pages at
// once. It starts Chromium at the first such page; without Chromium those
// pages are skipped, "needs a browser: install chromium".
func newRenderer(cfg config.Config, fc *fetch.Client, log *slog.Logger) *render.Renderer {
	return render.New(fc, render.Options{MaxPages: cfg.CrawlRenderMax, MaxBytes: cfg.FetchURLMaxBytes, Log: log})
}

// crawlSite crawls the site at start into conv, recording it as a source
// (or syncing it, when it is one already), and waits for its files.
func (s *syncRun) crawlSite(ctx context.Context, conv, start string, opts sources.CrawlOptions) error {
	u, err := crawl.Normalize(start)
	if err != nil {
		return err
	}
	if err := s.syncer.CheckOptions(opts); err != nil {
		return err
	}
	src, err := s.src.Ensure(ctx, conv, sources.KindSite, u, opts)
	if err != nil {
		return err
	}
	return s.syncSite(ctx, src)
}

// syncSite runs a sync of site source src in this process, as a job the
// servers show, and waits for its files to be processed.
func (s *syncRun) syncSite(ctx context.Context, src sources.Source) error {
	kind := sources.JobSync
	if src.LastSyncAt.IsZero() && src.Pages == 0 {
		kind = sources.JobCrawl
	}
	jst := s.runner.Store()
	token := uuid.NewString()
	lease := time.Duration(s.cfg.JobLeaseSeconds) * time.Second
	j, err := jst.CreateHeld(ctx, src.ConversationID, kind, jobs.Input{URL: src.Root, SourceID: src.ID}, "cli", token, lease)
	if err != nil {
		return fmt.Errorf("record the job: %w", err)
	}
	fmt.Fprintf(s.env.stderr, "job %s: %s %s\n", j.ID, kind, src.Root)
	jctx, release := jst.Hold(ctx, j, token, lease, time.Second)
	defer release()
	runErr := s.syncer.Run(jctx, s.runner, j)
	if cause := context.Cause(jctx); cause != nil && ctx.Err() == nil {
		return fmt.Errorf("stopped: %w", cause)
	}
	if runErr == nil {
		runErr = jst.Submit(ctx, j, jobs.Outcome{})
	} else {
		_ = jst.Fail(context.WithoutCancel(ctx), j, runErr.Error())
	}
	release()
	// The files stored wait for this process's workers (or a server's).
	final, err := waitJob(ctx, s.env.stderr, jst, j.ID)
	if err != nil {
		return err
	}
	after, err := s.src.Get(ctx, src.ID)
	if err == nil {
		printSummary(s.env.stdout, after.LastSummary, final)
	}
	if runErr != nil {
		return runErr
	}
	if final.Status == jobs.Failed {
		return errors.New(final.Error)
	}
	return nil
}

// waitJob waits for job id to end, printing its progress on w.
func waitJob(ctx context.Context, w io.Writer, st *jobs.Store, id string) (jobs.Job, error) {
	last := ""
	for {
		j, err := st.Get(ctx, id)
		if err != nil {
			return j, err
		}
		if p := j.Progress(); p != last {
			fmt.Fprintf(w, "%s: %s\n", j.Status, p)
			last = p
		}
		if jobs.Final(j.Status) {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// printSummary prints a sync's summary on one line.
func printSummary(w io.Writer, sum sources.Summary, j jobs.Job) {
	fmt.Fprintf(w, "%d added, %d updated, %d removed, %d unchanged; %d fetched", sum.Added, sum.Updated, sum.Removed, sum.Unchanged, sum.Fetched)
	if sum.NotModified > 0 {
		fmt.Fprintf(w, " (%d not modified)", sum.NotModified)
	}
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(sum.Skipped)) {
		if n := sum.Skipped[reason]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", reason, n))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "; skipped: %s", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "; job %s %s\n", j.ID, j.Status)
}

// syncFolder syncs folder dir into conv as a source: files new or changed
// since the last sync (by size and time, then by content) are read again,
// files deleted from the folder are removed, the rest is left alone.
func (s *syncRun) syncFolder(ctx context.Context, conv, dir string, verbose bool) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return fmt.Errorf("--sync wants a folder: %s", dir)
	}
	src, err := s.src.Ensure(ctx, conv, sources.KindFolder, abs, sources.CrawlOptions{})
	if err != nil {
		return err
	}
	engine, err := newOCR(s.cfg)
	if err != nil {
		return err
	}
	paths, skips, err := collectFiles([]string{abs}, extract.Limits{MaxBytes: s.cfg.MaxFileBytes, OCR: engine})
	if err != nil {
		return err
	}
	known, err := s.src.Pages(ctx, src)
	if err != nil {
		return err
	}
	sum := sources.Summary{Skipped: map[string]int{}}
	type stat struct {
		size int64
		mod  time.Time
	}
	stats := map[string]stat{}
	present := map[string]bool{}
	var read []string
	for _, p := range paths {
		rel, err := filepath.Rel(abs, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		present[rel] = true
		fi, err := os.Stat(p)
		if err != nil {
			skips = append(skips, skip{p, "unreadable: " + errText(err)})
			continue
		}
		st := stat{fi.Size(), fi.ModTime().UTC().Truncate(time.Microsecond)}
		stats[p] = st
		if k, ok := known[rel]; ok && k.FileID != "" && k.SizeBytes == st.size && k.ModifiedAt.Equal(st.mod) {
			// Same size and time: not read at all.
			sum.Unchanged++
			continue
		}
		read = append(read, p)
	}
	if len(skips) > 0 {
		sum.Skipped["unsupported or unreadable"] = len(skips)
	}
	jst := s.runner.Store()
	token := uuid.NewString()
	lease := time.Duration(s.cfg.JobLeaseSeconds) * time.Second
	j, err := jst.CreateHeld(ctx, conv, sources.JobSync, jobs.Input{Folder: abs, SourceID: src.ID}, "cli", token, lease)
	if err != nil {
		return fmt.Errorf("record the job: %w", err)
	}
	fmt.Fprintf(s.env.stderr, "job %s: sync %s (%d files, %d to read)\n", j.ID, abs, len(paths), len(read))
	jctx, release := jst.Hold(ctx, j, token, lease, time.Second)
	defer release()
	var saveErr error
	out, err := ingestFilesWith(jctx, s.env, s.in, conv, j.ID, read, skips, s.cfg, verbose, func(path string, f docs.File) {
		rel, _ := filepath.Rel(abs, path)
		rel = filepath.ToSlash(rel)
		k, wasKnown := known[rel]
		switch {
		case wasKnown && k.FileID == f.ID:
			sum.Unchanged++
		case wasKnown:
			sum.Updated++
		default:
			sum.Added++
		}
		st := stats[path]
		if _, err := s.src.SavePage(jctx, src, sources.Page{URL: rel, FileID: f.ID, Known: crawl.Known{Hash: f.SHA256},
			SizeBytes: st.size, ModifiedAt: st.mod}); err != nil && saveErr == nil {
			saveErr = err
		}
	})
	if cause := context.Cause(jctx); cause != nil && ctx.Err() == nil {
		return fmt.Errorf("stopped: %w", cause)
	}
	var gone []string
	for rel := range known {
		if !present[rel] {
			gone = append(gone, rel)
		}
	}
	if ctx.Err() == nil && saveErr == nil {
		if _, err := s.src.RemovePages(ctx, src, gone); err != nil {
			saveErr = err
		}
		sum.Removed = len(gone)
	}
	sum.Fetched = len(read)
	if serr := jst.Submit(context.WithoutCancel(ctx), j, out); serr != nil && saveErr == nil {
		saveErr = serr
	}
	if ferr := s.src.Finish(context.WithoutCancel(ctx), src, j.ID, sum); ferr != nil && saveErr == nil {
		saveErr = ferr
	}
	final, _ := jst.Get(context.WithoutCancel(ctx), j.ID)
	printSummary(s.env.stdout, sum, final)
	if saveErr != nil {
		return saveErr
	}
	return err
}

// runSync syncs a conversation's sources: every one, or the one named.
// A site is crawled again with conditional requests; a folder is synced
// when it is on this machine.
func runSync(ctx context.Context, env *environment, args []string) error {
	var conv, sourceID string
	var verbose bool
	cfg, _, err := loadConfig(env, "sync", args, func(fs *flag.FlagSet) {
		fs.StringVar(&conv, "conversation", "", "conversation whose sources are synced (required)")
		fs.StringVar(&sourceID, "source", "", "sync only this source (an id from list_sources)")
		fs.BoolVar(&verbose, "verbose", false, "list every file of a folder read, not only those skipped or failed")
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(conv) == "" {
		return usageError{errors.New("usage: mcpsearch sync --conversation ID [--source SOURCE_ID]")}
	}
	s, closeRun, err := openSyncRun(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer closeRun()
	list, err := s.src.List(ctx, conv)
	if err != nil {
		return err
	}
	var errs []error
	n := 0
	for _, src := range list {
		if sourceID != "" && src.ID != sourceID {
			continue
		}
		n++
		fmt.Fprintf(env.stderr, "source %s: %s %s\n", src.ID, src.Kind, src.Root)
		switch src.Kind {
		case sources.KindSite:
			err = s.syncSite(ctx, src)
		default:
			err = s.syncFolder(ctx, conv, src.Root, verbose)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", src.Root, err))
		}
	}
	if n == 0 {
		if sourceID != "" {
			return fmt.Errorf("conversation %s has no source %s", conv, sourceID)
		}
		return fmt.Errorf("conversation %s has no source: add one with mcpsearch ingest --crawl URL or --sync DIR", conv)
	}
	return errors.Join(errs...)
}
