package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
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
	if _, ok, _ := u.session(r); ok {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	u.render(w, r, http.StatusOK, "signin", session{}, "Sign in", u.signinData(w, r, next, ""))
}

// signinData is what the sign-in page shows: its form's token, where to
// go next, the identity provider to sign in through, and an error.
func (u *UI) signinData(w http.ResponseWriter, r *http.Request, next, msg string) map[string]any {
	data := map[string]any{"Token": u.signinToken(w, r), "Next": next, "Error": msg, "TTL": u.ttl, "Keys": true}
	if prov := u.b.Provider(); prov != nil {
		// With a provider, the key form shows only where keys exist.
		data["Provider"], data["Keys"] = prov.Name(), u.b.Features().Keys
	}
	return data
}

func (u *UI) signin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	start := u.now()
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	next := localPath(r.PostFormValue("next"))
	if u.b.Open() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	again := func(e *Error) {
		// A failed sign-in is audited without the key: a mistyped key is
		// often another secret.
		u.record(r, Principal{}, "sign_in", "", map[string]any{"method": "api_key"}, "", start, e)
		u.render(w, r, e.Status, "signin", session{}, "Sign in", u.signinData(w, r, next, e.Message))
	}
	if !u.originOK(r) || !checkSigninToken(r) {
		again(&Error{Status: http.StatusForbidden, Message: "The sign-in form had expired or came from another site. Sign in again on this page."})
		return
	}
	p, ok := u.b.SignIn(strings.TrimSpace(r.PostFormValue("key")))
	if !ok {
		again(&Error{Status: http.StatusUnauthorized, Message: "This server does not accept that key. Check it for typos: the keys are the server's MCP_API_KEYS or the lines of its keys file."})
		return
	}
	if _, err := u.startSession(w, r, p); err != nil {
		u.fail(w, r, session{}, err)
		return
	}
	u.record(r, p, "sign_in", "", map[string]any{"method": "api_key"}, "", start, nil)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (u *UI) signout(w http.ResponseWriter, r *http.Request, s session) {
	start := u.now()
	err := u.endSession(w, r, s)
	u.record(r, s.p, "sign_out", "", nil, "", start, err)
	if err != nil {
		u.log.Error("ui: sign-out not recorded", "error", err)
		u.fail(w, r, session{}, &Error{Status: http.StatusServiceUnavailable, Message: "This browser is signed out, but the server could not record the sign-out " +
			"(its database does not answer): a copy of the session cookie would still work elsewhere until it expires. Sign in and out again once the server is back."})
		return
	}
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
		"SourceDeleted": r.FormValue("source_deleted"), "Removed": r.FormValue("removed"),
		"Statuses": []string{"", "ready", "processing", "failed"}})
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
		"Conversation": conv, "Choices": u.conversationChoices(r, s), "Scopes": crawlScopes})
}

// crawlScopes are the crawl form's choices of which links to follow.
var crawlScopes = []struct{ Value, Label string }{
	{"", "pages under the start address (prefix)"}, {"host", "the whole host"}, {"domain", "the host and its sibling subdomains"},
}

// crawlForm reads the crawl form's options: numbers in words when they
// are not, and patterns one per line or separated by commas.
func crawlForm(r *http.Request) (CrawlOptions, error) {
	var o CrawlOptions
	num := func(field, what string, lo, hi int) (int, error) {
		v := strings.TrimSpace(r.PostFormValue(field))
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("%s must be a whole number from %d to %d, not %q.", what, lo, hi, v)}
		}
		return n, nil
	}
	var err error
	if o.MaxPages, err = num("max_pages", "The page limit (max_pages)", 1, 20000); err != nil {
		return o, err
	}
	if o.MaxDepth, err = num("max_depth", "The depth (max_depth)", 0, 50); err != nil {
		return o, err
	}
	o.Scope = strings.TrimSpace(r.PostFormValue("scope"))
	if !slices.ContainsFunc(crawlScopes, func(c struct{ Value, Label string }) bool { return c.Value == o.Scope }) && o.Scope != "prefix" {
		return o, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("The scope must be prefix, host or domain, not %q.", o.Scope)}
	}
	o.Include, o.Exclude = patterns(r.PostFormValue("include")), patterns(r.PostFormValue("exclude"))
	return o, nil
}

// patterns splits a field of patterns, one per line or separated by
// commas.
func patterns(v string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' }) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (u *UI) addURL(w http.ResponseWriter, r *http.Request, s session) {
	start := u.now()
	conv := strings.TrimSpace(r.PostFormValue("conversation"))
	target := strings.TrimSpace(r.PostFormValue("url"))
	action, touched := "add_url", map[string]any{"url": target}
	var crawl *CrawlOptions
	var err error
	if r.PostFormValue("crawl") != "" {
		action = "crawl"
		var o CrawlOptions
		o, err = crawlForm(r)
		crawl = &o
		touched["options"] = crawlJSON(o)
	}
	switch {
	case err != nil:
	case conv == "":
		err = &Error{Status: http.StatusBadRequest, Message: "Name the conversation the documents go to."}
	case target == "":
		err = &Error{Status: http.StatusBadRequest, Message: "Give the address (URL) of the page, file or site to add."}
	}
	var j Job
	if err == nil {
		j, err = u.b.AddURL(r.Context(), s.p, conv, target, crawl)
	}
	u.record(r, s.p, action, conv, touched, j.ID, start, err)
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

// crawlJSON is a crawl's options as the audit keeps them, those set only.
func crawlJSON(o CrawlOptions) map[string]any {
	m := map[string]any{}
	if o.MaxPages > 0 {
		m["max_pages"] = o.MaxPages
	}
	if o.MaxDepth > 0 {
		m["max_depth"] = o.MaxDepth
	}
	if o.Scope != "" {
		m["scope"] = o.Scope
	}
	if len(o.Include) > 0 {
		m["include"] = o.Include
	}
	if len(o.Exclude) > 0 {
		m["exclude"] = o.Exclude
	}
	return m
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
	start := u.now()
	id := r.PathValue("id")
	j, err := u.b.CancelJob(r.Context(), s.p, id)
	u.record(r, s.p, "cancel_job", j.Conversation, map[string]any{"job_id": id}, j.ID, start, err)
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
	ID            string    `json:"id"`
	Conversation  string    `json:"conversation"`
	Kind          string    `json:"kind"`
	What          string    `json:"what"`
	Status        string    `json:"status"`
	Tone          string    `json:"tone"`
	Outcome       string    `json:"outcome"`
	Files         string    `json:"files"`
	Pages         string    `json:"pages,omitempty"`
	Percent       int       `json:"percent"`
	Indeterminate bool      `json:"indeterminate"`
	Done          int       `json:"done"`
	Total         int       `json:"total"`
	Final         bool      `json:"final"`
	Error         string    `json:"error,omitempty"`
	Failures      []Failure `json:"failures,omitempty"`
}

func jobJSON(j Job) jobView {
	return jobView{ID: j.ID, Conversation: j.Conversation, Kind: j.Kind, What: j.What, Status: j.Status, Tone: j.Tone(), Outcome: j.Outcome(),
		Files: j.Files(), Pages: j.Pages(), Percent: j.Percent(), Indeterminate: j.Indeterminate(), Done: j.Done, Total: j.Total,
		Final: j.Final(), Error: j.Error, Failures: j.Failures}
}

func (u *UI) jobJSON(w http.ResponseWriter, r *http.Request, s session) {
	j, err := u.b.Job(r.Context(), s.p, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	writeJSON(w, http.StatusOK, jobJSON(j))
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

// transports are the audit's transport filters.
var transports = []struct{ Value, Label string }{
	{"", "any way"}, {"ui", "this web page"}, {"http", "streamable HTTP"}, {"sse", "SSE"}, {"rest", "REST"}, {"stdio", "stdio"},
}

// Actions are what the page audits of its own doing, beside the tools its
// playground calls.
var Actions = []string{"sign_in", "sign_out", "upload", "add_url", "crawl", "delete_document", "retry_file", "cancel_job", "sync_source", "delete_source"}

func (u *UI) auditPage(w http.ResponseWriter, r *http.Request, s session) {
	q := AuditQuery{Tool: r.FormValue("tool"), Caller: strings.TrimSpace(r.FormValue("caller")), Outcome: r.FormValue("outcome"),
		Transport: r.FormValue("transport"), Conversation: strings.TrimSpace(r.FormValue("conversation")), Cursor: r.FormValue("cursor"), Limit: pageSize}
	period := r.FormValue("period")
	if period != "" {
		d, err := time.ParseDuration(period)
		if err != nil || d <= 0 {
			u.fail(w, r, s, &Error{Status: http.StatusBadRequest, Message: "Choose the period from the list."})
			return
		}
		q.Since = u.now().Add(-d)
	}
	data := map[string]any{"Query": q, "Period": period, "Periods": periods, "Outcomes": outcomes, "Transports": transports, "Actions": Actions}
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
