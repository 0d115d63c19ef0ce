package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/crawl"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/fetch"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/sources"
)

// withSources gives d a fetch client allowed on loopback, and sources over
// its documents store, with a jobs runner that runs their crawls.
func withSources(t *testing.T, d *Deps) {
	t.Helper()
	fc, err := fetch.New(fetch.Options{AllowHosts: []string{"127.0.0.1"}, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	d.Fetch = fc
	st := d.Docs.(*docs.Store)
	// The runner setDocs made runs no crawl: left working beside this one,
	// it could take a crawl job first and fail it.
	if old, ok := d.Jobs.(*jobs.Runner); ok {
		old.Close()
	}
	sy := sources.NewSyncer(sources.NewStore(st), fc, crawl.Options{Delay: -1}, nil)
	r := jobs.NewRunner(jobs.NewStore(st), d.Ingest.(*docs.Ingester), jobs.Options{Poll: 100 * time.Millisecond, Check: 100 * time.Millisecond,
		Fetch: fc, Kinds: sy.Kinds()})
	t.Cleanup(r.Close)
	d.Jobs, d.Sources = r, sources.NewService(sy, r)
}

func TestSiteSourceTools(t *testing.T) {
	pages := map[string]string{
		"/guide/":        `<html><body><h1>Guide</h1><p>Start with the harbour rules.</p><a href="rules">Rules</a></body></html>`,
		"/guide/rules":   `<html><body><h1>Rules</h1><p>Vessels give way to the pilot boat at the breakwater.</p></body></html>`,
		"/elsewhere/ads": `<html><body><p>Not part of the guide.</p></body></html>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		http.ServeContent(w, r, "", time.Unix(1700000000, 0), strings.NewReader(body))
	}))
	defer srv.Close()
	h := newDocsHarness(t, func(c *config.Config) { c.FetchURLAllowHosts = []string{"127.0.0.1"} }, func(d *Deps) { withSources(t, d) })

	out := decode[AddDocumentOutput](t, h.call(t, "add_document", map[string]any{"conversation_id": "g", "url": srv.URL + "/guide/",
		"crawl": map[string]any{"max_pages": 10}, "wait_seconds": 30}))
	if out.Status != "succeeded" || out.SourceID == "" || out.Kind != sources.JobCrawl || out.Report == nil || out.Report.Counts["added"] != 2 {
		t.Fatalf("crawl: %+v", out)
	}
	found := decode[SearchDocsOutput](t, h.call(t, "search_docs", map[string]any{"conversation_id": "g", "query": "pilot boat breakwater"}))
	if len(found.Chunks) == 0 || found.Chunks[0].Source != srv.URL+"/guide/rules" {
		t.Fatalf("search after the crawl: %+v", found)
	}
	list := decode[ListSourcesOutput](t, h.call(t, "list_sources", map[string]any{"conversation_id": "g"}))
	if len(list.Sources) != 1 || list.Sources[0].Pages != 2 || list.Sources[0].LastSync.Added != 2 || list.Sources[0].Kind != "site" {
		t.Fatalf("list_sources: %+v", list)
	}
	synced := decode[JobInfo](t, h.call(t, "sync_source", map[string]any{"source_id": out.SourceID}))
	done := h.waitJob(t, synced.JobID)
	if done.Status != "succeeded" || done.Report.Counts["unchanged"] != 2 || done.Report.Counts["added"] != 0 {
		t.Fatalf("sync: %+v %+v", done, done.Report)
	}
	if txt := textOf(h.call(t, "get_job", map[string]any{"job_id": synced.JobID})); !strings.Contains(txt, "0 added, 0 updated, 0 removed, 2 unchanged") {
		t.Fatalf("get_job text: %s", txt)
	}
	// The API shows and deletes the same.
	resp, err := http.Get(h.http.URL + "/v1/conversations/g/sources")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET sources: %v %v", resp, err)
	}
	resp.Body.Close()
	del := decode[DeleteSourceOutput](t, h.call(t, "delete_source", map[string]any{"source_id": out.SourceID}))
	if del.DeletedFiles != 2 {
		t.Fatalf("delete_source: %+v", del)
	}
	files := decode[ListFilesOutput](t, h.call(t, "list_files", map[string]any{"conversation_id": "g"}))
	if len(files.Files) != 0 {
		t.Fatalf("files left: %+v", files.Files)
	}
	for _, bad := range []map[string]any{
		{"conversation_id": "g", "text": "x", "title": "t", "crawl": map[string]any{}},
		{"conversation_id": "g", "url": srv.URL + "/guide/", "crawl": map[string]any{"scope": "galaxy"}},
		{"conversation_id": "g", "url": srv.URL + "/guide/", "crawl": map[string]any{"max_pages": 20001}},
	} {
		if res := h.call(t, "add_document", bad); !res.IsError {
			t.Errorf("accepted %v: %s", bad, textOf(res))
		}
	}
	if res := h.call(t, "sync_source", map[string]any{"source_id": docs.NewID("g")}); !res.IsError || !strings.Contains(toolErr(t, res).Message, "not found") {
		t.Errorf("sync of an unknown source: %s", textOf(res))
	}
}
