package ui

import (
	"net/http"
	"net/url"
	"strconv"
)

// sourcePage shows a source: its root and options, what it holds, its
// last syncs with what each did, and Sync now and Delete.
func (u *UI) sourcePage(w http.ResponseWriter, r *http.Request, s session) {
	src, err := u.b.Source(r.Context(), s.p, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	syncs, err := u.b.Jobs(r.Context(), s.p, JobQuery{Conversation: src.Conversation, Source: src.ID, Cursor: r.FormValue("cursor"), Limit: 20})
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	title := "Source " + src.Root
	u.render(w, r, http.StatusOK, "source", s, title, map[string]any{"Source": src, "Syncs": syncs, "Cursor": r.FormValue("cursor")})
}

func (u *UI) syncSource(w http.ResponseWriter, r *http.Request, s session) {
	start := u.now()
	id := r.PathValue("id")
	src, j, err := u.b.SyncSource(r.Context(), s.p, id)
	u.record(r, s.p, "sync_source", src.Conversation, map[string]any{"source_id": id, "root": src.Root}, j.ID, start, err)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusAccepted, jobJSON(j))
		return
	}
	http.Redirect(w, r, base+"/jobs/"+url.PathEscape(j.ID), http.StatusSeeOther)
}

func (u *UI) deleteSource(w http.ResponseWriter, r *http.Request, s session) {
	start := u.now()
	id := r.PathValue("id")
	src, n, err := u.b.DeleteSource(r.Context(), s.p, id)
	u.record(r, s.p, "delete_source", src.Conversation, map[string]any{"source_id": id, "root": src.Root, "pages": src.Pages, "files_deleted": n}, "", start, err)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"deleted": src.Root, "files_deleted": n})
		return
	}
	http.Redirect(w, r, base+"/conversations/"+url.PathEscape(src.Conversation)+"?source_deleted="+url.QueryEscape(src.Root)+"&removed="+strconv.Itoa(n), http.StatusSeeOther)
}
