package ui

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// fakeProvider signs alice in for the code "good".
type fakeProvider struct {
	verifier, nonce string
}

func (p *fakeProvider) Name() string { return "sso.example.com" }
func (p *fakeProvider) Seal() []byte { return []byte("the provider's seal") }
func (p *fakeProvider) AuthURL(_ context.Context, state, nonce, verifier string) (string, error) {
	return "https://sso.example.com/authorize?" + url.Values{"state": {state}, "nonce": {nonce}}.Encode(), nil
}
func (p *fakeProvider) Finish(_ context.Context, code, verifier, nonce string) (Principal, error) {
	if code != "good" {
		return Principal{}, &Error{Status: http.StatusForbidden, Message: "The sign-in was refused: the token endpoint refused the code."}
	}
	p.verifier, p.nonce = verifier, nonce
	return Principal{Name: "alice", Subject: "alice", Conversations: []string{"c-tenant"}}, nil
}

// start signs in at the provider from the sign-in form and returns the
// state and nonce it was sent with.
func (c *client) start(next string) (string, string) {
	c.t.Helper()
	page := c.get("/ui/signin")
	if !strings.Contains(page.Body.String(), "Sign in with sso.example.com") {
		c.t.Fatalf("the sign-in page offers no provider: %s", page.Body.String())
	}
	rec := c.get("/ui/oauth/start?" + url.Values{"next": {next}}.Encode())
	loc, err := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusSeeOther || err != nil || loc.Host != "sso.example.com" {
		c.t.Fatalf("start: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	return loc.Query().Get("state"), loc.Query().Get("nonce")
}

func TestSignInThroughProvider(t *testing.T) {
	f := newFake()
	prov := &fakeProvider{}
	f.provider = prov
	c := newClient(t, f)

	state, nonce := c.start("/ui/jobs")
	ck := c.cookies[oauthCookie]
	if ck == nil || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/ui/oauth/" || !ck.HttpOnly || strings.Contains(ck.Value, "/ui/jobs") {
		t.Fatalf("the flow's cookie: %+v", ck)
	}

	// Another state, the provider's refusal and a bad code are refused.
	for _, tt := range []struct {
		query url.Values
		code  int
		want  string
	}{
		{url.Values{"state": {"forged"}, "code": {"good"}}, http.StatusBadRequest, "did not start here"},
		{url.Values{"state": {state}, "error": {"access_denied"}, "error_description": {"the user said no"}}, http.StatusForbidden, "access_denied: the user said no"},
		{url.Values{"state": {state}, "code": {"bad"}}, http.StatusForbidden, "refused the code"},
	} {
		c.cookies[oauthCookie] = ck
		rec := c.get("/ui/oauth/callback?" + tt.query.Encode())
		if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("callback %v: %d, want %d saying %q", tt.query, rec.Code, tt.code, tt.want)
		}
		if _, ok := c.cookies[sessionCookie]; ok {
			t.Fatalf("callback %v made a session", tt.query)
		}
	}

	c.cookies[oauthCookie] = ck
	rec := c.get("/ui/oauth/callback?" + url.Values{"state": {state}, "code": {"good"}}.Encode())
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, `<meta http-equiv="refresh" content="0;url=/ui/jobs">`) || !strings.Contains(body, "alice") {
		t.Fatalf("callback: %d %s", rec.Code, body)
	}
	if prov.nonce != nonce || prov.verifier == "" || prov.verifier == state {
		t.Errorf("Finish got nonce %q verifier %q", prov.nonce, prov.verifier)
	}
	if _, ok := c.cookies[oauthCookie]; ok {
		t.Error("the flow's cookie outlives the sign-in")
	}
	page := c.get("/ui/conversations").Body.String()
	if !strings.Contains(page, "Signed in as <strong>alice</strong> · read only · 1 conversation") || strings.Contains(page, "c-main") {
		t.Fatalf("alice's page: %s", page)
	}
	if rec := c.do(http.MethodPost, "/ui/files/f1/delete", url.Values{"csrf": {c.csrf()}}, nil); rec.Code != http.StatusForbidden {
		t.Errorf("alice, who may only read, deleting: %d", rec.Code)
	}
	// The same callback again, without the flow's cookie, is refused.
	delete(c.cookies, oauthCookie)
	if rec := c.get("/ui/oauth/callback?" + url.Values{"state": {state}, "code": {"good"}}.Encode()); rec.Code != http.StatusBadRequest {
		t.Errorf("a replayed callback: %d", rec.Code)
	}

	// Her grant cannot be widened in the cookie.
	s := c.cookies[sessionCookie]
	parts := strings.Split(s.Value, ".")
	wider, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(wider), `"c":["c-tenant"]`, `"w":true,"c":null`, 1)))
	forged := *s
	forged.Value = strings.Join(parts, ".")
	c.cookies[sessionCookie] = &forged
	if rec := c.get("/ui/conversations"); rec.Code != http.StatusSeeOther {
		t.Errorf("a widened grant: %d", rec.Code)
	}

	// A server whose only sign-in is the provider offers no key form.
	f.noKeys = true
	if body := newClient(t, f).get("/ui/signin").Body.String(); strings.Contains(body, `name="key"`) || !strings.Contains(body, `id="provider"`) {
		t.Errorf("the sign-in page of a server without keys: %s", body)
	}
	f.noKeys = false

	// Without the provider, her session ends.
	c.cookies[sessionCookie] = s
	f.provider = nil
	if rec := c.get("/ui/conversations"); rec.Code != http.StatusSeeOther {
		t.Errorf("a person's session on a server without the provider: %d", rec.Code)
	}
	var outcomes []string
	for _, e := range f.events {
		if e.Action != "sign_in" {
			continue
		}
		outcomes = append(outcomes, e.Action+" "+e.Touched["method"].(string)+" "+map[bool]string{true: "ok", false: "failed"}[e.Err == nil])
	}
	if strings.Join(outcomes, ", ") != "sign_in identity_provider failed, sign_in identity_provider failed, sign_in identity_provider failed, sign_in identity_provider ok, sign_in identity_provider failed" {
		t.Errorf("audited sign-ins: %v", outcomes)
	}
}
