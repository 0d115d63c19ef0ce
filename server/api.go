package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpsearch/mcpsearch/docs"
)

// maxFilesPerUpload bounds the parts of one multipart upload.
const maxFilesPerUpload = 32

// apiRoutes adds the upload API to mux:
//
//	POST   /v1/conversations/{id}/files   multipart, one or more files -> 202
//	GET    /v1/conversations/{id}/files
//	DELETE /v1/conversations/{id}         every file of the conversation
//	GET    /v1/files/{id}
//	DELETE /v1/files/{id}
func (s *Server) apiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/conversations/{id}/files", s.routed(s.uploadFiles))
	mux.HandleFunc("GET /v1/conversations/{id}/files", s.routed(s.apiListFiles))
	mux.HandleFunc("DELETE /v1/conversations/{id}", s.routed(s.apiDeleteConversation))
	mux.HandleFunc("GET /v1/files/{id}", s.routed(s.apiGetFile))
	mux.HandleFunc("DELETE /v1/files/{id}", s.routed(s.apiDeleteFile))
	if s.deps.Sources != nil {
		mux.HandleFunc("GET /v1/conversations/{id}/sources", s.routed(s.apiListSources))
		mux.HandleFunc("POST /v1/sources/{id}/sync", s.routed(s.apiSyncSource))
		mux.HandleFunc("DELETE /v1/sources/{id}", s.routed(s.apiDeleteSource))
	}
	if s.deps.Jobs != nil {
		mux.HandleFunc("GET /v1/conversations/{id}/jobs", s.routed(s.apiListJobs))
		mux.HandleFunc("GET /v1/jobs/{id}", s.routed(s.apiGetJob))
		mux.HandleFunc("DELETE /v1/jobs/{id}", s.routed(s.apiCancelJob))
	}
}

// uploadResponse answers an upload: one result per file or URL, in part
// order.
type uploadResponse struct {
	// JobID is the job of the request's files: GET /v1/jobs/{id} follows
	// it, DELETE /v1/jobs/{id} cancels it.
	JobID string         `json:"job_id,omitempty"`
	Files []uploadedFile `json:"files"`
	// Error is the first refusal when every part was refused.
	Error *ToolError `json:"error,omitempty"`
}

// Upload outcomes of one part.
const (
	uploadAccepted  = "accepted"
	uploadDuplicate = "duplicate"
	uploadRefused   = "refused"
)

type uploadedFile struct {
	FileInfo
	// Result is accepted (queued for processing), duplicate (the same
	// bytes were already uploaded to the conversation: the existing file
	// is returned) or refused (Error says why; nothing was stored).
	Result string `json:"result"`
	// Duplicate is true when the existing file is returned.
	Duplicate bool `json:"duplicate"`
	// Refusal is why a part was refused, in the contract's error body.
	Refusal *ToolError `json:"refusal,omitempty"`
}

// uploadFiles takes multipart parts: files (-F file=@report.pdf) and URLs
// to fetch (-F url=https://...). Each part gets its own result, so a
// request never half-succeeds silently: 202 when every part was accepted or
// already there, 207 when some were refused, and the refusal's own status
// (413, 415, 503, ...) when all were.
func (s *Server) uploadFiles(w http.ResponseWriter, r *http.Request) {
	conv, ok := s.pathConversation(w, r)
	if !ok {
		return
	}
	if err := s.writesRefused(r); err != nil {
		writeError(w, r, err)
		return
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" {
		writeError(w, r, badArg("send the files as multipart/form-data (curl -F file=@report.pdf, or -F url=https://...)"))
		return
	}
	// The body may hold several files of up to the size limit each; the
	// per-file check below gives the precise 413.
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxFileBytes*maxFilesPerUpload+1<<20)
	// A body the queue cannot take is refused before it is read: its
	// first file has a slot, later ones take theirs when they are stored.
	ticket, err := s.deps.Ingest.Reserve()
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer ticket.Release()
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, r, badArg("reading multipart body: %v", err))
		return
	}
	var out uploadResponse
	var firstRefusal *ToolError
	refusal := func(err error) *ToolError {
		te := classifyRequest(r, err)
		if firstRefusal == nil {
			firstRefusal = te
		}
		return te
	}
	refuse := func(name string, err error) {
		out.Files = append(out.Files, uploadedFile{FileInfo: FileInfo{FileName: name}, Result: uploadRefused, Refusal: refusal(err)})
	}
	// The parts are read first, then stored together: one transaction for
	// the files of the request.
	var ups []docs.Upload
	var at []int
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// The body itself is broken: nothing after this point can be
			// read. That is the client's doing; only its size has a
			// status of its own.
			var mbe *http.MaxBytesError
			if !errors.As(err, &mbe) {
				err = badArg("reading multipart body: %v", err)
			}
			refuse("", err)
			break
		}
		name, isURL := part.FileName(), part.FormName() == "url" && part.FileName() == ""
		if name == "" && !isURL {
			part.Close()
			continue
		}
		if len(out.Files) == maxFilesPerUpload {
			part.Close()
			refuse(name, &ToolError{Code: CodeToolError, Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("send at most %d files per request", maxFilesPerUpload)})
			break
		}
		var up docs.Upload
		if isURL {
			up, err = s.fetchUpload(r.Context(), conv, part)
		} else {
			up, err = s.spoolUpload(conv, part)
			if up.Path != "" {
				defer os.Remove(up.Path)
			}
		}
		part.Close()
		if err != nil {
			refuse(cmp.Or(name, up.Source), err)
			continue
		}
		ups, at = append(ups, up), append(at, len(out.Files))
		out.Files = append(out.Files, uploadedFile{FileInfo: FileInfo{FileName: cmp.Or(up.Source, name)}})
	}
	if len(ups) > 0 {
		// Duplicates are answered even when the queue is full.
		files, errs := s.submitUploads(r, conv, ticket, ups, &out)
		for k, i := range at {
			if errs[k] != nil {
				out.Files[i].Result, out.Files[i].Refusal = uploadRefused, refusal(errs[k])
				continue
			}
			f := files[k]
			res := uploadedFile{FileInfo: fileInfo(f), Result: uploadAccepted, Duplicate: f.Duplicate}
			if f.Duplicate {
				res.Result = uploadDuplicate
			}
			out.Files[i] = res
		}
	}
	switch {
	case len(out.Files) == 0:
		writeError(w, r, badArg("no file in the upload: send at least one multipart part with a filename, or a url field"))
	case firstRefusal == nil:
		writeJSON(w, http.StatusAccepted, out)
	case !slices.ContainsFunc(out.Files, func(f uploadedFile) bool { return f.Result != uploadRefused }):
		errorHeaders(w, firstRefusal)
		out.Error = firstRefusal
		writeJSON(w, firstRefusal.Status, out)
	default:
		writeJSON(w, http.StatusMultiStatus, out)
	}
}

// spoolUpload writes one file part to a spool file, enforcing the size
// limit while it reads, so that no upload is held in memory whole. The
// caller removes the file.
func (s *Server) spoolUpload(conv string, part *multipart.Part) (docs.Upload, error) {
	f, err := os.CreateTemp("", "mcpsearch-upload-*")
	if err != nil {
		return docs.Upload{}, fmt.Errorf("spool the upload: %w", err)
	}
	up := docs.Upload{ConversationID: conv, FileName: part.FileName(), MIMEType: part.Header.Get("Content-Type"), Path: f.Name()}
	// The digest is taken as the body is spooled, so that the store reads
	// the spool file once on its way to storage (and what telling its type
	// needs of it, a few kilobytes).
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(part, s.cfg.MaxFileBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	up.SHA256 = hex.EncodeToString(h.Sum(nil))
	switch {
	case err != nil:
		return up, fmt.Errorf("reading the file: %w", err)
	case n > s.cfg.MaxFileBytes:
		return up, fmt.Errorf("larger than the %d MB limit (MCP_docs_max_file_mb): %w", s.cfg.MaxFileBytes>>20, docs.ErrTooLarge)
	}
	return up, nil
}

// fetchUpload reads a url part and fetches the page it names, with
// fetch_url's client and address rules; the URL becomes the file's source.
func (s *Server) fetchUpload(ctx context.Context, conv string, part *multipart.Part) (docs.Upload, error) {
	raw, err := io.ReadAll(io.LimitReader(part, 4097))
	target := strings.TrimSpace(string(raw))
	switch {
	case err != nil:
		return docs.Upload{}, fmt.Errorf("reading the url field: %w", err)
	case len(raw) > 4096:
		return docs.Upload{}, badArg("the url field holds more than 4096 bytes")
	case s.deps.Fetch == nil || !s.cfg.FetchURLEnabled:
		return docs.Upload{Source: target}, badArg("ingestion by URL is off on this server (MCP_fetch_url_enabled)")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.FetchURLTimeout)
	defer cancel()
	res, err := s.deps.Fetch.Download(ctx, target)
	if err != nil {
		return docs.Upload{Source: target}, err
	}
	return docs.Upload{ConversationID: conv, FileName: res.FileName(), MIMEType: res.ContentType, Source: res.URL, Data: res.Body}, nil
}

// apiListFiles answers GET /v1/conversations/{id}/files?limit=&cursor=&status=&prefix=
// with a page of the conversation's files, newest first, paged as
// list_files pages: {"files": [...], "total": N, "next_cursor": "..."}.
func (s *Server) apiListFiles(w http.ResponseWriter, r *http.Request) {
	conv, ok := s.pathConversation(w, r)
	if !ok {
		return
	}
	q := docs.FileQuery{ConversationID: conv}
	for name, values := range r.URL.Query() {
		v := values[len(values)-1]
		switch name {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil {
				writeError(w, r, badArg("limit %q is not a number: send 1 to %d (default %d)", clip(v, 20), docs.MaxListLimit, docs.DefaultListLimit))
				return
			}
			q.Limit = n
		case "cursor":
			q.Cursor = v
		case "status":
			q.Status = v
		case "prefix":
			q.Prefix = v
		default:
			writeError(w, r, badArg("unknown query parameter %q: the parameters are limit, cursor, status and prefix", clip(name, 40)))
			return
		}
	}
	if q.Limit == 0 && r.URL.Query().Has("limit") {
		writeError(w, r, badArg("limit 0 is out of range: send 1 to %d (default %d)", docs.MaxListLimit, docs.DefaultListLimit))
		return
	}
	p, err := s.deps.Docs.ListFilesPage(r.Context(), q)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, filesOutput(p))
}

func (s *Server) apiGetFile(w http.ResponseWriter, r *http.Request) {
	f, ok := s.ownFile(w, r)
	if ok {
		writeJSON(w, http.StatusOK, fileInfo(f))
	}
}

// pathConversation reads the conversation id of the path and checks that
// the caller's key may use it; otherwise it writes the error.
func (s *Server) pathConversation(w http.ResponseWriter, r *http.Request) (string, bool) {
	conv := strings.TrimSpace(r.PathValue("id"))
	if !identityFrom(r.Context()).allows(conv) {
		writeError(w, r, errForbiddenConversation)
		return "", false
	}
	return conv, true
}

// ownFile loads the file named in the path and checks that the caller's
// key may see its conversation; otherwise it writes the error.
func (s *Server) ownFile(w http.ResponseWriter, r *http.Request) (docs.File, bool) {
	f, err := s.deps.Docs.GetFile(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return f, false
	}
	if !identityFrom(r.Context()).allows(f.ConversationID) {
		writeError(w, r, errForbiddenConversation)
		return f, false
	}
	return f, true
}

func (s *Server) apiDeleteFile(w http.ResponseWriter, r *http.Request) {
	if err := s.writesRefused(r); err != nil {
		writeError(w, r, err)
		return
	}
	f, ok := s.ownFile(w, r)
	if !ok {
		return
	}
	if err := s.deps.Docs.DeleteFile(r.Context(), f.ID); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// deletedConversation answers DELETE /v1/conversations/{id}.
type deletedConversation struct {
	ConversationID string `json:"conversation_id"`
	DeletedFiles   int    `json:"deleted_files"`
}

func (s *Server) apiDeleteConversation(w http.ResponseWriter, r *http.Request) {
	conv, ok := s.pathConversation(w, r)
	if !ok {
		return
	}
	if err := s.writesRefused(r); err != nil {
		writeError(w, r, err)
		return
	}
	n, err := s.deps.Docs.DeleteConversation(r.Context(), conv)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, deletedConversation{ConversationID: conv, DeletedFiles: n})
}
