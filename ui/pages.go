package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// pageSize is how many rows a listing shows at once.
const pageSize = 50

func (u *UI) signinPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	next := localPath(r.FormValue("next"))
	if u.b.Open() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if _, ok := u.session(r); ok {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	u.render(w, r, http.StatusOK, "signin", session{}, "Sign in", map[string]any{"Token": u.signinToken(w, r), "Next": next})
}

func (u *UI) signin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	next := localPath(r.PostFormValue("next"))
	if u.b.Open() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	again := func(status int, msg string) {
		u.render(w, r, status, "signin", session{}, "Sign in", map[string]any{"Token": u.signinToken(w, r), "Next": next, "Error": msg})
	}
	if !u.originOK(r) || !checkSigninToken(r) {
		again(http.StatusForbidden, "The sign-in form had expired or came from another site. Sign in again on this page.")
		return
	}
	p, ok := u.b.SignIn(strings.TrimSpace(r.PostFormValue("key")))
	if !ok {
		again(http.StatusUnauthorized, "This server does not accept that key. Check it for typos: the keys are the server's MCP_API_KEYS or the lines of its keys file.")
		return
	}
	u.startSession(w, r, p)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (u *UI) signout(w http.ResponseWriter, r *http.Request, _ session) {
	u.endSession(w, r)
	to := base + "/signin"
	if u.b.Open() {
		to = base + "/"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (u *UI) conversationsPage(w http.ResponseWriter, r *http.Request, s session) {
	if open := strings.TrimSpace(r.FormValue("open")); open != "" {
		http.Redirect(w, r, base+"/conversations/"+url.PathEscape(open), http.StatusSeeOther)
		return
	}
	data := map[string]any{}
	if u.b.Features().Docs {
		page, err := u.b.Conversations(r.Context(), s.p, ConversationQuery{Cursor: r.FormValue("cursor"), Limit: pageSize})
		if err != nil {
			u.fail(w, r, s, err)
			return
		}
		data["Page"], data["Cursor"] = page, r.FormValue("cursor")
	}
	u.render(w, r, http.StatusOK, "conversations", s, "Conversations", data)
}

func (u *UI) conversationPage(w http.ResponseWriter, r *http.Request, s session) {
	conv := r.PathValue("id")
	q := FileQuery{Conversation: conv, Status: r.FormValue("status"), Prefix: r.FormValue("prefix"), Cursor: r.FormValue("cursor"), Limit: pageSize}
	page, err := u.b.Files(r.Context(), s.p, q)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	sources, err := u.b.Sources(r.Context(), s.p, conv)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "conversation", s, "Conversation "+conv, map[string]any{
		"Conversation": conv, "Query": q, "Page": page, "Sources": sources, "Deleted": r.FormValue("deleted"),
		"Statuses": []string{"", "ready", "processing", "failed"}})
}

func (u *UI) deleteFile(w http.ResponseWriter, r *http.Request, s session) {
	f, err := u.b.DeleteFile(r.Context(), s.p, r.PathValue("id"))
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

func (u *UI) upload(w http.ResponseWriter, r *http.Request, s session) {
	if !s.p.Write {
		u.fail(w, r, s, &Error{Status: http.StatusForbidden, Message: fmt.Sprintf("Key %s may only read: it cannot upload. Give it scopes=read,write in the keys file.", s.p.Name)})
		return
	}
	u.b.Upload(w, r, s.p, r.PathValue("id"))
}

// conversationChoices lists conversations to pick from in a form: the
// key's own, or the most recent ones.
func (u *UI) conversationChoices(r *http.Request, s session) []string {
	if s.p.Conversations != nil {
		return s.p.Conversations
	}
	if !u.b.Features().Docs {
		return nil
	}
	page, err := u.b.Conversations(r.Context(), s.p, ConversationQuery{Limit: 100})
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(page.Conversations))
	for _, c := range page.Conversations {
		out = append(out, c.ID)
	}
	return out
}

func (u *UI) addPage(w http.ResponseWriter, r *http.Request, s session) {
	conv := strings.TrimSpace(r.FormValue("conversation"))
	if conv == "" && len(s.p.Conversations) == 1 {
		conv = s.p.Conversations[0]
	}
	u.render(w, r, http.StatusOK, "add", s, "Add documents", map[string]any{
		"Conversation": conv, "Choices": u.conversationChoices(r, s)})
}

func (u *UI) addURL(w http.ResponseWriter, r *http.Request, s session) {
	conv := strings.TrimSpace(r.PostFormValue("conversation"))
	target := strings.TrimSpace(r.PostFormValue("url"))
	switch {
	case conv == "":
		u.fail(w, r, s, &Error{Status: http.StatusBadRequest, Message: "Name the conversation the documents go to."})
		return
	case target == "":
		u.fail(w, r, s, &Error{Status: http.StatusBadRequest, Message: "Give the address (URL) of the page, file or site to add."})
		return
	}
	j, err := u.b.AddURL(r.Context(), s.p, conv, target, r.PostFormValue("crawl") != "")
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

func (u *UI) jobsPage(w http.ResponseWriter, r *http.Request, s session) {
	conv := strings.TrimSpace(r.FormValue("conversation"))
	data := map[string]any{"Conversation": conv, "Cursor": r.FormValue("cursor")}
	if u.b.Features().Jobs {
		if r.FormValue("cursor") == "" {
			active, err := u.b.Jobs(r.Context(), s.p, JobQuery{Conversation: conv, Active: true, Limit: 100})
			if err != nil {
				u.fail(w, r, s, err)
				return
			}
			data["Active"] = active.Jobs
		}
		recent, err := u.b.Jobs(r.Context(), s.p, JobQuery{Conversation: conv, Ended: true, Cursor: r.FormValue("cursor"), Limit: pageSize})
		if err != nil {
			u.fail(w, r, s, err)
			return
		}
		data["Recent"] = recent
	}
	u.render(w, r, http.StatusOK, "jobs", s, "Jobs", data)
}

func (u *UI) jobPage(w http.ResponseWriter, r *http.Request, s session) {
	j, err := u.b.Job(r.Context(), s.p, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "job", s, "Job "+j.ID, map[string]any{"Job": j})
}

func (u *UI) cancelJob(w http.ResponseWriter, r *http.Request, s session) {
	j, err := u.b.CancelJob(r.Context(), s.p, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, jobJSON(j))
		return
	}
	http.Redirect(w, r, base+"/jobs/"+url.PathEscape(j.ID), http.StatusSeeOther)
}

// jobView is a job as the page's script reads it.
type jobView struct {
	ID           string    `json:"id"`
	Conversation string    `json:"conversation"`
	Kind         string    `json:"kind"`
	What         string    `json:"what"`
	Status       string    `json:"status"`
	Progress     string    `json:"progress"`
	Percent      int       `json:"percent"`
	Done         int       `json:"done"`
	Total        int       `json:"total"`
	Final        bool      `json:"final"`
	Error        string    `json:"error,omitempty"`
	Failures     []Failure `json:"failures,omitempty"`
}

func jobJSON(j Job) jobView {
	return jobView{ID: j.ID, Conversation: j.Conversation, Kind: j.Kind, What: j.What, Status: j.Status, Progress: j.Progress,
		Percent: j.Percent(), Done: j.Done, Total: j.Total, Final: j.Final(), Error: j.Error, Failures: j.Failures}
}

func (u *UI) jobJSON(w http.ResponseWriter, r *http.Request, s session) {
	j, err := u.b.Job(r.Context(), s.p, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	writeJSON(w, http.StatusOK, jobJSON(j))
}

// Search results as search_docs returns them: what an agent reads.
type (
	searchOutput struct {
		Chunks []searchHit `json:"chunks"`
		More   []string    `json:"more_chunk_ids"`
	}
	searchHit struct {
		ChunkID    string   `json:"chunk_id"`
		FileID     string   `json:"file_id"`
		FileName   string   `json:"file_name"`
		Content    string   `json:"content"`
		Similarity float64  `json:"similarity"`
		Score      float64  `json:"score"`
		Source     string   `json:"source"`
		Location   location `json:"location"`
	}
	location struct {
		Citation string `json:"citation"`
		OCR      bool   `json:"ocr"`
	}
	chunkOutput struct {
		ChunkID  string `json:"chunk_id"`
		Content  string `json:"content"`
		Metadata struct {
			FileID    string   `json:"file_id"`
			FileName  string   `json:"file_name"`
			Source    string   `json:"source"`
			CharStart int      `json:"char_start"`
			CharEnd   int      `json:"char_end"`
			Location  location `json:"location"`
		} `json:"metadata"`
		ChunkIDs  []string `json:"chunk_ids"`
		Truncated bool     `json:"truncated"`
	}
)

// searchForm is the playground's form.
type searchForm struct {
	Conversation, Query, Mode, TopK, Threshold string
}

func (u *UI) searchPage(w http.ResponseWriter, r *http.Request, s session) {
	f := searchForm{Conversation: strings.TrimSpace(r.FormValue("conversation")), Query: strings.TrimSpace(r.FormValue("q")),
		Mode: r.FormValue("mode"), TopK: strings.TrimSpace(r.FormValue("top_k")), Threshold: strings.TrimSpace(r.FormValue("threshold"))}
	if f.Conversation == "" && len(s.p.Conversations) == 1 {
		f.Conversation = s.p.Conversations[0]
	}
	data := map[string]any{"Form": f, "Choices": u.conversationChoices(r, s), "Modes": []string{"hybrid", "vector", "keyword"}}
	if f.Query != "" {
		args := map[string]any{"query": f.Query}
		if f.Conversation != "" {
			args["conversation_id"] = f.Conversation
		}
		if f.Mode != "" {
			args["mode"] = f.Mode
		}
		bad := ""
		if f.TopK != "" {
			n, err := strconv.Atoi(f.TopK)
			if err != nil {
				bad = fmt.Sprintf("top_k must be a whole number from 1 to 50, not %q.", f.TopK)
			}
			args["top_k"] = n
		}
		if f.Threshold != "" {
			t, err := strconv.ParseFloat(f.Threshold, 64)
			if err != nil {
				bad = fmt.Sprintf("The threshold must be a number from 0 to 1, such as 0.3, not %q.", f.Threshold)
			}
			args["threshold"] = t
		}
		if bad != "" {
			data["Error"] = bad
		} else {
			tc, err := u.b.Call(r.Context(), s.p, "search_docs", args)
			if err != nil {
				u.fail(w, r, s, err)
				return
			}
			data["Call"] = tc
			if tc.Failed {
				data["Error"] = tc.Error
			} else {
				var out searchOutput
				if err := json.Unmarshal(tc.Structured, &out); err != nil {
					u.fail(w, r, s, fmt.Errorf("search_docs result: %w", err))
					return
				}
				data["Result"] = out
			}
		}
	}
	u.render(w, r, http.StatusOK, "search", s, "Search playground", data)
}

// chunkNeighbours is how many chunks before and after the chunk page
// shows with it.
const chunkNeighbours = 1

func (u *UI) chunkPage(w http.ResponseWriter, r *http.Request, s session) {
	id := r.PathValue("id")
	tc, err := u.b.Call(r.Context(), s.p, "get_chunk", map[string]any{"chunk_id": id, "before": chunkNeighbours, "after": chunkNeighbours})
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	data := map[string]any{"Call": tc, "ID": id, "Back": localBack(r.FormValue("back"))}
	if tc.Failed {
		data["Error"] = tc.Error
	} else {
		var out chunkOutput
		if err := json.Unmarshal(tc.Structured, &out); err != nil {
			u.fail(w, r, s, fmt.Errorf("get_chunk result: %w", err))
			return
		}
		data["Chunk"] = out
		data["Parts"] = markHit(out.Content, r.FormValue("hit"))
	}
	u.render(w, r, http.StatusOK, "chunk", s, "Chunk "+id, data)
}

// localBack keeps a "back to the results" link on the page.
func localBack(p string) string {
	if p == "" {
		return ""
	}
	return localPath(p)
}

// passagePart is a piece of a merged passage; Hit marks the chunk that
// was found.
type passagePart struct {
	Text string
	Hit  bool
}

// markHit splits a passage around the first occurrence of hit (the start
// of the chunk found), so that the page can mark it among its neighbours.
func markHit(passage, hit string) []passagePart {
	hit = strings.TrimSpace(hit)
	i := -1
	if hit != "" {
		i = strings.Index(passage, hit)
	}
	if i < 0 {
		return []passagePart{{Text: passage}}
	}
	return []passagePart{{Text: passage[:i]}, {Text: hit, Hit: true}, {Text: passage[i+len(hit):]}}
}

// periods are the audit's time filters.
var periods = []struct{ Value, Label string }{
	{"", "any time"}, {"15m", "the last 15 minutes"}, {"1h", "the last hour"}, {"24h", "the last day"},
	{"168h", "the last 7 days"}, {"720h", "the last 30 days"},
}

// outcomes are the audit's outcome filters.
var outcomes = []struct{ Value, Label string }{
	{"", "any outcome"}, {"ok", "succeeded"}, {"error", "failed"}, {"TOOL_ERROR", "TOOL_ERROR"},
	{"RATE_LIMITED", "RATE_LIMITED"}, {"TIMEOUT", "TIMEOUT"}, {"AUTH_ERROR", "AUTH_ERROR"},
}

func (u *UI) auditPage(w http.ResponseWriter, r *http.Request, s session) {
	q := AuditQuery{Tool: r.FormValue("tool"), Key: strings.TrimSpace(r.FormValue("key")), Outcome: r.FormValue("outcome"),
		Conversation: strings.TrimSpace(r.FormValue("conversation")), Cursor: r.FormValue("cursor"), Limit: pageSize}
	period := r.FormValue("period")
	if period != "" {
		d, err := time.ParseDuration(period)
		if err != nil || d <= 0 {
			u.fail(w, r, s, &Error{Status: http.StatusBadRequest, Message: "Choose the period from the list."})
			return
		}
		q.Since = u.now().Add(-d)
	}
	data := map[string]any{"Query": q, "Period": period, "Periods": periods, "Outcomes": outcomes}
	if u.b.Features().Audit {
		page, err := u.b.Audit(r.Context(), s.p, q)
		if err != nil {
			u.fail(w, r, s, err)
			return
		}
		data["Page"] = page
	}
	u.render(w, r, http.StatusOK, "audit", s, "Audit", data)
}

func (u *UI) statusPage(w http.ResponseWriter, r *http.Request, s session) {
	u.render(w, r, http.StatusOK, "status", s, "Status", u.b.Status(r.Context(), s.p))
}
