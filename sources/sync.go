package sources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/mcpsearch/mcpsearch/crawl"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/jobs"
)

// Syncer runs the crawl and sync jobs of sources: register Kinds with the
// jobs runner, then add jobs with Crawl and Sync.
type Syncer struct {
	st     *Store
	client crawl.Client
	// base are the crawl options every site starts from: the user agent,
	// requests per host and the least delay (MCP_crawl_delay_ms), the page
	// size limit, the renderer of pages built by scripts.
	base crawl.Options
	log  *slog.Logger
	// reportEvery spaces the job's progress reports.
	reportEvery time.Duration
}

// NewSyncer returns a Syncer crawling through client (fetch.Client: with
// fetch_url's address rules) with base as every crawl's defaults.
func NewSyncer(st *Store, client crawl.Client, base crawl.Options, log *slog.Logger) *Syncer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Syncer{st: st, client: client, base: base, log: log, reportEvery: time.Second}
}

// Store returns the sources store.
func (sy *Syncer) Store() *Store { return sy.st }

// Kinds are the job kinds the Syncer runs, for jobs.Options.Kinds.
func (sy *Syncer) Kinds() map[string]jobs.KindFunc {
	return map[string]jobs.KindFunc{JobCrawl: sy.Run, JobSync: sy.Run}
}

// CheckOptions validates a site's crawl options as the crawler takes them.
func (sy *Syncer) CheckOptions(opts CrawlOptions) error {
	if opts.DelayMS < 0 || opts.DelayMS > MaxDelayMS {
		return fmt.Errorf("%w: delay_ms %d must be between 0 and %d", docs.ErrInvalidArgument, opts.DelayMS, MaxDelayMS)
	}
	_, err := crawl.New(sy.client, sy.crawlOptions(opts))
	if err != nil {
		return fmt.Errorf("%w: %w", docs.ErrInvalidArgument, err)
	}
	return nil
}

// crawlOptions are the crawler's options for a site: the Syncer's base
// with the site's own. The site's delay may lengthen the base's, not
// shorten it.
func (sy *Syncer) crawlOptions(opts CrawlOptions) crawl.Options {
	o := sy.base
	o.MaxPages, o.MaxDepth, o.Scope = opts.MaxPages, opts.MaxDepth, crawl.Scope(opts.Scope)
	o.Include, o.Exclude = opts.Include, opts.Exclude
	o.Delay = max(o.Delay, time.Duration(opts.DelayMS)*time.Millisecond)
	o.Render = crawl.RenderMode(opts.Render)
	if len(opts.Headers) > 0 {
		o.Headers = http.Header{}
		for name, v := range opts.Headers {
			o.Headers[http.CanonicalHeaderKey(name)] = []string{v}
		}
	}
	return o
}

// Crawl records the site at start as a source of conversation conv, with
// opts, and starts its first crawl as a job (or a sync, when the source
// exists already). It returns the job, queued.
func (sy *Syncer) Crawl(ctx context.Context, r *jobs.Runner, conv, start string, opts CrawlOptions, caller string) (jobs.Job, Source, error) {
	u, err := crawl.Normalize(start)
	if err != nil {
		return jobs.Job{}, Source{}, fmt.Errorf("%w: %w", docs.ErrInvalidArgument, err)
	}
	if err := sy.CheckOptions(opts); err != nil {
		return jobs.Job{}, Source{}, err
	}
	src, err := sy.st.Ensure(ctx, conv, KindSite, u, opts)
	if err != nil {
		return jobs.Job{}, Source{}, err
	}
	kind := JobCrawl
	if !src.LastSyncAt.IsZero() || src.Pages > 0 {
		kind = JobSync
	}
	j, err := r.AddKind(ctx, conv, kind, jobInput(src), caller)
	return j, src, err
}

// Sync starts a sync of site source src as a job.
func (sy *Syncer) Sync(ctx context.Context, r *jobs.Runner, src Source, caller string) (jobs.Job, error) {
	if src.Kind != KindSite {
		return jobs.Job{}, fmt.Errorf("%w: source %s is a folder: sync it with mcpsearch ingest --sync %s on the machine that has it",
			docs.ErrInvalidArgument, src.ID, src.Root)
	}
	return r.AddKind(ctx, src.ConversationID, JobSync, jobInput(src), caller)
}

// Run is the jobs' function of a crawl or sync: it crawls the source's
// site with what it knows of each page, stores what is new or changed,
// forgets what is gone, and reports as it goes.
func (sy *Syncer) Run(ctx context.Context, r *jobs.Runner, j jobs.Job) error {
	src, err := sy.st.Get(ctx, j.Input.SourceID)
	if err != nil {
		return err
	}
	if src.Kind != KindSite {
		return fmt.Errorf("source %s is a folder, synced by mcpsearch ingest --sync", src.ID)
	}
	c, err := crawl.New(sy.client, sy.crawlOptions(src.Options))
	if err != nil {
		return err
	}
	pages, err := sy.st.Pages(ctx, src)
	if err != nil {
		return err
	}
	known := make(map[string]crawl.Known, len(pages))
	for u, p := range pages {
		// A page whose file was deleted (delete_document) is fetched as
		// new again.
		if p.FileID != "" {
			known[u] = p.Known
		}
	}
	sum := Summary{Skipped: map[string]int{}}
	var mu sync.Mutex
	var stats crawl.Stats
	var lastReport time.Time
	report := func(final bool) {
		mu.Lock()
		rep := jobs.Report{Message: progressLine(stats, sum), Counts: counts(sum, stats), Skipped: sum.Skipped}
		mu.Unlock()
		if err := r.Store().SetReport(context.WithoutCancel(ctx), j, rep, final); err != nil && final {
			sy.log.Warn("sources: cannot record a sync's report", "job_id", j.ID, "error", err)
		}
	}
	// Pages are stored in batches by a goroutine of their own while the
	// crawl goes on: stored one at a time, the database's round trips
	// would set the crawl's pace.
	cctx, stopCrawl := context.WithCancelCause(ctx)
	defer stopCrawl(nil)
	queue := make(chan crawl.Page, storeBatch)
	stored := make(chan struct{})
	var storeErr error
	go func() {
		defer close(stored)
		for p := range queue {
			batch := []crawl.Page{p}
		fill:
			for len(batch) < storeBatch {
				select {
				case q, ok := <-queue:
					if !ok {
						break fill
					}
					batch = append(batch, q)
				default:
					break fill
				}
			}
			if storeErr != nil {
				continue
			}
			if err := sy.store(ctx, r, j, src, pages, batch, &sum, &mu); err != nil {
				storeErr = err
				stopCrawl(err)
			}
		}
	}()
	emit := func(p crawl.Page) error {
		if p.Status == crawl.StatusGone {
			// Gone pages are removed with the others after the crawl.
			return nil
		}
		select {
		case queue <- p:
			return nil
		case <-cctx.Done():
			return context.Cause(cctx)
		}
	}
	progress := func(s crawl.Stats) {
		mu.Lock()
		stats = s
		due := time.Since(lastReport) >= sy.reportEvery
		if due {
			lastReport = time.Now()
		}
		mu.Unlock()
		if due {
			report(false)
		}
	}
	cs, cerr := c.Crawl(cctx, src.Root, known, emit, progress)
	close(queue)
	<-stored
	if storeErr != nil && cerr == nil {
		cerr = storeErr
	}
	sum.Fetched, sum.NotModified, sum.Limited = cs.Fetched, cs.NotModified, cs.Limited
	for reason, n := range cs.Skipped {
		sum.Skipped[string(reason)] += n
	}
	sum.Skips = cs.Skips
	if cerr == nil {
		gone := cs.Removed(known)
		if _, err := sy.st.RemovePages(ctx, src, gone); err != nil {
			cerr = err
		}
		sum.Removed += len(gone)
	}
	if cerr != nil {
		sum.Error = cerr.Error()
	}
	report(true)
	if ctx.Err() != nil {
		// Cancelled: what was stored is the cancel's to keep or remove;
		// the source records the sync as it stood.
		_ = sy.st.Finish(context.WithoutCancel(ctx), src, j.ID, sum)
		return context.Cause(ctx)
	}
	if err := sy.st.Finish(ctx, src, j.ID, sum); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("crawl %s: %w", src.Root, cerr)
	}
	return nil
}

// storeBatch is the most pages stored at once.
const storeBatch = 64

// store stores the new and changed pages of batch as files of job j, and
// records every page of it.
func (sy *Syncer) store(ctx context.Context, r *jobs.Runner, j jobs.Job, src Source, pages map[string]Page, batch []crawl.Page, sum *Summary, mu *sync.Mutex) error {
	var ups []docs.Upload
	var at []int
	for i, p := range batch {
		if p.Status == crawl.StatusNew || p.Status == crawl.StatusChanged {
			ups = append(ups, docs.Upload{FileName: p.FileName(), MIMEType: p.ContentType, Source: p.URL, Data: p.Body})
			at = append(at, i)
		}
	}
	fileOf := make([]string, len(batch))
	refused := make([]bool, len(batch))
	if len(ups) > 0 {
		files, errs, err := r.StoreFiles(ctx, j, ups)
		if err != nil {
			return err
		}
		for k, i := range at {
			if errs[k] != nil {
				refused[i] = true
			} else {
				fileOf[i] = files[k].ID
			}
		}
	}
	var save []Page
	var forget []string
	var added, updated, unchanged, refusals int
	for i, p := range batch {
		known := crawl.Known{ETag: p.ETag, LastModified: p.LastModified, Hash: p.Hash, Links: p.Links}
		switch _, had := pages[p.URL]; {
		case p.Status == crawl.StatusUnchanged:
			save = append(save, Page{URL: p.URL, FileID: pages[p.URL].FileID, Known: known})
			unchanged++
		case refused[i]:
			// Refused (type, size): counted in the job's refusals, and the
			// page is forgotten so that a later sync tries it again.
			forget = append(forget, p.URL)
			refusals++
		default:
			save = append(save, Page{URL: p.URL, FileID: fileOf[i], Known: known})
			if had && p.Status == crawl.StatusChanged {
				updated++
			} else {
				added++
			}
		}
	}
	if _, err := sy.st.SavePages(ctx, src, save); err != nil {
		return err
	}
	if _, err := sy.st.RemovePages(ctx, src, forget); err != nil {
		return err
	}
	mu.Lock()
	sum.Added += added
	sum.Updated += updated
	sum.Unchanged += unchanged
	if refusals > 0 {
		sum.Skipped["refused"] += refusals
	}
	mu.Unlock()
	return nil
}

// progressLine says where a crawl stands: "crawling: 120 pages fetched,
// 300 queued, 12 skipped".
func progressLine(s crawl.Stats, sum Summary) string {
	line := fmt.Sprintf("crawling: %d pages fetched, %d queued, %d skipped", s.Fetched, s.Queued, s.Skipped)
	if sum.Added+sum.Updated+sum.Unchanged > 0 {
		line += fmt.Sprintf(" (%d added, %d updated, %d unchanged)", sum.Added, sum.Updated, sum.Unchanged)
	}
	return line
}

// counts is a sync's report in numbers.
func counts(sum Summary, s crawl.Stats) map[string]int {
	m := map[string]int{"added": sum.Added, "updated": sum.Updated, "removed": sum.Removed, "unchanged": sum.Unchanged,
		"fetched": max(sum.Fetched, s.Fetched), "queued": s.Queued}
	if sum.NotModified > 0 {
		m["not_modified"] = sum.NotModified
	}
	return m
}

// Service is what the server offers of sources: crawl a site, sync a
// source, list and delete them. It runs its jobs on a jobs.Runner that
// has the Syncer's Kinds.
type Service struct {
	sy *Syncer
	r  *jobs.Runner
}

// NewService returns a Service adding jobs to r, whose Options.Kinds must
// hold sy.Kinds().
func NewService(sy *Syncer, r *jobs.Runner) *Service { return &Service{sy: sy, r: r} }

// Crawl records the site at start as a source of conv and starts its
// crawl (or its sync, when it is a source already) as a job.
func (s *Service) Crawl(ctx context.Context, conv, start string, opts CrawlOptions, caller string) (jobs.Job, Source, error) {
	return s.sy.Crawl(ctx, s.r, conv, start, opts, caller)
}

// Sync starts a sync of site source src as a job.
func (s *Service) Sync(ctx context.Context, src Source, caller string) (jobs.Job, error) {
	return s.sy.Sync(ctx, s.r, src, caller)
}

// Get returns source id.
func (s *Service) Get(ctx context.Context, id string) (Source, error) { return s.sy.st.Get(ctx, id) }

// List returns a conversation's sources.
func (s *Service) List(ctx context.Context, conv string) ([]Source, error) {
	return s.sy.st.List(ctx, conv)
}

// Delete removes source src with the files that came only from it,
// cancelling its sync first if one is under way.
func (s *Service) Delete(ctx context.Context, src Source) (int, error) {
	ids, err := s.sy.st.activeJobs(ctx, src)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		if _, err := s.r.Cancel(ctx, id); err != nil && !errors.Is(err, jobs.ErrFinished) && !errors.Is(err, jobs.ErrNotFound) {
			return 0, err
		}
	}
	return s.sy.st.Delete(ctx, src)
}
