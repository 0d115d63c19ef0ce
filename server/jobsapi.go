package server

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/sources"
)

// submitUploads stores an upload request's files as one job, holding the
// queue's ticket t as uploads always have, and records the job in out.
// Without jobs (a server built without them) the files are submitted as
// they are.
func (s *Server) submitUploads(r *http.Request, conv string, t *docs.Ticket, ups []docs.Upload, out *uploadResponse) ([]docs.File, []error) {
	if s.deps.Jobs == nil {
		return s.deps.Ingest.SubmitFiles(r.Context(), t, ups)
	}
	var in jobs.Input
	for _, u := range ups {
		if len(in.Files) == 20 {
			break
		}
		in.Files = append(in.Files, cmp.Or(u.Source, u.FileName))
	}
	j, files, errs, err := s.deps.Jobs.AddFiles(r.Context(), conv, jobs.KindUpload, in, caller(r.Context()), ups, t)
	if err != nil {
		errs = make([]error, len(ups))
		for i := range errs {
			errs[i] = err
		}
		return make([]docs.File, len(ups)), errs
	}
	out.JobID = j.ID
	return files, errs
}

// jobView renders a job for the API as get_job does.
func (s *Server) jobView(r *http.Request, j jobs.Job) JobInfo {
	return jobTools{jobs: s.deps.Jobs, store: s.deps.Docs}.jobInfo(r.Context(), j)
}

// ownJob reads the job of the path and checks that the caller's key may
// see its conversation; a job of another conversation is not found.
func (s *Server) ownJob(w http.ResponseWriter, r *http.Request) (jobs.Job, bool) {
	return own(w, r, s.deps.Jobs.Get, func(j jobs.Job) string { return j.ConversationID }, jobs.ErrNotFound)
}

// own reads what the path names with get and checks that the caller's key
// may see its conversation; another conversation's is answered as one that
// does not exist (notFound). On failure it writes the error.
func own[T any](w http.ResponseWriter, r *http.Request, get func(context.Context, string) (T, error), conv func(T) string, notFound error) (T, bool) {
	v, err := get(r.Context(), r.PathValue("id"))
	if err == nil && !identityFrom(r.Context()).allows(conv(v)) {
		err = notFound
	}
	if err != nil {
		writeError(w, r, err)
		var zero T
		return zero, false
	}
	return v, true
}

// apiGetJob answers GET /v1/jobs/{id}: the job as get_job shows it.
func (s *Server) apiGetJob(w http.ResponseWriter, r *http.Request) {
	if j, ok := s.ownJob(w, r); ok {
		writeJSON(w, http.StatusOK, s.jobView(r, j))
	}
}

// apiCancelJob answers DELETE /v1/jobs/{id}: cancel_job. A job that had
// ended is answered 409 with the contract's body.
func (s *Server) apiCancelJob(w http.ResponseWriter, r *http.Request) {
	if err := s.writesRefused(r); err != nil {
		writeError(w, r, err)
		return
	}
	j, ok := s.ownJob(w, r)
	if !ok {
		return
	}
	j, err := s.deps.Jobs.Cancel(r.Context(), j.ID)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.jobView(r, j))
}

// apiListJobs answers GET /v1/conversations/{id}/jobs?status=&limit=&cursor=
// with a page of the conversation's jobs, newest first, as list_jobs.
func (s *Server) apiListJobs(w http.ResponseWriter, r *http.Request) {
	conv, ok := s.pathConversation(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := docs.DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > docs.MaxListLimit {
			writeError(w, r, badArg("limit %q: send 1 to %d (default %d)", clip(v, 20), docs.MaxListLimit, docs.DefaultListLimit))
			return
		}
		limit = n
	}
	status := q.Get("status")
	if status != "" && !slices.Contains(jobs.Statuses, status) {
		writeError(w, r, badArg("status %q: send one of queued, running, succeeded, failed, cancelled", clip(status, 20)))
		return
	}
	p, err := s.deps.Jobs.List(r.Context(), conv, status, limit, q.Get("cursor"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := ListJobsOutput{Jobs: make([]JobInfo, 0, len(p.Jobs)), Total: p.Total, NextCursor: p.Next}
	for _, j := range p.Jobs {
		info := s.jobView(r, j)
		info.Failures = nil
		out.Jobs = append(out.Jobs, info)
	}
	writeJSON(w, http.StatusOK, out)
}

// apiListSources answers GET /v1/conversations/{id}/sources: list_sources.
func (s *Server) apiListSources(w http.ResponseWriter, r *http.Request) {
	conv, ok := s.pathConversation(w, r)
	if !ok {
		return
	}
	list, err := s.deps.Sources.List(r.Context(), conv)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := ListSourcesOutput{Sources: make([]SourceInfo, 0, len(list))}
	for _, src := range list {
		out.Sources = append(out.Sources, sourceInfo(src))
	}
	writeJSON(w, http.StatusOK, out)
}

// ownSource reads the source of the path as ownJob reads a job.
func (s *Server) ownSource(w http.ResponseWriter, r *http.Request) (sources.Source, bool) {
	return own(w, r, s.deps.Sources.Get, func(src sources.Source) string { return src.ConversationID }, sources.ErrNotFound)
}

// apiSyncSource answers POST /v1/sources/{id}/sync: sync_source, 202 with
// the job.
func (s *Server) apiSyncSource(w http.ResponseWriter, r *http.Request) {
	if err := s.writesRefused(r); err != nil {
		writeError(w, r, err)
		return
	}
	src, ok := s.ownSource(w, r)
	if !ok {
		return
	}
	j, err := s.deps.Sources.Sync(r.Context(), src, caller(r.Context()))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, s.jobView(r, j))
}

// apiDeleteSource answers DELETE /v1/sources/{id}: delete_source.
func (s *Server) apiDeleteSource(w http.ResponseWriter, r *http.Request) {
	if err := s.writesRefused(r); err != nil {
		writeError(w, r, err)
		return
	}
	src, ok := s.ownSource(w, r)
	if !ok {
		return
	}
	n, err := s.deps.Sources.Delete(r.Context(), src)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, DeleteSourceOutput{SourceID: src.ID, DeletedFiles: n})
}
