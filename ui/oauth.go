package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// oauthCookie holds one sign-in through the identity provider while the
// browser is there: its state, nonce, PKCE verifier and where to go next,
// signed with the provider's seal. It is SameSite=Lax, the one cookie that
// is: the provider's redirect back is a navigation from another site,
// which a Strict cookie would not come with.
const oauthCookie = "mcpsearch_oauth"

// oauthTTL is how long a sign-in at the provider may take.
const oauthTTL = 10 * time.Minute

// oauthPath is the path the flow's cookie is limited to.
const oauthPath = base + "/oauth/"

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// flow is one sign-in under way.
type flow struct {
	state, nonce, verifier, next string
	expiry                       time.Time
}

func (f flow) value(seal []byte) string {
	body := strings.Join([]string{f.state, f.nonce, f.verifier, base64.RawURLEncoding.EncodeToString([]byte(f.next)),
		strconv.FormatInt(f.expiry.Unix(), 10)}, ".")
	return body + "." + sign(seal, "oauth."+body)
}

func parseFlow(v string, seal []byte, now time.Time) (flow, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 6 {
		return flow{}, false
	}
	body := strings.Join(parts[:5], ".")
	if subtle.ConstantTimeCompare([]byte(sign(seal, "oauth."+body)), []byte(parts[5])) != 1 {
		return flow{}, false
	}
	next, err := base64.RawURLEncoding.DecodeString(parts[3])
	secs, err2 := strconv.ParseInt(parts[4], 10, 64)
	if err != nil || err2 != nil || !now.Before(time.Unix(secs, 0)) {
		return flow{}, false
	}
	return flow{state: parts[0], nonce: parts[1], verifier: parts[2], next: localPath(string(next)), expiry: time.Unix(secs, 0)}, true
}

func (u *UI) flowCookie(r *http.Request, value string, expiry time.Time) *http.Cookie {
	c := u.cookie(r, oauthCookie, value, expiry)
	c.Path, c.SameSite = oauthPath, http.SameSiteLaxMode
	if expiry.IsZero() {
		c.MaxAge = -1
	}
	return c
}

// oauthStart sends the browser to the identity provider to sign in: a
// link of the sign-in page. It is a link, not a form: the page's
// Content-Security-Policy lets its forms lead nowhere but here, and a
// browser holds a form's redirects to that too. Starting a sign-in
// changes nothing here; what comes back is checked against the state
// this browser leaves with.
func (u *UI) oauthStart(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	start := u.now()
	next := localPath(r.FormValue("next"))
	prov := u.b.Provider()
	fail := func(e *Error) {
		u.record(r, Principal{}, "sign_in", "", map[string]any{"method": "identity_provider"}, "", start, e)
		u.render(w, r, e.Status, "signin", session{}, "Sign in", u.signinData(w, r, next, e.Message))
	}
	if prov == nil {
		u.fail(w, r, session{}, &Error{Status: http.StatusNotFound, Message: "This server offers no sign-in through an identity provider: sign in with an API key."})
		return
	}
	f := flow{state: random(), nonce: random(), verifier: random(), next: next, expiry: u.now().Add(oauthTTL)}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	to, err := prov.AuthURL(ctx, f.state, f.nonce, f.verifier)
	if err != nil {
		u.log.Warn("ui: sign-in through the identity provider", "error", err)
		fail(&Error{Status: http.StatusBadGateway, Message: "The identity provider cannot be reached to sign in (" + err.Error() + "). Try again shortly, or sign in with an API key."})
		return
	}
	http.SetCookie(w, u.flowCookie(r, f.value(prov.Seal()), f.expiry))
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// oauthCallback is where the identity provider sends the browser back:
// the state must be the one this browser left with, then the code is
// exchanged and the tokens checked (Provider.Finish), and the person
// signed in.
func (u *UI) oauthCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	start := u.now()
	prov := u.b.Provider()
	if prov == nil {
		u.fail(w, r, session{}, &Error{Status: http.StatusNotFound, Message: "This server offers no sign-in through an identity provider: sign in with an API key."})
		return
	}
	http.SetCookie(w, u.flowCookie(r, "", time.Time{}))
	q := r.URL.Query()
	fail := func(e *Error) {
		u.record(r, Principal{}, "sign_in", "", map[string]any{"method": "identity_provider"}, "", start, e)
		u.render(w, r, e.Status, "signin", session{}, "Sign in", u.signinData(w, r, base+"/", e.Message))
	}
	c, err := r.Cookie(oauthCookie)
	var f flow
	ok := err == nil
	if ok {
		f, ok = parseFlow(c.Value, prov.Seal(), u.now())
	}
	if !ok || q.Get("state") == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.state)) != 1 {
		fail(&Error{Status: http.StatusBadRequest, Message: "This sign-in did not start here, or took longer than 10 minutes: sign in again."})
		return
	}
	if e := q.Get("error"); e != "" {
		msg := "The identity provider did not sign you in (" + clip(e, 100)
		if d := q.Get("error_description"); d != "" {
			msg += ": " + clip(d, 300)
		}
		fail(&Error{Status: http.StatusForbidden, Message: msg + ")."})
		return
	}
	if q.Get("code") == "" {
		fail(&Error{Status: http.StatusBadRequest, Message: "The identity provider sent no authorization code: sign in again."})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	p, err := prov.Finish(ctx, q.Get("code"), f.verifier, f.nonce)
	if err != nil {
		e, ok := err.(*Error)
		if !ok {
			u.log.Warn("ui: sign-in through the identity provider", "error", err)
			e = &Error{Status: http.StatusBadGateway, Message: "The sign-in could not be completed: " + err.Error()}
		}
		fail(e)
		return
	}
	p.Seal = prov.Seal()
	s, err := u.newSession(p)
	if err != nil {
		e, _ := err.(*Error)
		fail(e)
		return
	}
	u.record(r, p, "sign_in", "", map[string]any{"method": "identity_provider"}, "", start, nil)
	http.SetCookie(w, u.cookie(r, sessionCookie, s.raw, s.expiry))
	// This answer ends a navigation that came from the provider's site: a
	// redirect from here would carry it on, and a browser sends no Strict
	// cookie along such a chain. A page of this site moves on instead, a
	// navigation of its own.
	u.render(w, r, http.StatusOK, "continue", session{}, "Signed in", map[string]any{"Next": f.next, "Who": p.Subject})
}

// clip cuts s to n bytes at most, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
