package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Cookies of the page, all HttpOnly and limited to its path; Secure when
// the request came over TLS.
const (
	// sessionCookie carries a signed session (SameSite=Strict): who, its
	// expiry and a random id, signed with the key's seal, or the
	// provider's for a person.
	sessionCookie = "mcpsearch_session"
	// signinCookie is the sign-in form's token, submitted twice (cookie and
	// field): nobody else's page can read it to post the form.
	signinCookie = "mcpsearch_signin"
)

// DefaultSessionTTL is how long a sign-in lasts.
const DefaultSessionTTL = 12 * time.Hour

// maxSessionCookie bounds a session cookie: browsers keep cookies of up
// to 4 KB, name and attributes included.
const maxSessionCookie = 3800

// session is a signed-in caller: who, the cookie that says so (from which
// the CSRF token derives), its random id and its expiry.
type session struct {
	p      Principal
	raw    string
	id     string
	expiry time.Time
}

// Session cookie versions: a key's session names the key by its id; a
// person's carries what their token granted.
const (
	keySession    = "1"
	personSession = "2"
)

// anonymousID stands for Anonymous in a session cookie.
const anonymousID = "-"

// grant is what a person's session carries of their token: who, whether
// they may write, and the conversations they may touch (nil: any).
type grant struct {
	Subject       string   `json:"sub"`
	Write         bool     `json:"w,omitempty"`
	Conversations []string `json:"c"`
}

// sessionValue is the cookie of a session of version v naming who, until
// expiry, signed with seal; and the session's random id.
func sessionValue(v, who string, expiry time.Time, seal []byte) (string, string) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	id := base64.RawURLEncoding.EncodeToString(nonce)
	body := v + "." + who + "." + strconv.FormatInt(expiry.Unix(), 10) + "." + id
	return body + "." + sign(seal, "session."+body), id
}

// sign is the base64 HMAC-SHA256 of msg under key.
func sign(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// parsedSession is a session cookie split into its parts.
type parsedSession struct {
	version, who, id string
	expiry           time.Time
	body, mac        string
}

// parseSession splits a session cookie; ok is false for anything else.
func parseSession(v string) (parsedSession, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 || (parts[0] != keySession && parts[0] != personSession) || parts[1] == "" || parts[3] == "" {
		return parsedSession{}, false
	}
	secs, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return parsedSession{}, false
	}
	return parsedSession{version: parts[0], who: parts[1], id: parts[3], expiry: time.Unix(secs, 0),
		body: strings.Join(parts[:4], "."), mac: parts[4]}, true
}

// errCannotCheck is a session that could not be checked against the
// sign-outs: it is refused, with this in words.
var errCannotCheck = &Error{Status: http.StatusServiceUnavailable,
	Message: "The server cannot tell whether this session was signed out: its database does not answer. Try again in a moment."}

// session reads the request's session: valid, unexpired, signed with the
// seal of a key the server still accepts (or the identity provider's, for
// a person), and not signed out. On a server without keys a session
// signed by this process stands for Anonymous. Its error says why a
// session could not be checked.
func (u *UI) session(r *http.Request) (session, bool, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false, nil
	}
	ps, ok := parseSession(c.Value)
	if !ok || !u.now().Before(ps.expiry) {
		return session{}, false, nil
	}
	var p Principal
	switch {
	case u.b.Open():
		if ps.version != keySession || ps.who != anonymousID {
			return session{}, false, nil
		}
		p = Anonymous
		p.Seal = u.anonSeal
	case ps.version == keySession:
		if p, ok = u.b.Principal(ps.who); !ok {
			return session{}, false, nil
		}
	default:
		prov := u.b.Provider()
		if prov == nil {
			return session{}, false, nil
		}
		raw, err := base64.RawURLEncoding.DecodeString(ps.who)
		var g grant
		if err != nil || json.Unmarshal(raw, &g) != nil || g.Subject == "" {
			return session{}, false, nil
		}
		p = Principal{Name: g.Subject, Subject: g.Subject, Write: g.Write, Conversations: g.Conversations, Seal: prov.Seal()}
	}
	if subtle.ConstantTimeCompare([]byte(sign(p.Seal, "session."+ps.body)), []byte(ps.mac)) != 1 {
		return session{}, false, nil
	}
	if !u.b.Open() {
		out, err := u.b.SignedOut(r.Context(), ps.id)
		if err != nil {
			u.log.Warn("ui: check a session against the sign-outs", "error", err)
			return session{}, false, errCannotCheck
		}
		if out {
			return session{}, false, nil
		}
	}
	return session{p: p, raw: c.Value, id: ps.id, expiry: ps.expiry}, true, nil
}

// startSession signs p in: a new session cookie on w.
func (u *UI) startSession(w http.ResponseWriter, r *http.Request, p Principal) (session, error) {
	s, err := u.newSession(p)
	if err != nil {
		return session{}, err
	}
	http.SetCookie(w, u.cookie(r, sessionCookie, s.raw, s.expiry))
	return s, nil
}

// newSession makes a session of p. A person's session lasts as long as a
// key's; it fails when what their token grants does not fit in a cookie.
func (u *UI) newSession(p Principal) (session, error) {
	expiry := u.now().Add(u.ttl)
	var v, id string
	switch {
	case u.b.Open():
		p.Seal = u.anonSeal
		v, id = sessionValue(keySession, anonymousID, expiry, p.Seal)
	case p.Subject != "":
		raw, _ := json.Marshal(grant{Subject: p.Subject, Write: p.Write, Conversations: p.Conversations})
		v, id = sessionValue(personSession, base64.RawURLEncoding.EncodeToString(raw), expiry, p.Seal)
		if len(v) > maxSessionCookie {
			return session{}, &Error{Status: http.StatusRequestHeaderFieldsTooLarge, Message: fmt.Sprintf(
				"Your sign-in names %d conversations, more than a session of the page can hold: ask for a token limited to fewer, or sign in with an API key.",
				len(p.Conversations))}
		}
	default:
		v, id = sessionValue(keySession, p.ID, expiry, p.Seal)
	}
	return session{p: p, raw: v, id: id, expiry: expiry}, nil
}

// endSession signs s out: every replica refuses its cookie from now on,
// and the browser forgets it.
func (u *UI) endSession(w http.ResponseWriter, r *http.Request, s session) error {
	c := u.cookie(r, sessionCookie, "", time.Time{})
	c.MaxAge = -1
	http.SetCookie(w, c)
	if u.b.Open() || s.id == "" {
		return nil
	}
	return u.b.SignOut(r.Context(), s.id, s.expiry)
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
