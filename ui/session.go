package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Cookies of the page, all HttpOnly, SameSite=Strict and limited to its
// path; Secure when the request came over TLS.
const (
	// sessionCookie carries a signed session: the key's id, its expiry and
	// a nonce, signed with the key's seal.
	sessionCookie = "mcpsearch_session"
	// signinCookie is the sign-in form's token, submitted twice (cookie and
	// field): nobody else's page can read it to post the form.
	signinCookie = "mcpsearch_signin"
)

// DefaultSessionTTL is how long a sign-in lasts.
const DefaultSessionTTL = 12 * time.Hour

// session is a signed-in caller: who, and the cookie that says so, from
// which the CSRF token derives.
type session struct {
	p   Principal
	raw string
}

// anonymousID stands for Anonymous in a session cookie.
const anonymousID = "-"

// sessionValue is the cookie of a session of p until expiry, signed with
// seal.
func sessionValue(id string, expiry time.Time, seal []byte) string {
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	body := "1." + id + "." + strconv.FormatInt(expiry.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(nonce)
	return body + "." + sign(seal, "session."+body)
}

// sign is the base64 HMAC-SHA256 of msg under key.
func sign(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// parseSession splits a session cookie into the key's id, its expiry, and
// the signed body and signature; ok is false for anything else.
func parseSession(v string) (id string, expiry time.Time, body, mac string, ok bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 || parts[0] != "1" || parts[1] == "" {
		return "", time.Time{}, "", "", false
	}
	secs, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return "", time.Time{}, "", "", false
	}
	return parts[1], time.Unix(secs, 0), strings.Join(parts[:4], "."), parts[4], true
}

// session reads the request's session: valid, unexpired, signed with the
// seal of a key the server still accepts. On a server without keys a
// session signed by this process stands for Anonymous.
func (u *UI) session(r *http.Request) (session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	id, expiry, body, mac, ok := parseSession(c.Value)
	if !ok || !u.now().Before(expiry) {
		return session{}, false
	}
	var p Principal
	if u.b.Open() {
		if id != anonymousID {
			return session{}, false
		}
		p = Anonymous
		p.Seal = u.anonSeal
	} else {
		if p, ok = u.b.Principal(id); !ok {
			return session{}, false
		}
	}
	if subtle.ConstantTimeCompare([]byte(sign(p.Seal, "session."+body)), []byte(mac)) != 1 {
		return session{}, false
	}
	return session{p: p, raw: c.Value}, true
}

// startSession signs p in: a new session cookie on w.
func (u *UI) startSession(w http.ResponseWriter, r *http.Request, p Principal) session {
	id := p.ID
	if u.b.Open() {
		id, p.Seal = anonymousID, u.anonSeal
	}
	expiry := u.now().Add(u.ttl)
	v := sessionValue(id, expiry, p.Seal)
	http.SetCookie(w, u.cookie(r, sessionCookie, v, expiry))
	return session{p: p, raw: v}
}

// endSession signs out: the cookie is cleared.
func (u *UI) endSession(w http.ResponseWriter, r *http.Request) {
	c := u.cookie(r, sessionCookie, "", time.Time{})
	c.MaxAge = -1
	http.SetCookie(w, c)
}

func (u *UI) cookie(r *http.Request, name, value string, expiry time.Time) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: base + "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil}
	if !expiry.IsZero() {
		c.Expires = expiry
		c.MaxAge = int(time.Until(expiry).Seconds())
	}
	return c
}

// csrf is the token state-changing requests of session s carry: a form's
// csrf field or the X-CSRF-Token header. It is bound to the session, and
// a page of another site can neither read it nor compute it.
func (s session) csrf() string { return sign(s.p.Seal, "csrf."+s.raw) }

// csrfHeader carries the token of requests made by the page's script.
const csrfHeader = "X-CSRF-Token"

// checkCSRF reports whether r carries s's token, in its header or, when
// form is set, in its form.
func (s session) checkCSRF(r *http.Request, form bool) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" && form {
		got = r.PostFormValue("csrf")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf())) == 1
}

// signinToken returns the sign-in form's token, setting its cookie when
// the request has none.
func (u *UI) signinToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(signinCookie); err == nil && len(c.Value) >= 20 {
		return c.Value
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, u.cookie(r, signinCookie, v, u.now().Add(time.Hour)))
	return v
}

// checkSigninToken reports whether the form's token matches its cookie.
func checkSigninToken(r *http.Request) bool {
	c, err := r.Cookie(signinCookie)
	got := r.PostFormValue("csrf")
	return err == nil && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(c.Value)) == 1
}

// originOK applies the Origin rules to a state-changing request: the
// server's own (an origin listed in MCP_allowed_origins, a loopback origin
// on a loopback listener), and, when sessions need a key, the page's own
// origin (a page of another host has no session cookie to send). A request
// without Origin passes on to the CSRF check.
func (u *UI) originOK(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if u.b.OriginAllowed(origin) {
		return true
	}
	o, err := url.Parse(origin)
	return err == nil && !u.b.Open() && o.Host != "" && strings.EqualFold(o.Host, r.Host)
}

// localPath keeps a post-sign-in destination on the page: a path under
// base, nothing else.
func localPath(next string) string {
	if !strings.HasPrefix(next, base+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return base + "/"
	}
	return next
}
