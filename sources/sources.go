// Package sources keeps where a conversation's files come from, a site
// crawled from a start URL or a folder the CLI ingests, so that they can be
// synced: only what changed is read and embedded again, what is gone is
// removed, what is new is added. A source lives in PostgreSQL (migration
// 014) with, per page or file, what the next sync needs to tell whether it
// changed (HTTP validators and a content hash, or a file's size and time).
// A sync is a job (package jobs): followed, cancelled and resumed like any
// other.
package sources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/crawl"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/jobs"
)

// Source kinds.
const (
	KindSite   = "site"
	KindFolder = "folder"
)

// Job kinds of a sync (registered with jobs.Options.Kinds).
const (
	// JobCrawl is the first crawl of a site.
	JobCrawl = "crawl"
	// JobSync is a sync of a source already read.
	JobSync = "sync"
)

// ErrNotFound reports a source that does not exist.
var ErrNotFound = errors.New("source not found")

// CrawlOptions are a site source's crawl settings, as the tools, the CLI
// and the database give them.
type CrawlOptions struct {
	MaxPages int      `json:"max_pages,omitempty"`
	MaxDepth int      `json:"max_depth,omitempty"`
	Scope    string   `json:"scope,omitempty"`
	Include  []string `json:"include,omitempty"`
	Exclude  []string `json:"exclude,omitempty"`
	// DelayMS, when above 0, is the least time between two requests to
	// the site, 0 to MaxDelayMS milliseconds; the server's
	// MCP_crawl_delay_ms or the site's Crawl-delay may ask for more.
	DelayMS int `json:"delay_ms,omitempty"`
	// Render is never, auto (the default) or always: which pages are
	// rendered in a headless browser (crawl.RenderMode).
	Render string `json:"render,omitempty"`
	// Headers are request headers for a private site (Authorization,
	// Cookie), sent to the start URL's origin alone. They are stored with
	// the source and never shown: the options' JSON leaves them out
	// (HeaderNames gives their names).
	Headers map[string]string `json:"-"`
}

// MaxDelayMS is the largest CrawlOptions.DelayMS.
const MaxDelayMS = 60000

// HeaderNames returns the names of the options' headers, sorted: what is
// shown of them.
func (o CrawlOptions) HeaderNames() []string {
	return slices.Sorted(maps.Keys(o.Headers))
}

// storedOptions is the options column: the options with their headers.
type storedOptions struct {
	CrawlOptions
	Headers map[string]string `json:"headers,omitempty"`
}

// Summary is what a sync did: the source's files added, updated, removed
// and left unchanged, the pages fetched, and the pages skipped by reason
// with a few examples.
type Summary struct {
	Added     int `json:"added"`
	Updated   int `json:"updated"`
	Removed   int `json:"removed"`
	Unchanged int `json:"unchanged"`
	// Fetched counts the pages fetched (a site), or the files read (a
	// folder).
	Fetched int `json:"fetched"`
	// NotModified counts the pages the site answered 304.
	NotModified int            `json:"not_modified,omitempty"`
	Skipped     map[string]int `json:"skipped,omitempty"`
	Skips       []crawl.Skip   `json:"skips,omitempty"`
	// Limited reports that max_pages stopped the crawl with pages left.
	Limited bool `json:"limited,omitempty"`
	// Error says why the sync stopped before its end; pages not reached
	// then were not removed.
	Error string `json:"error,omitempty"`
}

// Source is one source of a conversation.
type Source struct {
	ID             string
	ConversationID string
	Kind           string
	// Root is a site's start URL or a folder's absolute path.
	Root       string
	Options    CrawlOptions
	CreatedAt  time.Time
	LastSyncAt time.Time
	LastJobID  string
	// LastSummary is the last sync's.
	LastSummary Summary
	// Pages counts the pages or files the source knows; Files the distinct
	// files holding them.
	Pages, Files int
}

// Store keeps sources in PostgreSQL, beside the documents.
type Store struct {
	pool *pgxpool.Pool
	docs *docs.Store
}

// NewStore returns a Store over the documents store's database.
func NewStore(d *docs.Store) *Store { return &Store{pool: d.Pool(), docs: d} }

const sourceColumns = `s.id::text, s.conversation_id, s.kind, s.root, s.options, s.created_at, s.last_sync_at,
	coalesce(s.last_job_id::text, ''), s.last_summary,
	(SELECT count(*) FROM source_pages p WHERE p.conversation_id = s.conversation_id AND p.source_id = s.id),
	(SELECT count(DISTINCT p.file_id) FROM source_pages p WHERE p.conversation_id = s.conversation_id AND p.source_id = s.id)`

func scanSource(row pgx.Row) (Source, error) {
	var src Source
	var opts, summary []byte
	var last *time.Time
	err := row.Scan(&src.ID, &src.ConversationID, &src.Kind, &src.Root, &opts, &src.CreatedAt, &last, &src.LastJobID, &summary, &src.Pages, &src.Files)
	if err != nil {
		return Source{}, err
	}
	if last != nil {
		src.LastSyncAt = *last
	}
	// Both columns are written by this package alone.
	var stored storedOptions
	_ = json.Unmarshal(opts, &stored)
	src.Options = stored.CrawlOptions
	src.Options.Headers = stored.Headers
	_ = json.Unmarshal(summary, &src.LastSummary)
	return src, nil
}

// Ensure returns the source of conversation conv of kind and root,
// recording it with opts when it is new; an existing one takes opts as its
// options from now on.
func (s *Store) Ensure(ctx context.Context, conv, kind, root string, opts CrawlOptions) (Source, error) {
	conv, err := docs.CheckConversationID(conv)
	if err != nil {
		return Source{}, err
	}
	raw, err := json.Marshal(storedOptions{CrawlOptions: opts, Headers: opts.Headers})
	if err != nil {
		return Source{}, fmt.Errorf("sources: %w", err)
	}
	b := &pgx.Batch{}
	// The conversation's key lets Get find the source by its id alone.
	b.Queue(`INSERT INTO conversation_keys (key, conversation_id) VALUES (conversation_key($1), $1) ON CONFLICT DO NOTHING`, conv)
	b.Queue(`
		INSERT INTO sources AS s (conversation_id, id, kind, root, options) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (conversation_id, kind, root) DO UPDATE SET options = excluded.options`, conv, docs.NewID(conv), kind, root, raw)
	b.Queue(`SELECT `+sourceColumns+` FROM sources s WHERE s.conversation_id = $1 AND s.kind = $2 AND s.root = $3`, conv, kind, root)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return Source{}, dbError("sources: record", err)
		}
	}
	src, err := scanSource(br.QueryRow())
	if err != nil {
		return Source{}, dbError("sources: record", err)
	}
	return src, nil
}

// Get returns source id.
func (s *Store) Get(ctx context.Context, id string) (Source, error) {
	convs, err := s.docs.ConversationsOf(ctx, strings.TrimSpace(id))
	if err != nil {
		return Source{}, fmt.Errorf("sources: %w", err)
	}
	if len(convs) == 0 {
		return Source{}, fmt.Errorf("sources: source %s: %w", id, ErrNotFound)
	}
	src, err := scanSource(s.pool.QueryRow(ctx, `SELECT `+sourceColumns+` FROM sources s
		WHERE s.id = $1::uuid AND s.conversation_id = ANY($2::text[])`, strings.TrimSpace(id), convs))
	if errors.Is(err, pgx.ErrNoRows) {
		return Source{}, fmt.Errorf("sources: source %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Source{}, dbError("sources: get", err)
	}
	return src, nil
}

// List returns the sources of conversation conv, oldest first.
func (s *Store) List(ctx context.Context, conv string) ([]Source, error) {
	conv, err := docs.CheckConversationID(conv)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+sourceColumns+` FROM sources s WHERE s.conversation_id = $1 ORDER BY s.created_at, s.id`, conv)
	if err != nil {
		return nil, dbError("sources: list", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Source, error) { return scanSource(r) })
	if err != nil {
		return nil, dbError("sources: list", err)
	}
	if list == nil {
		list = []Source{}
	}
	return list, nil
}

// Delete removes source src with its pages and the files that came only
// from it: files its syncs stored that no other source's page holds. Files
// the conversation had before (an upload of the same bytes) stay. It
// returns how many files it deleted.
func (s *Store) Delete(ctx context.Context, src Source) (int, error) {
	rows, err := s.pool.Query(ctx, `
		DELETE FROM source_pages WHERE conversation_id = $1 AND source_id = $2 RETURNING file_id`, src.ConversationID, src.ID)
	if err != nil {
		return 0, dbError("sources: delete", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[*string])
	if err != nil {
		return 0, dbError("sources: delete", err)
	}
	n, err := s.dropOrphans(ctx, src, ids)
	if err != nil {
		return n, err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM sources WHERE conversation_id = $1 AND id = $2`, src.ConversationID, src.ID); err != nil {
		return n, dbError("sources: delete", err)
	}
	return n, nil
}

// dropOrphans deletes those of files ids that no page of any source holds
// any more and that a job of source src stored; it returns how many.
func (s *Store) dropOrphans(ctx context.Context, src Source, ids []*string) (int, error) {
	var want []string
	seen := map[string]bool{}
	for _, id := range ids {
		if id != nil && !seen[*id] {
			seen[*id] = true
			want = append(want, *id)
		}
	}
	if len(want) == 0 {
		return 0, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT f.id::text FROM files f
		WHERE f.conversation_id = $1 AND f.id = ANY($2::uuid[])
		  AND NOT EXISTS (SELECT FROM source_pages p WHERE p.conversation_id = $1 AND p.file_id = f.id)
		  AND EXISTS (SELECT FROM jobs j WHERE j.conversation_id = $1 AND j.id = f.job_id AND j.input->>'source_id' = $3)`,
		src.ConversationID, want, src.ID)
	if err != nil {
		return 0, dbError("sources: find files to delete", err)
	}
	orphans, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, dbError("sources: find files to delete", err)
	}
	n := 0
	for _, id := range orphans {
		err := s.docs.DeleteFile(ctx, id)
		switch {
		case errors.Is(err, docs.ErrNotFound):
		case err != nil:
			return n, err
		default:
			n++
		}
	}
	return n, nil
}

// Page is what a source knows of one of its pages or files.
type Page struct {
	URL    string
	FileID string
	crawl.Known
	SizeBytes  int64
	ModifiedAt time.Time
}

// Pages returns what source src knows of its pages, by URL (or path).
func (s *Store) Pages(ctx context.Context, src Source) (map[string]Page, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT url, coalesce(file_id::text, ''), etag, last_modified, content_hash, links, size_bytes, modified_at
		FROM source_pages WHERE conversation_id = $1 AND source_id = $2`, src.ConversationID, src.ID)
	if err != nil {
		return nil, dbError("sources: read pages", err)
	}
	defer rows.Close()
	out := map[string]Page{}
	for rows.Next() {
		var p Page
		var mod *time.Time
		if err := rows.Scan(&p.URL, &p.FileID, &p.ETag, &p.LastModified, &p.Hash, &p.Links, &p.SizeBytes, &mod); err != nil {
			return nil, dbError("sources: read pages", err)
		}
		if mod != nil {
			p.ModifiedAt = *mod
		}
		out[p.URL] = p
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("sources: read pages", err)
	}
	return out, nil
}

// SavePage records page p of source src, holding file p.FileID ("" for
// none), and deletes the file it held before when nothing holds it any
// more; it reports whether it deleted one.
func (s *Store) SavePage(ctx context.Context, src Source, p Page) (bool, error) {
	n, err := s.SavePages(ctx, src, []Page{p})
	return n > 0, err
}

// SavePages records pages ps of source src, as SavePage does, in one
// transaction: a crawl stores its pages in batches. It returns how many
// files it deleted.
func (s *Store) SavePages(ctx context.Context, src Source, ps []Page) (int, error) {
	if len(ps) == 0 {
		return 0, nil
	}
	urls := make([]string, len(ps))
	for i, p := range ps {
		urls[i] = p.URL
	}
	// The files the pages held before, then the pages: one transaction,
	// the rows locked in between (a distributed database takes no
	// subquery in an INSERT).
	before := map[string]string{}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT url, file_id::text FROM source_pages
			WHERE conversation_id = $1 AND source_id = $2 AND url = ANY($3::text[]) AND file_id IS NOT NULL FOR UPDATE`,
			src.ConversationID, src.ID, urls)
		if err != nil {
			return err
		}
		for rows.Next() {
			var u, f string
			if err := rows.Scan(&u, &f); err != nil {
				rows.Close()
				return err
			}
			before[u] = f
		}
		if err := rows.Err(); err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, p := range ps {
			var file, modified any
			if p.FileID != "" {
				file = p.FileID
			}
			if !p.ModifiedAt.IsZero() {
				modified = p.ModifiedAt
			}
			links := p.Links
			if links == nil {
				links = []string{}
			}
			b.Queue(`
				INSERT INTO source_pages AS p (conversation_id, source_id, url, file_id, etag, last_modified, content_hash, links, size_bytes, modified_at, synced_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now())
				ON CONFLICT (conversation_id, source_id, url) DO UPDATE
				SET file_id = excluded.file_id, etag = excluded.etag, last_modified = excluded.last_modified, content_hash = excluded.content_hash,
				    links = excluded.links, size_bytes = excluded.size_bytes, modified_at = excluded.modified_at, synced_at = excluded.synced_at`,
				src.ConversationID, src.ID, p.URL, file, p.ETag, p.LastModified, p.Hash, links, p.SizeBytes, modified)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return 0, dbError("sources: record pages", err)
	}
	var replaced []*string
	for _, p := range ps {
		if f, ok := before[p.URL]; ok && f != p.FileID {
			replaced = append(replaced, &f)
		}
	}
	return s.dropOrphans(ctx, src, replaced)
}

// RemovePages forgets pages urls of source src and deletes the files only
// they held; it returns how many files it deleted.
func (s *Store) RemovePages(ctx context.Context, src Source, urls []string) (int, error) {
	if len(urls) == 0 {
		return 0, nil
	}
	rows, err := s.pool.Query(ctx, `
		DELETE FROM source_pages WHERE conversation_id = $1 AND source_id = $2 AND url = ANY($3::text[]) RETURNING file_id::text`,
		src.ConversationID, src.ID, urls)
	if err != nil {
		return 0, dbError("sources: remove pages", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[*string])
	if err != nil {
		return 0, dbError("sources: remove pages", err)
	}
	return s.dropOrphans(ctx, src, ids)
}

// Finish records the end of a sync of src: its job and summary.
func (s *Store) Finish(ctx context.Context, src Source, jobID string, sum Summary) error {
	raw, err := json.Marshal(sum)
	if err != nil {
		return fmt.Errorf("sources: %w", err)
	}
	_, err = s.pool.Exec(ctx, `
		UPDATE sources SET last_sync_at = now(), last_job_id = $3, last_summary = $4 WHERE conversation_id = $1 AND id = $2`,
		src.ConversationID, src.ID, jobID, raw)
	if err != nil {
		return dbError("sources: record the sync", err)
	}
	return nil
}

// Due returns up to limit site sources, of every conversation, whose last sync
// ended longer than every ago (or never did), the least recent first, with
// no sync job queued or running. The statement asks every node of a
// distributed database; it runs once per interval on one replica.
func (s *Store) Due(ctx context.Context, every time.Duration, limit int) ([]Source, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+sourceColumns+` FROM sources s
		WHERE s.kind = 'site' AND (s.last_sync_at IS NULL OR s.last_sync_at < now() - make_interval(secs => $1))
		  AND NOT EXISTS (SELECT FROM jobs j WHERE j.conversation_id = s.conversation_id AND j.status IN ('queued', 'running')
		                  AND j.input->>'source_id' = s.id::text)
		ORDER BY s.last_sync_at NULLS FIRST LIMIT $2`, every.Seconds(), limit)
	if err != nil {
		return nil, dbError("sources: due", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Source, error) { return scanSource(r) })
}

// activeJobs returns the ids of src's sync jobs queued or running.
func (s *Store) activeJobs(ctx context.Context, src Source) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id::text FROM jobs WHERE conversation_id = $1 AND status IN ('queued', 'running') AND input->>'source_id' = $2`,
		src.ConversationID, src.ID)
	if err != nil {
		return nil, dbError("sources: find its jobs", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func dbError(op string, err error) error { return docs.DatabaseError(op, err) }

// jobInput is the input of a source's sync job.
func jobInput(src Source) jobs.Input {
	return jobs.Input{URL: src.Root, SourceID: src.ID}
}
