package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// textPage is how many characters of a file's text its page shows at
// once; chunksPage how many of its chunks.
const (
	textPage   = 20_000
	chunksPage = 50
)

// filePage shows a file: what it is, its extracted text a page at a time
// (?page=N), or its chunks with their places (?view=chunks&after=N), and
// for a failed file, how to try it again.
func (u *UI) filePage(w http.ResponseWriter, r *http.Request, s session) {
	f, err := u.b.File(r.Context(), s.p, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	view := r.FormValue("view")
	data := map[string]any{"File": f, "View": view}
	if f.Status == "ready" {
		switch view {
		case "chunks":
			after := -1
			if v := r.FormValue("after"); v != "" {
				if after, err = strconv.Atoi(v); err != nil || after < -1 {
					u.fail(w, r, s, &Error{Status: http.StatusBadRequest, Message: "That page of chunks does not exist: start from the first."})
					return
				}
			}
			chunks, err := u.b.FileChunks(r.Context(), s.p, f, after, chunksPage+1)
			if err != nil {
				u.fail(w, r, s, err)
				return
			}
			if len(chunks) > chunksPage {
				chunks = chunks[:chunksPage]
				data["NextAfter"] = strconv.Itoa(chunks[chunksPage-1].Ordinal)
			}
			data["Chunks"], data["After"] = chunks, after
		default:
			text, err := u.b.FileText(r.Context(), s.p, f)
			if err != nil {
				u.fail(w, r, s, err)
				return
			}
			n := 1
			if v := r.FormValue("page"); v != "" {
				if n, err = strconv.Atoi(v); err != nil || n < 1 {
					u.fail(w, r, s, &Error{Status: http.StatusBadRequest, Message: "Pages of the text are numbered from 1."})
					return
				}
			}
			part, pages, from, to := pageOf(text, n)
			if n > pages {
				u.fail(w, r, s, &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("The text has %s.", plural(pages, "page"))})
				return
			}
			data["Text"], data["Page"], data["Pages"], data["From"], data["To"], data["Chars"] = part, n, pages, from, to, utf8.RuneCountInString(text)
		}
	}
	u.render(w, r, http.StatusOK, "file", s, f.Name, data)
}

// pageOf is page n (from 1) of text, textPage characters a page, cut at
// the last line break within the page when there is one; with the number
// of pages and the characters it covers.
func pageOf(text string, n int) (string, int, int, int) {
	runes := []rune(text)
	var starts []int
	for at := 0; at < len(runes) || len(starts) == 0; {
		starts = append(starts, at)
		end := min(at+textPage, len(runes))
		if end < len(runes) {
			// Cut at a line break in the page's last quarter, if any.
			for i := end; i > at+textPage*3/4; i-- {
				if runes[i-1] == '\n' {
					end = i
					break
				}
			}
		}
		if end == at {
			break
		}
		at = end
	}
	pages := len(starts)
	if n > pages {
		return "", pages, 0, 0
	}
	from := starts[n-1]
	to := len(runes)
	if n < pages {
		to = starts[n]
	}
	return string(runes[from:to]), pages, from, to
}

func (u *UI) deleteFile(w http.ResponseWriter, r *http.Request, s session) {
	start := u.now()
	id := r.PathValue("id")
	f, err := u.b.DeleteFile(r.Context(), s.p, id)
	touched := map[string]any{"file_id": id}
	if f.Name != "" {
		touched["file_name"] = f.Name
	}
	u.record(r, s.p, "delete_document", f.Conversation, touched, f.JobID, start, err)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]string{"deleted": f.Name})
		return
	}
	http.Redirect(w, r, base+"/conversations/"+url.PathEscape(f.Conversation)+"?deleted="+url.QueryEscape(f.Name), http.StatusSeeOther)
}

// readOnly refuses a write of a caller that may only read, naming how it
// could.
func readOnly(p Principal, what string) *Error {
	if p.Subject != "" {
		return &Error{Status: http.StatusForbidden, Message: fmt.Sprintf("%s may only read: %s needs the write scope at your identity provider.", p.Subject, what)}
	}
	return &Error{Status: http.StatusForbidden, Message: fmt.Sprintf("Key %s may only read: it cannot %s. Give it scopes=read,write in the keys file.", p.Name, what)}
}

func (u *UI) upload(w http.ResponseWriter, r *http.Request, s session) {
	start := u.now()
	conv := r.PathValue("id")
	if !s.p.Write {
		err := readOnly(s.p, "upload")
		u.record(r, s.p, "upload", conv, nil, "", start, err)
		u.fail(w, r, s, err)
		return
	}
	res := u.b.Upload(w, r, s.p, conv)
	u.record(r, s.p, "upload", conv, uploadTouched(res), res.JobID, start, res.err())
}

// uploadTouched is what an upload touched, for the audit: each file's
// name and outcome.
func uploadTouched(res UploadResult) map[string]any {
	files := make([]map[string]string, 0, len(res.Files))
	for _, f := range res.Files {
		m := map[string]string{"file_name": f.Name, "result": f.Result}
		if f.ID != "" {
			m["file_id"] = f.ID
		}
		if f.Reason != "" {
			m["reason"] = f.Reason
		}
		files = append(files, m)
	}
	return map[string]any{"files": files}
}

// err is an upload's failure: the whole upload refused, or some of its
// files.
func (res UploadResult) err() error {
	switch {
	case res.Error != "":
		return &Error{Status: res.Status, Message: res.Error}
	case res.Status >= 400 || res.Status == http.StatusMultiStatus:
		var refused []string
		for _, f := range res.Files {
			if f.Result == "refused" {
				refused = append(refused, f.Name+": "+f.Reason)
			}
		}
		return &Error{Status: res.Status, Message: "refused: " + strings.Join(refused, "; ")}
	}
	return nil
}

// retryFile tries a failed file again. A file fetched from a URL is
// fetched again, as a job; an uploaded one, whose bytes are not kept once
// it failed, comes with this request (multipart), and the failed file
// makes way for it.
func (u *UI) retryFile(w http.ResponseWriter, r *http.Request, s session) {
	start := u.now()
	id := r.PathValue("id")
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		f, j, err := u.b.RetryFile(r.Context(), s.p, id)
		u.record(r, s.p, "retry_file", f.Conversation, map[string]any{"file_id": id, "file_name": f.Name, "url": f.Source}, j.ID, start, err)
		if err != nil {
			u.fail(w, r, s, err)
			return
		}
		if wantsJSON(r) {
			writeJSON(w, http.StatusAccepted, jobJSON(j))
			return
		}
		http.Redirect(w, r, base+"/jobs/"+url.PathEscape(j.ID), http.StatusSeeOther)
		return
	}
	f, err := u.b.File(r.Context(), s.p, id)
	switch {
	case err != nil:
	case f.Status != "failed":
		err = &Error{Status: http.StatusConflict, Message: fmt.Sprintf("%s is %s: only a failed file is tried again.", f.Name, f.Status)}
	case !s.p.Write:
		err = readOnly(s.p, "retry a file")
	}
	if err != nil {
		u.record(r, s.p, "retry_file", f.Conversation, map[string]any{"file_id": id}, "", start, err)
		u.fail(w, r, s, err)
		return
	}
	res := u.b.Upload(w, r, s.p, f.Conversation)
	touched := uploadTouched(res)
	touched["file_id"], touched["file_name"] = f.ID, f.Name
	err = res.err()
	// The same bytes process the failed file again, in place; other bytes
	// are a new file, and the failed one goes.
	if err == nil && len(res.Files) == 1 && res.Files[0].ID != "" && res.Files[0].ID != f.ID {
		if _, derr := u.b.DeleteFile(r.Context(), s.p, f.ID); derr == nil {
			touched["replaced"] = true
		} else {
			u.log.Warn("ui: retry: the failed file stays", "file", f.ID, "error", derr)
		}
	}
	u.record(r, s.p, "retry_file", f.Conversation, touched, res.JobID, start, err)
}
