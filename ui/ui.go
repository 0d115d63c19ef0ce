// Package ui is the web page of the people who run mcpsearch: the
// conversations, their files and sources, adding documents and following
// their jobs, a search playground, the audit and the server's status. It
// is served by the binary at /ui/: html/template pages and a little
// JavaScript, every file embedded, nothing fetched from elsewhere.
//
// The page knows the server through Backend alone, which applies the
// caller's rights as the server's other routes do. A caller signs in with
// an API key, through the identity provider (Provider), or not at all on
// a server that asks for neither, and gets a signed session cookie that
// every replica accepts until it expires or is signed out (Backend keeps
// the sign-outs). Every request that changes something carries a CSRF
// token and is audited (Backend.Record), and the Content-Security-Policy
// allows no inline script.
package ui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"
)

// base is the path the page is served under.
const base = "/ui"

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Options tune the page.
type Options struct {
	// SessionTTL is how long a sign-in lasts (DefaultSessionTTL when 0).
	SessionTTL time.Duration
	// Logger receives the failures the page shows in words; nil discards.
	Logger *slog.Logger
}

// UI serves the page. It is an http.Handler for the paths under /ui/.
type UI struct {
	b     Backend
	log   *slog.Logger
	ttl   time.Duration
	now   func() time.Time
	pages map[string]*template.Template
	mux   *http.ServeMux
	// anonSeal signs sessions on a server that asks for no key.
	anonSeal []byte
	// assetVersion names the embedded static files' version in their
	// URLs, so that browsers may keep them as long as they like.
	assetVersion string
}

// New returns the page over b.
func New(b Backend, opts Options) (*UI, error) {
	u := &UI{b: b, log: opts.Logger, ttl: opts.SessionTTL, now: time.Now, anonSeal: make([]byte, 32)}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	if u.ttl <= 0 {
		u.ttl = DefaultSessionTTL
	}
	_, _ = rand.Read(u.anonSeal)
	h := sha256.New()
	err := fs.WalkDir(staticFiles, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := staticFiles.ReadFile(p)
		h.Write([]byte(p))
		h.Write(data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ui: static files: %w", err)
	}
	u.assetVersion = hex.EncodeToString(h.Sum(nil))[:12]
	if u.pages, err = parsePages(u.funcs()); err != nil {
		return nil, err
	}
	u.routes()
	return u, nil
}

// ServeHTTP answers the page's requests, each with the page's security
// headers.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	u.mux.ServeHTTP(w, r)
}

// contentSecurityPolicy allows the page's own scripts, styles and
// requests, and nothing inline or from elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// handler is a page's handler, given the caller's session.
type handler func(w http.ResponseWriter, r *http.Request, s session)

func (u *UI) routes() {
	m := http.NewServeMux()
	m.Handle("GET "+base+"/static/", http.StripPrefix(base+"/", u.static()))
	m.HandleFunc("GET "+base+"/signin", u.signinPage)
	m.HandleFunc("POST "+base+"/signin", u.signin)
	m.HandleFunc("GET "+base+"/oauth/start", u.oauthStart)
	m.HandleFunc("GET "+base+"/oauth/callback", u.oauthCallback)
	m.HandleFunc("POST "+base+"/signout", u.state(u.signout))
	m.HandleFunc("GET "+base+"/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, base+"/conversations", http.StatusSeeOther)
	})
	m.HandleFunc("GET "+base+"/conversations", u.read(u.conversationsPage))
	m.HandleFunc("GET "+base+"/conversations/{id}", u.read(u.conversationPage))
	m.HandleFunc("POST "+base+"/conversations/{id}/files", u.state(u.upload))
	m.HandleFunc("GET "+base+"/files/{id}", u.read(u.filePage))
	m.HandleFunc("POST "+base+"/files/{id}/delete", u.state(u.deleteFile))
	m.HandleFunc("POST "+base+"/files/{id}/retry", u.state(u.retryFile))
	m.HandleFunc("GET "+base+"/sources/{id}", u.read(u.sourcePage))
	m.HandleFunc("POST "+base+"/sources/{id}/sync", u.state(u.syncSource))
	m.HandleFunc("POST "+base+"/sources/{id}/delete", u.state(u.deleteSource))
	m.HandleFunc("GET "+base+"/add", u.read(u.addPage))
	m.HandleFunc("POST "+base+"/add/url", u.state(u.addURL))
	m.HandleFunc("GET "+base+"/jobs", u.read(u.jobsPage))
	m.HandleFunc("GET "+base+"/jobs/{id}", u.read(u.jobPage))
	m.HandleFunc("POST "+base+"/jobs/{id}/cancel", u.state(u.cancelJob))
	m.HandleFunc("GET "+base+"/api/jobs/{id}", u.read(u.jobJSON))
	m.HandleFunc("GET "+base+"/search", u.read(u.searchPage))
	m.HandleFunc("GET "+base+"/chunks/{id}", u.read(u.chunkPage))
	m.HandleFunc("GET "+base+"/audit", u.read(u.auditPage))
	m.HandleFunc("GET "+base+"/status", u.read(u.statusPage))
	m.HandleFunc(base+"/", func(w http.ResponseWriter, r *http.Request) {
		u.fail(w, r, session{}, &Error{Status: http.StatusNotFound, Message: "There is no such page."})
	})
	u.mux = m
}

// read wraps a page that changes nothing: it needs a session, and a
// request without one is sent to sign in (on a server without keys, a
// session is made on the spot).
func (u *UI) read(next handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s, ok, err := u.session(r)
		if err != nil {
			u.fail(w, r, session{}, err)
			return
		}
		if !ok && u.b.Open() {
			if s, err = u.startSession(w, r, Anonymous); err != nil {
				u.fail(w, r, session{}, err)
				return
			}
			ok = true
		}
		if !ok {
			if wantsJSON(r) {
				u.fail(w, r, session{}, &Error{Status: http.StatusUnauthorized, Message: "You are signed out: sign in again."})
				return
			}
			http.Redirect(w, r, base+"/signin?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next(w, r, s)
	}
}

// state wraps a request that changes something: it needs a session, an
// accepted Origin and the session's CSRF token.
func (u *UI) state(next handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if !u.originOK(r) {
			u.fail(w, r, session{}, &Error{Status: http.StatusForbidden, Message: fmt.Sprintf(
				"Requests from %s are not accepted here: open the page at this server's own address, or add the origin to MCP_allowed_origins.", r.Header.Get("Origin"))})
			return
		}
		s, ok, err := u.session(r)
		if err != nil {
			u.fail(w, r, session{}, err)
			return
		}
		if !ok {
			u.fail(w, r, session{}, &Error{Status: http.StatusUnauthorized, Message: "You are signed out: sign in again, then repeat what you were doing."})
			return
		}
		// A multipart body is the upload's to read, part by part: its
		// token comes in the header alone.
		multipart := strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/")
		if !multipart {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		}
		if !s.checkCSRF(r, !multipart) {
			u.fail(w, r, s, &Error{Status: http.StatusForbidden, Message: "This request did not carry the page's security token, so it was refused. Reload the page and try again."})
			return
		}
		next(w, r, s)
	}
}

// record audits an action of the page done by p, which began at start
// and ended with err.
func (u *UI) record(r *http.Request, p Principal, action, conv string, touched map[string]any, jobID string, start time.Time, err error) {
	u.b.Record(r.Context(), p, Event{Action: action, Conversation: conv, Touched: touched, JobID: jobID, Err: err, Start: start})
}

// wantsJSON reports whether the request comes from the page's script,
// which reads JSON.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json") || strings.HasPrefix(r.URL.Path, base+"/api/")
}

// fail answers an error in words: a page, or JSON for the page's script.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, s session, err error) {
	var e *Error
	if !errors.As(err, &e) {
		u.log.Error("ui", "path", r.URL.Path, "error", err)
		e = &Error{Status: http.StatusInternalServerError, Message: "Something went wrong on the server; its log has the details."}
		if errors.Is(err, context.DeadlineExceeded) {
			e = &Error{Status: http.StatusGatewayTimeout, Message: "The server took too long to answer; try again."}
		}
	}
	if wantsJSON(r) {
		writeJSON(w, e.Status, map[string]string{"error": e.Message})
		return
	}
	u.render(w, r, e.Status, "error", s, "Something went wrong", map[string]any{"Message": e.Message, "Status": e.Status})
}

// static serves the embedded files.
func (u *UI) static() http.Handler {
	files := http.FileServerFS(staticFiles)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		// Their URLs carry the files' version.
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		files.ServeHTTP(w, r)
	})
}

// asset is the URL of a static file, with its version.
func (u *UI) asset(name string) string {
	return path.Join(base, "static", name) + "?v=" + u.assetVersion
}
