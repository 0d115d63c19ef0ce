package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/mcpsearch/mcpsearch/docs"
)

// maxFilesPerUpload bounds the parts of one multipart upload.
const maxFilesPerUpload = 32

// apiRoutes adds the upload API to mux:
//
//	POST   /v1/conversations/{id}/files   multipart, one or more files -> 202
//	GET    /v1/conversations/{id}/files
//	GET    /v1/files/{id}
//	DELETE /v1/files/{id}
func (s *Server) apiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/conversations/{id}/files", s.uploadFiles)
	mux.HandleFunc("GET /v1/conversations/{id}/files", s.apiListFiles)
	mux.HandleFunc("GET /v1/files/{id}", s.apiGetFile)
	mux.HandleFunc("DELETE /v1/files/{id}", s.apiDeleteFile)
}

// uploadResponse answers an upload: the files accepted, in part order.
type uploadResponse struct {
	Files []uploadedFile `json:"files"`
}

type uploadedFile struct {
	FileInfo
	// Duplicate is true when the same bytes were already uploaded to the
	// conversation; the existing file is returned.
	Duplicate bool `json:"duplicate"`
}

func (s *Server) uploadFiles(w http.ResponseWriter, r *http.Request) {
	conv, ok := s.pathConversation(w, r)
	if !ok {
		return
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" {
		writeError(w, r, badArg("send the files as multipart/form-data (curl -F file=@report.pdf)"))
		return
	}
	// The body may hold several files of up to the size limit each; the
	// per-file check below gives the precise 413.
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxFileBytes*maxFilesPerUpload+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, r, badArg("reading multipart body: %v", err))
		return
	}
	var out uploadResponse
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeError(w, r, fmt.Errorf("reading multipart body: %w", err))
			return
		}
		if part.FileName() == "" {
			part.Close()
			continue
		}
		if len(out.Files) == maxFilesPerUpload {
			writeError(w, r, &ToolError{Code: CodeToolError, Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("send at most %d files per request", maxFilesPerUpload)})
			return
		}
		data, err := io.ReadAll(io.LimitReader(part, s.cfg.MaxFileBytes+1))
		part.Close()
		if err != nil {
			writeError(w, r, fmt.Errorf("reading %s: %w", part.FileName(), err))
			return
		}
		if int64(len(data)) > s.cfg.MaxFileBytes {
			writeError(w, r, fmt.Errorf("%s is larger than the %d MB limit (MCP_docs_max_file_mb): %w", part.FileName(), s.cfg.MaxFileBytes>>20, docs.ErrTooLarge))
			return
		}
		f, err := s.deps.Ingest.Submit(r.Context(), conv, part.FileName(), part.Header.Get("Content-Type"), data)
		if err != nil {
			writeError(w, r, err)
			return
		}
		out.Files = append(out.Files, uploadedFile{FileInfo: fileInfo(f), Duplicate: f.Duplicate})
	}
	if len(out.Files) == 0 {
		writeError(w, r, badArg("no file in the upload: send at least one multipart part with a filename"))
		return
	}
	writeJSON(w, http.StatusAccepted, out)
}

func (s *Server) apiListFiles(w http.ResponseWriter, r *http.Request) {
	conv, ok := s.pathConversation(w, r)
	if !ok {
		return
	}
	files, err := s.deps.Docs.ListFiles(r.Context(), conv)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := ListFilesOutput{Files: make([]FileInfo, 0, len(files))}
	for _, f := range files {
		out.Files = append(out.Files, fileInfo(f))
	}
	writeJSON(w, http.StatusOK, out)
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
